r"""(Weighted) least squares on the weak residual, bounded, in pure JAX.

Minimises $\tfrac12\|W(g(p) - b)\|^2$ with $W = C^{-1}$ per trajectory ($S = CC^T$ a
fixed covariance, IRLS) or $W = I$ (WLS): in closed form followed by a projection
check for models linear in the parameters ($g = Gp + g_0$), by a bounded Gauss–Newton
trust region otherwise.
"""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..weak import WeakLikelihood, residual
from ._trust_region import TrustRegion, TrustRegionSolution


def _whiten(chol: Float[Array, "r n n"] | None, x: Float[Array, "r n ..."]):
    if chol is None:
        return x
    return jax.vmap(lambda c, y: jax.scipy.linalg.solve_triangular(c, y, lower=True))(chol, x)


def _gauss_newton(r: Array, J: Array) -> tuple[Array, Array, Array]:
    return 0.5 * jnp.dot(r, r), J.T @ r, J.T @ J


def weighted_least_squares(
    lik: WeakLikelihood,
    chol: Float[Array, "r n n"] | None,
    p_start: Float[Array, " j"],
    lower: Float[Array, " j"],
    upper: Float[Array, " j"],
    *,
    solver: TrustRegion,
    max_steps: int,
) -> TrustRegionSolution:
    r"""$\arg\min_{l\le p\le u} \tfrac12\sum_r \|C_r^{-1}(g_r(p) - b_r)\|^2$ (Bortz et al. 2023, Alg. 2
    line 9; $C = I$ for WLS, Bortz et al. 2023, Alg. 1).

    Linear in parameters: the unconstrained solution by `lstsq` starts a Gauss–Newton
    trust region that is exact on this quadratic (one step when that solution is
    feasible, otherwise the bounded solution). `p_start` is used only for nonlinear models.
    """
    if lik.linear is not None:
        lin = lik.linear
        n_params = lin.G.shape[-1]
        A = _whiten(chol, lin.G).reshape(-1, n_params)
        y = _whiten(chol, (lik.problem.b - lin.g0)[..., None]).reshape(-1)
        p_start = jnp.linalg.lstsq(A, y)[0]

        def fn(p, _):
            return _gauss_newton(A @ p - y, A)
    else:

        def weighted_residual(p):
            return _whiten(chol, residual(lik, p)[..., None]).reshape(-1)

        def fn(p, _):
            return _gauss_newton(weighted_residual(p), jax.jacfwd(weighted_residual)(p))

    return solver.minimise(fn, p_start, lower, upper, max_steps=max_steps)
