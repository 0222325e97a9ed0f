"""Uncertainty of a PEtab fit, batched: profile likelihoods (every grid point re-fitted at
once) and the parametric bootstrap (every refit at once)."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray
from scipy import stats

from .._checks import as_count, as_key, as_level
from .._compile import cpu_safe_jit, per_run, resolve_vectorize
from .._typing import ArrayLike
from ..estimators import RESULTS, TrustRegion
from ._fits import SOLVER, run_fits
from ._multistart import _value_gradient_fisher
from ._problem import PetabProblem, _outputs, require_problem

_fisher_at = cpu_safe_jit(_value_gradient_fisher)


def _check(problem, params, level) -> tuple[Float[Array, " n"], float]:
    require_problem(problem)
    return problem._as_params(params), as_level(level)


class Profile(eqx.Module):
    """The profile likelihood of one parameter ([`profile`][wendyjax.petab.profile]): on the
    grid `values` (the parameter's scale), the lowest objective over the other parameters
    (`objectives`, `params`, `result`), and the interval where it stays within
    χ²₁(`level`)/2 of the best (`lower`, `upper`: ±inf where the profile does not rise that
    far inside the box — the parameter is not identifiable on that side)."""

    name: str = eqx.field(static=True)
    values: Float[Array, " k"]
    objectives: Float[Array, " k"]
    params: Float[Array, "k n"]
    result: RESULTS
    best_objective: float = eqx.field(static=True)
    level: float = eqx.field(static=True)
    lower: float = eqx.field(static=True)
    upper: float = eqx.field(static=True)

    def plot(self, ax=None):
        """Plot the profile (objective − best) with its threshold; returns the axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(4.5, 3.2))
        ax.plot(np.asarray(self.values), np.asarray(self.objectives) - self.best_objective, "o-", ms=3)
        ax.axhline(
            float(stats.chi2.ppf(self.level, 1)) / 2,
            color="tab:red",
            ls="--",
            lw=1,
            label=f"{self.level:.0%} threshold",
        )
        ax.set_xlabel(self.name)
        ax.set_ylabel("objective − best")
        ax.legend(frameon=False, fontsize="small")
        return ax


@cpu_safe_jit
def _pinned_fits(problem: PetabProblem, starts, lower, upper, solver: TrustRegion, max_steps: int, vectorize: bool):
    def one(x0, lo, hi):
        return solver.minimise(_value_gradient_fisher, x0, lo, hi, problem, max_steps=max_steps)

    return per_run(vectorize, one, starts, lower, upper)


def _crossing(values, excess, threshold, side) -> float:
    """Where the profile's excess first reaches `threshold` walking from its minimum to one side
    (linear interpolation between finite points: a failed point in between is stepped over),
    ±inf if it never does."""
    centre = int(np.nanargmin(excess))
    order = range(centre, len(values)) if side > 0 else range(centre, -1, -1)
    previous = centre
    for k in order:
        if not np.isfinite(excess[k]):
            continue
        if excess[k] >= threshold:
            a, b = excess[previous], excess[k]
            w = (threshold - a) / (b - a) if b != a else 1.0
            return float(values[previous] + w * (values[k] - values[previous]))
        previous = k
    return math.inf * side


def profile(
    problem: PetabProblem,
    params: ArrayLike,
    name: str,
    *,
    n_points: int = 21,
    level: float = 0.95,
    passes: int = 2,
    solver: TrustRegion = SOLVER,
    max_steps: int = 200,
    vectorize: bool | str = "auto",
) -> Profile:
    """The profile likelihood of parameter `name` around the fit `params` (on the
    parameters' scales, e.g. `multistart(...).best`): `n_points` values of `name` spanning
    ±4 Wald standard errors (Fisher information at `params`), clipped to its box (the whole
    box where the information is singular), each with the other parameters re-fitted from
    `params`, all grid points in one batched call; each further of the `passes` re-fits
    every point from its better neighbour's optimum (a batched continuation that repairs
    points stuck in a worse local minimum) and keeps the lower objective. The interval is
    where the objective stays within χ²₁(`level`)/2 of the best (Raue et al. 2009), read
    between finite points. `vectorize`, and points whose ODE-solve derivative raises
    (`derivative_failed`), as in [`multistart`][wendyjax.petab.multistart]."""
    x, level = _check(problem, params, level)
    vectorize = resolve_vectorize(vectorize, jax.devices())
    if name not in problem.parameter_names:
        raise ValueError(
            f"name must be an estimated parameter of {problem.name} (problem.parameter_names), got {name!r}."
        )
    n_points = as_count("n_points", n_points, 3)
    passes = as_count("passes", passes, 1)
    i = problem.parameter_names.index(name)
    value, _, fisher = _fisher_at(x, problem)
    variance = float(np.linalg.pinv(np.asarray(fisher))[i, i])
    lo, hi = float(problem.lower[i]), float(problem.upper[i])
    span = 4.0 * math.sqrt(variance) if variance > 0 else math.inf
    grid = np.linspace(max(lo, float(x[i]) - span), min(hi, float(x[i]) + span), n_points)
    starts = jnp.repeat(x[None], n_points, axis=0).at[:, i].set(grid)
    lower = jnp.repeat(problem.lower[None], n_points, axis=0).at[:, i].set(grid)
    upper = jnp.repeat(problem.upper[None], n_points, axis=0).at[:, i].set(grid)

    def pinned(starts):
        rest = (solver, max_steps, vectorize)
        each = lambda k: (starts[k : k + 1], lower[k : k + 1], upper[k : k + 1], *rest)  # noqa: E731
        return run_fits(_pinned_fits, problem, starts, lower, upper, *rest, each=each, starts=starts, what="points")

    fits = pinned(starts)
    for _ in range(passes - 1):
        # every point again from its better neighbour's optimum (the pinned value its own): a
        # batched continuation that repairs points stuck in a worse local minimum
        f = np.where(np.isfinite(np.asarray(fits.objective)), np.asarray(fits.objective), np.inf)
        left, right = np.r_[np.inf, f[:-1]], np.r_[f[1:], np.inf]
        source = np.where(left <= right, np.arange(n_points) - 1, np.arange(n_points) + 1).clip(0, n_points - 1)
        again = pinned(fits.params[source].at[:, i].set(grid))
        better = np.asarray(again.objective) < f
        fits = jax.tree_util.tree_map(
            lambda a, b, keep=better: jnp.where(keep.reshape((-1,) + (1,) * (a.ndim - 1)), b, a), fits, again
        )
    objectives = np.asarray(fits.objective)
    best = float(min(np.nanmin(objectives), float(value)))
    threshold = stats.chi2.ppf(level, 1) / 2
    excess = objectives - best
    return Profile(
        name=name,
        values=jnp.asarray(grid),
        objectives=fits.objective,
        params=fits.params,
        result=fits.result,
        best_objective=best,
        level=level,
        lower=_crossing(grid, excess, threshold, -1),
        upper=_crossing(grid, excess, threshold, +1),
    )


class Bootstrap(eqx.Module):
    """The parametric bootstrap of a fit ([`bootstrap`][wendyjax.petab.bootstrap]): `params`
    of each refit (on the parameters' scales), their `objectives` and `result`, and
    percentile intervals at `level` (`lower`, `upper`, from the `usable` refits)."""

    parameter_names: tuple[str, ...] = eqx.field(static=True)
    params: Float[Array, "b n"]
    objectives: Float[Array, " b"]
    result: RESULTS
    level: float = eqx.field(static=True)

    @property
    def usable(self) -> np.ndarray:
        """Refits that stopped where no step lowers their objective: converged, or stalled
        (the trust region stalls at the minimum of a Laplace likelihood, whose kinks no
        smooth model captures); not those out of steps or with a failed solve."""
        status = np.asarray(self.result._value)
        ok = (status == np.asarray(RESULTS.successful._value)) | (status == np.asarray(RESULTS.stalled._value))
        return ok & np.isfinite(np.asarray(self.objectives))

    @property
    def lower(self) -> np.ndarray:
        """Lower ends of the percentile intervals (usable refits)."""
        return np.quantile(np.asarray(self.params)[self.usable], (1 - self.level) / 2, axis=0)

    @property
    def upper(self) -> np.ndarray:
        """Upper ends of the percentile intervals (usable refits)."""
        return np.quantile(np.asarray(self.params)[self.usable], (1 + self.level) / 2, axis=0)


@cpu_safe_jit
def _refits(problem: PetabProblem, measured, x, solver: TrustRegion, max_steps: int, vectorize: bool):
    def one(data):
        replica = eqx.tree_at(lambda p: p._measured, problem, data)
        return solver.minimise(_value_gradient_fisher, x, replica.lower, replica.upper, replica, max_steps=max_steps)

    return per_run(vectorize, one, measured)


def bootstrap(
    problem: PetabProblem,
    params: ArrayLike,
    n_boot: int = 200,
    *,
    key: PRNGKeyArray | int = 0,
    level: float = 0.95,
    solver: TrustRegion = SOLVER,
    max_steps: int = 200,
    vectorize: bool | str = "auto",
) -> Bootstrap:
    """Parametric bootstrap of the fit `params`: `n_boot` data sets simulated from it (each
    measurement's noise model: normal or Laplace on its observable's scale, with the fitted
    noise scale), each refitted from `params`, all in one compiled call (`vectorize`, and
    refits whose ODE-solve derivative raises, as in [`multistart`][wendyjax.petab.multistart])."""
    x, level = _check(problem, params, level)
    vectorize = resolve_vectorize(vectorize, jax.devices())
    n_boot = as_count("n_boot", n_boot, 2)
    sim, log_sigma, ok = _outputs(problem, x)
    if not bool(ok):
        raise RuntimeError(f"{problem.name}: the ODE solve failed at params.")
    k_normal, k_laplace = jax.random.split(as_key(key))
    shape = (n_boot, sim.shape[0])
    noise = jnp.where(
        problem._laplace, jax.random.laplace(k_laplace, shape), jax.random.normal(k_normal, shape)
    ) * jnp.exp(log_sigma)
    measured = problem._untransformed(sim + noise)
    fits = run_fits(
        _refits,
        problem,
        measured,
        x,
        solver,
        max_steps,
        vectorize,
        each=lambda k: (measured[k : k + 1], x, solver, max_steps, vectorize),
        starts=jnp.broadcast_to(x, (n_boot, x.size)),
        what="refits",
    )
    return Bootstrap(
        parameter_names=problem.parameter_names,
        params=fits.params,
        objectives=fits.objective,
        result=fits.result,
        level=level,
    )
