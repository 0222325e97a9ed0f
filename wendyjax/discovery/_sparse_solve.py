r"""Direct solve of Meissner & Glasner 2024's damped Levenberg–Marquardt system with a general sparse
factorisation of the state block, bordered by the dense coefficient rows,

$$\begin{pmatrix} A & B \\ B^\top & C \end{pmatrix} \begin{pmatrix} d_u \\ d_\theta \end{pmatrix}
= \begin{pmatrix} r_u \\ r_\theta \end{pmatrix}:$$

one sparse LU of $A$ (scipy's SuperLU with a minimum-degree ordering of $A^\top + A$ and
diagonal pivots: for a symmetric positive-definite $A$ this is its Cholesky factorisation
up to scaling), $A^{-1}[r_u, B]$, and the Schur complement $C - B^\top A^{-1} B$ by Cholesky.
For fields whose time levels are too large for the dense blocks of `bordered_solve`
(2-D Allen–Cahn from two snapshots: two levels of 128² states). It runs on the host through
`jax.pure_callback`, under `jit` and (sequentially) `vmap`. A singular $A$ or a Schur
complement that is not positive definite gives NaN (the caller rejects the step).

Two time levels (two snapshots): Meissner & Glasner 2024's midpoint residual (eq. 13) depends on the states
only through $s = (u_0 + u_1)/2$ and $d = u_1 - u_0$, and linearly on $d$ with a diagonal
Jacobian, while the data misfit and the damping act point by point. In the variables
$(s, d)$, $u = P(s, d)$, the block of $P^\top A P$ in $d$ is therefore diagonal; it is eliminated
exactly and only its Schur complement, one level of states, is factorised (several times
faster: the docs' Meissner & Glasner 2024 page). Where that block is not diagonal
(a matrix of another origin) the whole $A$ is factorised."""

import functools

import jax
import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.linalg
from jaxtyping import Array, Float, Int


def _factorise(a: scipy.sparse.csc_matrix):
    """SuperLU's factorisation of a symmetric positive-definite `a` (its Cholesky up to scaling)."""
    return scipy.sparse.linalg.splu(
        a, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True}
    )


def _solve_two_levels(a: scipy.sparse.csc_matrix, rhs: np.ndarray) -> np.ndarray | None:
    """$A^{-1}$ `rhs` for states of two equal time levels by eliminating the diagonal block of
    $d = u_1 - u_0$ (above); None where that block is not diagonal and positive."""
    size = rhs.shape[0] // 2  # a is (2 size, 2 size)
    eye = scipy.sparse.identity(size, format="csc")
    p = scipy.sparse.bmat([[eye, -0.5 * eye], [eye, 0.5 * eye]], format="csc")  # u = P (s, d)
    a_hat = (p.T @ a @ p).tocsc()
    a_ss, a_sd, a_dd = a_hat[:size, :size], a_hat[:size, size:], a_hat[size:, size:]
    d = a_dd.diagonal()
    off = abs(a_dd - scipy.sparse.diags(d)).max()
    if not (np.all(d > 0) and off <= 1e-12 * d.max()):
        return None
    b_s, b_d = np.split(p.T @ rhs, 2)
    schur = (a_ss - a_sd @ scipy.sparse.diags(1.0 / d) @ a_sd.T).tocsc()
    x_s = _factorise(schur).solve(b_s - a_sd @ (b_d / d[:, None]))
    return p @ np.vstack([x_s, (b_d - a_sd.T @ x_s) / d[:, None]])


def _solve_on_host(levels, *args):
    rows, cols, values, shift, border, corner, r_u, r_theta = (np.asarray(x) for x in args)
    n = r_u.shape[0]
    a = scipy.sparse.csc_matrix((values, (rows, cols)), shape=(n, n)) + scipy.sparse.diags(shift, format="csc")
    rhs = np.column_stack([r_u, border])
    try:
        x = _solve_two_levels(a, rhs) if levels == 2 else None
        if x is None:
            x = _factorise(a).solve(rhs)
        x_r, x_b = x[:, 0], x[:, 1:]
        schur = scipy.linalg.cho_factor(corner - border.T @ x_b, lower=True)
        d_theta = scipy.linalg.cho_solve(schur, r_theta - border.T @ x_r)
    except (RuntimeError, np.linalg.LinAlgError):  # singular A; Schur complement not positive definite
        return np.full_like(r_u, np.nan), np.full_like(r_theta, np.nan)
    return (x_r - x_b @ d_theta).astype(r_u.dtype), d_theta.astype(r_theta.dtype)


def sparse_bordered_solve(
    rows: Int[Array, " nnz"],
    cols: Int[Array, " nnz"],
    values: Float[Array, " nnz"],
    shift: Float[Array, " n"],
    border: Float[Array, "n p"],
    corner: Float[Array, "p p"],
    r_u: Float[Array, " n"],
    r_theta: Float[Array, " p"],
    levels: int = 1,
) -> tuple[Float[Array, " n"], Float[Array, " p"]]:
    """Solve the bordered system above with $A$ = the entries `values` at `(rows, cols)`
    (every non-zero, both triangles) plus `diag(shift)`; `levels` is the number of time
    levels the states (flattened level by level) have."""
    out = (jax.ShapeDtypeStruct(r_u.shape, r_u.dtype), jax.ShapeDtypeStruct(r_theta.shape, r_theta.dtype))
    return jax.pure_callback(
        functools.partial(_solve_on_host, levels),
        out,
        rows,
        cols,
        values,
        shift,
        border,
        corner,
        r_u,
        r_theta,
        vmap_method="sequential",
    )
