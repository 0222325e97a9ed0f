"""Output error on what users measure: count likelihoods (Poisson, negative binomial) and
observation functions y = h(u, p, t), checked against scipy's likelihoods and against the
states observed directly."""

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest
import scipy.optimize
import scipy.stats
from _typecheck import unchecked
from _zoo import zoo

import wendyjax as wj

N_BOYS = wj.datasets.BOARDING_SCHOOL_N
FLU = wj.datasets.boarding_school()
IN_BED = np.asarray(FLU.u)[:, 1]


def _sir(u, p, t):
    s, i, _ = u
    infection = p[0] * s * i / N_BOYS
    return jnp.stack([-infection, infection - p[1] * i, p[1] * i])


SIR = wj.ODEModel(
    _sir,
    ["S", "I", "R"],
    ["beta", "gamma", "I0", "phi"],
    bounds=([0.1, 0.05, 0.5, 0.1], [5.0, 2.0, 20.0, 1000.0]),
    name="flu",
)


def _tied(p):
    return jnp.stack([N_BOYS - p[2], p[2], 0.0])


def _in_bed(p):
    """I(t) at the data's days, solved independently of the fit's machinery."""
    return np.asarray(wj.solve(SIR, p, _tied(jnp.asarray(p)), FLU.t))[:, 1]


def _scipy_nll(p, counts: str) -> float:
    mean = _in_bed(p)
    if counts == "poisson":
        return -float(np.sum(scipy.stats.poisson.logpmf(IN_BED, mean)))
    return -float(np.sum(scipy.stats.nbinom.logpmf(IN_BED, p[3], p[3] / (p[3] + mean))))


def test_the_count_likelihoods_are_scipys():
    rng = np.random.default_rng(0)
    y, mean, phi = jnp.asarray(rng.integers(0, 60, 50).astype(float)), jnp.asarray(rng.uniform(0.5, 80.0, 50)), 3.7
    np.testing.assert_allclose(wj.Poisson().nll(y, mean, None), -scipy.stats.poisson.logpmf(y, mean), rtol=1e-12)
    nb = wj.NegativeBinomial(phi)
    np.testing.assert_allclose(
        nb.nll(y, mean, None), -scipy.stats.nbinom.logpmf(y, phi, phi / (phi + mean)), rtol=1e-11
    )
    # draws: the means and variances the likelihoods have (4 standard errors of 20,000 draws)
    draws = np.asarray(nb.draw(jnp.full(20_000, 12.0), None, jax.random.key(0)))
    assert abs(draws.mean() - 12.0) < 4 * np.sqrt((12 + 144 / phi) / 20_000)
    assert abs(draws.var() / (12 + 144 / phi) - 1) < 0.05


@pytest.mark.parametrize("counts", ["poisson", "negative_binomial"])
def test_a_count_fit_is_the_maximum_likelihood_estimate(counts):
    """Its objective is scipy's negative log-likelihood of the counts at the estimate, and
    scipy's optimiser started nearby finds no better point."""
    noise, fixed = (wj.Poisson(), {"phi": 1.0}) if counts == "poisson" else (wj.NegativeBinomial("phi"), None)
    fit = wj.OutputError().fit(SIR, FLU, [1.5, 0.5, 3.0, 10.0], u0=_tied, noise=noise, fixed=fixed)
    assert fit.successful and fit.noise == counts.replace("_", " ")
    full = np.r_[fit.params, 1.0] if counts == "poisson" else fit.params
    at_fit = _scipy_nll(full, counts)
    assert fit.objective == pytest.approx(at_fit, rel=1e-5)  # the two ODE solves agree to their tolerance, 1e-6
    free = len(fit.params)
    other = scipy.optimize.minimize(
        lambda q: _scipy_nll(np.r_[q, full[free:]], counts),
        1.02 * fit.params,
        method="Nelder-Mead",
        options={"xatol": 1e-9, "fatol": 1e-10, "maxiter": 20_000},
    )
    assert other.fun >= at_fit - 1e-6
    np.testing.assert_allclose(other.x, fit.params, rtol=1e-3)
    assert np.all(np.isfinite(fit.stderr))


def test_a_count_fits_covariance_from_the_trust_region_is_the_one_computed_afresh():
    """With counts the trust region keeps the root of its Fisher-scoring model at the
    estimate; the covariance from it equals the one that recomputes that root."""
    est = wj.OutputError()
    problem = est.problem(SIR, wj.Dataset([FLU]), key=None, u0=_tied, noise=wj.NegativeBinomial("phi"))
    assert SIR.bounds is not None
    lo, hi = (jnp.asarray(b) for b in SIR.bounds)
    sol = jax.jit(est.solve)(problem, jnp.array([1.5, 0.5, 3.0, 10.0]), lo, hi)
    assert bool(sol.successful) and sol.extras["jacobian"].shape[1] == 4
    covariance = jax.jit(est.covariance, static_argnums=2)
    kept, afresh = (np.asarray(covariance(problem, s, None)) for s in (sol, sol.on_host()))
    assert np.all(np.isfinite(kept))
    np.testing.assert_allclose(kept, afresh, rtol=1e-9, atol=0)


@pytest.mark.slow  # over 7 s: the quick loop stays under 5 minutes
def test_count_bootstraps_and_profiles():
    """The bootstrap draws counts (no σ); the profile's statistic is twice the rise of the
    negative log-likelihood (a likelihood, not least squares)."""
    fit = wj.OutputError().fit(SIR, FLU, [1.5, 0.5, 3.0, 10.0], u0=_tied, noise=wj.Poisson(), fixed={"phi": 1.0})
    boot = wj.studies.bootstrap(wj.OutputError(), fit, FLU, 12, key=0, progress=False)
    assert boot.noise == "poisson" and "σ" not in boot.table(0.5) and boot.n_failed <= 1
    lo, hi = boot.normal(0.95)
    assert np.all(lo < fit.params) and np.all(fit.params < hi)
    prof = wj.studies.profile(wj.OutputError(), fit, FLU, "gamma", n_points=5)["gamma"]
    at_fit = _scipy_nll(np.r_[fit.params, 1.0], "poisson")
    expected = [2 * (_scipy_nll(np.r_[q, 1.0], "poisson") - at_fit) for q in prof.params]
    # the fit's ODE solves and scipy's reference agree to their tolerance (1e-6 relative)
    np.testing.assert_allclose(prof.statistic, np.maximum(expected, 0.0), rtol=1e-4, atol=1e-4)
    assert prof.statistic.max() > 3.84  # the grid reaches past the 95 % threshold: not a flat check


@pytest.mark.slow  # over 7 s: the quick loop stays under 5 minutes
def test_observing_the_states_through_observe_is_observing_them():
    bench = zoo("lotka_volterra")
    data = bench.simulate(jax.random.key(0), 0.05, subsample=8)
    start = np.asarray(bench.p_true) * 1.1
    direct = wj.OutputError().fit(bench.model, data, start, u0=np.asarray(bench.u0))
    through = wj.OutputError().fit(bench.model, data, start, u0=np.asarray(bench.u0), observe=lambda u, p, t: u)
    np.testing.assert_allclose(through.params, direct.params, rtol=1e-10)
    np.testing.assert_allclose(through.stderr, direct.stderr, rtol=1e-8)


def _decay(u, p, t):
    return jnp.stack([-p[0] * u[0]])


def test_a_scaled_and_offset_observable_recovers_its_parameters():
    """y = s·x + o of x' = −k x (s, o parameters of the model, unused by the ODE): the
    estimates fall within 4 standard errors of the truth (fixed seed)."""
    model = wj.ODEModel(_decay, ["x"], ["k", "s", "o"], bounds=([0.01, 0.1, -5.0], [5.0, 10.0, 5.0]), name="decay")
    t = np.linspace(0.0, 5.0, 101)
    truth = np.array([0.7, 2.5, 1.0])
    y = truth[1] * 3.0 * np.exp(-truth[0] * t) + truth[2]
    y = y + 0.05 * np.random.default_rng(3).normal(size=t.size)
    observe = lambda u, p, t: jnp.stack([p[1] * u[0] + p[2]])  # noqa: E731
    fit = wj.OutputError(fit_u0=False).fit(
        model, wj.Trajectory(t, y[:, None]), [1.0, 2.0, 0.0], u0=[3.0], observe=observe
    )
    assert fit.successful and np.all(np.abs(fit.params - truth) < 4 * fit.stderr)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: wj.MLE().fit(SIR, FLU, [1.5, 0.5, 3.0, 10.0], noise=wj.Poisson()),
            ValueError,
            r"the weak form \(WENDy\) has Gaussian and log-normal likelihoods only; counts with Poisson noise are "
            r"fitted by output error",
        ),
        (
            lambda: wj.MLE().fit(SIR, FLU, [1.5, 0.5, 3.0, 10.0], observe=lambda u, p, t: u[1:2]),
            TypeError,
            r"unknown keyword\(s\) observe; .* fitted by output error \(wj.OutputError\): "
            r"the weak form needs every state",
        ),
        (
            lambda: wj.OutputError().fit(SIR, FLU, [1.5, 0.5, 3.0, 10.0], u0=_tied, noise=wj.Poisson(), sigma=3.0),
            ValueError,
            r"sigma and weighted=False set a Gaussian noise level, but counts \(poisson\) have the variance",
        ),
        (
            lambda: wj.OutputError().fit(
                SIR, wj.Trajectory(FLU.t, np.asarray(FLU.u) - 5.0), [1.5, 0.5, 3.0, 10.0], u0=_tied, noise=wj.Poisson()
            ),
            ValueError,
            r"a count likelihood models counts, but trajectory 0 has u\[0, 1\] = -2",
        ),
        (
            lambda: wj.OutputError().fit(SIR, FLU, [1.5, 0.5, 3.0, 10.0], u0=_tied, noise=wj.NegativeBinomial("k")),
            ValueError,
            r"NegativeBinomial\(dispersion='k'\): model 'flu' has no such parameter",
        ),
        (
            lambda: wj.OutputError().fit(
                SIR, wj.Trajectory(FLU.t, IN_BED[:, None]), [1.5, 0.5, 3.0, 10.0], u0=_tied, observe="I"
            ),
            TypeError,
            r"observe must be a function h\(u, p, t\) of the states, parameters and time, got str",
        ),
        (lambda: wj.NegativeBinomial(-1.0), ValueError, "dispersion must be a number > 0 or the name of a model"),
        (
            lambda: wj.NegativeBinomial("phi").sample(jnp.ones((3, 1)), jax.random.key(0)),
            ValueError,
            r"names a parameter: only a fit, which knows the model's parameters, can use it",
        ),
        (
            lambda: wj.OutputError(solver=optx.LevenbergMarquardt(rtol=1e-8, atol=1e-8)).fit(
                SIR, FLU, [1.5, 0.5, 3.0, 10.0], u0=_tied, noise=wj.Poisson()
            ),
            ValueError,
            "counts are fitted by their likelihood, which needs the TrustRegion solver",
        ),
        (
            lambda: wj.OutputError().fit(SIR, FLU, [1.5, 0.5, 3.0, 10.0], u0=_tied, observe=lambda u, p, t: u[1:2]),
            ValueError,
            "observe returns 1 observables but the data have 3 columns",
        ),
        (
            lambda: wj.OutputError().fit(
                SIR, wj.Trajectory(FLU.t, IN_BED[:, None]), [1.5, 0.5, 3.0, 10.0], observe=lambda u, p, t: u[1:2]
            ),
            ValueError,
            r"with observe=..., the data show observables, not the states: pass u0=",
        ),
        (
            lambda: wj.OutputError().fit(
                SIR,
                wj.Trajectory(FLU.t, IN_BED[:, None]),
                [1.5, 0.5, 3.0, 10.0],
                u0=_tied,
                observe=lambda u, p, t: u[1],
            ),
            ValueError,
            r"observe\(u, p, t\) must return a vector of observables \(K,\), got \(\)",
        ),
    ],
)
def test_what_does_not_apply_is_refused_before_work(call, error, match):
    with pytest.raises(error, match=match), unchecked():  # the functions' own messages (a str is no observe)
        call()


@pytest.mark.slow  # over 7 s: the quick loop stays under 5 minutes
def test_the_outbreak_observed_through_one_column():
    """Only I observed, given as one column with observe = I: the Poisson fit of the
    three-column data with S and R missing."""
    one = wj.Trajectory(FLU.t, IN_BED[:, None])
    kwargs: dict[str, Any] = dict(u0=_tied, noise=wj.Poisson(), fixed={"phi": 1.0})
    direct = wj.OutputError().fit(SIR, FLU, [1.5, 0.5, 3.0, 10.0], **kwargs)
    through = wj.OutputError().fit(SIR, one, [1.5, 0.5, 3.0, 10.0], observe=lambda u, p, t: u[1:2], **kwargs)
    np.testing.assert_allclose(through.params, direct.params, rtol=1e-10)
    assert through.objective == pytest.approx(direct.objective, rel=1e-12)
    boot = wj.studies.bootstrap(wj.OutputError(), through, one, 6, key=0, progress=False)
    assert boot.draws.shape == (6, 3) and boot.n_failed <= 1


def test_log_normal_noise_with_an_unobserved_zero_state_points_at_observe():
    """Log-normal noise refused u0 with R = 0 although R is unobserved, with no guidance."""
    with pytest.raises(
        ValueError,
        match=r"u0\(p0\) = \[760.0, 3.0, 0.0\] must be positive .* fit the observed columns "
        r"through observe=",
    ):
        wj.OutputError().fit(
            SIR, FLU, [1.5, 0.5, 3.0, 10.0], u0=_tied, noise="lognormal", fixed={"phi": 1.0}, weighted=False
        )
    one = wj.Trajectory(FLU.t, IN_BED[:, None])
    fit = wj.OutputError().fit(
        SIR,
        one,
        [1.5, 0.5, 3.0, 10.0],
        u0=_tied,
        noise="lognormal",
        fixed={"phi": 1.0},
        observe=lambda u, p, t: u[1:2],
        weighted=False,
    )
    assert fit.successful and fit.noise == "lognormal"
    r = np.log(IN_BED) - np.log(_in_bed(np.r_[fit.params, 1.0]))
    assert fit.objective == pytest.approx(0.5 * np.sum(r**2), rel=1e-4)


def _sir_r0(u, q, t):  # by hand: beta = R0·gamma, q = (gamma, I0, phi, R0)
    s, i, _ = u
    infection = q[3] * q[0] * s * i / N_BOYS
    return jnp.stack([-infection, infection - q[0] * i, q[0] * i])


@pytest.mark.slow  # over 7 s: the quick loop stays under 5 minutes
def test_a_derived_quantity_is_profiled_by_reparametrised_refits():
    """R0 = β/γ profiled through β (solved from γ and R0) is the profile of R0 in the model
    written by hand with β = R0·γ; a "quantity" that is a parameter itself has that
    parameter's profile."""
    kwargs: dict[str, Any] = dict(u0=_tied, noise=wj.Poisson(), fixed={"phi": 1.0})
    fit = wj.OutputError().fit(SIR, FLU, [1.5, 0.5, 3.0, 10.0], **kwargs)
    prof = wj.studies.profile(
        wj.OutputError(), fit, FLU, n_points=7, derived={"R0": lambda p: p[0] / p[1], "gamma_too": lambda p: p[1]}
    )
    assert list(prof) == ["R0", "gamma_too"]
    r0 = prof["R0"]
    assert r0.estimate == pytest.approx(fit.params[0] / fit.params[1], rel=1e-12)
    assert r0.verdict == "identifiable" and r0.interval[0] < r0.estimate < r0.interval[1]
    hand_model = wj.ODEModel(
        _sir_r0,
        ["S", "I", "R"],
        ["gamma", "I0", "phi", "R0"],
        bounds=([0.05, 0.5, 0.1, -np.inf], [2.0, 20.0, 1000.0, np.inf]),
        name="flu",
    )
    hand_u0 = lambda q: jnp.stack([N_BOYS - q[1], q[1], 0.0])  # noqa: E731
    hand = wj.OutputError().fit(
        hand_model,
        FLU,
        [fit.params[1], fit.params[2], 1.0, r0.estimate],
        u0=hand_u0,
        noise=wj.Poisson(),
        fixed={"phi": 1.0},
    )
    by_hand = wj.studies.profile(wj.OutputError(), hand, FLU, "R0", grid={"R0": r0.grid})["R0"]
    np.testing.assert_allclose(r0.statistic, by_hand.statistic, rtol=1e-4, atol=1e-5)
    gamma = wj.studies.profile(wj.OutputError(), fit, FLU, "gamma", n_points=7)["gamma"]
    np.testing.assert_allclose(prof["gamma_too"].grid, gamma.grid, rtol=1e-12)
    np.testing.assert_allclose(prof["gamma_too"].statistic, gamma.statistic, rtol=1e-6, atol=1e-7)


@unchecked()  # profile's own messages for wrong types (a list is no dict of derived quantities)
def test_bad_derived_profiles_are_refused():
    fit = wj.OutputError().fit(SIR, FLU, [1.5, 0.5, 3.0, 10.0], u0=_tied, noise=wj.Poisson(), fixed={"phi": 1.0})
    with pytest.raises(TypeError, match=r"derived must be a dict \{name: fn\}"):
        wj.studies.profile(wj.OutputError(), fit, FLU, derived=[lambda p: p[0]])  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(ValueError, match=r"derived\['c'\] does not depend on the fitted parameters"):
        wj.studies.profile(wj.OutputError(), fit, FLU, derived={"c": lambda p: 3.0 + 0 * p[0]})
    with pytest.raises(ValueError, match=r"'gamma' is already a parameter of model 'flu'"):
        wj.studies.profile(wj.OutputError(), fit, FLU, derived={"gamma": lambda p: p[0] / p[1]})


@pytest.mark.slow  # over 7 s: the quick loop stays under 5 minutes
def test_a_profile_of_a_fit_through_observe_reuses_it():
    one = wj.Trajectory(FLU.t, IN_BED[:, None])
    fit = wj.OutputError().fit(
        SIR,
        one,
        [1.5, 0.5, 3.0, 10.0],
        u0=_tied,
        noise=wj.Poisson(),
        fixed={"phi": 1.0},
        observe=lambda u, p, t: u[1:2],
    )
    prof = wj.studies.profile(wj.OutputError(), fit, one, "beta", n_points=5)["beta"]
    assert prof.verdict == "identifiable" and prof.interval[0] < fit.params[0] < prof.interval[1]


def _chain(u, p, t):
    return jnp.stack([-p[0] * u[0], p[0] * u[0] - p[1] * u[1]])


CHAIN = wj.ODEModel(_chain, ["x", "y"], ["a", "b"], bounds=([0.01, 0.01], [5.0, 5.0]), name="chain")


def _chain_data():
    """x measured with Gaussian noise (σ = 2), y counted (Poisson)."""
    t = np.linspace(0.0, 6.0, 25)
    clean = np.asarray(wj.solve(CHAIN, [0.9, 0.4], [60.0, 0.0], t))
    rng = np.random.default_rng(5)
    return wj.Trajectory(t, np.c_[clean[:, 0] + 2.0 * rng.normal(size=t.size), rng.poisson(clean[:, 1])])


@pytest.mark.slow  # over 7 s: the quick loop stays under 5 minutes
def test_each_observable_has_its_own_noise_model():
    """noise=("gaussian", Poisson()): the fit maximises the joint likelihood of a Gaussian
    column (σ given, as known) and a count column; scipy's optimiser on the same likelihood
    finds no better point, and the bootstrap draws each column by its own model."""
    data = _chain_data()
    fit = wj.OutputError(fit_u0=False).fit(
        CHAIN, data, [1.0, 0.5], u0=[60.0, 0.0], noise=("gaussian", wj.Poisson()), sigma=[2.0, 1.0]
    )
    assert fit.successful and fit.noise == "gaussian, poisson"

    def nll(q):
        states = np.asarray(wj.solve(CHAIN, q, [60.0, 0.0], data.t))
        u = np.asarray(data.u)
        return float(
            0.5 * np.sum(((states[:, 0] - u[:, 0]) / 2.0) ** 2)
            - np.sum(scipy.stats.poisson.logpmf(u[:, 1], states[:, 1]))
        )

    assert fit.objective == pytest.approx(nll(fit.params), rel=1e-5)
    other = scipy.optimize.minimize(
        nll, 1.02 * fit.params, method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-10}
    )
    assert other.fun >= nll(fit.params) - 1e-6
    np.testing.assert_allclose(other.x, fit.params, rtol=1e-3)
    assert np.all(np.abs(fit.params - [0.9, 0.4]) < 4 * fit.stderr)
    boot = wj.studies.bootstrap(wj.OutputError(fit_u0=False), fit, data, 8, key=0, progress=False)
    assert boot.n_failed == 0 and re.search(r"σ = \(2, poisson\)", boot.table(0.5))  # the σ given to the fit
    # the fit's per-observable noise may be repeated to its interval methods, not changed
    est = wj.OutputError(fit_u0=False)
    lo, hi = wj.studies.Wald()(est, fit, data, noise=("gaussian", wj.Poisson()))
    assert np.all(lo < fit.params) and np.all(fit.params < hi)
    with pytest.raises(ValueError, match=r"got noise=.* but the fit was made with noise="):
        wj.studies.Wald()(est, fit, data, noise=("gaussian", "gaussian"))
    with pytest.raises(ValueError, match=r"noise: one noise model per observable \(2\), got 3"):
        wj.OutputError().fit(CHAIN, data, [1.0, 0.5], u0=[60.0, 0.0], noise=("gaussian",) * 3, sigma=2.0)
    with (
        pytest.raises(ValueError, match=r"one noise model per observable, a sequence, is an option of output error"),
        unchecked(),  # the library's own message
    ):
        wj.MLE().fit(CHAIN, data, [1.0, 0.5], noise=("gaussian", wj.Poisson()))
