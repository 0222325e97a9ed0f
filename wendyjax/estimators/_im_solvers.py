r"""The solvers of integral matching besides the trust region (Anonymous 2025): exact least
squares with sequential thresholding for models linear in $\Theta$, and the stochastic
gradient loop on random batches of subintervals (Algorithms 1 and 2)."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray, PyTree

from .._compile import cpu_safe_jit
from .._progress import progress_bar
from .._results import RESULTS
from ..library import PolynomialLibrary
from ._im_problem import IntegralMatchingProblem, integral_matching_loss
from ._solution import Solution


def _solve_gram(G, b, mask, ridge):
    r"""Least squares on the support `mask` from the normal equations, Jacobi-scaled:
    $(SGS + \lambda I)\hat\theta = Sb$, $\theta = S\hat\theta$ (entries off the support 0)."""
    d = jnp.diagonal(G)
    s = jnp.where(d > 0, 1.0 / jnp.sqrt(jnp.where(d > 0, d, 1.0)), 1.0) * mask
    Gs = s[:, None] * G * s[None, :] + jnp.diag(jnp.where(mask, ridge, 1.0))
    return s * jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(Gs), s * b)


class LeastSquares(eqx.Module):
    r"""Exact least squares for vector fields linear in $\Theta$ (a `PolynomialLibrary`):
    per state $k$, $\min_{\theta_k} \sum_s \|hA\Phi(X_s)\theta_k - (X_{s,1:K,k} - X_{s,0,k})\|^2$,
    all sharing one Gram matrix (Jacobi-scaled, Tikhonov weight `ridge`). With `threshold`,
    the sequential thresholding of Anonymous 2025, App. C: zero the coefficients below it
    and refit on the support, until the support stops changing or for at most
    `max_threshold_iter` rounds."""

    threshold: float | None = None
    max_threshold_iter: int = 10
    ridge: float = 1e-12

    def __check_init__(self):
        if self.threshold is not None and not self.threshold >= 0:
            raise ValueError(f"LeastSquares: threshold must be non-negative or None, got {self.threshold}.")
        if not (isinstance(self.max_threshold_iter, int) and self.max_threshold_iter >= 1):
            raise ValueError(
                f"LeastSquares: max_threshold_iter must be a positive integer, got {self.max_threshold_iter!r}."
            )
        if not self.ridge >= 0:
            raise ValueError(f"LeastSquares: ridge must be non-negative, got {self.ridge}.")

    def solve(self, library: PolynomialLibrary, problem: IntegralMatchingProblem) -> Solution:
        """The exact minimiser of ℓ on `problem`'s subintervals (pure)."""
        h, A = problem.length, problem.lgr.A

        def add(carry, Xs):
            Z = h * A @ jax.vmap(library.features)(Xs[1:])  # (K, F)
            return (carry[0] + Z.T @ Z, carry[1] + Z.T @ (Xs[1:] - Xs[0])), None

        F, D = library.n_features, library.n_states
        zero = (jnp.zeros((F, F), problem.X.dtype), jnp.zeros((F, D), problem.X.dtype))
        (G, b), _ = jax.lax.scan(add, zero, problem.X)
        solve = jax.vmap(lambda m, bk: _solve_gram(G, bk, m, self.ridge), in_axes=(1, 1), out_axes=1)
        threshold = 0.0 if self.threshold is None else self.threshold
        iters = 0 if self.threshold is None else self.max_threshold_iter

        def cond(state):
            _, mask, prev, i = state
            return (i < iters) & jnp.any(mask != prev)

        def body(state):
            theta, mask, _, i = state
            new = mask & (jnp.abs(theta) >= threshold)
            return solve(new, b), new, mask, i + 1

        full = jnp.ones((F, D), bool)
        theta, _, _, i = jax.lax.while_loop(cond, body, (solve(full, b), full, ~full, 0))
        loss = integral_matching_loss(library.rhs, theta, problem)
        result = RESULTS.where(jnp.isfinite(loss), RESULTS.successful, RESULTS.nonfinite)
        return Solution(theta, loss, jnp.asarray(i), result, {"history": jnp.zeros((0,), loss.dtype)})


class GradientState(eqx.Module):
    """State of the chunked gradient loop: current and best iterates, chunks done and
    chunks since the best loss last improved by the relative tolerance."""

    params: PyTree
    opt_state: PyTree
    best: PyTree
    best_loss: Float[Array, ""]
    stale: Int[Array, ""]
    chunks: Int[Array, ""]
    history: Float[Array, " c"]
    key: PRNGKeyArray


class Gradient(eqx.Module):
    r"""optax's `optimizer` (Adam by default) on random batches of `batch_size`
    subintervals, `chunk` steps per compiled `lax.scan` (Anonymous 2025, Algorithm 1; with
    hidden states Algorithm 2). It stops when the full loss has not improved by a factor
    `1 - rtol` for `patience` chunks, or at the estimator's `max_steps`, and returns the
    best iterate seen."""

    optimizer: optax.GradientTransformation = eqx.field(default=optax.adam(1e-3), static=True)
    batch_size: int = 32
    chunk: int = 200
    patience: int = 5
    rtol: float = 1e-3

    def __check_init__(self):
        for name in ("batch_size", "chunk", "patience"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Gradient: {name} must be a positive integer, got {value!r}.")
        if not 0 <= self.rtol < 1:
            raise ValueError(f"Gradient: rtol must lie in [0, 1), got {self.rtol}.")

    def advance(self, loss: Callable, args: PyTree, n_sub: int, lower, upper, state: GradientState) -> GradientState:
        """One compiled chunk of optimizer steps on random batches of the `n_sub`
        subintervals, then the full loss and the stopping bookkeeping.

        `loss(params, args, index)` takes a tuple of parameter groups, updated in turn at
        every step, each on the batch's gradient at the groups' latest values and with its
        own optimizer state: one group (Θ) is Algorithm 1, two (Θ, then the hidden node
        values) Algorithm 2's alternation. The first group is clipped to `lower`/`upper`."""

        def step(carry, key):
            params, opt_state = carry
            index = jax.random.randint(key, (self.batch_size,), 0, n_sub)
            states = []
            for g, opt_g in enumerate(opt_state):
                grads = jax.grad(lambda x, g=g, ps=params: loss((*ps[:g], x, *ps[g + 1 :]), args, index))(params[g])
                updates, opt_g = self.optimizer.update(grads, opt_g, params[g])
                new = optax.apply_updates(params[g], updates)
                if g == 0 and lower is not None:
                    new = jnp.clip(jnp.asarray(new), lower, upper)
                params = (*params[:g], new, *params[g + 1 :])
                states.append(opt_g)
            return (params, tuple(states)), None

        key, sub = jax.random.split(state.key)
        (params, opt_state), _ = jax.lax.scan(step, (state.params, state.opt_state), jax.random.split(sub, self.chunk))
        full = loss(params, args, None)
        better = full < state.best_loss
        improved = full < state.best_loss * (1.0 - self.rtol)
        best = jax.tree.map(lambda new, old: jnp.where(better, new, old), params, state.best)
        return GradientState(
            params,
            opt_state,
            best,
            jnp.where(better, full, state.best_loss),
            jnp.where(improved, 0, state.stale + 1),
            state.chunks + 1,
            state.history.at[state.chunks].set(full),
            key,
        )

    def start(self, loss: Callable, args: PyTree, params: tuple, key, max_steps: int) -> GradientState:
        """The loop's state before the first chunk (a history of `max_steps / chunk` chunks)."""
        full = loss(params, args, None)
        return GradientState(
            params,
            tuple(self.optimizer.init(x) for x in params),
            params,
            full,
            jnp.asarray(0),
            jnp.asarray(0),
            jnp.full((-(-max_steps // self.chunk),), jnp.nan, full.dtype),
            key,
        )

    @staticmethod
    def _finite(state: GradientState) -> Array:
        """The last full loss (the start's before the first chunk) is finite."""
        last = jnp.where(state.chunks > 0, state.history[jnp.maximum(state.chunks - 1, 0)], state.best_loss)
        return jnp.isfinite(last)

    def running(self, state: GradientState) -> Array:
        """Whether the loop goes on: patience left, chunks left, a finite loss."""
        return (state.stale < self.patience) & (state.chunks < state.history.shape[0]) & self._finite(state)

    def status(self, state: GradientState) -> RESULTS:
        """Status of a finished loop: converged (patience ran out), step limit, or non-finite loss."""
        return RESULTS.where(
            ~self._finite(state),
            RESULTS.nonfinite,
            RESULTS.where(state.stale >= self.patience, RESULTS.successful, RESULTS.max_steps_reached),
        )

    def run(
        self,
        loss: Callable,
        args: PyTree,
        params: tuple,
        n_sub: int,
        key: PRNGKeyArray,
        lower,
        upper,
        max_steps: int,
        *,
        progress: bool = False,
    ) -> GradientState:
        """The chunked loop until the stopping rule holds: pure (jit- and vmap-able) as one
        `lax.while_loop`; with `progress`, one compiled chunk per call and a tqdm bar. The
        best iterate is `state.best`."""
        if not progress:
            state = self.start(loss, args, params, key, max_steps)
            return jax.lax.while_loop(self.running, lambda s: self.advance(loss, args, n_sub, lower, upper, s), state)

        state = cpu_safe_jit(self.start)(loss, args, params, key, max_steps)
        advance = cpu_safe_jit(self.advance)
        with progress_bar(total=max_steps, desc="integral matching", unit="step") as bar:
            while bool(self.running(state)):
                state = advance(loss, args, n_sub, lower, upper, state)
                bar.update(self.chunk)
                bar.set_postfix(loss=f"{float(state.history[int(state.chunks) - 1]):.3e}")
        return state
