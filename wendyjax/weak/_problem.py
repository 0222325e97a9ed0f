"""The weak-form problem: test functions and data of every trajectory, padded and stacked."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..noise import NOISE_WIDTH
from ._test_functions import TestFunctionConfig, min_samples


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

    A batch of datasets' problems is one `WeakProblem` with their axis in front of every array.
    """

    phi: Float[Array, "*batch r k n"]
    dphi: Float[Array, "*batch r k n"]
    dphi_gram: Float[Array, "*batch r k k"]
    kmask: Float[Array, "*batch r k"]
    u: Float[Array, "*batch r n d"]
    t: Float[Array, "*batch r n"]
    b: Float[Array, "*batch r dk"]
    sigma: Float[Array, "*batch r d"]
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


def sample_chunks(u, t, size: int = 1024):
    """Every sample `u` `(..., D)` and time `t` `(...)` in chunks of `size`, `(C, size, D)`
    and `(C, size)` (the last padded with repeats of the last sample): for `lax.map` over
    all of a study's samples, whose per-sample Jacobians need not all fit in memory."""
    d = u.shape[-1]
    u, t = u.reshape(-1, d), t.reshape(-1)
    pad = -t.shape[0] % size
    u = jnp.concatenate([u, jnp.broadcast_to(u[-1:], (pad, d))])
    t = jnp.concatenate([t, jnp.broadcast_to(t[-1:], (pad,))])
    return u.reshape(-1, size, d), t.reshape(-1, size)


def prepare_trajectory(
    t: np.ndarray, u: np.ndarray, mask: np.ndarray | None, log_space: bool, which: str = "the trajectory"
) -> tuple[np.ndarray, np.ndarray]:
    """`(t, u)` of one trajectory of a batch restricted to its fully observed rows, `u`
    `(R, n, D)` in log space for log-normal noise: what the test functions are built on.
    The weak form needs every state at a sample time (a row with only some states missing
    is refused) and, in a batch, the same rows in every dataset (one grid for all)."""
    if mask is not None:
        observed = np.all(mask, axis=2)  # (R, n)
        partial = np.any(mask, axis=2) & ~observed
        if partial.any():
            r, row = (int(i) for i in np.argwhere(partial)[0])
            of = f" of dataset {r}" if len(u) > 1 else ""
            raise ValueError(
                f"{int(partial.sum())} sample times{of} (first at t={t[row]:.6g}) have only some states missing; the "
                f"weak form needs all states at a sample time. Drop or impute those entries, or fit with output error "
                f"(OutputError), which uses partly observed rows."
            )
        differs = np.any(observed != observed[:1], axis=1)
        if differs.any():
            r = int(np.argmax(differs))
            raise ValueError(
                f"datasets on different grids: dataset {r} of the batch is missing other samples than "
                f"dataset 0 ({which}), so their weak forms have different test functions; a batch needs "
                f"the same observed rows in every dataset (fit the others separately)."
            )
        t, u = t[observed[0]], u[:, observed[0]]
    if log_space and np.any(u <= 0):
        r, row, col = (int(i) for i in np.argwhere(u <= 0)[0])
        of = f"dataset {r}: " if len(u) > 1 else ""
        raise ValueError(
            f"log-normal noise needs strictly positive data, but {of}u[{row}, {col}] = {u[r, row, col]:.6g} (at "
            f"t = {t[row]:.6g}); drop or fix non-positive observations."
        )
    return t, np.log(u) if log_space else u


def check_samples(times, test_functions, sigma) -> None:
    """One floor on the samples per trajectory, checked before any work: the larger of what
    the test functions and the noise estimate need."""
    for i, t in enumerate(times):
        needs = []
        if isinstance(test_functions, TestFunctionConfig):
            needs.append(min_samples(t, test_functions))
        if sigma is None:
            needs.append(
                (
                    NOISE_WIDTH,
                    f"the noise estimate's {NOISE_WIDTH}-point stencil (Bortz et al. 2023, "
                    f"§2.2); pass sigma=... if the noise level is known",
                )
            )
        need, why = max(needs, default=(0, ""))
        if len(t) < need:
            which = f"trajectory {i} has" if len(times) > 1 else "the trajectory has"
            raise ValueError(
                f"the weak form (WENDy) needs at least {need} observed samples per trajectory, but "
                f"{which} {len(t)}: {why}. With fewer samples use output error (OutputError; below "
                f"{NOISE_WIDTH} samples it too needs sigma=... or weighted=False)."
            )
