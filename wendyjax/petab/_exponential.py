"""Exact solutions of linear autonomous ODEs by the matrix exponential."""

import math
from collections.abc import Sequence

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


def _pade13(a: Float[Array, "n n"]) -> Float[Array, "n n"]:
    b = _PADE13
    eye = jnp.eye(a.shape[-1], dtype=a.dtype)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    return jnp.linalg.solve(v - u, v + u)


def _affine_flow(
    a: Float[Array, "c n n"], b: Float[Array, "c n"], ts: Float[Array, "c k"], max_squarings: int
) -> Float[Array, "c k n+1 n+1"]:
    r"""$e^{M_c t_{ck}}$, $M_c = \begin{pmatrix}a_c & b_c\\ 0 & 0\end{pmatrix}$, by scaling and
    squaring (Higham 2005): each $M_c t_{ck}$ scaled by its own $2^{-s}$, the squarings of all
    run together, and blocks of them that none needs are skipped (`jax.scipy.linalg.expm`
    squares in a scan of `max_squarings` conditionals and picks its Padé degree by a switch:
    batched, every squaring and every degree runs). The last row is kept exactly
    $(0, \dots, 0, 1)$: the Padé approximant's rounding there, squared $s$ times, would scale
    the input $b$ by $(1 - \epsilon)^{2^s}$. NaN where $s$ would exceed `max_squarings`."""
    c, n = b.shape
    m = jnp.zeros((c, n + 1, n + 1), a.dtype).at[:, :n, :n].set(a).at[:, :n, n].set(b)
    norm = jnp.abs(ts) * jnp.max(jnp.sum(jnp.abs(m), axis=1), axis=1)[:, None]
    s = jax.lax.stop_gradient(jnp.maximum(0.0, jnp.ceil(jnp.log2(norm / _THETA13))))  # (c, k)
    x = jax.vmap(jax.vmap(_pade13))(m[:, None] * (ts / 2.0**s)[:, :, None, None])
    x = x.at[:, :, n].set(jnp.eye(n + 1, dtype=a.dtype)[n])
    most = jnp.max(s)

    def block(x, j):
        def square(x, i):
            return jnp.where((j * _BLOCK + i < s)[:, :, None, None], x @ x, x), None

        return jax.lax.cond(
            j * _BLOCK < most, lambda x: jax.lax.scan(square, x, jnp.arange(_BLOCK))[0], lambda x: x, x
        ), None

    x, _ = jax.lax.scan(block, x, jnp.arange(math.ceil(max_squarings / _BLOCK)))
    return jnp.where((s <= max_squarings)[:, :, None, None], x, jnp.nan)


class MatrixExponential(eqx.Module):
    r"""The exact solution of a linear autonomous model $\dot x = Ax + b$ ($A$ and $b$ functions
    of the parameters only, as in networks of first-order reactions): the matrix exponential
    of $\begin{pmatrix}A & b\\ 0 & 0\end{pmatrix}$ times $(x_0, 1)$ at every measurement time
    (the [13/13] Padé approximant with scaling and squaring, Higham 2005). No steps, no
    tolerances, no stiffness: `rtol`, `atol` and `max_steps` of [`load`][wendyjax.petab.load]
    do not apply. A solve fails (objective `inf`) where $\|At\|_1$ would need more than
    `max_squarings` squarings (above about $5.4 \cdot 2^{64}$ by default) or the states are
    not finite. Its rounding is relative to the largest entries of $e^{At}$: states that
    decay to below about 1e-16 of them can come out slightly negative (NaN on a log-scale
    observable; such trial points are rejected). [`load`][wendyjax.petab.load] chooses it for
    linear autonomous models."""

    max_squarings: int = eqx.field(static=True, default=64)

    def __check_init__(self):
        if isinstance(self.max_squarings, bool) or not isinstance(self.max_squarings, int) or self.max_squarings < 1:
            raise ValueError(f"max_squarings must be a positive integer, got {self.max_squarings!r}.")

    def solve(
        self, rhs, p: Float[Array, "c q"], x0: Float[Array, "c s"], ts: Float[Array, "c k"]
    ) -> tuple[Float[Array, "c k s"], Bool[Array, ""]]:
        """Per condition c, the states at times `ts[c]` from `x0[c]` at t = 0 of the field
        `rhs(t, x, p[c])` (affine in `x`, independent of `t`); and whether all are finite."""
        n = x0.shape[1]
        zero = jnp.zeros(n, x0.dtype)
        a = jax.vmap(lambda p: jax.jacfwd(lambda x: rhs(0.0, x, p))(zero))(p)
        b = jax.vmap(lambda p: rhs(0.0, zero, p))(p)
        y0 = jnp.concatenate([x0, jnp.ones((x0.shape[0], 1), x0.dtype)], axis=1)
        states = jnp.einsum("ckij,cj->cki", _affine_flow(a, b, ts, self.max_squarings), y0)[..., :n]
        return states, jnp.all(jnp.isfinite(states))


def linear_autonomous(rhs: Sequence[sp.Basic], states: Sequence[sp.Basic], time: sp.Basic) -> bool:
    """Whether every right-hand side is free of `time` and has derivatives in the `states` free
    of them (is affine in them)."""
    members = set(states)
    return not any(
        expr.has(time) or any(sp.diff(expr, x).free_symbols & members for x in states if x in expr.free_symbols)
        for expr in rhs
    )
