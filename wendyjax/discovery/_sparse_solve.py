r"""Direct solve of 003's damped Levenberg–Marquardt system with a general sparse
factorisation of the state block, bordered by the dense coefficient rows,

$$\begin{pmatrix} A & B \\ B^\top & C \end{pmatrix} \begin{pmatrix} d_u \\ d_\theta \end{pmatrix}
= \begin{pmatrix} r_u \\ r_\theta \end{pmatrix}:$$

one sparse LU of $A$ (scipy's SuperLU with a minimum-degree ordering of $A^\top + A$ and
diagonal pivots: for a symmetric positive-definite $A$ this is its Cholesky factorisation
up to scaling), $A^{-1}[r_u, B]$, and the Schur complement $C - B^\top A^{-1} B$ by Cholesky.
For fields whose time levels are too large for the dense blocks of `bordered_solve`
(2-D Allen–Cahn from two snapshots: two levels of 128² states). It runs on the host through
`jax.pure_callback`, under `jit` and (sequentially) `vmap`. A singular $A$ or a Schur
complement that is not positive definite gives NaN (the caller rejects the step)."""

import jax
import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.linalg
from jaxtyping import Array, Float, Int


def _solve_on_host(*args):
    rows, cols, values, shift, border, corner, r_u, r_theta = (np.asarray(x) for x in args)
    n = r_u.shape[0]
    a = scipy.sparse.csc_matrix((values, (rows, cols)), shape=(n, n)) + scipy.sparse.diags(shift, format="csc")
    try:
        lu = scipy.sparse.linalg.splu(a, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                                      options={"SymmetricMode": True})
        x = lu.solve(np.column_stack([r_u, border]))
        x_r, x_b = x[:, 0], x[:, 1:]
        schur = scipy.linalg.cho_factor(corner - border.T @ x_b, lower=True)
        d_theta = scipy.linalg.cho_solve(schur, r_theta - border.T @ x_r)
    except (RuntimeError, np.linalg.LinAlgError):  # singular A; Schur complement not positive definite
        return np.full_like(r_u, np.nan), np.full_like(r_theta, np.nan)
    return (x_r - x_b @ d_theta).astype(r_u.dtype), d_theta.astype(r_theta.dtype)


def sparse_bordered_solve(rows: Int[Array, " nnz"], cols: Int[Array, " nnz"], values: Float[Array, " nnz"],
                          shift: Float[Array, " n"], border: Float[Array, "n p"], corner: Float[Array, "p p"],
                          r_u: Float[Array, " n"], r_theta: Float[Array, " p"]
                          ) -> tuple[Float[Array, " n"], Float[Array, " p"]]:
    """Solve the bordered system above with $A$ = the entries `values` at `(rows, cols)`
    (every non-zero, both triangles) plus `diag(shift)`."""
    out = (jax.ShapeDtypeStruct(r_u.shape, r_u.dtype), jax.ShapeDtypeStruct(r_theta.shape, r_theta.dtype))
    return jax.pure_callback(_solve_on_host, out, rows, cols, values, shift, border, corner, r_u, r_theta,
                             vmap_method="sequential")
