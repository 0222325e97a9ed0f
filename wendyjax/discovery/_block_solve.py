r"""Direct solve with the Hessian of Meissner & Glasner 2024's objective: a block-tridiagonal state block (levels
$t$, $t \pm 1$ coupled through the one-step residual) bordered by dense coefficient rows,

$$\begin{pmatrix} A & B \\ B^\top & C \end{pmatrix} \begin{pmatrix} d_u \\ d_\theta \end{pmatrix}
= \begin{pmatrix} r_u \\ r_\theta \end{pmatrix},$$

by block Cholesky of $A$ in one `lax.scan` over time levels and the Schur complement
$C - B^\top A^{-1} B$ — the sparse Cholesky of Meissner & Glasner 2024, §4 for this structure, in JAX. A matrix
that is not positive definite gives non-finite output (the caller rejects the step)."""

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jaxtyping import Array, Float


def _block_cholesky(diag: Float[Array, "T S S"], sub: Float[Array, "T-1 S S"]) -> tuple[Array, Array]:
    r"""$A = LL^\top$ with $L$ block lower bidiagonal: diagonal blocks $L_t$ and sub-diagonal
    blocks $W_t = A_{t,t-1} L_{t-1}^{-\top}$ ($W_0 = 0$)."""

    def step(prev, blocks):
        a, s = blocks
        w = jsl.solve_triangular(prev, s.T, lower=True).T
        chol = jnp.linalg.cholesky(a - w @ w.T)
        return chol, (chol, w)

    first = jnp.linalg.cholesky(diag[0])
    _, (chols, ws) = jax.lax.scan(step, first, (diag[1:], sub))
    return jnp.concatenate([first[None], chols]), jnp.concatenate([jnp.zeros_like(diag[:1]), ws])


def _block_cholesky_solve(chols: Array, ws: Array, rhs: Float[Array, "T S m"]) -> Float[Array, "T S m"]:
    def forward(prev, blocks):
        chol, w, r = blocks
        y = jsl.solve_triangular(chol, r - w @ prev, lower=True)
        return y, y

    _, y = jax.lax.scan(forward, jnp.zeros_like(rhs[0]), (chols, ws, rhs))

    def backward(nxt, blocks):
        chol, w_next, yt = blocks
        x = jsl.solve_triangular(chol, yt - w_next.T @ nxt, lower=True, trans="T")
        return x, x

    w_next = jnp.concatenate([ws[1:], jnp.zeros_like(ws[:1])])
    _, x = jax.lax.scan(backward, jnp.zeros_like(rhs[0]), (chols, w_next, y), reverse=True)
    return x


def bordered_solve(
    diag: Float[Array, "T S S"],
    sub: Float[Array, "T-1 S S"],
    border: Float[Array, "T S p"],
    corner: Float[Array, "p p"],
    r_u: Float[Array, "T S"],
    r_theta: Float[Array, " p"],
) -> tuple[Float[Array, "T S"], Float[Array, " p"]]:
    """Solve the bordered block-tridiagonal system above (symmetric positive definite)."""
    chols, ws = _block_cholesky(diag, sub)
    x = _block_cholesky_solve(chols, ws, jnp.concatenate([r_u[..., None], border], axis=-1))
    x_r, x_b = x[..., 0], x[..., 1:]
    schur = corner - jnp.einsum("tsp,tsq->pq", border, x_b)
    d_theta = jsl.cho_solve((jnp.linalg.cholesky(schur), True), r_theta - jnp.einsum("tsp,ts->p", border, x_r))
    return x_r - x_b @ d_theta, d_theta
