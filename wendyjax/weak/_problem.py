"""The weak-form problem: test functions and data of every trajectory, padded and stacked."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import as_sigma, warn_if_float32
from ..data import Dataset, Trajectory, as_dataset
from ..model import ODEModel
from ..noise import NOISE_WIDTH, AbstractNoise, estimate_noise_std, is_log_space
from ._test_functions import TestFunctionConfig, TestFunctions, build_test_functions, min_samples


def log_space_rhs(rhs):
    r"""$\tilde f(x, p, t) = f(e^x, p, t) \oslash e^x$, the dynamics of $x = \log u$ (Rummel et al. 2025, §2.6)."""

    def f(x, p, t):
        u = jnp.exp(x)
        return rhs(u, p, t) / u

    return f


class WeakProblem(eqx.Module):
    r"""Arrays of the weak residual for $R$ trajectories (leading axis $R$).

    Every trajectory is padded to common $K$ (zero test functions, `kmask` = 0) and
    common $N$ (zero quadrature columns, repeated last sample), so one vmapped likelihood
    serves datasets of different lengths.

    - `phi`, `dphi`: $(R, K, N)$ test-function matrices with quadrature weights.
    - `dphi_gram`: $(R, K, K)$, $\dot\Phi\dot\Phi^T$ (constant part of $S$).
    - `kmask`: $(R, K)$, 1 for real test functions.
    - `u`, `t`: $(R, N, D)$ and $(R, N)$ data (log data for log-normal noise).
    - `b`: $(R, DK)$, $b = -\mathrm{vec}(\dot\Phi U)$.
    - `sigma`: $(R, D)$ noise standard deviation of `u`.
    """

    phi: Float[Array, "r k n"]
    dphi: Float[Array, "r k n"]
    dphi_gram: Float[Array, "r k k"]
    kmask: Float[Array, "r k"]
    u: Float[Array, "r n d"]
    t: Float[Array, "r n"]
    b: Float[Array, "r dk"]
    sigma: Float[Array, "r d"]
    log_space: bool = eqx.field(static=True)

    @property
    def n_trajectories(self) -> int:
        """Number of trajectories R."""
        return self.phi.shape[0]

    @property
    def n_test_functions(self) -> int:
        """Number of test functions K (padded)."""
        return self.phi.shape[1]

    @property
    def n_states(self) -> int:
        """Number of states D."""
        return self.u.shape[2]

    @property
    def n_residuals(self) -> Array:
        """Number of real (unpadded) residual entries, D·ΣK_r."""
        return self.n_states * jnp.sum(self.kmask)


def _pad_rows(x: np.ndarray, n: int) -> np.ndarray:
    if x.shape[0] == n:
        return x
    return np.concatenate([x, np.repeat(x[-1:], n - x.shape[0], axis=0)])


def _pad_cols(x: np.ndarray, n: int) -> np.ndarray:
    return np.pad(x, ((0, 0), (0, n - x.shape[1])))


def prepare_data(tr: Trajectory, log_space: bool) -> tuple[np.ndarray, np.ndarray]:
    """`(t, u)` of a trajectory's fully observed rows, `u` in log space for log-normal noise
    (refusing non-positive data there): what its test functions are built on."""
    tr = tr.observed_rows()
    t, u = np.asarray(tr.t), np.asarray(tr.u)
    if log_space:
        if np.any(u <= 0):
            bad = np.argwhere(u <= 0)[0]
            raise ValueError(
                f"log-normal noise needs strictly positive data, but u[{bad[0]}, {bad[1]}] = "
                f"{u[bad[0], bad[1]]:.6g} (at t = {t[bad[0]]:.6g}); drop or fix non-positive "
                f"observations."
            )
        u = np.log(u)
    return t, u


def _check_samples(prepared, test_functions, sigma) -> None:
    """One floor on the samples per trajectory, checked before any work: the larger of what
    the test functions and the noise estimate need."""
    for i, (t, _) in enumerate(prepared):
        needs = []
        if isinstance(test_functions, TestFunctionConfig):
            needs.append(min_samples(t, test_functions))
        if sigma is None:
            needs.append((NOISE_WIDTH, f"the noise estimate's {NOISE_WIDTH}-point stencil (Bortz et al. 2023, "
                                       f"§2.2); pass sigma=... if the noise level is known"))
        need, why = max(needs, default=(0, ""))
        if len(t) < need:
            which = f"trajectory {i} has" if len(prepared) > 1 else "the trajectory has"
            raise ValueError(f"the weak form (WENDy) needs at least {need} observed samples per trajectory, but "
                             f"{which} {len(t)}: {why}. With fewer samples use output error (OutputError; below "
                             f"{NOISE_WIDTH} samples it too needs sigma=... or weighted=False).")


def build_problem(
    model: ODEModel,
    data: "Trajectory | Dataset | list[Trajectory]",
    noise: "str | AbstractNoise" = "gaussian",
    sigma=None,
    test_functions: "TestFunctionConfig | TestFunctions | list[TestFunctions]" = TestFunctionConfig(),
    k: int | None = None,
) -> tuple[WeakProblem, tuple[TestFunctions, ...]]:
    """Validate data, build test functions per trajectory and stack a [`WeakProblem`][].

    - `noise`: `"gaussian"` (additive) or `"lognormal"` (multiplicative), or a noise model.
    - `sigma`: noise standard deviation per state (scalar or `(D,)`, in log space for
      log-normal noise); `None` estimates it from each trajectory (Bortz et al. 2023, §2.2).
    - `test_functions`: a configuration, or prebuilt test functions (one per trajectory).
    - `k`: pad every trajectory to exactly `k` test functions (for batching).
    """
    warn_if_float32("weak likelihood")
    dataset = as_dataset(data)
    dataset.require_distinct_times("the weak form (WENDy)")
    log_space = is_log_space(noise)
    d = model.n_states
    if dataset.n_states != d:
        raise ValueError(
            f"data have {dataset.n_states} state columns but model '{model.name}' has {d} "
            f"states ({', '.join(model.state_names)})."
        )
    given = None if sigma is None else as_sigma(sigma, d, zero_ok=True)
    prepared = [prepare_data(tr, log_space) for tr in dataset]
    _check_samples(prepared, test_functions, sigma)
    if isinstance(test_functions, TestFunctionConfig):
        tfs = [build_test_functions(t, u, test_functions) for t, u in prepared]
    else:
        tfs = [test_functions] if isinstance(test_functions, TestFunctions) else list(test_functions)
        if len(tfs) != len(prepared):
            raise ValueError(f"got {len(tfs)} sets of test functions for {len(prepared)} trajectories.")
        for tf, (t, _) in zip(tfs, prepared):
            if tf.phi.shape[1] != len(t):
                raise ValueError(
                    f"test functions have {tf.phi.shape[1]} columns but the trajectory has "
                    f"{len(t)} observed samples."
                )
    if given is None:
        sigmas = [np.asarray(estimate_noise_std(u)) for _, u in prepared]
    else:
        sigmas = [given] * len(prepared)
    k_max = max(tf.k for tf in tfs)
    n_most = max(len(t) for t, _ in prepared)
    if k is None:
        k = k_max
    elif k < k_max:
        raise ValueError(f"k={k} is smaller than the {k_max} test functions of some trajectory.")
    elif k > n_most:
        raise ValueError(f"k={k} exceeds the {n_most} samples of the longest trajectory: there are at most that many "
                         f"independent test functions, so padding beyond them only costs memory and time (k pads "
                         f"every trajectory to the same count for batching; {k_max} are in use).")
    tfs = [tf.pad(k) for tf in tfs]
    n = max(len(t) for t, _ in prepared)
    phi = np.stack([_pad_cols(np.asarray(tf.phi), n) for tf in tfs])
    dphi = np.stack([_pad_cols(np.asarray(tf.dphi), n) for tf in tfs])
    kmask = np.stack([np.asarray(tf.mask) for tf in tfs])
    u = np.stack([_pad_rows(u, n) for _, u in prepared])
    t = np.stack([_pad_rows(t, n) for t, _ in prepared])
    b = -np.einsum("rkn,rnd->rdk", dphi, u).reshape(len(tfs), -1)
    problem = WeakProblem(
        phi=jnp.asarray(phi),
        dphi=jnp.asarray(dphi),
        dphi_gram=jnp.asarray(np.einsum("rkn,rln->rkl", dphi, dphi)),
        kmask=jnp.asarray(kmask),
        u=jnp.asarray(u),
        t=jnp.asarray(t),
        b=jnp.asarray(b),
        sigma=jnp.asarray(np.stack(sigmas)),
        log_space=log_space,
    )
    return problem, tuple(tfs)

