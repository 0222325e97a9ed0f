r"""B-spline bases in the style of R's `fda` (breakpoints with multiplicities and an order),
evaluated with their derivatives in JAX, and Gauss–Legendre quadrature aligned with
breakpoints (Carey & Ramsay 2021, §3.1).

A basis of order $O$ (degree $O-1$) on $[a, b]$ with breakpoints
$a = \xi_0 \le \xi_1 \le \dots \le \xi_L = b$ has the knot vector
$(a^{\times(O-1)}, \xi_0, \dots, \xi_L, b^{\times(O-1)})$ and $K = L + 1 + O - 2$
functions; a break of multiplicity $m$ leaves the splines $C^{O-1-m}$ there.
"""

from collections.abc import Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._compile import cpu_safe_jit
from .._typing import ArrayLike


def _knot_spans(knots: np.ndarray, k: int) -> np.ndarray:
    """$t_{i+k} - t_i$ for every $i$, with 0 replaced by inf (0/0 := 0 in Cox–de Boor)."""
    span = knots[k:] - knots[:-k]
    return np.where(span > 0, span, np.inf)


class BSplineBasis(eqx.Module):
    r"""B-splines of order `order` on `[a, b]` with breakpoints `breaks` (`fda`'s
    `create.bspline.basis(rangeval, norder=order, breaks=breaks)`): `breaks` is
    non-decreasing, starts at `a`, ends at `b` and may repeat interior values (a break of
    multiplicity $m$ lowers the smoothness there to $C^{O-1-m}$). Calling the basis
    evaluates $D^r\phi_k(t)$, shape `(n, K)`, differentiably in JAX."""

    break_values: tuple[float, ...] = eqx.field(static=True)
    order: int = eqx.field(static=True)

    def __init__(self, breaks: Sequence[float] | ArrayLike, order: int = 4):
        breaks = np.asarray(breaks, dtype=float)
        if breaks.ndim != 1 or breaks.size < 2:
            raise ValueError(f"breaks must be a 1-D sequence of at least two values, got shape {breaks.shape}.")
        if not np.all(np.isfinite(breaks)):
            raise ValueError("breaks contains NaN or inf.")
        if np.any(np.diff(breaks) < 0):
            i = int(np.argmax(np.diff(breaks) < 0))
            raise ValueError(
                f"breaks must be sorted (non-decreasing): breaks[{i}] = {breaks[i]} > "
                f"breaks[{i + 1}] = {breaks[i + 1]}."
            )
        if breaks[0] == breaks[-1]:
            raise ValueError(f"breaks must span an interval, got a single value {breaks[0]}.")
        if int(order) != order or order < 1:
            raise ValueError(f"order must be a positive integer, got {order}.")
        order = int(order)
        values, counts = np.unique(breaks, return_counts=True)
        if counts[0] > 1 or counts[-1] > 1:
            raise ValueError("breaks: the end points a and b must appear once (fda repeats them itself).")
        if np.any(counts > order):
            raise ValueError(
                f"breaks: an interior break repeated {counts.max()} times exceeds the order "
                f"{order} (the basis would be discontinuous beyond a jump)."
            )
        self.break_values = tuple(breaks.tolist())
        self.order = order

    @property
    def breaks(self) -> np.ndarray:
        """The breaks with their multiplicities (fda's convention)."""
        return np.asarray(self.break_values)

    @property
    def knots(self) -> np.ndarray:
        """The full knot vector: the end points repeated `order` times in all."""
        a, b, o = self.break_values[0], self.break_values[-1], self.order
        return np.asarray((a,) * (o - 1) + self.break_values + (b,) * (o - 1))

    @property
    def num_basis(self) -> int:
        """$K$ = number of breaks + order − 2."""
        return self.breaks.size + self.order - 2

    @property
    def domain(self) -> tuple[float, float]:
        """`(first break, last break)`: where the basis is defined."""
        return float(self.breaks[0]), float(self.breaks[-1])

    @property
    def distinct_breaks(self) -> np.ndarray:
        """The breaks without repeats."""
        return np.unique(self.breaks)

    def multiplicity(self) -> dict[float, int]:
        """Multiplicity of every interior break."""
        values, counts = np.unique(self.breaks[1:-1], return_counts=True)
        return dict(zip(values.tolist(), counts.tolist()))

    def check_points(self, t: ArrayLike, argname: str = "t") -> np.ndarray:
        """`t` as an array, refused when it leaves the basis range."""
        t = np.asarray(t, dtype=float)
        a, b = self.domain
        scale = 1e-12 * (b - a)
        if t.size and (np.min(t) < a - scale or np.max(t) > b + scale):
            raise ValueError(
                f"{argname} must lie in the basis range [{a:g}, {b:g}], got values in [{np.min(t):g}, {np.max(t):g}]."
            )
        return t

    def __call__(self, t: ArrayLike, deriv: int = 0) -> Float[Array, "n K"]:
        r"""$D^r\phi_k(t_i)$ by the Cox–de Boor recursion: values of order $O - r$, then $r$
        applications of $D B_{i,k} = (k-1)[B_{i,k-1}/(t_{i+k-1}-t_i) - B_{i+1,k-1}/(t_{i+k}-t_{i+1})]$.
        Right-continuous at interior knots; the last interval is closed at $b$. Points
        outside $[a, b]$ give 0."""
        if int(deriv) != deriv or deriv < 0:
            raise ValueError(f"deriv must be a non-negative integer, got {deriv}.")
        return _evaluate(self, jnp.asarray(t, dtype=float), int(deriv))


@cpu_safe_jit
def _evaluate(basis: BSplineBasis, t, deriv: int):
    knots, order = basis.knots, basis.order
    if deriv >= order:
        return jnp.zeros(t.shape + (basis.num_basis,), t.dtype)
    # order-1 indicators: [t_i, t_{i+1}); the last non-empty interval also holds b
    left, right = knots[:-1], knots[1:]
    last = int(np.nonzero(right > left)[0][-1])
    tt = t[..., None]
    B = ((tt >= left) & (tt < right)).astype(t.dtype)
    B = B.at[..., last].set(jnp.where((t >= left[last]) & (t <= right[last]), 1.0, 0.0))
    for k in range(2, order - deriv + 1):
        span = _knot_spans(knots, k - 1)
        w_left = (tt - knots[:-k]) / span[:-1]
        w_right = (knots[k:] - tt) / span[1:]
        B = w_left * B[..., :-1] + w_right * B[..., 1:]
    for k in range(order - deriv + 1, order + 1):
        span = _knot_spans(knots, k - 1)
        B = (k - 1) * (B[..., :-1] / span[:-1] - B[..., 1:] / span[1:])
    return B


def breakpoint_quadrature(breaks: ArrayLike, num_points: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Gauss–Legendre nodes and weights with `num_points` points on every interval between
    consecutive distinct `breaks` (exact for polynomials of degree $2n-1$ on each piece, so
    for piecewise polynomials — B-spline products, pulses — broken only at `breaks`)."""
    if int(num_points) != num_points or num_points < 1:
        raise ValueError(f"num_points must be a positive integer, got {num_points}.")
    edges = np.unique(np.asarray(breaks, dtype=float))
    x, w = np.polynomial.legendre.leggauss(int(num_points))
    a, b = edges[:-1, None], edges[1:, None]
    nodes = 0.5 * (b - a) * x + 0.5 * (a + b)
    weights = 0.5 * (b - a) * w
    return nodes.reshape(-1), weights.reshape(-1)
