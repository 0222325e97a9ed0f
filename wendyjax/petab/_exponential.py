"""Exact solutions of linear autonomous ODEs by the matrix exponential."""

import math
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import sympy as sp
from jaxtyping import Array, Bool, Float

# Higham (2005)'s [13/13] Padé approximant of exp: its coefficients, and the largest 1-norm
# at which it is accurate to double precision (θ₁₃)
_PADE13 = (
    64764752532480000.0,
    32382376266240000.0,
    7771770303897600.0,
    1187353796428800.0,
    129060195264000.0,
    10559470521600.0,
    670442572800.0,
    33522128640.0,
    1323241920.0,
    40840800.0,
    960960.0,
    16380.0,
    182.0,
    1.0,
)
_THETA13 = 5.371920351148152
# squarings per conditional block: a block not needed is skipped as a whole
_BLOCK = 8


def _mm(a, b):
    """A matrix product at full precision (no TF32 for float32 on GPUs)."""
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)


def _pade13(a: Float[Array, "n n"]) -> Float[Array, "n n"]:
    b = _PADE13
    eye = jnp.eye(a.shape[-1], dtype=a.dtype)
    a2 = _mm(a, a)
    a4 = _mm(a2, a2)
    a6 = _mm(a4, a2)
    u = _mm(a, _mm(a6, b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = _mm(a6, b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    return jnp.linalg.solve(v - u, v + u)


def _affine_flow(
    a: Float[Array, "c n n"],
    b: Float[Array, "c n"],
    x0: Float[Array, "c n"],
    ts: Float[Array, "c k"],
    max_squarings: int,
) -> Float[Array, "c k n"]:
    r"""$e^{a_c t}x_{0c} + \int_0^t e^{a_c u}\,du\,b_c$ at $t = t_{ck}$: the exponential of
    $M_c t$, $M_c = \begin{pmatrix}a_c & b_c/\beta_c\\ 0 & 0\end{pmatrix}$, times
    $(x_{0c}, \beta_c)$, by scaling and squaring (Higham 2005). $\beta_c$, a power of two near
    $\|b_c\|_1/\|a_c\|_1$, keeps a large input from adding squarings that $a_c$ does not need
    (each squaring adds its rounding: the result's relative error grows like $2^s\epsilon$).
    Each $M_c t_{ck}$ is scaled by its own $2^{-s}$, the squarings of all run together, and
    blocks of them that none needs are skipped (`jax.scipy.linalg.expm` squares in a scan of
    `max_squarings` conditionals and picks its Padé degree by a switch: batched, every
    squaring and every degree runs). The last row is kept exactly $(0, \dots, 0, 1)$: the
    Padé approximant's rounding there, squared $s$ times, would scale the input by
    $(1 - \epsilon)^{2^s}$. NaN where $s$ would exceed `max_squarings` or is not finite."""
    c, n = b.shape
    a_norm, b_norm = jnp.max(jnp.sum(jnp.abs(a), axis=1), axis=1), jnp.sum(jnp.abs(b), axis=1)
    ratio = jnp.where((a_norm > 0) & (b_norm > 0), b_norm / a_norm, 1.0)
    beta = jax.lax.stop_gradient(jnp.where(jnp.isfinite(ratio), 2.0 ** jnp.round(jnp.log2(ratio)), 1.0))
    m = jnp.zeros((c, n + 1, n + 1), a.dtype).at[:, :n, :n].set(a).at[:, :n, n].set(b / beta[:, None])
    norm = jnp.abs(ts) * jnp.max(jnp.sum(jnp.abs(m), axis=1), axis=1)[:, None]
    squarings = jax.lax.stop_gradient(jnp.maximum(0.0, jnp.ceil(jnp.log2(norm / _THETA13))))  # (c, k)
    x = jax.vmap(jax.vmap(_pade13))(m[:, None] * (ts / 2.0**squarings)[:, :, None, None])
    x = x.at[:, :, n].set(jnp.eye(n + 1, dtype=a.dtype)[n])
    most = jnp.max(squarings)  # NaN where some matrix is not finite: no block runs, and its result is NaN

    def block(x, j):
        def square(x, i):
            return jnp.where((j * _BLOCK + i < squarings)[:, :, None, None], _mm(x, x), x), None

        return jax.lax.cond(
            j * _BLOCK < most, lambda x: jax.lax.scan(square, x, jnp.arange(_BLOCK))[0], lambda x: x, x
        ), None

    x, _ = jax.lax.scan(block, x, jnp.arange(math.ceil(max_squarings / _BLOCK)))
    x = jnp.where((squarings <= max_squarings)[:, :, None, None], x, jnp.nan)
    y0 = jnp.concatenate([x0, beta[:, None]], axis=1)
    return jnp.einsum("ckij,cj->cki", x, y0)[..., :n]


class MatrixExponential(eqx.Module):
    r"""The solution of a linear autonomous model $\dot x = Ax + b$ ($A$ and $b$ functions of the
    parameters only, as in networks of first-order reactions) by the matrix exponential of
    $\begin{pmatrix}A & b\\ 0 & 0\end{pmatrix}$ at every measurement time (the [13/13] Padé
    approximant with scaling and squaring, Higham 2005): no steps, no tolerances, and no
    truncation error; its rounding error grows like $2^s\epsilon$ with the $s \approx
    \log_2(\|A\|_1 t / 5.4)$ squarings, so with stiffness, as an ODE solver's cost does.
    `rtol`, `atol`, `max_steps` and `max_rejections` of [`load`][wendyjax.petab.load] do not apply. A solve
    fails (objective `inf`) where one would need more than `max_squarings` squarings or the
    states are not finite. The rounding is relative to the largest entries of $e^{At}$:
    states that decay to below about 1e-16 of them can come out slightly negative (NaN on a
    log-scale observable; such trial points are rejected). [`load`][wendyjax.petab.load]
    chooses it for linear autonomous models; the conditions are solved side by side."""

    max_squarings: int = eqx.field(static=True, default=64)

    def __check_init__(self):
        if isinstance(self.max_squarings, bool) or not isinstance(self.max_squarings, int) or self.max_squarings < 1:
            raise ValueError(f"max_squarings must be a positive integer, got {self.max_squarings!r}.")

    def solve(
        self,
        rhs: Callable[[float, Float[Array, " n"], Float[Array, " q"]], Float[Array, " n"]],
        p: Float[Array, "c q"],
        x0: Float[Array, "c n"],
        ts: Float[Array, "c k"],
    ) -> tuple[Float[Array, "c k n"], Bool[Array, ""]]:
        """Per condition c, the states at times `ts[c]` from `x0[c]` at t = 0 of the field
        `rhs(t, x, p[c])` (affine in `x`, independent of `t`); and whether all are finite."""
        zero = jnp.zeros(x0.shape[1], x0.dtype)
        a = jax.vmap(lambda p: jax.jacfwd(lambda x: rhs(0.0, x, p))(zero))(p)
        b = jax.vmap(lambda p: rhs(0.0, zero, p))(p)
        states = _affine_flow(a, b, x0, ts, self.max_squarings)
        return states, jnp.all(jnp.isfinite(states))


def linear_autonomous(rhs: Sequence[sp.Basic], states: Sequence[sp.Basic], time: sp.Basic) -> bool:
    """Whether every right-hand side is free of `time` and a polynomial of degree at most one
    in the `states` (a switch on a state, such as a piecewise, is not: its derivative drops the
    switch's condition)."""
    members = set(states)
    return not any(
        expr.has(time)
        or not (isinstance(expr, sp.Expr) and expr.is_polynomial(*states))
        or any(sp.diff(expr, x).free_symbols & members for x in states if x in expr.free_symbols)
        for expr in rhs
    )
