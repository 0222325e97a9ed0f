r"""Output error: fit parameters and initial conditions by forward simulation (Rummel et al. 2025, eq. 11).

$$\min_{l \le p \le u,\ u_0}\ \tfrac12\sum_{r,i,d} m_{rid}\,(x_d(t_{ri}; p, u_{0,r}) - y_{rid})^2 / \sigma_{rd}^2$$

with $x$ the diffrax solution (in log space, $x = \log u$, for log-normal noise), $y$ the
data, $m$ the observation mask and $\sigma$ the noise level per state (1 for the plain
least squares of Rummel et al. 2025, eq. 11). The Jacobian comes from the forward sensitivity equations
solved with the states (or forward-mode autodiff through diffrax); the optimiser is
Levenberg–Marquardt in Moré's trust-region form on the box (our
[`TrustRegion`][wendyjax.estimators.TrustRegion] with the Gauss–Newton model) or an
optimistix least-squares solver with the bounds as a change of variables.
"""

from collections.abc import Callable, Sequence
from typing import ClassVar

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Bool, Float

from .._checks import as_ode_solver, as_sigma, check_solver_options, check_state_columns, warn_if_float32
from .._results import RESULTS
from .._typing import Keys
from ..data import Batch, Dataset, Trajectory, as_dataset
from ..inference import determined_pinv
from ..model import ODEModel
from ..noise import (
    NOISE_WIDTH,
    AbstractCountNoise,
    AbstractNoise,
    estimate_noise_std,
    noise_name,
    observable_noises,
    resolve_noise,
)
from ..weak import TestFunctionConfig, WeakLikelihood, log_space_rhs
from ._base import AbstractEstimator, check_start
from ._result import OutputErrorFit
from ._solution import Solution
from ._trust_region import TrustRegion
from ._wendy import MLE, AbstractWENDyEstimator


class OutputErrorProblem(eqx.Module):
    r"""Data of an output-error fit for $R$ trajectories (leading axis $R$).

    - `t`: $(R, N)$ sample times; shorter trajectories repeat their last time (masked).
    - `y`: $(R, N, K)$ observations of the $K$ observables (the states, or those of
      `observe`; log data for log-normal noise), 0 where missing.
    - `mask`: $(R, N, K)$, 1 where observed.
    - `scale`: $(R, K)$ residual scale $\sigma_{rk}$ (noise level, or 1 unweighted or for counts).
    - `x0`: $(R, D)$ default start of the initial state: the first observation of each
      state (in log space for log-normal noise).
    - `noises`: the noise model of each observable: "gaussian", "lognormal" (residuals of
      the logarithms) or a count likelihood (e.g. [`Poisson`][wendyjax.Poisson]); with any
      count likelihood the fit maximises the likelihood of all of them (Gaussian terms with
      their `scale` as known), otherwise it is least squares.
    - `initial`: initial states tied to the parameters, `u0(p)` → `(D,)` or `(R, D)`, or
      `None` (they are the problem's unknowns or held at `x0`).
    - `observe`: the observables `h(u, p, t)` → `(K,)`, or `None` for the states.
    """

    model: ODEModel
    t: Float[Array, "r n"]
    y: Float[Array, "r n k"]
    mask: Float[Array, "r n k"]
    scale: Float[Array, "r k"]
    x0: Float[Array, "r d"]
    noises: tuple = eqx.field(static=True)
    initial: Callable | None = eqx.field(static=True, default=None)
    observe: Callable | None = eqx.field(static=True, default=None)

    @property
    def log_space(self) -> bool:
        """Whether every observable has log-normal noise."""
        return all(n == "lognormal" for n in self.noises)

    @property
    def counts(self) -> bool:
        """Whether some observable has a count likelihood (the fit is then a likelihood's)."""
        return any(isinstance(n, AbstractCountNoise) for n in self.noises)

    @property
    def log_states(self) -> bool:
        """Whether the states are integrated as their logarithms (log-normal noise on all the
        states themselves)."""
        return self.log_space and self.observe is None

    @property
    def rhs(self):
        """The right-hand side fitted: f, or f̃(x) = f(eˣ)/eˣ in log space."""
        return log_space_rhs(self.model.rhs) if self.log_states else self.model.rhs

    def predict(self, p, xs) -> Float[Array, "r n k"]:
        """The model's values of the observables at the sample times from its states `xs`
        (`(R, N, D)`, as integrated), on the scale of `y`."""
        if self.log_states:
            return xs
        h = (
            xs
            if self.observe is None
            else jax.vmap(jax.vmap(self.observe, in_axes=(0, None, 0)), in_axes=(0, None, 0))(xs, p, self.t)
        )
        logs = np.array([n == "lognormal" for n in self.noises])
        return jnp.where(logs, jnp.log(jnp.where(logs, h, 1.0)), h) if logs.any() else h

    def states0(self, p, x0) -> Float[Array, "r d"]:
        """The initial states the trajectories start from: `initial(p)` where they are tied
        to the parameters (log states under log-normal noise), else `x0`."""
        if self.initial is None:
            return x0
        u0 = jnp.broadcast_to(self.initial(p), x0.shape)
        return jnp.log(u0) if self.log_states else u0

    @property
    def n_observed(self) -> Array:
        """Number of observed data values."""
        return jnp.sum(self.mask)


def _trajectory_arrays(tr: Trajectory, logs: np.ndarray, d: int, hidden_ok: bool = False):
    """Times, observations (logarithms in the columns `logs`), mask and each column's first
    observation (of the data as given) of one trajectory."""
    t, u = np.asarray(tr.t), np.asarray(tr.u)
    mask = np.ones(u.shape, bool) if tr.mask is None else np.asarray(tr.mask)
    first = np.array([np.asarray(u)[np.argmax(mask[:, j]), j] for j in range(u.shape[1])])
    if logs.any():
        bad = mask & ~(u > 0) & logs
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise ValueError(
                f"log-normal noise needs strictly positive data, but u[{i}, {j}] = {u[i, j]:.6g} "
                f"(at t = {t[i]:.6g}); drop or mask non-positive observations."
            )
        u = np.where(mask & logs, np.log(np.where(mask & logs, u, 1.0)), u)
    u = np.where(mask, u, 0.0)
    if not hidden_ok and not mask.any(axis=0).all():
        missing = [j for j in range(d) if not mask[:, j].any()]
        raise ValueError(
            f"states {missing} are never observed in a trajectory: their initial "
            f"condition cannot be started from the data (pass u0=..., the start of the initial "
            f"states)."
        )
    return t, u, mask, first


_LOG_ZERO = (
    "A state that starts at 0 and is never observed (e.g. R = 0): fit the observed columns through observe= "
    "(e.g. observe=lambda u, p, t: u[1:2] with data of those columns), which keeps the states on their own "
    "scale and takes the logarithm of the observables only."
)


def output_error_problem(
    model: ODEModel,
    data: "Trajectory | Dataset | list[Trajectory]",
    noise: "str | AbstractNoise | AbstractCountNoise | Sequence" = "gaussian",
    *,
    sigma=None,
    weighted: bool = True,
    u0=None,
    observe: Callable | None = None,
) -> OutputErrorProblem:
    """Validate data and stack the arrays of an output-error fit.

    - `noise`: "gaussian" (residuals of the states) or "lognormal" (residuals of the
      log states, Rummel et al. 2025, eq. 20), or a noise model; for counts
      [`Poisson`][wendyjax.Poisson] or [`NegativeBinomial`][wendyjax.NegativeBinomial]
      (their likelihood is fitted, not least squares); or a sequence of these, one per
      observable (the Gaussian and log-normal ones then enter the likelihood with their
      `sigma` as known).
    - `weighted`: divide each state's residuals by its noise level (the Gaussian maximum
      likelihood); `False` gives Rummel et al. 2025, eq. (11)'s plain least squares.
    - `sigma`: noise level per state (scalar or `(D,)`; log space for log-normal noise);
      `None` estimates it from each trajectory's fully observed rows (Bortz et al. 2023, §2.2).
    - `u0`: start of the initial states, `(D,)` or `(R, D)`; `None` takes each state's
      first observation, so every state must be observed somewhere; with `u0` states may
      be hidden (never observed). A function `u0(p)` → `(D,)` or `(R, D)` ties them to the
      parameters instead (e.g. S₀ = N − I₀ with I₀ a parameter, bounded by the model's
      box): they are then not fitted on their own.
    - `observe`: what the data's columns measure, `h(u, p, t)` → `(K,)` observables (e.g.
      `lambda u, p, t: jnp.stack([p[2] * u[0] + p[3], u[0] + u[1]])`: a scale and an offset
      that are parameters of the model, and a sum of states); `None`: the states. With it,
      `u0` must be given (the data do not show the states).
    """
    if not isinstance(model, ODEModel):
        raise TypeError(f"model must be an ODEModel, got {type(model).__name__}.")
    warn_if_float32("output-error problem")
    dataset = as_dataset(data)
    dataset.require_distinct_times("output error")
    d = model.n_states
    if observe is None:
        check_state_columns(dataset.n_states, model)
        k = d
    else:
        k = _check_observe(model, observe, dataset.n_states)
        if u0 is None:
            raise ValueError(
                "with observe=..., the data show observables, not the states: pass u0= (the initial "
                "states, or a function u0(p) of the parameters)."
            )
    noises = observable_noises(model, noise, k)
    logs = np.array([n == "lognormal" for n in noises])
    counting = np.array([isinstance(n, AbstractCountNoise) for n in noises])
    log_states = bool(logs.all()) and observe is None
    if counting.all() and sigma is not None or counting.any() and not weighted:
        raise ValueError(
            f"sigma and weighted=False set a Gaussian noise level, but counts "
            f"({', '.join(sorted({noise_name(n) for n in noises if isinstance(n, AbstractCountNoise)}))}) "
            f"have the "
            f"variance their likelihood gives them: leave weighted out (and sigma, or give it for the "
            f"Gaussian and log-normal observables: their terms enter the likelihood with it as known)."
        )
    arrays = [_trajectory_arrays(tr, logs, k, hidden_ok=u0 is not None) for tr in dataset]
    if counting.any():
        _check_counts(arrays, counting)
    if log_states:  # the start of the log states
        arrays = [(t, u, m, np.log(first)) for t, u, m, first in arrays]
    initial = None
    if callable(u0):
        initial = _check_initial(model, u0, len(arrays))
        arrays = [(t, u, m, np.zeros(d)) for t, u, m, _ in arrays]  # not a start: the states follow p
    elif u0 is not None:
        u0 = np.asarray(u0, dtype=float)
        u0 = np.broadcast_to(u0, (len(arrays), d)) if u0.shape == (d,) else u0
        if u0.shape != (len(arrays), d) or not np.all(np.isfinite(u0)):
            raise ValueError(
                f"u0 must be {d} finite initial states of model '{model.name}', or one row per "
                f"trajectory ({len(arrays)}, {d}), got shape {u0.shape}."
            )
        if log_states and np.any(u0 <= 0):
            raise ValueError(f"u0 must be positive under log-normal noise (the fit runs on log states). {_LOG_ZERO}")
        x0 = np.log(u0) if log_states else u0
        arrays = [(t, u, m, row) for (t, u, m, _), row in zip(arrays, x0)]
    if not weighted or counting.all():
        scales = [np.ones(k)] * len(arrays)
    elif sigma is not None:
        scales = [np.where(counting, 1.0, as_sigma(sigma, k, zero_ok=False))] * len(arrays)
    else:
        scales = []
        for _, u, mask, _ in arrays:
            full = mask[:, ~counting].all(axis=1)
            if full.sum() < NOISE_WIDTH:
                raise ValueError(
                    f"cannot estimate the noise level from {int(full.sum())} fully observed rows "
                    f"(need {NOISE_WIDTH}); pass sigma=... or weighted=False."
                )
            s = np.asarray(estimate_noise_std(u[full]))
            # noiseless data: floor at a tiny fraction of the data scale, not zero
            floor = 1e-8 * np.maximum(np.max(np.abs(u[full]), axis=0), 1.0)
            scales.append(np.where(counting, 1.0, np.maximum(s, floor)))
    n = max(len(a[0]) for a in arrays)

    def pad(x, fill_last):
        extra = n - x.shape[0]
        if not extra:
            return x
        tail = np.repeat(x[-1:], extra, axis=0) if fill_last else np.zeros((extra,) + x.shape[1:], x.dtype)
        return np.concatenate([x, tail])

    return OutputErrorProblem(
        model=model,
        t=jnp.asarray(np.stack([pad(a[0], True) for a in arrays])),
        y=jnp.asarray(np.stack([pad(a[1], False) for a in arrays])),
        mask=jnp.asarray(np.stack([pad(a[2], False) for a in arrays]), dtype=float),
        scale=jnp.asarray(np.stack(scales)),
        x0=jnp.asarray(np.stack([a[3] for a in arrays])),
        noises=noises,
        initial=initial,
        observe=observe,
    )


def _check_observe(model: ODEModel, observe: Callable, n_columns: int) -> int:
    """The number of observables `observe(u, p, t)` returns, checked against the data's
    columns."""
    if not callable(observe):
        raise TypeError(
            f"observe must be a function h(u, p, t) of the states, parameters and time, got {type(observe).__name__}."
        )
    d, j = model.n_states, model.n_params
    try:
        out = jax.eval_shape(observe, jnp.zeros(d), jnp.zeros(j), jnp.zeros(()))
    except Exception as e:  # noqa: BLE001 - re-raised with context
        raise ValueError(
            f"observe(u, p, t) with u of shape ({d},), p of shape ({j},) and a scalar t failed: {e}"
        ) from e
    shape = getattr(out, "shape", None)
    if shape is None or len(shape) != 1:
        raise ValueError(f"observe(u, p, t) must return a vector of observables (K,), got {shape}.")
    if shape[0] != n_columns:
        raise ValueError(
            f"observe returns {shape[0]} observables but the data have {n_columns} columns: one column "
            f"per observable, in observe's order."
        )
    return shape[0]


def _check_counts(arrays, counting: np.ndarray) -> None:
    """Counts are finite and non-negative where observed (in the columns `counting`)."""
    for r, (t, u, mask, _) in enumerate(arrays):
        bad = mask & ~(u >= 0) & counting
        if bad.any():
            i, k = np.argwhere(bad)[0]
            raise ValueError(
                f"a count likelihood models counts, but trajectory {r} has u[{i}, {k}] = {u[i, k]:.6g} "
                f"(at t = {t[i]:.6g}): counts are >= 0; use Gaussian or log-normal noise for other "
                f"data."
            )


def _check_initial(model: ODEModel, u0: Callable, n_trajectories: int) -> Callable:
    """`u0(p)` checked to give `(D,)` or `(R, D)` initial states from the parameters."""
    d, j = model.n_states, model.n_params
    try:
        out = jax.eval_shape(u0, jnp.zeros(j))
    except Exception as e:  # noqa: BLE001 - re-raised with context
        raise ValueError(
            f"u0 as a function u0(p) of the {j} parameters ({', '.join(model.param_names)}) failed on "
            f"p of shape ({j},): {e}"
        ) from e
    if getattr(out, "shape", None) not in ((d,), (n_trajectories, d)):
        raise ValueError(
            f"u0(p) must return the {d} initial states ({', '.join(model.state_names)}) of shape ({d},) "
            f"or ({n_trajectories}, {d}), got {getattr(out, 'shape', type(out).__name__)}."
        )
    return u0


def stack_problems(problems) -> OutputErrorProblem:
    """Stack problems of equal shapes along a new leading (batch) axis, for `vmap`."""
    arrays, static = eqx.partition(list(problems), eqx.is_array)
    stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *arrays)
    return eqx.combine(stacked, static[0])


class _Box(eqx.Module):
    r"""$p = l + (u - l)\,\sigma(z)$ on finite boxes, $l + \mathrm{softplus}(z)$ or
    $u - \mathrm{softplus}(z)$ on half-lines, $p = z$ when unbounded."""

    lower: Float[Array, " j"]
    upper: Float[Array, " j"]

    def to_box(self, z):
        lo, hi = self.lower, self.upper
        lo_f, hi_f = jnp.isfinite(lo), jnp.isfinite(hi)
        lo0, hi0 = jnp.where(lo_f, lo, 0.0), jnp.where(hi_f, hi, 0.0)
        both = lo0 + (hi0 - lo0) * jax.nn.sigmoid(z)
        return jnp.where(
            lo_f & hi_f, both, jnp.where(lo_f, lo0 + jax.nn.softplus(z), jnp.where(hi_f, hi0 - jax.nn.softplus(z), z))
        )

    def to_free(self, p):
        lo, hi = self.lower, self.upper
        lo_f, hi_f = jnp.isfinite(lo), jnp.isfinite(hi)
        lo0, hi0 = jnp.where(lo_f, lo, 0.0), jnp.where(hi_f, hi, 1.0)
        width = jnp.where(lo_f & hi_f, hi0 - lo0, 1.0)
        # a start on a bound is moved 1e-9 of the width inside (z is finite)
        s = jnp.clip((p - lo0) / width, 1e-9, 1 - 1e-9)
        inv_softplus = lambda v: v + jnp.log(-jnp.expm1(-v))  # noqa: E731
        gap_lo = jnp.maximum(p - lo0, 1e-9 * jnp.maximum(jnp.abs(lo0), 1.0))
        gap_hi = jnp.maximum(hi0 - p, 1e-9 * jnp.maximum(jnp.abs(hi0), 1.0))
        return jnp.where(
            lo_f & hi_f,
            jnp.log(s) - jnp.log1p(-s),
            jnp.where(lo_f, inv_softplus(gap_lo), jnp.where(hi_f, inv_softplus(gap_hi), p)),
        )


def _states_norm(y):
    """RMS norm of the states only (the first leaf of an augmented state)."""
    return optx.rms_norm(jax.tree_util.tree_leaves(y)[0])


@eqx.filter_custom_jvp
def _states_with_sensitivities(p, x0, *, est, problem):
    xs, ok = jax.vmap(lambda t, x: est._solve(problem, t, x, p, False))(problem.t, x0)
    return xs, jnp.all(ok)


@_states_with_sensitivities.def_jvp
def _states_jvp(primals, tangents, *, est, problem):
    """Tangents of the states from the forward sensitivities: one augmented solve, then
    ∂x/∂x₀·dx₀ + ∂x/∂p·dp for any number of tangent directions (`jacfwd` batches them)."""
    p, x0 = primals
    dp, dx0 = tangents
    (xs, sx, sp), ok = jax.vmap(lambda t, x: est._solve(problem, t, x, p, True))(problem.t, x0)
    dxs = jnp.zeros_like(xs)
    if dp is not None:
        dxs = dxs + jnp.einsum("rnij,j->rni", sp, dp)
    if dx0 is not None:
        dxs = dxs + jnp.einsum("rnij,rj->rni", sx, dx0)
    return (xs, jnp.all(ok)), (dxs, None)


class OutputError(AbstractEstimator):
    r"""Output-error least squares over parameters and initial states (Rummel et al. 2025, eq. 11, §3.2).

    - `ode_solver`: the diffrax solver of the forward model (`Tsit5()`; `Kvaerno5()` for
      stiff systems), with step-size tolerances `ode_rtol`, `ode_atol` and at most `ode_max_steps`
      steps per solve.
    - `solver`: the optimiser, and `max_steps` its step limit: a
      [`TrustRegion`][wendyjax.estimators.TrustRegion] (default, tolerances 1e-8):
      Levenberg–Marquardt as a trust region on the Gauss–Newton model $J^TJ$ with Moré's
      scaling, bounds enforced exactly (active set); or any optimistix least-squares
      solver (e.g. `optimistix.LevenbergMarquardt(rtol=1e-8, atol=1e-8)`), with the bounds
      as the change of variables $p = l + (u - l)\,\mathrm{sigmoid}(z)$ (softplus on
      half-lines); both are tested on the same fits in `tests/test_output_error.py`.
    - `fit_u0`: also fit the initial states (default, as Rummel et al. 2025); else they stay at the start.
    - `jacobian`: "sensitivity" (default) solves the forward sensitivity equations
      $\dot S = \partial_x f\,S + \partial_p f$ with the states in one augmented solve whose
      steps are controlled by the states alone, so it equals the forward-mode derivative of
      the discrete solution (to rounding; tested) at lower cost inside the optimiser;
      "forward_mode" differentiates the solver (`diffrax.ForwardMode`).

    A trial point whose forward solve fails (diffrax does not reach the last sample, or
    non-finite states) gets a large constant residual, so the step is rejected; a final
    estimate whose solve fails has status `forward_failed` (Rummel et al. 2025's failure).
    """

    ode_solver: diffrax.AbstractSolver = diffrax.Tsit5()
    ode_rtol: float = 1e-6
    ode_atol: float = 1e-8
    ode_max_steps: int = 16_384
    solver: TrustRegion | optx.AbstractLeastSquaresSolver = TrustRegion()
    max_steps: int = 500
    fit_u0: bool = True
    jacobian: str = "sensitivity"
    method: ClassVar[str] = "output_error"
    covariances: ClassVar[tuple[str, ...]] = ("gauss_newton",)
    fit_type: ClassVar[type] = OutputErrorFit

    def __check_init__(self):
        if self.jacobian not in ("sensitivity", "forward_mode"):
            raise ValueError(f"jacobian must be 'sensitivity' or 'forward_mode', got {self.jacobian!r}.")
        check_solver_options(
            self,
            (TrustRegion, optx.AbstractLeastSquaresSolver),
            "wendyjax.estimators.TrustRegion() or optimistix.LevenbergMarquardt(rtol=1e-8, atol=1e-8)",
        )
        as_ode_solver("ode_solver", self.ode_solver)
        for name in ("ode_rtol", "ode_atol"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and np.isfinite(value) and value >= 0):
                raise ValueError(
                    f"OutputError: {name} (the ODE solver's step-size tolerance) must be a finite number "
                    f">= 0, got {value!r}."
                )
        if self.ode_rtol == 0 and self.ode_atol == 0:
            raise ValueError("OutputError: ode_rtol and ode_atol cannot both be 0.")
        if isinstance(self.ode_max_steps, bool) or not isinstance(self.ode_max_steps, int) or self.ode_max_steps < 1:
            raise ValueError(
                f"OutputError: ode_max_steps (the ODE solver's step limit per solve) must be a positive "
                f"integer, got {self.ode_max_steps!r}."
            )

    def problem(
        self,
        model,
        data: Dataset,
        *,
        key: Keys | None = None,  # unused: a fit draws nothing (a study passes one per dataset)
        noise=None,
        sigma=None,
        weighted: bool = True,
        u0=None,
        observe: Callable | None = None,
    ) -> OutputErrorProblem:
        """The output-error data of `model` on `data` (see [`output_error_problem`][]):
        `noise` ("gaussian" or "lognormal": log residuals; `None` takes `model.noise`; counts:
        [`Poisson`][wendyjax.Poisson], [`NegativeBinomial`][wendyjax.NegativeBinomial]; or one
        per observable), `sigma` and `weighted`, `u0`, the start of the initial states (`(D,)` or `(R, D)`;
        default: the first observations) or a function of the parameters, and `observe`, the
        observables the data's columns measure."""
        problem = output_error_problem(
            model,
            data,
            noise if isinstance(noise, (list, tuple)) else resolve_noise(model, noise),
            sigma=sigma,
            weighted=weighted,
            u0=u0,
            observe=observe,
        )
        if problem.counts and not isinstance(self.solver, TrustRegion):
            raise ValueError(
                "counts are fitted by their likelihood, which needs the TrustRegion solver (optimistix's "
                "solvers fit least squares); use OutputError(solver=wj.estimators.TrustRegion())."
            )
        return problem

    def batch_problems(self, model, datasets: "Batch | list", **options):
        """One output-error problem per dataset (each from its own first observations)."""
        return (
            lambda indices: stack_problems([self.problem(model, as_dataset(datasets[i]), **options) for i in indices]),
            [{} for _ in datasets],
        )

    def start_required(self, model) -> str | None:
        """Output error has no default start."""
        names = ", ".join(getattr(model, "param_names", ()))
        return (
            f"output error on model '{getattr(model, 'name', type(model).__name__)}' starts from given "
            f"parameters ({names}); a WENDy estimate is a good one (see Hybrid)."
        )

    def init(self, model, problem, p0, lower, upper) -> Float[Array, " j"]:
        """`p0` checked: output error has no default start (and initial states tied to it
        must be positive for log states)."""
        self.require_start(model, p0)
        p0 = check_start(model, p0, lower, upper)
        if problem.initial is not None and problem.log_states and np.any(np.asarray(problem.initial(p0)) <= 0):
            raise ValueError(
                f"u0(p0) = {np.asarray(problem.initial(p0)).tolist()} must be positive under log-normal "
                f"noise (the fit runs on log states). {_LOG_ZERO}"
            )
        return jnp.asarray(p0, float)

    def _solve(self, problem, t, x0, p, sensitivities: bool):
        """One trajectory: states at `t` (and, with `sensitivities`, ∂x/∂x₀ and ∂x/∂p from
        the variational equations Ṡ = ∂ₓf S (+ ∂ₚf), solved alongside), and success.
        The steps land on the model's `jump_ts`."""
        rhs = problem.rhs
        if sensitivities:

            def field(s, y, p):
                x, sx, sp = y
                fx = jax.jacfwd(rhs, argnums=0)(x, p, s)
                return rhs(x, p, s), fx @ sx, fx @ sp + jax.jacfwd(rhs, argnums=1)(x, p, s)

            y0 = (x0, jnp.eye(x0.shape[0], dtype=x0.dtype), jnp.zeros((x0.shape[0], p.shape[0]), x0.dtype))
        else:
            field, y0 = (lambda s, y, p: rhs(y, p, s)), x0
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(field),
            self.ode_solver,
            t0=t[0],
            t1=t[-1],
            dt0=None,
            y0=y0,
            args=p,
            saveat=diffrax.SaveAt(ts=t),
            # step sizes controlled by the states alone: the same steps as the plain solve
            stepsize_controller=problem.model.stepsize_controller(self.ode_rtol, self.ode_atol, norm=_states_norm),
            max_steps=self.ode_max_steps,
            adjoint=diffrax.ForwardMode(),
            throw=False,
        )
        assert sol.ys is not None  # saved at `t`
        finite = jnp.stack([jnp.all(jnp.isfinite(y)) for y in jax.tree_util.tree_leaves(sol.ys)])
        ok = diffrax.is_successful(sol.result) & jnp.all(finite)
        return sol.ys, ok

    def trajectories(self, problem: OutputErrorProblem, p, x0) -> tuple[Float[Array, "r n d"], Bool[Array, ""]]:
        """Model states at the sample times of every trajectory (log states under log-normal
        noise) from initial states `x0`, and whether every solve succeeded. Derivatives:
        forward sensitivities (`jacobian="sensitivity"`) or forward-mode autodiff through
        the solver (`"forward_mode"`)."""
        if self.jacobian == "sensitivity":
            return _states_with_sensitivities(p, x0, est=self, problem=problem)
        xs, ok = jax.vmap(lambda t, x: self._solve(problem, t, x, p, False))(problem.t, x0)
        return xs, jnp.all(ok)

    def predictions(self, problem: OutputErrorProblem, p, x0) -> tuple[Float[Array, "r n k"], Bool[Array, ""]]:
        """The observables at the sample times (0 where missing) and whether every solve
        succeeded with finite observables (for counts, positive ones, or 0 where the count
        is 0) where observed."""
        xs, ok = self.trajectories(problem, p, x0)
        y = problem.predict(p, jnp.where(jnp.isfinite(xs), xs, 0.0))
        counting = np.array([isinstance(n, AbstractCountNoise) for n in problem.noises])
        valid = jnp.isfinite(y) & (~counting | (y > 0) | ((y == 0) & (problem.y == 0)))
        ok = ok & jnp.all(jnp.where(problem.mask > 0, valid, True))
        return jnp.where(problem.mask > 0, jnp.where(valid, y, 1.0), 0.0), ok

    def residuals(self, problem: OutputErrorProblem, p, x0) -> tuple[Float[Array, "r n k"], Bool[Array, ""]]:
        """Whitened residuals $m (h - y)/\\sigma$ (0 where missing) and the solve status."""
        y, ok = self.predictions(problem, p, x0)
        return problem.mask * (y - problem.y) / problem.scale[:, None, :], ok

    def _columns(self, problem: OutputErrorProblem, p, means, count, other):
        """Per observable, `count(noise, y, mean)` for a count likelihood's observables and
        `other(y, mean, scale)` for the Gaussian (and log-normal, in logs) ones, `(R, N, K)`;
        missing entries get a valid mean and weight 0."""
        mean = jnp.where(problem.mask > 0, means, 1.0)
        scale = jnp.broadcast_to(problem.scale[:, None, :], mean.shape)
        cols = [
            count(n, problem.y[..., k], mean[..., k])
            if isinstance(n, AbstractCountNoise)
            else other(problem.y[..., k], mean[..., k], scale[..., k])
            for k, n in enumerate(problem.noises)
        ]
        return problem.mask * jnp.stack(cols, axis=-1)

    def _nll(self, problem: OutputErrorProblem, p, means) -> Float[Array, ""]:
        """The negative log-likelihood at the observables' `means` (the count likelihoods',
        and ½ of the squared whitened residuals of the others)."""
        return jnp.sum(
            self._columns(problem, p, means, lambda n, y, m: n.nll(y, m, p), lambda y, m, s: 0.5 * ((m - y) / s) ** 2)
        )

    def _fisher_model(self, problem, theta, split):
        """The likelihood (with count observables) at the unknowns `theta` (parameters, then
        any fitted initial states; `split` separates them): its value, gradient, and the square root `A` of its
        Fisher-scoring model $A^TA = J^T W J + H_\\phi$ ($J$ the Jacobian of the means, $W$
        their expected information, $H_\\phi$ the curvature of a dispersion fitted among the
        parameters, means held, clipped to be positive semi-definite), and the solve status."""
        n_p = split(theta)[0].shape[0]

        def means(th):
            y, ok = self.predictions(problem, *split(th))
            return y.reshape(-1), (y, ok)

        jac, (mu, ok) = jax.jacfwd(means, has_aux=True)(theta)
        p = theta[:n_p]
        value, dmu = jax.value_and_grad(lambda m: self._nll(problem, p, m.reshape(mu.shape)))(mu.reshape(-1))
        w = self._columns(problem, p, mu, lambda n, y, m: n.information(m, p), lambda y, m, s: 1.0 / s**2).reshape(-1)
        held = lambda th: self._nll(problem, th[:n_p], jax.lax.stop_gradient(mu))  # noqa: E731
        lam, vec = jnp.linalg.eigh(jax.hessian(held)(theta))
        root = jnp.sqrt(jnp.maximum(lam, 0.0))[:, None] * vec.T
        a = jnp.concatenate([jnp.sqrt(w)[:, None] * jac, root])
        return value, jac.T @ dmu + jax.grad(held)(theta), a, ok

    def _penalised(self, problem, p, x):
        """Flat whitened residuals; a failed forward solve gives a large constant residual
        (1e3 noise units per observed entry), so optimistix's LM rejects that point."""
        r, ok = self.residuals(problem, p, x)
        return jnp.where(ok, r, 1e3 * problem.mask).reshape(-1)

    def fits_u0(self, problem: OutputErrorProblem) -> bool:
        """Whether the initial states are unknowns of the fit: `fit_u0`, unless the problem
        ties them to the parameters."""
        return self.fit_u0 and problem.initial is None

    def _unknowns(self, problem: OutputErrorProblem, p, x0):
        """The fit's unknowns `theta` at parameters `p` and initial states `x0` (the states
        too where they are fitted), and `split(theta)` → the parameters and the initial
        states the trajectories start from."""
        n_p, fits = p.shape[0], self.fits_u0(problem)

        def split(theta):
            return theta[:n_p], theta[n_p:].reshape(x0.shape) if fits else problem.states0(theta[:n_p], x0)

        return (jnp.concatenate([p, x0.reshape(-1)]) if fits else p), split

    def _trust_region(self, solver: TrustRegion, problem, p0, x0, lower, upper):
        theta0, split = self._unknowns(problem, p0, x0)

        def fn(theta, problem):
            # a failed forward solve makes the value infinite: the trust region rejects
            # such a trial point, and stops at once when it is the start; the last output,
            # the root of H, is what `covariance` needs at the solution
            if problem.counts:
                value, grad, a, ok = self._fisher_model(problem, theta, split)
                return jnp.where(ok, value, jnp.inf), grad, a.T @ a, a

            def res(th):
                r, ok = self.residuals(problem, *split(th))
                return r.reshape(-1), (r.reshape(-1), ok)

            jac, (r, ok) = jax.jacfwd(res, has_aux=True)(theta)
            return jnp.where(ok, 0.5 * jnp.dot(r, r), jnp.inf), jac.T @ r, jac.T @ jac, jac

        free = jnp.full(theta0.size - p0.size, jnp.inf)
        rows = problem.mask.size + (theta0.size if problem.counts else 0)
        sol = solver.minimise(
            fn,
            theta0,
            jnp.concatenate([lower, -free]),
            jnp.concatenate([upper, free]),
            problem,
            max_steps=self.max_steps,
            aux=jnp.zeros((rows, theta0.size), theta0.dtype),
        )
        # the value at the last accepted point: finite unless the start's forward solve failed
        return (*split(sol.params), sol.num_steps, sol.result, sol.objective, {"jacobian": sol.aux})

    def _optimistix(self, solver: optx.AbstractLeastSquaresSolver, problem, p0, x0, lower, upper):
        box, fits = _Box(lower, upper), self.fits_u0(problem)
        unknowns = lambda y: (box.to_box(y[0]), y[1] if fits else problem.states0(box.to_box(y[0]), x0))  # noqa: E731
        fn = lambda y, problem: self._penalised(problem, *unknowns(y))  # noqa: E731
        sol = optx.least_squares(fn, solver, (box.to_free(p0), x0), args=problem, max_steps=self.max_steps, throw=False)
        capped = (sol.result == optx.RESULTS.max_steps_reached) | (
            sol.result == optx.RESULTS.nonlinear_max_steps_reached
        )
        result = RESULTS.where(
            sol.result == optx.RESULTS.successful,
            RESULTS.successful,
            RESULTS.where(capped, RESULTS.max_steps_reached, RESULTS.nonfinite),
        )
        p, x = unknowns(sol.value)
        r, ok = self.residuals(problem, p, x)
        return p, x, sol.stats["num_steps"], result, jnp.where(ok, 0.5 * jnp.sum(r**2), jnp.inf), {}

    def objective(self, problem: OutputErrorProblem, params) -> Float[Array, ""]:
        """Half the sum of squared whitened residuals at `params` from the problem's initial
        states (a fit's own: `u0=fit.u0`, or those tied to `params`); inf where the forward
        solve fails; for counts, their negative log-likelihood."""
        x0 = problem.states0(params, problem.x0)
        if problem.counts:
            y, ok = self.predictions(problem, params, x0)
            return jnp.where(ok, self._nll(problem, params, y), jnp.inf)
        r, ok = self.residuals(problem, params, x0)
        return jnp.where(ok, 0.5 * jnp.sum(r**2), jnp.inf)

    def solve(self, problem: OutputErrorProblem, p0, lower, upper) -> Solution:
        """Fit from `p0` within `lower ≤ p ≤ upper`, the initial states from the problem's
        start `x0`. Pure: jit/vmap it. `extras["u0"]`: the fitted initial states (natural
        scale); the objective is inf when the forward solve at the estimate fails. With the
        [`TrustRegion`][wendyjax.estimators.TrustRegion], `extras["jacobian"]`: the Jacobian of the whitened
        residuals in the unknowns at the estimate (with counts, the root of the Fisher-scoring
        model), from which [`covariance`][] computes without solving again."""
        args = (problem, jnp.asarray(p0, float), problem.x0, jnp.asarray(lower, float), jnp.asarray(upper, float))
        if isinstance(self.solver, TrustRegion):
            p, x, num_steps, result, loss, extras = self._trust_region(self.solver, *args)
        else:
            p, x, num_steps, result, loss, extras = self._optimistix(self.solver, *args)
        result = RESULTS.where(jnp.isfinite(loss), result, RESULTS.forward_failed)
        u0 = jnp.exp(x) if problem.log_states else x
        return Solution(p, loss, num_steps, result, {"u0": u0, **extras})

    def covariance(self, problem: OutputErrorProblem, sol: Solution, kind: str | None = None):
        r"""Gauss–Newton covariance of $\hat p$: the $p$ block of $s^2 (J^TJ)^{-1}$, $J$ the
        Jacobian of the whitened residuals in $(p, u_0)$ and $s^2$ = RSS/(n − #unknowns); for
        counts, the inverse of the Fisher-scoring model of the likelihood (no $s^2$). NaN for
        the parameters the data do not determine."""
        if kind not in (None, *self.covariances):
            raise ValueError(f"output error has covariance {self.covariances}, got {kind!r}.")
        u0 = sol.extras["u0"]
        x = jnp.log(u0) if problem.log_states else u0
        n = sol.params.shape[0]
        jac = sol.extras.get("jacobian")  # the trust region's, at the estimate
        if problem.counts:
            if jac is None:
                theta, split = self._unknowns(problem, sol.params, x)
                jac = self._fisher_model(problem, theta, split)[2]
            pinv = determined_pinv(jac)[:n]
            return pinv @ pinv.T
        if jac is None:
            flat = lambda p, x: self.residuals(problem, p, problem.states0(p, x))[0].reshape(-1)  # noqa: E731
            jp, jx = jax.jacfwd(flat, argnums=(0, 1))(sol.params, x)
            jac = jnp.concatenate([jp, jx.reshape(jx.shape[0], -1)], axis=1) if self.fits_u0(problem) else jp
        dof = problem.n_observed - jac.shape[1]
        s2 = 2.0 * sol.objective / jnp.maximum(dof, 1)
        pinv = determined_pinv(jac)[:n]
        return s2 * pinv @ pinv.T

    def solve_multistart(self, problem: OutputErrorProblem, p0s, lower, upper) -> tuple[Solution, Solution]:
        """Fit from every row of `p0s` (vmapped, one compiled call) and return
        `(best, all)`: the successful fit of least loss (the least-loss fit when none
        succeeded), and every fit."""
        every = jax.vmap(lambda p0: self.solve(problem, p0, lower, upper))(jnp.asarray(p0s, float))
        loss = jnp.where(every.successful & jnp.isfinite(every.objective), every.objective, jnp.inf)
        fallback = jnp.argmin(jnp.nan_to_num(every.objective, nan=jnp.inf))
        best = jnp.where(jnp.any(jnp.isfinite(loss)), jnp.argmin(loss), fallback)
        return jax.tree_util.tree_map(lambda x: x[best], every), every


class HybridProblem(eqx.Module):
    """The two problems of a [`Hybrid`][] fit: the weak likelihood and the output-error data."""

    likelihood: WeakLikelihood
    output_error: OutputErrorProblem


class Hybrid(AbstractEstimator):
    r"""WENDy estimate refined by output error (Rummel et al. 2025, §3.6.4): `wendy` (MLE
    by default) from $p_0$, then `output_error` from the WENDy estimate (from $p_0$ when
    WENDy fails), its initial states from the first observations."""

    wendy: AbstractWENDyEstimator = MLE()
    output_error: OutputError = OutputError()
    method: ClassVar[str] = "hybrid"
    covariances: ClassVar[tuple[str, ...]] = ("gauss_newton",)
    fit_type: ClassVar[type] = OutputErrorFit

    def problem(
        self,
        model,
        data: Dataset,
        *,
        key: Keys | None = None,  # unused, as output error's
        noise=None,
        sigma=None,
        weighted: bool = True,
        test_functions=TestFunctionConfig(),
        k: int | None = None,
        u0=None,
    ) -> HybridProblem:
        """The weak likelihood (`test_functions`, `k`) and the output-error data
        (`weighted`; `u0` the start of the initial states, as for [`OutputError`][]) of
        `model` on `data`, with one `noise` model and `sigma`."""
        noise = resolve_noise(model, noise)
        lik = self.wendy.problem(model, data, noise=noise, sigma=sigma, test_functions=test_functions, k=k)
        return HybridProblem(lik, output_error_problem(model, data, noise, sigma=sigma, weighted=weighted, u0=u0))

    def batch_problems(
        self, model, datasets: "Batch | list", *, noise=None, sigma=None, weighted: bool = True, u0=None, **options
    ):
        """The WENDy stage's stacked likelihoods (padded to one K) with the stacked
        output-error problems."""
        noise = resolve_noise(model, noise)
        liks, notes = self.wendy.batch_problems(model, datasets, noise=noise, sigma=sigma, **options)
        oe, _ = self.output_error.batch_problems(model, datasets, noise=noise, sigma=sigma, weighted=weighted, u0=u0)
        return (lambda indices: HybridProblem(liks(indices), oe(indices))), notes

    def start_required(self, model) -> str | None:
        """The WENDy stage's rule: `p0` for models nonlinear in their parameters."""
        return self.wendy.start_required(model)

    def init(self, model, problem, p0, lower, upper) -> Float[Array, " j"]:
        """`p0` checked, or the WENDy stage's default start (models linear in the parameters)."""
        return self.wendy.init(model, problem.likelihood, p0, lower, upper)

    def solve(self, problem: HybridProblem, p0, lower, upper) -> Solution:
        """WENDy's solve from `p0`, then output error from its estimate (a pure function of
        arrays); `extras` adds the WENDy stage's `wendy_params` and `wendy_result`."""
        start = self.wendy.solve(problem.likelihood, p0, lower, upper)
        p_start = jnp.where(start.successful & jnp.all(jnp.isfinite(start.params)), start.params, p0)
        sol = self.output_error.solve(problem.output_error, p_start, lower, upper)
        return eqx.tree_at(
            lambda s: s.extras, sol, {**sol.extras, "wendy_params": start.params, "wendy_result": start.result}
        )

    def objective(self, problem: HybridProblem, params) -> Float[Array, ""]:
        """The output-error stage's objective ([`OutputError.objective`][])."""
        return self.output_error.objective(problem.output_error, params)

    def covariance(self, problem: HybridProblem, sol: Solution, kind: str | None = None):
        """The output-error covariance at the refined estimate."""
        return self.output_error.covariance(problem.output_error, sol, kind)
