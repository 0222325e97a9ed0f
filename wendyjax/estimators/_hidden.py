r"""Integral matching with hidden (never observed) states: Anonymous 2025, §5 and Algorithm 2.

The data are split into consecutive subintervals $[a_i, a_i + h]$, $a_{i+1} = a_i + h$,
so the LGR supports chain: the last node of one is the first of the next. Observed
components take their node values from the data (the regressions $r_i$ of eq. 6);
hidden components are decision variables $\tilde X$, one value per chained node (so the
reconstructed trajectory is continuous). The loss is Anonymous 2025's relaxed problem of §5,

$$\min_{\Theta, \tilde X} \sum_i \big\| \hat X_{i,0} + hAF(\hat X_i, \tilde X_i, \Theta) - \hat X_{i,1:K} \big\|^2
+ \big\| \tilde X_{i,0} + hAF(\hat X_i, \tilde X_i, \Theta) - \tilde X_{i,1:K} \big\|^2,$$

minimised either jointly over $(\Theta, \tilde X)$ by the bounded Gauss–Newton trust region
(`solve_hidden`; ODEModels and libraries: a second-order solve of the same problem), or by
Algorithm 2 itself (`fit_hidden_gradient`, any vector field including neural ones): on
random batches of subintervals, an optimizer step in $\Theta$, then one in $\tilde X$ at
the new $\Theta$, each with its own optimizer state. The chained node values are
Algorithm 2's pool of subinterval values, continuous by construction (its continuity
penalty $r$ is not needed). The start $\tilde X^{(0)} = \gamma(\Theta_0, \hat X)$ is
Algorithm 2's reconstruction: the hidden components integrated along the observed ones by
the collocation itself (Radau IIA, Newton's method on each subinterval in turn) from the
given hidden initial values.

A polynomial library, and a neural field, is closed under affine changes of a hidden
variable ($z \mapsto \alpha z + \beta$ gives another model of the same class with the same
observed dynamics, Anonymous 2025, §5.1), and shrinking $\alpha$ shrinks the hidden residuals, so for
them the hidden components are standardised (mean 0, variance 1 over the nodes):
the reconstruction is defined up to that affine map and compared after regression.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, Float, Int, PRNGKeyArray, PyTree

from .._compile import cpu_safe_jit
from .._results import RESULTS
from ._im_problem import (
    IntegralMatchingProblem,
    collocation_residuals,
    integral_matching_loss,
    integral_matching_problem,
)
from ._im_solvers import Gradient
from ._trust_region import TrustRegion


def chained_problem(data, *, order: int, length: float, smoother) -> IntegralMatchingProblem:
    """The consecutive subintervals $[t_0 + ih, t_0 + (i+1)h]$ of one trajectory (hidden
    states allowed). Their ends must be sample times: $h$ a multiple of a uniform spacing."""
    if len(data) != 1:
        raise ValueError(f"hidden-state reconstruction takes one trajectory, got {len(data)}.")
    t = np.asarray(data[0].t, float)
    step = int(np.searchsorted(t, t[0] + length * (1 - 1e-9)))
    if step >= t.size or not np.isclose(t[step] - t[0], length, rtol=1e-9, atol=0.0):
        raise ValueError(
            f"hidden-state reconstruction chains subintervals end to start: the subinterval length "
            f"h = {length} must be a multiple of the sampling step and shorter than the data."
        )
    problem = integral_matching_problem(data, order=order, length=length, smoother=smoother, stride=step, hidden=True)
    a = np.asarray(problem.a)
    if not np.allclose(np.diff(a), length, rtol=0.0, atol=1e-9 * max(length, 1.0)):
        raise ValueError(
            "hidden-state reconstruction needs a uniform time grid (subinterval starts "
            f"t_0 + i h with h = {length} must be sample times)."
        )
    return problem


def _node_index(problem: IntegralMatchingProblem) -> Int[Array, "N K1"]:
    """Index of each subinterval's nodes in the chained node sequence."""
    n, k = problem.X.shape[0], problem.lgr.order
    return jnp.arange(n)[:, None] * k + jnp.arange(k + 1)[None]


def node_times(problem: IntegralMatchingProblem) -> Float[Array, " n"]:
    """Times of the chained nodes: $t_0$, then $a_i + h\\tau_{1..K}$ for each subinterval."""
    later = (problem.a[:, None] + problem.length * problem.lgr.nodes[None, 1:]).reshape(-1)
    return jnp.concatenate([problem.a[:1], later])


def with_hidden(problem: IntegralMatchingProblem, hidden: Int[Array, " H"], Z: Float[Array, "n H"]):
    """`problem` with the hidden columns of every subinterval's nodes taken from `Z`."""
    X = problem.X.at[..., hidden].set(Z[_node_index(problem)])
    return eqx.tree_at(lambda p: p.X, problem, X)


def chained_states(problem: IntegralMatchingProblem, hidden: Int[Array, " H"], Z: Float[Array, "n H"]):
    """All states at the chained nodes (observed ones from the node fits, hidden from `Z`)."""
    X = with_hidden(problem, hidden, Z).X
    return jnp.concatenate([X[0, :1], X[:, 1:].reshape(-1, X.shape[-1])])


def standardise(Z: Float[Array, "n H"]) -> Float[Array, "n H"]:
    return (Z - Z.mean(axis=0)) / Z.std(axis=0)


def reconstruct_hidden(
    rhs,
    theta: PyTree,
    problem: IntegralMatchingProblem,
    hidden: Int[Array, " H"],
    z0: Float[Array, " H"],
    newton_steps: int = 20,
) -> Float[Array, "n H"]:
    r"""Algorithm 2's $\gamma(\Theta, \hat X)$: the hidden components at the chained nodes,
    integrated along the observed node values by the collocation equations
    $\tilde X_{1:K} = \tilde X_0 + hAF(\hat X, \tilde X, \Theta)_{\rm hidden}$ (Newton on each
    subinterval, continuing from the previous end)."""
    h, lgr = problem.length, problem.lgr

    def subinterval(z_start, inputs):
        Xs, a = inputs
        tn = a + h * lgr.nodes[1:]

        def g(z):
            X = Xs.at[0, hidden].set(z_start).at[1:, hidden].set(z)
            F = jax.vmap(rhs, (0, None, 0))(X[1:], theta, tn)[:, hidden]
            return z_start + h * (lgr.A @ F) - z

        def newton(_, z):
            J = jax.jacfwd(g)(z).reshape(z.size, z.size)
            return z - jnp.linalg.solve(J, g(z).reshape(-1)).reshape(z.shape)

        z = jax.lax.fori_loop(0, newton_steps, newton, jnp.broadcast_to(z_start, (lgr.order, z_start.size)))
        return z[-1], z

    _, Z = jax.lax.scan(subinterval, z0, (problem.X, problem.a))
    return jnp.concatenate([z0[None], Z.reshape(-1, z0.size)])


def _standardised_library(features, theta, problem, hidden, Z):
    r"""The library coefficients of $\Phi(u)\Theta$ in the standardised hidden variables
    $u'_H = (u_H - m)/s$: least squares of $T^{-1}f(Tu')$ on the library at the nodes (exact
    for a polynomial of the library's degree)."""
    m, s = Z.mean(axis=0), Z.std(axis=0)
    U = chained_states(problem, hidden, standardise(Z))
    to_raw = lambda u: u.at[hidden].set(s * u[hidden] + m)  # noqa: E731
    F = jax.vmap(lambda u: (features(to_raw(u)) @ theta).at[hidden].divide(s))(U)
    return jnp.linalg.lstsq(jax.vmap(features)(U), F)[0]


class HiddenSolution(eqx.Module):
    """The parameters `params`, the hidden components at the chained nodes `Z`
    (standardised for libraries and neural fields), the loss `objective`, steps, status, and
    the full loss after each chunk of gradient steps (`history`, NaN past the end; empty for
    Gauss–Newton)."""

    params: PyTree
    Z: Float[Array, "n H"]
    objective: Float[Array, ""]
    num_steps: Int[Array, ""]
    result: RESULTS
    history: Float[Array, " c"]


def solve_hidden(
    solver: TrustRegion,
    max_steps: int,
    rhs,
    theta0: PyTree,
    Z0: Float[Array, "n H"],
    problem: IntegralMatchingProblem,
    hidden: Int[Array, " H"],
    lower,
    upper,
    *,
    standardised: bool,
) -> HiddenSolution:
    r"""Joint bounded Gauss–Newton over $(\Theta, \tilde X)$ by `solver` on the §5 loss (bounds on
    $\Theta$ only)."""
    flat0, unravel = ravel_pytree(theta0)
    n_theta = flat0.size
    hidden_of = standardise if standardised else (lambda Z: Z)
    scale = 1.0 / jnp.sqrt(problem.X[:, 1:].size)

    def split(v):
        return unravel(v[:n_theta]), hidden_of(v[n_theta:].reshape(Z0.shape))

    def residuals(v, problem):
        theta, Z = split(v)
        return scale * collocation_residuals(rhs, theta, with_hidden(problem, hidden, Z)).reshape(-1)

    def fn(v, problem):
        r, jac = residuals(v, problem), jax.jacfwd(residuals)(v, problem)
        return 0.5 * jnp.dot(r, r), jac.T @ r, jac.T @ jac

    free = jnp.full(Z0.size, jnp.inf, flat0.dtype)
    lo = jnp.concatenate([jnp.full_like(flat0, -jnp.inf) if lower is None else lower.reshape(-1), -free])
    hi = jnp.concatenate([jnp.full_like(flat0, jnp.inf) if upper is None else upper.reshape(-1), free])
    v0 = jnp.concatenate([flat0, Z0.reshape(-1)])
    sol = solver.minimise(fn, v0, lo, hi, problem, max_steps=max_steps)
    theta, Z = split(sol.params)
    return HiddenSolution(
        theta, Z, 2.0 * sol.objective, sol.num_steps, sol.result, jnp.zeros((0,), sol.objective.dtype)
    )


def _hidden_start(rhs, theta0, problem, hidden, z0, features):
    """Θ₀ (mapped to standardised hidden states for a library's `features`) and γ(Θ₀) from `z0`."""
    Z0 = reconstruct_hidden(rhs, theta0, problem, hidden, z0)
    if features is not None:
        theta0 = _standardised_library(features, theta0, problem, hidden, Z0)
    return theta0, Z0


@cpu_safe_jit
def fit_hidden(
    solver: TrustRegion, max_steps: int, rhs, theta0, problem, hidden, z0, lower, upper, features=None
) -> HiddenSolution:
    """γ(Θ₀) from `z0`, then the joint Gauss–Newton solve by `solver`; a library's
    `features` turn on standardised hidden states (Θ₀ mapped to them)."""
    theta0, Z0 = _hidden_start(rhs, theta0, problem, hidden, z0, features)
    return solve_hidden(
        solver, max_steps, rhs, theta0, Z0, problem, hidden, lower, upper, standardised=features is not None
    )


def _hidden_loss(params: tuple, args: PyTree, index: Int[Array, " b"] | None) -> Float[Array, ""]:
    """ℓ of `(Θ, Z̃)` on the subintervals `index`, `args = (rhs, static, problem, hidden,
    standardised)`."""
    rhs, static, problem, hidden, standardised = args
    Z = standardise(params[1]) if standardised else params[1]
    return integral_matching_loss(rhs, eqx.combine(params[0], static), with_hidden(problem, hidden, Z), index)


_run_gradient = cpu_safe_jit(lambda solver, *args: solver.run(*args))


def fit_hidden_gradient(
    solver: Gradient,
    max_steps: int,
    rhs,
    theta0: PyTree,
    problem: IntegralMatchingProblem,
    hidden: Int[Array, " H"],
    z0: Float[Array, " H"],
    key: PRNGKeyArray,
    lower,
    upper,
    *,
    features=None,
    standardised: bool,
    progress: bool = False,
) -> HiddenSolution:
    """Algorithm 2: γ(Θ₀) from `z0`, then `solver`'s optimizer alternating between the
    parameters (clipped to the bounds) and the hidden node values, on random batches of
    chained subintervals, with its chunks and stopping rule, in at most `max_steps` steps."""
    theta0, Z0 = cpu_safe_jit(_hidden_start)(rhs, theta0, problem, hidden, z0, features)
    params, static = eqx.partition(theta0, eqx.is_inexact_array)
    args = (
        _hidden_loss,
        (rhs, static, problem, hidden, standardised),
        (params, Z0),
        problem.X.shape[0],
        key,
        lower,
        upper,
        max_steps,
    )
    state = solver.run(*args, progress=True) if progress else _run_gradient(solver, *args)
    theta, Z = eqx.combine(state.best[0], static), state.best[1]
    return HiddenSolution(
        theta,
        standardise(Z) if standardised else Z,
        state.best_loss,
        state.chunks * solver.chunk,
        solver.status(state),
        state.history,
    )
