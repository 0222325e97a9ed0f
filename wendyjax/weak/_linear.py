r"""Precomputed covariance pieces for models affine in the parameters (Rummel et al. 2025, App. B).

For $f(u, p, t) = f_0(u, t) + \sum_j p_j f_j(u, t)$ the state Jacobian is
$J(p) = \sum_a \tilde p_a J^a$ with $\tilde p = (1, p)$, $J^0 = \partial_u f_0$ and
$J^j = \partial_u f_j$, and the residual covariance (Rummel et al. 2025, Prop. 2) is, block by block,

$$S_{df}(p) = \sum_e \sigma_e^2\,\Phi\,\mathrm{diag}(J_{de}J_{fe})\,\Phi^T
 + \sigma_d^2\,\dot\Phi\,\mathrm{diag}(J_{fd})\,\Phi^T
 + \sigma_f^2\,\Phi\,\mathrm{diag}(J_{df})\,\dot\Phi^T
 + \delta_{df}\sigma_d^2\,\dot\Phi\dot\Phi^T ,$$

a quadratic polynomial in $p$ whose coefficients are $K\times K$ weighted Gram matrices.
Most entries $J^a_{de}$ vanish identically (each parameter multiplies one term), so only
the Grams of structurally non-zero entries are formed: 38 Grams for Lorenz and 33 for
Hindmarsh–Rose, where the $(J+1)(J+2)/2$ dense $(a, b)$ blocks of $D \times D$ products
need 270 and 1782 (and $(J+1)(J+2)/2$ matrices of size $DK\times DK$ in memory). The
structure is found by evaluating the Jacobians at random states (as linearity is
detected), and $S(p)$, $\partial_i S$ and the contractions $\langle X, \partial_i S\rangle$
are small products of coefficient matrices with the stacked Grams.
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from .._compile import cpu_safe_jit
from ._covariance import weighted_grams
from ._problem import log_space_rhs


class LinearBlocks(eqx.Module):
    r"""Precomputed pieces of the linear-in-parameters path (leading axis $R$: trajectories).

    - `G`: $(R, DK, J)$ and `g0`: $(R, DK)$ with $g(p) = G p + g_0$.
    - `grams`: $(R, N_g, K, K)$ weighted Gram matrices.
    - `weights`: $(R, N_t)$ the noise-variance factor of each term.
    - static `term_gram`, `term_block`, `term_a`, `term_b`: term $t$ adds
      `weights[t]` $\tilde p_a\tilde p_b$ `grams[term_gram[t]]` to block
      `term_block[t]` $= dD + f$ of $S$.
    """

    G: Float[Array, "r dk j"]
    g0: Float[Array, "r dk"]
    grams: Float[Array, "r g k k"]
    weights: Float[Array, "r t"]
    term_gram: tuple[int, ...] = eqx.field(static=True)
    term_block: tuple[int, ...] = eqx.field(static=True)
    term_a: tuple[int, ...] = eqx.field(static=True)
    term_b: tuple[int, ...] = eqx.field(static=True)
    n_states: int = eqx.field(static=True)

    def _onehots(self):
        n_g, d2 = self.grams.shape[1], self.n_states**2
        t = np.arange(len(self.term_gram))
        to_gram = np.zeros((len(t), n_g))
        to_gram[t, self.term_gram] = 1.0
        to_block = np.zeros((d2, len(t)))
        to_block[self.term_block, t] = 1.0
        return to_block, to_gram

    def term_coefficients(self, p: Float[Array, " j"]) -> Float[Array, "r t"]:
        r"""The coefficient of every Gram term: its noise variance times $\tilde p_a\tilde p_b$, $\tilde p = (1, p)$."""
        pt = jnp.concatenate([jnp.ones(1, p.dtype), p])
        return self.weights * (pt[np.array(self.term_a)] * pt[np.array(self.term_b)])

    def assemble(self, coef: Float[Array, "*s r t"]) -> Float[Array, "*s r dk dk"]:
        r"""$\sum_t$ `coef[t]` $\cdot$ Gram$_t$ placed in its block, as $(R, DK, DK)$ matrices
        (for every leading index of `coef`: one product for several coefficient sets)."""
        to_block, to_gram = self._onehots()
        lead = coef.shape[:-2]
        r, n_g, k, _ = self.grams.shape
        d = self.n_states
        coef = coef.reshape(-1, r, coef.shape[-1])
        n_s = coef.shape[0]
        c = jnp.einsum("bt,srt,tg->rsbg", to_block, coef, to_gram).reshape(r, n_s * d * d, n_g)
        blocks = c @ self.grams.reshape(r, n_g, k * k)  # (r, s·D², K²): one batched product
        # a single copy into the state-major layout (s, r, d, k, f, l)
        blocks = blocks.reshape(r, n_s, d, d, k, k).transpose(1, 0, 2, 4, 3, 5)
        return blocks.reshape(*lead, r, d * k, d * k)

    def derivative_pattern(self) -> tuple[tuple[int, int, int], ...]:
        r"""The blocks $(i, d, f)$ where $\partial_{p_i} S$ is not identically zero, in
        order. A parameter that enters one equation touches only that block row and
        column (5 of Lorenz's 9 blocks for σ and ρ, 3 for β)."""
        d = self.n_states
        n_params = self.G.shape[-1]
        touched = {(i, blk) for blk, a, b in zip(self.term_block, self.term_a, self.term_b)
                   for i in range(n_params) if i + 1 in (a, b)}
        return tuple((i, *divmod(blk, d)) for i, blk in sorted(touched))

    def derivative_blocks(self, dcoef: Float[Array, "j r t"]) -> Float[Array, "r b k k"]:
        r"""The blocks of [`derivative_pattern`][] of $\sum_t$ `dcoef[i, :, t]` Gram$_t$ (the
        derivatives $\partial_i S$ for `dcoef` $= \partial_i c$), as one product."""
        to_block, to_gram = self._onehots()
        r, n_g, k, _ = self.grams.shape
        pattern = np.array(self.derivative_pattern(), dtype=int).reshape(-1, 3)  # (0, 3) if p never enters J
        c = jnp.einsum("bt,jrt,tg->rjbg", to_block, dcoef, to_gram)  # (r, j, D², n_g)
        c = c[:, pattern[:, 0], pattern[:, 1] * self.n_states + pattern[:, 2]]  # (r, b, n_g)
        return (c @ self.grams.reshape(r, n_g, k * k)).reshape(r, len(pattern), k, k)

    def contract(self, x: Float[Array, "r dk dk"]) -> Float[Array, "r t"]:
        r"""$\langle X, \text{Gram}_t \text{ in its block}\rangle$ for every term $t$."""
        r, n_g, k, _ = self.grams.shape
        d = self.n_states
        # X's blocks K²-major, so the long contraction is a plain (n_g, K²) @ (K², D²) product
        # (measured 1.7 ms against 3.1 ms for the K²-last layout, Lorenz K = 200)
        xb = x.reshape(r, d, k, d, k).transpose(0, 2, 4, 1, 3).reshape(r, k * k, d * d)
        per = jnp.einsum("rgx,rxb->rbg", self.grams.reshape(r, n_g, k * k), xb)
        return per[:, np.array(self.term_block), np.array(self.term_gram)]


def _random_jacobians(rhs, n_states: int, n_params: int, seed: int) -> np.ndarray:
    r"""$J^a = \partial_u\partial_{\tilde p_a} f$ ($a = 0$: $\partial_u f$ at $p = 0$) at three
    random states and times: `(J + 1, 3, D, D)`."""
    rng = np.random.default_rng(seed)
    u = jnp.asarray(rng.normal(size=(3, n_states)) + 0.5)
    t = jnp.asarray(rng.uniform(0.5, 1.5, size=3))
    zero = jnp.zeros(n_params)
    jac0 = jax.vmap(jax.jacfwd(rhs, argnums=0), in_axes=(0, None, 0))(u, zero, t)
    jacp = jax.vmap(jax.jacfwd(jax.jacfwd(rhs, argnums=0), argnums=1), in_axes=(0, None, 0))(u, zero, t)
    return np.concatenate([np.asarray(jac0)[None], np.moveaxis(np.asarray(jacp), 3, 0)])


def jacobian_pattern(rhs, n_states: int, n_params: int, seed: int = 0) -> np.ndarray:
    r"""Which entries of $J^a = \partial_u\partial_{\tilde p_a} f$ ($a = 0$: $\partial_u f$ at
    $p = 0$) are not identically zero: `(J + 1, D, D)` booleans from three random states,
    times and parameter-free evaluations (NaN counts as non-zero)."""
    jacs = _random_jacobians(rhs, n_states, n_params, seed)
    return np.any((jacs != 0) | np.isnan(jacs), axis=1)


@functools.lru_cache(maxsize=64)
def model_structure(rhs, log_space: bool, n_states: int, n_params: int):
    r"""[`term_structure`][] of a model's rhs (in log space for log-normal noise), cached,
    plus which of its Grams have a constant weight: `(jj, entries, terms, constant_jj,
    constant_entries)`. An entry of $J^a$ equal at the three random states and times is
    constant (e.g. the $-\sigma$ of Lorenz's $\sigma(y - x)$); a Gram whose weight is a
    product of constants is that constant times $\Phi\Phi^T$ (or $\dot\Phi\Phi^T$), formed
    once instead of as its own $K\times N\times K$ product (12 of Lorenz's 28 products)."""
    f = log_space_rhs(rhs) if log_space else rhs
    jacs = _random_jacobians(f, n_states, n_params, seed=0)
    pattern = np.any((jacs != 0) | np.isnan(jacs), axis=1)
    constant = np.all(jacs == jacs[:, :1], axis=1) & np.all(np.isfinite(jacs), axis=1)
    jj, entries, terms = term_structure(pattern)
    return (jj, entries, terms, tuple(bool(constant[a, d, e] and constant[b, f, e]) for (a, d, e), (b, f, _) in jj),
            tuple(bool(constant[e]) for e in entries))


def term_structure(pattern: np.ndarray):
    """The Grams to form and the terms that place them, from a Jacobian pattern.

    Returns `(jj, entries, terms)`: `jj` the pairs of entries sharing a column
    ((a, d, e), (b, f, e)) whose Φ diag(J^a_de J^b_fe) Φᵀ is formed; `entries` the
    non-zero (a, i, j), each giving Φ̇ diag(J^a_ij) Φᵀ and its transpose; `terms`
    (gram, block, a, b, variance state) for every placement. Gram order: the `jj`
    Grams, then the Φ̇ Grams, then their transposes, then Φ̇Φ̇ᵀ.
    """
    n_states = pattern.shape[1]
    entries = [tuple(int(x) for x in e) for e in zip(*np.nonzero(pattern))]
    jj, terms = [], []
    for e in range(n_states):
        col = [(a, d) for a, d, ee in entries if ee == e]
        for i, (a, d) in enumerate(col):
            for b, f in col[i:]:
                g = len(jj)
                jj.append(((a, d, e), (b, f, e)))
                terms.append((g, d * n_states + f, a, b, e))
                if (a, d) != (b, f):
                    terms.append((g, f * n_states + d, a, b, e))
    n_jj, n_e = len(jj), len(entries)
    for m, (a, i, j) in enumerate(entries):
        terms.append((n_jj + m, j * n_states + i, a, 0, j))  # σ_j² Φ̇ diag(J^a_ij) Φᵀ in block (j, i)
        terms.append((n_jj + n_e + m, i * n_states + j, a, 0, j))  # its transpose in block (i, j)
    for d in range(n_states):
        terms.append((n_jj + 2 * n_e, d * n_states + d, 0, 0, d))  # σ_d² Φ̇Φ̇ᵀ
    return jj, entries, terms


def _grams_in_order(left, right, weights, constant):
    r"""$\{L\,\mathrm{diag}(w_q)\,R^T\}_q$ for the weight columns `weights` `(n, q)`: those
    flagged `constant` as $w_q\,LR^T$ (one product for all of them), the rest by
    [`weighted_grams`][]; in the original order."""
    constant = np.asarray(constant, bool)
    var, con = np.flatnonzero(~constant), np.flatnonzero(constant)
    parts = []
    if var.size:
        parts.append(weighted_grams(left, right, weights[:, var]))
    if con.size:
        parts.append(weights[0, con][:, None, None] * (left @ right.T)[None])
    grams = jnp.concatenate(parts)
    return grams if not (var.size and con.size) else grams[np.argsort(np.concatenate([var, con]))]


def _sample_jacobians(rhs, u, t, n_params):
    r"""$J^a$ at every sample: `(J + 1, n, D, D)`."""
    zero = jnp.zeros(n_params, u.dtype)
    jac0 = jax.vmap(jax.jacfwd(rhs, argnums=0), in_axes=(0, None, 0))(u, zero, t)
    jacp = jax.vmap(jax.jacfwd(jax.jacfwd(rhs, argnums=0), argnums=1), in_axes=(0, None, 0))(u, zero, t)
    return jnp.concatenate([jac0[None], jnp.moveaxis(jacp, 3, 0)])


def linear_blocks_single(rhs, structure, phi, dphi, dphi_gram, u, t, sigma, n_params):
    """G, g0, Grams and term weights of one trajectory."""
    jj, entries, terms, constant_jj, constant_entries = structure
    zero = jnp.zeros(n_params, u.dtype)
    vf = jax.vmap(rhs, in_axes=(0, None, 0))
    g0 = (phi @ vf(u, zero, t)).T.reshape(-1)
    dfdp = jax.vmap(jax.jacfwd(rhs, argnums=1), in_axes=(0, None, 0))(u, zero, t)  # (n, d, j)
    G = jnp.einsum("kn,ndj->dkj", phi, dfdp).reshape(-1, n_params)
    jacs = _sample_jacobians(rhs, u, t, n_params)
    k = phi.shape[0]
    parts = []
    if jj:
        w = jnp.stack([jacs[a, :, d, e] * jacs[b, :, f, e] for (a, d, e), (b, f, _) in jj], axis=1)
        parts.append(_grams_in_order(phi, phi, w, constant_jj))
    if entries:
        w = jnp.stack([jacs[a, :, i, j] for a, i, j in entries], axis=1)
        dgrams = _grams_in_order(dphi, phi, w, constant_entries)
        parts += [dgrams, jnp.swapaxes(dgrams, 1, 2)]
    parts.append(dphi_gram.reshape(1, k, k))
    var = sigma**2
    weights = var[np.array([term[4] for term in terms])]
    return G, g0, jnp.concatenate(parts), weights


@cpu_safe_jit
def structure_holds(model, structure, problem) -> Bool[Array, ""]:
    r"""Whether the structure found at random states (which $J^a$ entries vanish, which are
    constant) holds at every sample of the data: an entry that is non-zero, or varies, only
    at times or states the random probes missed (e.g. a rate switched on at t = 20) would
    otherwise drop or misweight a Gram of $S$."""
    rhs = log_space_rhs(model.rhs) if problem.log_space else model.rhs
    _, entries, _, _, constant_entries = structure
    jacs = jax.vmap(lambda u, t: _sample_jacobians(rhs, u, t, model.n_params), out_axes=1)(
        problem.u, problem.t)  # (J+1, r, n, D, D)
    mask = np.zeros(jacs.shape[:1] + jacs.shape[3:], bool)
    for a, i, j in entries:
        mask[a, i, j] = True
    off = jnp.where(mask[:, None, None], 0.0, jacs)
    # entries that are NaN on the data (e.g. log of a parameter at p = 0) are not a structure
    # violation: they keep their Grams, and ℓ reports them as non-finite
    scale = jnp.maximum(jnp.max(jnp.abs(jnp.where(mask[:, None, None] & jnp.isfinite(jacs), jacs, 0.0))), 1.0)
    constant = [jacs[a, :, :, i, j] - jacs[a, :, :1, i, j] for (a, i, j), c in zip(entries, constant_entries) if c]
    spread = jnp.max(jnp.abs(jnp.stack(constant))) if constant else 0.0
    return (jnp.max(jnp.abs(off)) <= 1e-12 * scale) & (spread <= 1e-12 * scale)


@cpu_safe_jit
def linear_blocks(model, structure, problem) -> LinearBlocks:
    """The [`LinearBlocks`][] of every trajectory of a weak problem."""
    rhs = log_space_rhs(model.rhs) if problem.log_space else model.rhs
    n_params = model.n_params
    G, g0, grams, weights = jax.vmap(
        lambda phi, dphi, gram, u, t, sigma: linear_blocks_single(
            rhs, structure, phi, dphi, gram, u, t, sigma, n_params
        )
    )(problem.phi, problem.dphi, problem.dphi_gram, problem.u, problem.t, problem.sigma)
    terms = structure[2]
    cols = list(zip(*terms))
    return LinearBlocks(G, g0, grams, weights, tuple(cols[0]), tuple(cols[1]), tuple(cols[2]), tuple(cols[3]),
                        problem.n_states)
