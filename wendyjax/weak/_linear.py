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
the Grams of structurally non-zero entries are formed, and entries that are constant
multiples of one another (or constants) share one. As $S$ is symmetric it is kept as
$S = M + M^T$, with each Gram placed once in $M$ (the $\dot\Phi$–$\Phi$ Grams stand for
their transposes too): 13 Grams for Lorenz and 10 for Hindmarsh–Rose, where the
$(J+1)(J+2)/2$ dense $(a, b)$ blocks of $D \times D$ products need 270 and 1782 (and
$(J+1)(J+2)/2$ matrices of size $DK\times DK$ in memory). The structure is found by
evaluating the Jacobians at random states (as linearity is detected), and $S(p)$,
$\partial_i S$ and the contractions $\langle X, \partial_i S\rangle$ are small products of
coefficient matrices with the stacked Grams.
"""

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from .._compile import cpu_safe_jit
from ._covariance import symmetric_grams, table_grams, weighted_grams
from ._problem import log_space_rhs, sample_chunks


class LinearBlocks(eqx.Module):
    r"""Precomputed pieces of the linear-in-parameters path (leading axis $R$: trajectories).

    - `G`: $(R, DK, J)$ and `g0`: $(R, DK)$ with $g(p) = G p + g_0$.
    - `grams`: $(R, N_g, K, K)$ weighted Gram matrices.
    - `weights`: $(R, N_t)$ the noise-variance factor of each term.
    - static `term_gram`, `term_block`, `term_a`, `term_b`: term $t$ adds
      `weights[t]` $\tilde p_a\tilde p_b$ `grams[term_gram[t]]` to block
      `term_block[t]` $= dD + f$ of $M$, and $S = M + M^T$.
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
        r"""$M + M^T$ with $M = \sum_t$ `coef[t]` $\cdot$ Gram$_t$ placed in its block, as
        $(R, DK, DK)$ matrices (for every leading index of `coef`: one product for several
        coefficient sets)."""
        to_block, to_gram = self._onehots()
        lead = coef.shape[:-2]
        r, n_g, k, _ = self.grams.shape
        d = self.n_states
        coef = coef.reshape(-1, r, coef.shape[-1])
        n_s = coef.shape[0]
        c = jnp.einsum("bt,srt,tg->rsbg", to_block, coef, to_gram).reshape(r, n_s * d * d, n_g)
        blocks = c @ self.grams.reshape(r, n_g, k * k)  # (r, s·D², K²): one batched product
        # a single copy into the state-major layout (s, r, d, k, f, l)
        blocks = blocks.reshape(r, n_s, d, d, k, k).transpose(1, 0, 2, 4, 3, 5).reshape(*lead, r, d * k, d * k)
        return blocks + jnp.swapaxes(blocks, -1, -2)

    def derivative_pattern(self) -> tuple[tuple[int, int, int], ...]:
        r"""The blocks $(i, d, f)$ where $\partial_{p_i} S$ is not identically zero, in
        order. A parameter that enters one equation touches only that block row and
        column (5 of Lorenz's 9 blocks for σ and ρ, 3 for β)."""
        n_params = self.G.shape[-1]
        touched = {
            (i, *divmod(blk, self.n_states))
            for blk, a, b in zip(self.term_block, self.term_a, self.term_b)
            for i in range(n_params)
            if i + 1 in (a, b)
        }  # the blocks of ∂_i M; ∂_i S = ∂_i M + (∂_i M)ᵀ adds their mirror images
        return tuple(sorted(touched | {(i, f, d) for i, d, f in touched}))

    def derivative_blocks(self, dcoef: Float[Array, "j r t"]) -> Float[Array, "r b k k"]:
        r"""The blocks of [`derivative_pattern`][] of $\sum_t$ `dcoef[i, :, t]` Gram$_t$ (the
        derivatives $\partial_i S$ for `dcoef` $= \partial_i c$): the blocks of $\partial_i M$,
        as one product, each plus its mirror image's transpose."""
        to_block, to_gram = self._onehots()
        r, n_g, k, _ = self.grams.shape
        found = self.derivative_pattern()
        pattern = np.array(found, dtype=int).reshape(-1, 3)  # (0, 3) if p never enters J
        mirror = np.array([found.index((i, f, d)) for i, d, f in found], dtype=int)
        c = jnp.einsum("bt,jrt,tg->rjbg", to_block, dcoef, to_gram)  # (r, j, D², n_g)
        c = c[:, pattern[:, 0], pattern[:, 1] * self.n_states + pattern[:, 2]]  # (r, b, n_g)
        blocks = (c @ self.grams.reshape(r, n_g, k * k)).reshape(r, len(pattern), k, k)
        return blocks + jnp.swapaxes(blocks[:, mirror], -1, -2)

    def contract(self, x: Float[Array, "r dk dk"]) -> Float[Array, "r t"]:
        r"""$\langle X, G_t + G_t^T\rangle = \langle X + X^T, G_t\rangle$ for every term $t$, $G_t$
        its Gram placed in its block of $M$ (the derivative of $S$ by its coefficient)."""
        r, n_g, k, _ = self.grams.shape
        d = self.n_states
        x = x + jnp.swapaxes(x, -1, -2)
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
    return np.asarray(_sample_jacobians(rhs, u, t, n_params))


def _scale(jacs: np.ndarray) -> float:
    """The magnitude below which an entry counts as zero, relative to: its largest finite
    entry (at least 1), as [`structure_holds`][] measures it on the data."""
    return max(float(np.max(np.abs(np.where(np.isfinite(jacs), jacs, 0.0)), initial=0.0)), 1.0)


def _nonzero(jacs: np.ndarray) -> np.ndarray:
    """Entries above 1e-12 of [`_scale`][] at some random state, or NaN there: the log-space
    rhs $f(e^x)/e^x$ leaves rounding-level values where the entry vanishes analytically."""
    return np.any((np.abs(jacs) > 1e-12 * _scale(jacs)) | np.isnan(jacs), axis=1)


def jacobian_pattern(rhs, n_states: int, n_params: int, seed: int = 0) -> np.ndarray:
    r"""Which entries of $J^a = \partial_u\partial_{\tilde p_a} f$ ($a = 0$: $\partial_u f$ at
    $p = 0$) are not identically zero: `(J + 1, D, D)` booleans from three random states,
    times and parameter-free evaluations (NaN counts as non-zero)."""
    return _nonzero(_random_jacobians(rhs, n_states, n_params, seed))


class Structure(NamedTuple):
    r"""Which Grams a model's $S(p)$ needs ([`model_structure`][]).

    Every structurally non-zero entry $(a, i, j)$ of the $J^a$ (`entries`) is `scale` times
    a function of the state: the constant 1 (class −1, e.g. the $-\sigma$ of Lorenz's
    $\sigma(y - x)$) or the entry `classes[m]` (class m); entries of one class differ only
    by a constant factor (Lorenz's $-x$ and $x$). A Gram's weight is a product of class
    functions, so one Gram serves every term whose weight is a multiple of it:

    - `pairs`: the classes $(m, m')$, $m \le m'$, of $\Phi\,\mathrm{diag}(f_m f_{m'})\Phi^T$;
    - `singles`: the class $m$ of $\dot\Phi\,\mathrm{diag}(f_m)\Phi^T$;
    - `terms`: `(gram, block, a, b, variance state, factor)`: term $t$ adds $\sigma_e^2\,$
      `factor` $\tilde p_a\tilde p_b$ Gram to block $dD + f$ of $M$, where $S = M + M^T$
      (a product of two entries, or a $\dot\Phi$–$\Phi$ Gram, placed once; the square of
      an entry and $\dot\Phi\dot\Phi^T$ at half its factor).

    Gram order: the `pairs`, the `singles`, $\dot\Phi\dot\Phi^T$. Grams of the constant
    class alone ($\Phi\Phi^T$, $\dot\Phi\Phi^T$) depend on the test functions only and are
    formed once per basis.
    """

    entries: tuple[tuple[int, int, int], ...]
    entry_class: tuple[int, ...]
    entry_scale: tuple[float, ...]
    classes: tuple[tuple[int, int, int], ...]
    pairs: tuple[tuple[int, int], ...]
    singles: tuple[int, ...]
    terms: tuple[tuple[int, int, int, int, int, float], ...]

    @property
    def data_pairs(self) -> tuple[tuple[int, int], ...]:
        """The `pairs` whose Grams depend on the data (not the constant class's own)."""
        return tuple(c for c in self.pairs if c != (-1, -1))


def _classes(jacs: np.ndarray, entries) -> tuple[list[int], list[float], list[tuple[int, int, int]]]:
    """Class and scale of every entry from its values at the random states `jacs[a, :, i, j]`:
    constant (class −1, scale its value), a constant multiple of an earlier class's
    representative, or a class of its own (scale 1); equal to 1e-12 of [`_scale`][], the
    tolerance of [`structure_holds`][]. NaN values never merge."""
    tol = 1e-12 * _scale(jacs)
    cls, scale, reps = [], [], []
    for a, i, j in entries:
        v = jacs[a, :, i, j]
        if np.all(np.isfinite(v)) and np.all(np.abs(v - v[0]) <= tol):
            cls.append(-1)
            scale.append(float(v[0]))
            continue
        for m, rep in enumerate(reps):
            r = jacs[rep[0], :, rep[1], rep[2]]
            k = np.argmax(np.abs(r))
            if np.all(np.isfinite(v)) and np.all(np.isfinite(r)) and r[k] != 0:
                c = v[k] / r[k]
                if np.all(np.abs(v - c * r) <= tol):
                    cls.append(m)
                    scale.append(float(c))
                    break
        else:
            cls.append(len(reps))
            scale.append(1.0)
            reps.append((a, i, j))
    return cls, scale, reps


def term_structure(pattern: np.ndarray, entry_class=None, entry_scale=None) -> Structure:
    """The Grams to form and the terms that place them, from a Jacobian pattern and the
    class and scale of every entry (default: every entry its own class, scale 1)."""
    n_states = pattern.shape[1]
    entries = [(int(a), int(i), int(j)) for a, i, j in zip(*np.nonzero(pattern))]
    cls = list(range(len(entries))) if entry_class is None else list(entry_class)
    scale = [1.0] * len(entries) if entry_scale is None else list(entry_scale)
    pairs, terms = {}, []
    for e in range(n_states):
        col = [(n, a, d) for n, (a, d, ee) in enumerate(entries) if ee == e]
        for i, (n, a, d) in enumerate(col):
            for m, b, f in col[i:]:
                # Gram G in blocks (d, f) and (f, d) of S (their sum when n ≠ m): G in (d, f) of M
                g = pairs.setdefault(tuple(sorted((cls[n], cls[m]))), len(pairs))
                terms.append((g, d * n_states + f, a, b, e, scale[n] * scale[m] * (0.5 if n == m else 1.0)))
    singles = dict.fromkeys(cls)
    singles = {c: g for g, c in enumerate(singles)}
    n_p, n_s = len(pairs), len(singles)
    for n, (a, i, j) in enumerate(entries):
        # σ_j² Φ̇ diag(J^a_ij) Φᵀ in block (j, i) of S and its transpose in (i, j): the first in M
        terms.append((n_p + singles[cls[n]], j * n_states + i, a, 0, j, scale[n]))
    for d in range(n_states):
        terms.append((n_p + n_s, d * n_states + d, 0, 0, d, 0.5))  # σ_d² Φ̇Φ̇ᵀ
    reps: list = [None] * (max(cls, default=-1) + 1)
    for n, c in enumerate(cls):
        if c >= 0 and reps[c] is None:
            reps[c] = entries[n]
    return Structure(tuple(entries), tuple(cls), tuple(scale), tuple(reps), tuple(pairs), tuple(singles), tuple(terms))


@functools.lru_cache(maxsize=64)
def model_structure(rhs, log_space: bool, n_states: int, n_params: int) -> Structure:
    r"""The [`Structure`][] of a model's rhs (in log space for log-normal noise), cached: the
    pattern and the classes of its Jacobian entries from three random states and times
    (checked on the data by [`structure_holds`][]). Lorenz needs 13 Grams per trajectory
    where one per pair of entries would be 29, and forms 10 of them from its data."""
    f = log_space_rhs(rhs) if log_space else rhs
    jacs = _random_jacobians(f, n_states, n_params, seed=0)
    pattern = _nonzero(jacs)
    entries = [(int(a), int(i), int(j)) for a, i, j in zip(*np.nonzero(pattern))]
    cls, scale, _ = _classes(jacs, entries)
    return term_structure(pattern, cls, scale)


def basis_grams(phi: Float[Array, "k n"], dphi: Float[Array, "k n"]) -> Float[Array, "3 k k"]:
    r"""The Grams of the test functions alone: $\Phi\Phi^T$, $\dot\Phi\Phi^T$, $\dot\Phi\dot\Phi^T$."""
    return jnp.stack([phi @ phi.T, dphi @ phi.T, dphi @ dphi.T])


def _sample_jacobians(rhs, u, t, n_params) -> Float[Array, "a n d d"]:
    r"""$J^a$ at every sample: `(J + 1, n, D, D)`."""

    def jacobians(u, zero, t):
        jac0 = jax.vmap(jax.jacfwd(rhs, argnums=0), in_axes=(0, None, 0))(u, zero, t)
        jacp = jax.vmap(jax.jacfwd(jax.jacfwd(rhs, argnums=0), argnums=1), in_axes=(0, None, 0))(u, zero, t)
        return jnp.concatenate([jac0[None], jnp.moveaxis(jacp, 3, 0)])

    return cpu_safe_jit(jacobians)(u, jnp.zeros(n_params, u.dtype), t)


def _class_function(structure: Structure, jacs, c: int):
    """Class `c`'s function of the state at every sample (the constant class: 1)."""
    if c < 0:
        return jnp.ones(jacs.shape[1], jacs.dtype)
    a, i, j = structure.classes[c]
    return jacs[a, :, i, j]


def linear_blocks_single(rhs, structure: Structure, phi, dphi, grams0, u, t, sigma, n_params, pairs=True):
    """G, g0, Grams and term weights of one trajectory; `grams0` from [`basis_grams`][].
    Without `pairs` the Grams leave out the pairs' data Grams (the products of two
    non-constant classes' functions), formed for many trajectories at once by
    `table_grams` from the weights `(Q, n)` returned fifth (None with `pairs`)."""
    zero = jnp.zeros(n_params, u.dtype)
    vf = jax.vmap(rhs, in_axes=(0, None, 0))
    g0 = (phi @ vf(u, zero, t)).T.reshape(-1)
    dfdp = jax.vmap(jax.jacfwd(rhs, argnums=1), in_axes=(0, None, 0))(u, zero, t)  # (n, d, j)
    G = jnp.einsum("kn,ndj->dkj", phi, dfdp).reshape(-1, n_params)
    f = functools.partial(_class_function, structure, _sample_jacobians(rhs, u, t, n_params))
    w_pairs = jnp.stack([f(m) * f(n) for m, n in structure.data_pairs]) if structure.data_pairs else None  # (Q, n)
    pair_grams = iter(symmetric_grams(phi, w_pairs.T) if pairs and w_pairs is not None else ())
    singles = [c for c in structure.singles if c != -1]
    single_grams = iter(weighted_grams(dphi, phi, jnp.stack([f(m) for m in singles], axis=1)) if singles else ())
    grams = jnp.stack(
        [grams0[0] if c == (-1, -1) else next(pair_grams) for c in structure.pairs if pairs or c == (-1, -1)]
        + [grams0[1] if c == -1 else next(single_grams) for c in structure.singles]
        + [grams0[2]]
    )
    terms = np.array(structure.terms)
    weights = sigma[terms[:, 4].astype(int)] ** 2 * jnp.asarray(terms[:, 5], u.dtype)
    return G, g0, grams, weights, None if pairs else w_pairs


@cpu_safe_jit
def structure_holds(model, structure: Structure, u, t, log_space: bool) -> Bool[Array, ""]:
    r"""Whether the [`Structure`][] found at random states (which $J^a$ entries vanish, and
    which are constant multiples of others or constants) holds at every sample `u` `(..., D)`
    at times `t` `(...)`: an entry that is non-zero, or varies differently, only at times or
    states the random probes missed (e.g. a rate switched on at t = 20) would otherwise drop
    or misweight a Gram of $S$."""
    rhs = log_space_rhs(model.rhs) if log_space else model.rhs
    mask = np.zeros((model.n_params + 1, model.n_states, model.n_states), bool)
    for a, i, j in structure.entries:
        mask[a, i, j] = True
    derived = [
        (e, c, s)
        for e, c, s in zip(structure.entries, structure.entry_class, structure.entry_scale)
        if c < 0 or structure.classes[c] != e
    ]  # every entry but the classes' own representatives

    # (max |off-pattern entry|, max |entry|, max misfit of a derived entry) over some samples
    def check(rows: tuple[Array, Array]):
        jacs = _sample_jacobians(rhs, *rows, model.n_params)  # (J+1, n, D, D)
        off = jnp.max(jnp.abs(jnp.where(mask[:, None], 0.0, jacs)))
        # entries that are NaN on the data (e.g. log of a parameter at p = 0) are not a structure
        # violation: they keep their Grams, and ℓ reports them as non-finite
        big = jnp.max(jnp.abs(jnp.where(mask[:, None] & jnp.isfinite(jacs), jacs, 0.0)))
        misfit = jnp.max(
            jnp.stack(
                [jnp.zeros((), jacs.dtype)]
                + [
                    jnp.max(jnp.abs(jacs[a, :, i, j] - s * _class_function(structure, jacs, c)))
                    for (a, i, j), c, s in derived
                ]
            )
        )
        return off, big, misfit

    off, big, misfit = (jnp.max(x) for x in jax.lax.map(check, sample_chunks(u, t)))
    scale = jnp.maximum(big, 1.0)
    return (off <= 1e-12 * scale) & (misfit <= 1e-12 * scale)


@cpu_safe_jit
def linear_blocks(
    model,
    structure: Structure,
    log_space: bool,
    bases,
    index,
    u,
    t,
    sigma,
    sequential: bool = False,
    shared: bool = False,
) -> LinearBlocks:
    """The [`LinearBlocks`][] of trajectories `u` `(R, N, D)` at times `t` `(R, N)` with noise
    levels `sigma` `(R, D)`, trajectory `r` tested against basis `index[r]` of `bases` =
    (`phi`, `dphi` `(B, K, N)`, [`basis_grams`][] `(B, 3, K, K)`). `sequential` forms them
    one trajectory after another (faster on CPU, where batched products are slower per
    trajectory than unbatched ones, and every one reads the few shared bases from cache),
    else vmapped. `shared` (only where every `index` is the same: the basis is read from
    `index[0]`): the pairs' data Grams of all trajectories are formed together
    (`table_grams`)."""
    rhs = log_space_rhs(model.rhs) if log_space else model.rhs
    phi, dphi, grams0 = bases
    shared = shared and bool(structure.data_pairs)

    def one(args):
        i, u, t, sigma = args
        return linear_blocks_single(rhs, structure, phi[i], dphi[i], grams0[i], u, t, sigma, model.n_params, not shared)

    args = (index, u, t, sigma)
    G, g0, grams, weights, w = jax.lax.map(one, args) if sequential else jax.vmap(one)(args)
    if w is not None:  # shared: the pairs' data Grams of all trajectories from one product table, in their places
        (r, q, n), k = w.shape, phi.shape[1]
        table = iter(jnp.unstack(table_grams(phi[index[0]], w.reshape(r * q, n)).reshape(r, q, k, k), axis=1))
        rest = iter(jnp.unstack(grams, axis=1))
        grams = jnp.stack([next(rest) if c == (-1, -1) else next(table) for c in structure.pairs] + list(rest), axis=1)
    cols = list(zip(*structure.terms))
    return LinearBlocks(
        G, g0, grams, weights, tuple(cols[0]), tuple(cols[1]), tuple(cols[2]), tuple(cols[3]), u.shape[-1]
    )
