"""Property-based fuzz of the public API (hypothesis, derandomised so every run tries the
same examples): bad constructors and `fit` arguments raise `ValueError`/`TypeError`
quickly, good ones are accepted, and garbage data never give a silent "successful" fit."""

import math
import time
import warnings

import numpy as np
import pytest
from _zoo import logistic_small_data, zoo
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import wendyjax as wj

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=200,
    suppress_health_check=list(HealthCheck),  # pyright: ignore[reportArgumentType]  # an Enum class iterates over its members
)
BAD = (ValueError, TypeError)

# -- values -------------------------------------------------------------------------------

_NOT_POSITIVE = st.sampled_from([0.0, -1.0, -1e-12, math.nan, math.inf, -math.inf])
_NOT_A_NUMBER = st.sampled_from(["1e-6", None, [1.0], (), {}])
_POSITIVE = st.floats(1e-12, 1e3)
# for tolerances, which lie in [0, 1): 0 is a pure relative or absolute test (both 0 is refused
# separately), 1 or more would declare any start converged
_NOT_TOLERANCE = st.one_of(st.sampled_from([-1.0, -1e-12, math.nan, math.inf, -math.inf]), st.floats(1.0, 1e6))
_TOLERANCE = st.floats(0.0, 1.0, exclude_max=True)
_NEGATIVE = st.sampled_from([-1.0, -1e-12, math.nan, math.inf, -math.inf])  # for the ODE solver's tolerances, >= 0
_ODE_TOLERANCE = st.floats(0.0, 1e3)


def _bad_int(none_ok=False):
    bad = st.one_of(st.sampled_from([0, -1, -100, 2.5, math.nan, math.inf, "10"]), _NOT_A_NUMBER)
    return bad.filter(lambda v: v is not None) if none_ok else bad


def _good_int():
    return st.integers(1, 1000)


# option name -> (constructor, good values, bad values); the good values are what the
# docstrings promise, the bad ones what no docstring allows
_OPTIONS = {
    "TrustRegion.rtol": (lambda v: wj.TrustRegion(rtol=v), _TOLERANCE, st.one_of(_NOT_TOLERANCE, _NOT_A_NUMBER)),
    "TrustRegion.atol": (lambda v: wj.TrustRegion(atol=v), _TOLERANCE, st.one_of(_NOT_TOLERANCE, _NOT_A_NUMBER)),
    "TrustRegion.both": (
        lambda v: wj.TrustRegion(rtol=v, atol=v),
        st.floats(1e-12, 1.0, exclude_max=True),
        st.just(0.0),
    ),
    "WLS.max_steps": (lambda v: wj.WLS(max_steps=v), _good_int(), _bad_int()),
    "MLE.max_steps": (lambda v: wj.MLE(max_steps=v), _good_int(), _bad_int()),
    "MLE.start": (
        lambda v: wj.MLE(start=v),
        st.sampled_from(["p0", "wls", "best", "both"]),
        st.one_of(st.sampled_from(["", "P0", "random", "none"]), _NOT_A_NUMBER),
    ),
    "IRLS.step_tol": (lambda v: wj.IRLS(step_tol=v), _POSITIVE, st.one_of(_NOT_POSITIVE, _NOT_A_NUMBER)),
    "IRLS.max_iters": (lambda v: wj.IRLS(max_iters=v), _good_int(), _bad_int()),
    "OutputError.ode_rtol": (lambda v: wj.OutputError(ode_rtol=v), _ODE_TOLERANCE, st.one_of(_NEGATIVE, _NOT_A_NUMBER)),
    "OutputError.ode_atol": (lambda v: wj.OutputError(ode_atol=v), _ODE_TOLERANCE, st.one_of(_NEGATIVE, _NOT_A_NUMBER)),
    "OutputError.both": (lambda v: wj.OutputError(ode_rtol=v, ode_atol=v), _POSITIVE, st.just(0.0)),
    "OutputError.ode_max_steps": (lambda v: wj.OutputError(ode_max_steps=v), _good_int(), _bad_int()),
    "OutputError.max_steps": (lambda v: wj.OutputError(max_steps=v), _good_int(), _bad_int()),
    "OutputError.jacobian": (
        lambda v: wj.OutputError(jacobian=v),
        st.sampled_from(["sensitivity", "forward_mode"]),
        st.one_of(st.sampled_from(["", "adjoint", "Sensitivity"]), _NOT_A_NUMBER),
    ),
    "IntegralMatching.order": (lambda v: wj.IntegralMatching(order=v), st.integers(1, 60), _bad_int()),
    "IntegralMatching.length": (
        lambda v: wj.IntegralMatching(length=v),
        _POSITIVE,
        st.one_of(_NOT_POSITIVE, _NOT_A_NUMBER),
    ),
    "IntegralMatching.max_steps": (
        lambda v: wj.IntegralMatching(max_steps=v),
        _good_int(),
        _bad_int(none_ok=True),
    ),  # None: the solver's default
    "Gradient.batch_size": (lambda v: wj.Gradient(batch_size=v), _good_int(), _bad_int()),
    "Gradient.rtol": (
        lambda v: wj.Gradient(rtol=v),
        st.floats(0.0, 0.999),  # [0, 1): 0 stops at no gain
        st.one_of(st.sampled_from([-1e-3, 1.0, 2.0, math.nan, math.inf]), _NOT_A_NUMBER),
    ),
    "TestFunctionConfig.radius": (
        lambda v: wj.TestFunctionConfig(radius=v),
        _POSITIVE,
        st.one_of(_NOT_POSITIVE, st.sampled_from(["1", [1.0]])),
    ),
}


@FUZZ
@given(name=st.sampled_from(sorted(_OPTIONS)), good=st.booleans(), data=st.data())
def test_estimator_options_are_checked_when_built(name, good, data):
    make, ok, bad = _OPTIONS[name]
    value = data.draw(ok if good else bad, label=name)
    clock = time.perf_counter()
    if good:
        make(value)
    else:
        with pytest.raises(BAD):
            make(value)
    assert time.perf_counter() - clock < 5.0


# -- data ---------------------------------------------------------------------------------

_ELEMENTS = st.one_of(
    st.floats(-1e6, 1e6), st.sampled_from([math.nan, math.inf, -math.inf, 1e300, -1e200, 1e-300, 0.0])
)


@st.composite
def _trajectory_args(draw):
    n = draw(st.integers(0, 8))
    t_kind = draw(st.sampled_from(["sorted", "any", "2d", "complex", "strings"]))
    if t_kind == "sorted":
        t = np.sort(draw(hnp.arrays(float, n, elements=st.floats(-1e3, 1e3))))
    elif t_kind == "any":
        t = draw(hnp.arrays(float, n, elements=_ELEMENTS))
    elif t_kind == "2d":
        t = np.zeros((n, 2))
    elif t_kind == "complex":
        t = np.arange(n) + 1j
    else:
        t = np.array([str(i) for i in range(n)])
    rows = draw(st.sampled_from([n, n, n + 1, max(n - 1, 0)]))
    shape = draw(st.sampled_from([(rows,), (rows, 1), (rows, 3), (rows, 2, 2)]))
    u = draw(hnp.arrays(draw(st.sampled_from([float, int, complex, bool])), shape, elements=None))
    if u.dtype == float:
        u = draw(hnp.arrays(float, shape, elements=_ELEMENTS))
    mask = draw(
        st.one_of(
            st.none(),
            hnp.arrays(bool, u.shape),
            hnp.arrays(float, u.shape, elements=st.sampled_from([0.0, 1.0, 0.5, math.nan])),
            st.just(np.full(u.shape, "yes")),
            st.just(np.ones(u.shape[:1], bool)),
        )
    )
    return t, u, mask


@FUZZ
@given(args=_trajectory_args())
def test_a_trajectory_is_valid_or_refused(args):
    t, u, mask = args
    clock = time.perf_counter()
    try:
        traj = wj.Trajectory(t, u, mask)
    except BAD:
        return
    finally:
        assert time.perf_counter() - clock < 5.0
    tt, uu = np.asarray(traj.t), np.asarray(traj.u)
    observed = np.ones(uu.shape, bool) if traj.mask is None else np.asarray(traj.mask)
    assert tt.ndim == 1 and uu.ndim == 2 and len(tt) == len(uu) >= 2 and uu.dtype == float
    assert np.all(np.isfinite(tt)) and np.all(np.diff(tt) >= 0)
    assert np.all(np.isfinite(uu[observed]))
    assert np.max(np.abs(uu[observed]), initial=0.0) ** 2 < np.inf  # squarable
    if mask is None:  # without a mask, exactly the NaN entries are missing
        assert np.array_equal(~observed, np.isnan(uu))


# -- fit arguments ------------------------------------------------------------------------

BENCH = zoo("logistic")
assert BENCH.model.bounds is not None
LO, HI = (np.asarray(b, float) for b in BENCH.model.bounds)

_GOOD = {
    "p0": st.tuples(st.floats(0.2, 5.0), st.floats(-5.0, -0.2)).map(np.array),
    "bounds": st.sampled_from(["model", None, (LO * 2, HI * 2)]),
    "sigma": st.sampled_from([None, 0.05, np.array([0.05])]),
    "covariance": st.sampled_from([None, "sandwich", "hessian"]),
    "k": st.sampled_from([None, 65]),
}
_BAD = {
    "p0": st.sampled_from(
        [
            np.array([1.0]),
            np.ones(3),
            np.array([np.nan, -1.0]),
            np.array([np.inf, -1.0]),
            np.array([1e9, -1.0]),
            "1,-1",
            np.ones((2, 1)),
        ]
    ),
    "bounds": st.sampled_from(
        [
            (HI, LO),
            (LO, HI, HI),
            (np.r_[LO, 0.0], HI),
            "box",
            (np.array([np.nan, LO[1]]), HI),
            (LO, np.array([HI[0], -np.inf])),
        ]
    ),
    "sigma": st.sampled_from([-0.1, math.nan, math.inf, np.array([0.1, 0.1]), "0.1"]),
    "covariance": st.sampled_from(["gauss_newton", "bogus", 3]),
    "k": st.sampled_from([0, -3, 66, 10_000, 2.5]),
}


@st.composite
def _fit_arguments(draw):
    """Every argument good, or exactly one bad (one is enough to be refused)."""
    bad = draw(st.sampled_from([None, *_GOOD]))
    args = {name: draw(_BAD[name] if name == bad else _GOOD[name]) for name in _GOOD}
    if bad is None and args["bounds"] == "model" and not np.all((LO <= args["p0"]) & (args["p0"] <= HI)):
        bad = "p0"  # a start outside the box it is held to
    return bad, args


@settings(FUZZ, max_examples=60)
@given(arguments=_fit_arguments(), estimator=st.sampled_from([wj.WLS(), wj.MLE()]))
def test_fit_arguments_are_refused_before_work_or_accepted(arguments, estimator):
    bad, args = arguments
    data = logistic_small_data()  # 65 samples: quick compiles (simulated before the clock starts)
    clock = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if bad is None:
            fit = estimator.fit(BENCH.model, data, throw=False, **args)
            assert fit.params.shape == (2,)
            assert time.perf_counter() - clock < 60.0
            return
        with pytest.raises(BAD):
            estimator.fit(BENCH.model, data, **args)
    assert time.perf_counter() - clock < 2.0, f"bad {bad} must be refused before any heavy work"


# -- garbage data -------------------------------------------------------------------------


@st.composite
def _garbage(draw):
    """65 samples with no dynamics at all: independent draws, a constant, one spike, a sign
    flip per sample, a far offset (a random walk is left out: its trends can look like
    logistic growth, and a fit of it is then no error)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["white", "uniform", "constant", "spike", "alternating", "offset"]))
    n = 65
    level = draw(st.floats(0.1, 10.0))
    u = {
        "white": lambda: rng.standard_normal(n),
        "uniform": lambda: rng.uniform(0, 1, n),
        "constant": lambda: np.full(n, level) + 1e-3 * level * rng.standard_normal(n),
        "spike": lambda: np.where(np.arange(n) == n // 2, 10 * level, 0.0) + 1e-3 * rng.standard_normal(n),
        "alternating": lambda: level * (-1.0) ** np.arange(n),
        "offset": lambda: 1e6 + rng.standard_normal(n),
    }[kind]()
    return kind, wj.Trajectory(logistic_small_data().t, u)


@settings(FUZZ, max_examples=40)
@given(garbage=_garbage(), estimator=st.sampled_from([wj.WLS(), wj.MLE()]))
def test_garbage_data_never_give_a_silent_success(garbage, estimator):
    kind, data = garbage
    clock = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fit = estimator.fit(BENCH.model, data, throw=False)
        except BAD:
            return
    assert time.perf_counter() - clock < 60.0
    said = [str(w.message) for w in caught if issubclass(w.category, (RuntimeWarning, UserWarning))]
    assert not fit.successful or said, f"{kind} data: a successful fit without a warning, {fit.params}"
