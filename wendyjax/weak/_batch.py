"""Weak likelihoods of many datasets at once: the build of studies, sweeps and bootstraps
(a single fit is a batch of one).

What depends only on the grid is computed once per grid and shared: the candidate radii
and their probes, and the basis of every radius some dataset selects (on the host, cached).
What depends on the data is one compiled, batched computation for all datasets: the
radius search, the noise estimate and, per chunk of datasets, the stacked weak problem
with the precomputed blocks of the likelihood (on the default device, next to the fits).
"""

import dataclasses
import warnings
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import as_sigma, check_state_columns, user_stacklevel, warn_if_float32
from .._compile import cpu_safe_jit
from .._notes import Notes
from .._typing import ArrayLike
from ..data import Batch, Dataset, Trajectory, as_batch, as_dataset
from ..model import ODEModel
from ..noise import AbstractCountNoise, AbstractNoise, estimate_noise_std, is_log_space
from ._covariance import TABLE_ROWS
from ._general import sensitivity_structure
from ._likelihood import WeakLikelihood
from ._linear import basis_grams, linear_blocks, model_structure, structure_holds
from ._problem import WeakProblem, check_samples, prepare_trajectory
from ._test_functions import (
    RadiusSelection,
    TestFunctionConfig,
    TestFunctionInfo,
    TestFunctions,
    _cached_basis,
    select_radii,
)

# WENDy.jl's noiseless test: min σ̂ / max|U| below this means no measurable noise
NOISELESS_RATIO = 1e-8


@cpu_safe_jit
def _basis_grams(phi, dphi):
    """[`basis_grams`][wendyjax.weak._linear.basis_grams] of every basis of every trajectory."""
    return jax.vmap(jax.vmap(basis_grams))(phi, dphi)


@cpu_safe_jit
def _noise_levels(u):
    """The noise estimate of every dataset `(R, n, D)` → `(R, D)`."""
    return jax.vmap(estimate_noise_std)(u)


@cpu_safe_jit
def _assemble(phi, dphi, kmask, grams0, index, u, t, sigma, log_space) -> WeakProblem:
    """The stacked weak problems (leading axes: datasets, trajectories) of the datasets
    whose basis indices are `index` `(R, T)`, gathered from the per-basis tables `phi`,
    `dphi` `(T, B, K, N)`, `kmask` `(T, B, K)` and `grams0` `(T, B, 3, K, K)`
    ([`basis_grams`][wendyjax.weak._linear.basis_grams])."""
    r, n_slots = index.shape
    slot = jnp.arange(n_slots)[None, :]
    phi, dphi, kmask, grams0 = (x[slot, index] for x in (phi, dphi, kmask, grams0))
    b = -jnp.einsum("rtkn,rtnd->rtdk", dphi, u).reshape(r, n_slots, -1)
    return WeakProblem(phi, dphi, grams0[:, :, 2], kmask, u, jnp.broadcast_to(t, (r, *t.shape)), b, sigma, log_space)


@cpu_safe_jit
def _blocks(model, structure, log_space, phi, dphi, grams0, index, u, t, sigma, sequential, shared):
    """The [`LinearBlocks`][wendyjax.weak.LinearBlocks] of the stacked problems of
    [`_assemble`][], every trajectory reading its basis from the tables (flattened over
    trajectories and bases). `shared`: all datasets test each trajectory against one basis,
    and its pairs' Grams are formed together (`linear_blocks`)."""
    r, n_slots = index.shape
    if shared:
        slots = [
            linear_blocks(
                model,
                structure,
                log_space,
                (phi[s], dphi[s], grams0[s]),
                index[:, s],
                u[:, s],
                t[:, s],
                sigma[:, s],
                sequential,
                shared=True,
            )
            for s in range(n_slots)
        ]
        return jax.tree.map(lambda *x: jnp.stack(x, axis=1), *slots)
    n_b = phi.shape[1]
    bases = tuple(x.reshape(n_slots * n_b, *x.shape[2:]) for x in (phi, dphi, grams0))
    flat = lambda x: x.reshape(r * n_slots, *x.shape[2:])  # noqa: E731
    blocks = linear_blocks(
        model,
        structure,
        log_space,
        bases,
        flat(jnp.arange(n_slots)[None, :] * n_b + index),
        flat(u),
        flat(t),
        flat(sigma),
        sequential,
    )
    return jax.tree.map(lambda x: x.reshape(r, n_slots, *x.shape[1:]), blocks)


class WeakBatch:
    """The weak likelihoods of a batch of datasets ([`build_batch`][]).

    Holds what every dataset's likelihood is assembled from: per trajectory the grid, the
    data (log data under log-normal noise) and noise levels of every dataset, the test
    functions of every radius some dataset selected (once each) and which one each dataset
    uses. [`likelihoods`][] assembles the stacked likelihoods of any datasets in one
    compiled call on the default device; [`likelihood`][] gives one dataset's.
    """

    def __init__(
        self,
        model,
        log_space,
        diag_reg,
        noiseless,
        structure,
        sensitivity,
        t,
        u,
        sigma,
        index,
        tables,
        infos,
        selections,
    ):
        self.model = model
        self.log_space = log_space
        self.diag_reg = diag_reg
        self.noiseless = noiseless
        self._structure = structure
        self._sensitivity = sensitivity
        self._t, self._u, self._sigma, self._index = t, u, sigma, index
        self._tables = tables
        self._infos = infos  # per trajectory, the TestFunctionInfo of each basis (None: given)
        self._selections = selections  # per trajectory: (radii, errors (R, n), index (R,)) of the search, or None

    def __len__(self) -> int:
        return self._u.shape[0]

    @property
    def n_test_functions(self) -> int:
        """K, the number of test functions every trajectory is padded to."""
        return self._tables[0].shape[2]

    @property
    def linear(self) -> bool:
        """Whether the likelihoods use the precomputed linear-in-parameters blocks."""
        return self._structure is not None

    def test_functions(self, r: int) -> tuple[TestFunctionInfo | None, ...]:
        """How the test functions of dataset `r`'s trajectories were chosen (with the radius
        search's curve where the radius was selected; `None` where they were given)."""
        out = []
        for slot, (infos, selection) in enumerate(zip(self._infos, self._selections)):
            info = infos[self._index[r, slot]]
            if selection is not None:
                radii, errors, index = selection
                info = dataclasses.replace(info, selection=RadiusSelection(radii, errors[r], int(index[r])))
            out.append(info)
        return tuple(out)

    def notes(self) -> list[dict]:
        """Per dataset: K and the minimum radius of its (first) trajectory's test functions."""
        infos = self._infos[0]
        if infos[0] is None:  # given test functions
            return [{} for _ in range(len(self))]
        k = np.array([i.k for i in infos])[self._index[:, 0]]
        radius = np.array([i.radius for i in infos])[self._index[:, 0]]
        return [{"k": int(a), "radius": float(b)} for a, b in zip(k, radius)]

    def likelihoods(self, indices: ArrayLike | Sequence[int] | None = None) -> WeakLikelihood:
        """The likelihoods of the datasets `indices` (default all), stacked along a leading
        axis for `jax.vmap`, assembled in one compiled call on the default device."""
        indices = np.arange(len(self)) if indices is None else np.asarray(indices, int)
        phi, dphi, kmask, grams0 = self._tables
        index, u, sigma = (jnp.asarray(x[indices]) for x in (self._index, self._u, self._sigma))
        # one basis per trajectory for every dataset, and enough pairs' Grams to form together
        shared = (
            self._structure is not None
            and all(np.unique(self._index[indices, s]).size == 1 for s in range(index.shape[1]))
            and len(indices) * len(self._structure.data_pairs) >= TABLE_ROWS
        )
        problem = _assemble(phi, dphi, kmask, grams0, index, u, jnp.asarray(self._t), sigma, self.log_space)
        blocks = None
        if self._structure is not None:  # a compiled call of its own (on CPU 25 % slower inside the gathers')
            blocks = _blocks(
                self.model,
                self._structure,
                self.log_space,
                phi,
                dphi,
                grams0,
                index,
                u,
                problem.t,
                sigma,
                jax.default_backend() == "cpu",
                shared,
            )
        # the model's arrays (its bounds) stacked too, so that every leaf has the leading axis `vmap` maps
        model = jax.tree.map(lambda x: jnp.broadcast_to(x, (len(indices), *jnp.shape(x))), self.model)
        return WeakLikelihood(model, problem, blocks, self.diag_reg, self._sensitivity, self.noiseless)

    def likelihood(self, r: int = 0) -> WeakLikelihood:
        """The likelihood of dataset `r` alone."""
        lik = _first(self.likelihoods([r]))
        return WeakLikelihood(
            self.model,
            lik.problem,
            lik.linear,
            lik.diag_reg,
            lik.sensitivity,
            lik.noiseless,
            Notes(self.test_functions(r)),
        )


@cpu_safe_jit
def _first(tree):
    """The first entry of every leaf (one compiled program, not one per leaf)."""
    return jax.tree.map(lambda x: x[0], tree)


def _bases(t: np.ndarray, u: np.ndarray, test_functions, which: str):
    """The test functions of one trajectory of a batch (`u` `(R, n, D)`): the bases (one per
    radius selected by some dataset, or the given ones), each dataset's basis index `(R,)`,
    and the radius search `(radii, errors, index)` (None where the radius was not searched)."""
    if isinstance(test_functions, TestFunctions):
        if test_functions.phi.shape[1] != len(t):
            raise ValueError(
                f"test functions have {test_functions.phi.shape[1]} columns but {which} has {len(t)} observed samples."
            )
        return [test_functions], np.zeros(len(u), int), None
    config = test_functions
    if config.radius is not None:
        return [_cached_basis(t.tobytes(), float(config.radius), config)], np.zeros(len(u), int), None
    radii, errors, index = select_radii(t, u, config)
    chosen, basis = np.unique(index, return_inverse=True)
    return (
        [_cached_basis(t.tobytes(), float(radii[i]), config) for i in chosen],
        basis.reshape(-1),
        (radii, errors, index),
    )


def _tables(bases: list[list[TestFunctions]], k: int, n: int):
    """Per-basis tables `phi`, `dphi` `(T, B, K, N)` (B the most bases of a trajectory; zero
    padding), their masks and their Grams."""
    n_b = max(len(b) for b in bases)
    phi = np.zeros((len(bases), n_b, k, n))
    dphi = np.zeros_like(phi)
    kmask = np.zeros((len(bases), n_b, k))
    for s, slot in enumerate(bases):
        for i, tf in enumerate(slot):
            kk, nn = tf.phi.shape
            phi[s, i, :kk, :nn] = np.asarray(tf.phi)
            dphi[s, i, :kk, :nn] = np.asarray(tf.dphi)
            kmask[s, i, :kk] = np.asarray(tf.mask)
    phi, dphi, kmask = (jnp.asarray(x) for x in (phi, dphi, kmask))
    return phi, dphi, kmask, _basis_grams(phi, dphi)


def _pad_rows(x: np.ndarray, n: int, axis: int) -> np.ndarray:
    """`x` padded along `axis` to length `n` by repeating its last entry."""
    extra = n - x.shape[axis]
    return x if not extra else np.concatenate([x, np.repeat(np.take(x, [-1], axis=axis), extra, axis=axis)], axis=axis)


def _linear_path(model, linear, log_space, u, t):
    """The linear-in-parameters structure to use (None: the general path) and, for the
    general path, the sensitivity structure; `u` `(R, T, N, D)`, `t` `(T, N)`."""
    requested = linear
    if linear is None:
        linear = model.linear_in_params
    if linear and not model.linear_in_params:
        raise ValueError(
            f"linear=True, but model '{model.name}' is not linear in its parameters "
            f"(declare linear_in_params=True on the model if detection is wrong)."
        )
    times = jnp.broadcast_to(jnp.asarray(t), u.shape[:3])
    if linear:
        structure = model_structure(model.rhs, log_space, model.n_states, model.n_params)
        if bool(structure_holds(model, structure, jnp.asarray(u), times, log_space)):
            return structure, None
        message = (
            f"the Jacobian structure of model '{model.name}' found at random states and times "
            f"t in [0.5, 1.5] (its zero and constant entries) does not hold on the data (e.g. a term "
            f"switched on at other times)"
        )
        if requested:
            raise ValueError(message + "; the linear-in-parameters path cannot be used (linear=True).")
        warnings.warn(
            message + "; using the general path (correct, slower).", RuntimeWarning, stacklevel=user_stacklevel()
        )
    return None, sensitivity_structure(model, jnp.asarray(u), times, log_space)


def build_batch(
    model: ODEModel,
    data: "Batch | list",
    noise: "str | AbstractNoise | AbstractCountNoise" = "gaussian",
    *,
    sigma: ArrayLike | None = None,
    test_functions: "TestFunctionConfig | TestFunctions | list[TestFunctions]" = TestFunctionConfig(),
    k: int | None = None,
    linear: bool | None = None,
    diag_reg: float = 1e-10,
) -> WeakBatch:
    """The weak likelihoods of many datasets of `model` on shared grids: a
    [`Batch`][wendyjax.Batch] (or a list of datasets on the same grids), with the options
    of [`weak_likelihood`][wendyjax.weak_likelihood]. Every dataset is checked as a single
    fit's would be, before any heavy work; the test functions are padded to one K for all
    (`k`, when given, must be at least their largest K). `test_functions` given as test
    functions (one set, or one per trajectory) are used for every dataset."""
    if not isinstance(model, ODEModel):
        raise TypeError(f"model must be an ODEModel, got {type(model).__name__}.")
    if not 0 <= diag_reg < 1:
        raise ValueError(f"diag_reg must lie in [0, 1), got {diag_reg}.")
    warn_if_float32("weak likelihood")
    batch = as_batch(data)
    for i, t in enumerate(batch.t):
        if np.any(np.diff(t) == 0):
            Dataset([Trajectory(t, batch.u[i][0])]).require_distinct_times("the weak form (WENDy)")
    if isinstance(noise, AbstractCountNoise):
        raise ValueError(
            f"the weak form (WENDy) has Gaussian and log-normal likelihoods only; counts with "
            f"{type(noise).__name__} noise are fitted by output error: wj.OutputError().fit(model, data, "
            f"p0, noise=wj.{type(noise).__name__}(...))."
        )
    log_space = is_log_space(noise)
    d = model.n_states
    check_state_columns(batch.n_states, model)
    given = None if sigma is None else as_sigma(sigma, d, zero_ok=True)
    n_slots = batch.n_trajectories
    which = [f"trajectory {i}" if n_slots > 1 else "the trajectory" for i in range(n_slots)]
    prepared = [prepare_trajectory(t, u, m, log_space, w) for t, u, m, w in zip(batch.t, batch.u, batch.mask, which)]
    check_samples([t for t, _ in prepared], test_functions, sigma)
    if isinstance(test_functions, (TestFunctionConfig, TestFunctions)):
        per_slot = [test_functions] * n_slots
    else:
        per_slot = list(test_functions)
        if len(per_slot) != n_slots:
            raise ValueError(f"got {len(per_slot)} sets of test functions for {n_slots} trajectories.")
    built = [_bases(t, u, tf, w) for (t, u), tf, w in zip(prepared, per_slot, which)]
    k_most = max(tf.k for bases, _, _ in built for tf in bases)
    n = max(len(t) for t, _ in prepared)
    if k is None:
        k = k_most
    elif k < k_most:
        raise ValueError(f"k={k} is smaller than the {k_most} test functions of some trajectory.")
    elif k > n:
        raise ValueError(
            f"k={k} exceeds the {n} samples of the longest trajectory: there are at most that many "
            f"independent test functions, so padding beyond them only costs memory and time (k pads "
            f"every trajectory to the same count for batching; {k_most} are in use)."
        )
    u = np.stack([_pad_rows(x, n, 1) for _, x in prepared], axis=1)  # (R, T, N, D)
    t = np.stack([_pad_rows(x, n, 0) for x, _ in prepared])  # (T, N)
    if given is not None:
        sigma_all = np.broadcast_to(given, (len(batch), n_slots, d))
    else:
        sigma_all = np.stack([np.asarray(_noise_levels(jnp.asarray(x))) for _, x in prepared], axis=1)
    scale = np.max(np.abs(u), axis=2)  # (R, T, D)
    noiseless = np.min(sigma_all / np.where(scale > 0, scale, 1.0), axis=(1, 2)) < NOISELESS_RATIO
    if noiseless.any() and not noiseless.all():
        raise ValueError(
            f"datasets {np.flatnonzero(noiseless)[:5].tolist()} of the batch look noiseless (estimated "
            f"noise / max|U| < {NOISELESS_RATIO:g}) and the others do not: their fits differ (weak least "
            f"squares for noiseless data), so fit them in separate batches."
        )
    structure, sensitivity = _linear_path(model, linear, log_space, u, t)
    return WeakBatch(
        model=model,
        log_space=log_space,
        diag_reg=diag_reg,
        noiseless=bool(noiseless[0]),
        structure=structure,
        sensitivity=sensitivity,
        t=t,
        u=u,
        sigma=np.ascontiguousarray(sigma_all),
        index=np.stack([index for _, index, _ in built], axis=1),
        tables=_tables([bases for bases, _, _ in built], k, n),
        infos=[[tf.info for tf in bases] for bases, _, _ in built],
        selections=[s for _, _, s in built],
    )


def weak_likelihood(
    model: ODEModel,
    data: "Trajectory | Dataset | list[Trajectory]",
    noise: "str | AbstractNoise | AbstractCountNoise" = "gaussian",
    *,
    sigma: ArrayLike | None = None,
    test_functions: "TestFunctionConfig | TestFunctions | list[TestFunctions]" = TestFunctionConfig(),
    k: int | None = None,
    linear: bool | None = None,
    diag_reg: float = 1e-10,
) -> WeakLikelihood:
    r"""Build the weak negative log-likelihood of `model` on `data`.

    - `noise`: `"gaussian"` (additive, Rummel et al. 2025, eq. 19) or `"lognormal"` (multiplicative,
      Rummel et al. 2025, eq. 20; the residual is formed for $x = \log u$), or a noise model.
    - `sigma`: noise standard deviation per state (log scale for log-normal); estimated
      from the data when `None` (Bortz et al. 2023, §2.2).
    - `test_functions`: configuration or prebuilt test functions (one per trajectory); `k`
      pads to a fixed K.
    - `linear`: use the precomputed linear-in-parameters path; defaults to
      `model.linear_in_params`. Forcing it on a nonlinear model raises.
    - `diag_reg`: α in $(1-\alpha)S + \alpha I$.
    """
    if not isinstance(model, ODEModel):
        raise TypeError(f"model must be an ODEModel, got {type(model).__name__}.")
    dataset = as_dataset(data)
    return build_batch(
        model,
        Batch.from_datasets([dataset]),
        noise,
        sigma=sigma,
        test_functions=test_functions,
        k=k,
        linear=linear,
        diag_reg=diag_reg,
    ).likelihood(0)
