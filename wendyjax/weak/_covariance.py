r"""Block assembly of the weak-residual covariance (Rummel et al. 2025, Prop. 2, App. B).

With states $d, e$, test functions $k, l$ and samples $m$, the linearised residual map is
$L_{de} = \Phi\,\mathrm{diag}(J_{\cdot de}) + \delta_{de}\dot\Phi$ where
$J_{mde} = \partial f_d/\partial u_e(u_m)$, and
$S_{dd'} = \sum_e \sigma_e^2 L_{de} L_{d'e}^T$. Expanding the products gives four kinds of
$K\times K$ blocks, each one weighted Gram product $A\,\mathrm{diag}(w)\,B^T$:

$$S_{dd'} = \Phi\,\mathrm{diag}\Big(\textstyle\sum_e \sigma_e^2 J_{de} J_{d'e}\Big)\Phi^T
 + \sigma_d^2\,\dot\Phi\,\mathrm{diag}(J_{d'd})\,\Phi^T
 + \sigma_{d'}^2\,\Phi\,\mathrm{diag}(J_{dd'})\,\dot\Phi^T
 + \delta_{dd'}\sigma_d^2\,\dot\Phi\dot\Phi^T .$$

Each family of blocks is one matrix product of shape $K\times N$ by $N\times(QK)$, so the
cost is $\approx 4D^2K^2N$ flops instead of $2D^3K^2N$ for the dense $L\Sigma L^T$.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

# pairs (k ≤ l) of test functions per block of the product table in [`table_grams`][]: a
# (PAIR_BLOCK, N) block of products stays in cache while it meets the weights
PAIR_BLOCK = 256
# weight vectors from which [`table_grams`][] (half the products, but a table to form) beats
# [`symmetric_grams`][] one by one (benchmarks/study_pipeline.py times the build)
TABLE_ROWS = 32


def weighted_grams(
    left: Float[Array, "k n"], right: Float[Array, "l n"], w: Float[Array, "n q"]
) -> Float[Array, "q k l"]:
    r"""$\{A\,\mathrm{diag}(w_q)\,B^T\}_q$ as a single matrix product.

    Formed as $[\mathrm{diag}(w_q) B^T]^T_q A^T$, a $(QL\times N)(N\times K)$ product whose
    reverse-mode transpose is again a plain $(QL\times K)(K\times N)$ product; the
    other orientation made XLA transpose $N\times QL$ operands in the gradient."""
    k = left.shape[0]
    m, n = right.shape
    q = w.shape[1]
    scaled = (w.T[:, None, :] * right[None, :, :]).reshape(q * m, n)  # (q·l, n)
    return (scaled @ left.T).reshape(q, m, k).transpose(0, 2, 1)


def symmetric_grams(phi: Float[Array, "k n"], w: Float[Array, "n q"]) -> Float[Array, "q k k"]:
    r"""$\{\Phi\,\mathrm{diag}(w_q)\,\Phi^T\}_q$, symmetric: the two diagonal blocks and one
    off-diagonal block of halves of $\Phi$'s rows, the other mirrored (three quarters of
    [`weighted_grams`][]'s products)."""
    h = phi.shape[0] // 2
    top, bottom = phi[:h], phi[h:]
    upper, lower, cross = weighted_grams(top, top, w), weighted_grams(bottom, bottom, w), weighted_grams(bottom, top, w)
    return jnp.concatenate(
        [jnp.concatenate([upper, jnp.swapaxes(cross, 1, 2)], axis=2), jnp.concatenate([cross, lower], axis=2)], axis=1
    )


@functools.lru_cache(maxsize=8)
def _pair_indices(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""The pairs $k \le l$ of `k` test functions in blocks of `PAIR_BLOCK` (padded with
    (0, 0)), and where entry (k, l) of a Gram is found among them."""
    rows, cols = np.triu_indices(k)
    n_blocks = -(-rows.size // PAIR_BLOCK)
    left, right = (np.zeros(n_blocks * PAIR_BLOCK, int) for _ in range(2))
    left[: rows.size], right[: rows.size] = rows, cols
    where = np.zeros((k, k), int)
    where[rows, cols] = np.arange(rows.size)
    where = np.maximum(where, where.T)
    return left.reshape(n_blocks, PAIR_BLOCK), right.reshape(n_blocks, PAIR_BLOCK), where


def table_grams(phi: Float[Array, "k n"], w: Float[Array, "r n"]) -> Float[Array, "r k k"]:
    r"""$\{\Phi\,\mathrm{diag}(w_r)\,\Phi^T\}_r$ for many weight vectors of one basis: the
    weights times the table of products $\varphi_k\varphi_l$, $k \le l$, formed block by
    block and never whole. Half the flops of the full products, in one product per block
    for all $r$: faster than [`symmetric_grams`][] per weight vector once there are a few
    dozen of them."""
    left, right, where = _pair_indices(phi.shape[0])

    def block(_, pairs):
        a, b = pairs
        return None, w @ (phi[a] * phi[b]).T

    _, packed = jax.lax.scan(block, None, (left, right))  # (blocks, r, PAIR_BLOCK)
    packed = jnp.moveaxis(packed, 0, 1).reshape(w.shape[0], -1)
    return packed[:, where]


def covariance_weights(
    jac: Float[Array, "n d d"], var: Float[Array, " d"]
) -> tuple[Float[Array, "n d d"], Float[Array, "n d d"]]:
    r"""The per-sample weights on which $S$ depends linearly:
    $w^1_{mdd'} = \sum_e \sigma_e^2 J_{mde} J_{md'e}$ (the $\Phi$–$\Phi$ Grams) and
    $w^2_{mdd'} = \sigma_d^2 J_{md'd}$ (the $\dot\Phi$–$\Phi$ Grams)."""
    return jnp.einsum("mde,mfe,e->mdf", jac, jac, var), jnp.swapaxes(jac, 1, 2) * var[None, :, None]


def weighted_blocks(
    phi: Float[Array, "k n"], dphi: Float[Array, "k n"], w1: Float[Array, "n d d"], w2: Float[Array, "n d d"]
) -> Float[Array, "d d k k"]:
    r"""The part of $S$'s blocks linear in the weights of [`covariance_weights`][]:
    $\Phi\,\mathrm{diag}(w^1_{dd'})\Phi^T + \dot\Phi\,\mathrm{diag}(w^2_{dd'})\Phi^T
    + (\dot\Phi\,\mathrm{diag}(w^2_{d'd})\Phi^T)^T$."""
    n, d, _ = w1.shape
    k = phi.shape[0]
    out = weighted_grams(phi, phi, w1.reshape(n, d * d)).reshape(d, d, k, k)
    c = weighted_grams(dphi, phi, w2.reshape(n, d * d)).reshape(d, d, k, k)
    return out + c + jnp.swapaxes(c, 0, 1).swapaxes(2, 3)


def covariance_blocks(
    phi: Float[Array, "k n"],
    dphi: Float[Array, "k n"],
    dphi_gram: Float[Array, "k k"],
    jac: Float[Array, "n d d"],
    var: Float[Array, " d"],
) -> Float[Array, "d d k k"]:
    r"""The blocks $S_{dd'}$ of $S = L\Sigma L^T$ (Rummel et al. 2025, Prop. 2) with
    $L_{de} = \Phi\,\mathrm{diag}(J_{\cdot de}) + \delta_{de}\dot\Phi$: the weighted Grams of
    `weighted_blocks` plus the constant $\delta_{dd'}\sigma_d^2\dot\Phi\dot\Phi^T$."""
    w1, w2 = covariance_weights(jac, var)
    constant = jnp.eye(var.shape[0])[:, :, None, None] * var[:, None, None, None] * dphi_gram
    return weighted_blocks(phi, dphi, w1, w2) + constant


def blocks_to_matrix(blocks: Float[Array, "d d k k"]) -> Float[Array, "dk dk"]:
    """(d, d', k, l) blocks → the (D·K)×(D·K) matrix in column-major vec order (state-major)."""
    d, _, k, _ = blocks.shape
    return blocks.transpose(0, 2, 1, 3).reshape(d * k, d * k)
