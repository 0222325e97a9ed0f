"""Multistart fits of a PEtab problem as one batched, compiled call: starts drawn in the box,
each fitted by the box-constrained trust region with the Fisher information as its Hessian
(and BFGS's approximation after 20 steps in a row that left the radius unchanged)."""

import math
import time
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import Array, Float, PRNGKeyArray

from .._checks import as_count, as_key, user_stacklevel
from .._compile import cpu_safe_jit, per_run, resolve_vectorize
from ..estimators import RESULTS, TrustRegion
from ._fits import SOLVER, ImplicitStepError, _wait, run_fits
from ._problem import PetabProblem, require_problem

# Fisher information of the noise scale's logarithm, per measurement: normal 2, Laplace 1.
_SCALE_INFORMATION = {False: 2.0, True: 1.0}

#: rounds of `n_starts` draws at most to replace the starts where a fit cannot begin ([`_fittable`][])
MAX_DRAW_ROUNDS = 10


def _value_gradient_fisher(x, problem: PetabProblem):
    """The objective, its gradient, and the Fisher information (plus the prior's Hessian) at
    `x`: one forward-mode pass through the ODE solves with a tangent for each parameter they
    depend on, then through the observables and noise with one for every parameter."""
    ode = np.flatnonzero(problem._in_ode)

    def solved(x_ode):
        _, _, states, ok = problem._trajectories(x.at[ode].set(x_ode), forward=True)
        return states, ok

    states, d_states, ok = _jacobian(solved, x[ode])  # d_states (C, K, S, len(ode))
    tangents = jnp.zeros((*states.shape, x.size), x.dtype).at[..., ode].set(d_states)

    def observed(x, states):
        values, p, _ = problem._parameters(x)
        return problem._observe(values, p, states)

    def push(tangent, d_states):
        return jax.jvp(observed, (x, states), (tangent, d_states))

    (sim, log_sigma), (j_sim, j_sigma) = jax.vmap(push, in_axes=(0, -1), out_axes=(None, -1))(
        jnp.eye(x.size, dtype=x.dtype), tangents
    )
    terms = problem._nll_terms(sim, log_sigma)
    m, _ = problem._measured_scaled()
    inv = jnp.exp(-log_sigma)
    r = (m - sim) * inv
    laplace = problem._laplace
    d_sim = jnp.where(laplace, -jnp.sign(r), -r) * inv
    d_sigma = 1.0 - jnp.where(laplace, jnp.abs(r), r**2)
    weight = jnp.where(laplace, _SCALE_INFORMATION[True], _SCALE_INFORMATION[False])
    prior, prior_grad = jax.value_and_grad(problem.log_prior)(x)
    prior_hess = jax.hessian(problem.log_prior)(x)
    value = jnp.sum(terms) - prior
    grad = j_sim.T @ d_sim + j_sigma.T @ d_sigma - prior_grad
    fisher = (j_sim * inv[:, None] ** 2).T @ j_sim + (j_sigma * weight[:, None]).T @ j_sigma - prior_hess
    value = jnp.where(ok, value, jnp.inf)
    return value, grad, 0.5 * (fisher + fisher.T)


def _jacobian(fn, x):
    """Values, forward-mode Jacobians and aux of `fn(x) -> (outputs, aux)`: one pass of the
    primal with the n tangents vmapped beside it (`jax.linearize` would solve the ODEs once
    for the values and again inside the pushforward)."""

    def push(tangent):
        return jax.jvp(fn, (x,), (tangent,), has_aux=True)

    values, jacobian, aux = jax.vmap(push, out_axes=(None, -1, None))(jnp.eye(x.size, dtype=x.dtype))
    return values, jacobian, aux


class MultistartResult(eqx.Module):
    """The fits of [`multistart`][wendyjax.petab.multistart], in the order of their starts:
    `starts` and `params` on the parameters' scales, final `objectives` (negative
    log-posterior; `inf` where the ODE solve failed), `num_steps`, `result` (status per
    start), the wall time `seconds` (drawing the starts included) and `n_rejected`, the
    draws replaced because the objective or its derivatives were not finite there."""

    parameter_names: tuple[str, ...] = eqx.field(static=True)
    starts: Float[Array, "s n"]
    params: Float[Array, "s n"]
    objectives: Float[Array, " s"]
    num_steps: Array
    result: RESULTS
    seconds: float = eqx.field(static=True)
    n_rejected: int = eqx.field(static=True)

    @property
    def converged(self) -> np.ndarray:
        """Whether each start converged (status successful, finite objective)."""
        ok = np.asarray(self.result._value) == np.asarray(RESULTS.successful._value)
        return ok & np.isfinite(np.asarray(self.objectives))

    @property
    def best(self) -> Float[Array, " n"]:
        """The parameters of the lowest objective reached."""
        return self.params[int(np.nanargmin(np.asarray(self.objectives)))]

    @property
    def best_objective(self) -> float:
        """The lowest objective reached."""
        return float(np.nanmin(np.asarray(self.objectives)))

    def fraction_within(self, reference: float, tolerance: float = 0.1) -> float:
        """Fraction of starts whose objective lies within `tolerance` of `reference`."""
        return float(np.mean(np.asarray(self.objectives) <= reference + tolerance))

    def waterfall(self, ax=None, *, tolerance: float = 0.1):
        """Plot the sorted final objectives (a waterfall plot, as pyPESTO draws it) on a log
        axis, offset so that the best is 1; the starts within `tolerance` of the best are
        highlighted. Returns the matplotlib axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(5, 3.5))
        values = np.sort(np.asarray(self.objectives))
        finite = values[np.isfinite(values)]
        shifted = finite - finite[0] + 1.0
        best = finite - finite[0] <= tolerance
        order = np.arange(1, finite.size + 1)
        ax.plot(order, shifted, color="0.6", lw=1)
        ax.scatter(order[~best], shifted[~best], s=12, color="tab:blue", label="other starts")
        ax.scatter(order[best], shifted[best], s=12, color="tab:red", label=f"within {tolerance} of the best")
        ax.set_yscale("log")
        ax.set_xlabel("start (sorted by final objective)")
        ax.set_ylabel("objective − best + 1")
        failed = values.size - finite.size
        ax.set_title(f"{finite.size} starts" + (f" ({failed} failed)" if failed else ""))
        ax.legend(frameon=False, fontsize="small")
        return ax


def _per_device(x, devices):
    """Rows `x` `(s, n)` as `(devices, per device, n)` (the last row repeated to fill it),
    sharded over `devices` where there are several."""
    padded = math.ceil(len(x) / len(devices)) * len(devices)
    batch = jnp.concatenate([x, jnp.repeat(x[-1:], padded - len(x), axis=0)]).reshape(len(devices), -1, x.shape[1])
    if len(devices) > 1:
        batch = jax.device_put(batch, NamedSharding(Mesh(np.asarray(devices), ("starts",)), PartitionSpec("starts")))
    return batch


def _over_devices(fn, batch):
    """`fn` over the devices' axis of `batch` `(devices, per device, n)`: vmapped over several
    (the axis the sharding splits); for one device, called on its chunk, so that conditionals
    inside stay conditionals (vmapped, `lax.cond` runs both branches)."""
    if batch.shape[0] == 1:
        return jax.tree_util.tree_map(lambda a: a[None], fn(batch[0]))
    return jax.vmap(fn)(batch)


@cpu_safe_jit
def _fittable(problem: PetabProblem, candidates, vectorize: bool):
    """Whether a fit can start at each of `candidates` `(devices, per device, n)`: its first
    evaluation (objective, gradient and Fisher information, with the fits' forward-mode
    solves) is finite; the objective alone first, so that a failing solve costs one primal
    solve where the candidates run one after another."""

    def one(x):
        value, ok = problem.objective(x)
        return jax.lax.cond(
            ok & jnp.isfinite(value),
            lambda: jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in _value_gradient_fisher(x, problem)])),
            lambda: jnp.array(False),
        )

    return _over_devices(lambda chunk: per_run(vectorize, one, chunk), candidates).reshape(-1)


def _fittable_rows(problem: PetabProblem, candidates, devices, vectorize: bool) -> np.ndarray:
    """[`_fittable`][] of the rows of `candidates`; where differentiating a failed implicit step
    raises inside the compiled call, the candidates one call each, those that raise counted
    as not fittable (a fit's first evaluation would raise there too)."""
    try:
        return np.asarray(_wait(_fittable, problem, (_per_device(candidates, devices), vectorize)))[: len(candidates)]
    except ImplicitStepError:
        pass
    rows = []
    for x in candidates:
        try:
            rows.append(bool(_wait(_fittable, problem, (x[None, None], vectorize))[0]))
        except ImplicitStepError:
            rows.append(False)
    return np.array(rows)


def _draw_starts(problem: PetabProblem, n_starts: int, key, devices, vectorize: bool, resample: bool):
    """`n_starts` starts drawn uniformly in the box, and how many draws were replaced: with
    `resample`, a draw at which a fit cannot start ([`_fittable`][]) is replaced by the next
    draw that can (rounds of `n_starts` draws, at most `MAX_DRAW_ROUNDS`), in the order drawn."""

    def draw(round_):
        k = key if round_ == 0 else jax.random.fold_in(key, round_)
        return jax.random.uniform(k, (n_starts, problem.n_parameters), minval=problem.lower, maxval=problem.upper)

    if not resample:
        return draw(0), 0
    kept, rejected = [], []
    for round_ in range(MAX_DRAW_ROUNDS):
        candidates = draw(round_)
        ok = _fittable_rows(problem, candidates, devices, vectorize)
        # the draws up to the one that completes the starts; those after it are not looked at
        needed = n_starts - sum(len(x) for x in kept)
        seen = min(int(np.searchsorted(np.cumsum(ok), needed)) + 1, n_starts)
        kept.append(candidates[:seen][ok[:seen]])
        rejected.append(candidates[:seen][~ok[:seen]])
        if sum(len(x) for x in kept) >= n_starts:
            return jnp.concatenate(kept), sum(len(x) for x in rejected)
    found = sum(len(x) for x in kept)
    if found == 0:
        raise RuntimeError(
            f"{problem.name}: no fit can start at any of the {MAX_DRAW_ROUNDS * n_starts} starts drawn in the "
            f"parameters' box (the objective or its derivatives are not finite there: an ODE solve fails); narrow "
            f"the parameter table's bounds to where the model can be solved, or load the problem with a larger "
            f"max_steps."
        )
    warnings.warn(
        f"{problem.name}: a fit can start at only {found} of the {MAX_DRAW_ROUNDS * n_starts} starts drawn in the "
        f"parameters' box; the other {n_starts - found} starts are draws where it cannot (their fits end with the "
        f"status nonfinite). Narrow the parameter table's bounds to where the model can be solved, or load the "
        f"problem with a larger max_steps.",
        RuntimeWarning,
        stacklevel=user_stacklevel(),
    )
    return jnp.concatenate(kept + rejected)[:n_starts], sum(len(x) for x in rejected) - (n_starts - found)


@cpu_safe_jit
def _fit_all(problem: PetabProblem, starts, solver: TrustRegion, max_steps: int, vectorize: bool):
    """`starts` `(devices, per device, n)`: each device's starts vmapped, or one after another."""

    def one(x0):
        return solver.minimise(_value_gradient_fisher, x0, problem.lower, problem.upper, problem, max_steps=max_steps)

    solution = _over_devices(lambda chunk: per_run(vectorize, one, chunk), starts)
    return jax.tree_util.tree_map(lambda a: a.reshape((-1,) + a.shape[2:]), solution)


def multistart(
    problem: PetabProblem,
    n_starts: int = 100,
    *,
    key: PRNGKeyArray | int = 0,
    solver: TrustRegion = SOLVER,
    max_steps: int = 200,
    devices=None,
    vectorize: bool | str = "auto",
    resample_infeasible: bool = True,
) -> MultistartResult:
    """Fit `problem` from `n_starts` starts drawn uniformly in its box (on the parameters'
    scales) in one compiled call, sharded over `devices` (default: all of the default
    backend's). Each start runs the box-constrained trust region `solver` with the Fisher
    information (plus the priors' Hessian) as its Hessian, for at most `max_steps` steps
    (by default with the current iterate's scaling, `monotone_scaling=False`: a far start's
    first curvature would otherwise fix the scaling and its later steps crawl; and with a
    BFGS approximation in its place once 20 steps in a row left the radius unchanged,
    `bfgs_after=20`, as pyPESTO's fides does by default).
    `vectorize`: each device's starts vmapped side by side (True; "auto" on accelerators), or
    one after another inside the compiled call (False; "auto" on CPU, where a vmapped start
    waits for the slowest one's ODE solves and iterations). `resample_infeasible`: a drawn
    start where the objective or its derivatives are not finite (an ODE solve fails there) is
    replaced by the next draw where they are, before the fits (up to 10 × `n_starts` draws,
    with a warning where too few are finite); False keeps every draw, as pyPESTO's uniform
    starts do by default.

    Where differentiating the ODE solve raises at some start's trial point (which stops the
    compiled call), the starts are fitted again one call each: those that raise again get the
    status `derivative_failed` (objective `inf`, parameters at their start), with a warning;
    `seconds` includes the stopped call.
    """
    require_problem(problem)
    n_starts = as_count("n_starts", n_starts, 1)
    max_steps = as_count("max_steps", max_steps, 1)
    if not isinstance(solver, TrustRegion):
        raise TypeError(f"solver must be a wendyjax.TrustRegion, got {type(solver).__name__}.")
    if not isinstance(resample_infeasible, bool):
        raise TypeError(f"resample_infeasible must be True or False, got {resample_infeasible!r}.")
    key = as_key(key)
    devices = jax.devices() if devices is None else list(devices)
    vectorize = resolve_vectorize(vectorize, devices)
    begin = time.perf_counter()
    starts, n_rejected = _draw_starts(problem, n_starts, key, devices, vectorize, resample_infeasible)
    solution = run_fits(
        _fit_all,
        problem,
        _per_device(starts, devices),
        solver,
        max_steps,
        vectorize,
        each=lambda i: (starts[i][None, None], solver, max_steps, vectorize),
        starts=starts,
        what="starts",
    )
    solution = jax.tree_util.tree_map(lambda a: a[:n_starts], solution)
    return MultistartResult(
        parameter_names=problem.parameter_names,
        starts=starts,
        params=solution.params,
        objectives=solution.objective,
        num_steps=solution.num_steps,
        result=solution.result,
        seconds=time.perf_counter() - begin,
        n_rejected=n_rejected,
    )
