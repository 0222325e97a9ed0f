r"""Integral matching on LGR collocation (Anonymous 2025, §3, Algorithm 1, App. C).

On a subinterval $[a, a+h]$ the data give the state's values $X_0..X_K$ at the LGR
support (a least-squares polynomial fit, after Savitzky–Golay denoising); the ODE then
says $X_j = X_0 + h\sum_k A_{jk} f(X_k, \Theta, a + h\tau_k)$ (Anonymous 2025, eq. 5, $A$ the
$K\times K$ block of $D_K^{-1}$). Integral matching minimises

$$\ell(\Theta) = \frac{1}{|S| K D}\sum_{s\in S} \big\| X_{s,0} + hAF(X_s, \Theta) - X_{s,1:K} \big\|^2$$

over a set $S$ of overlapping subintervals (eq. 6 with the regression terms fixed), with
no ODE solve: every term is an independent, vmapped evaluation of $f$ at known states.

Three solvers, one loss:

- `"least_squares"`: models linear in $\Theta$ (polynomial libraries) give a linear
  least-squares problem, solved exactly (per state component, one shared Gram matrix),
  with the sequential thresholding of Anonymous 2025, App. C for sparse recovery;
- `"gauss_newton"`: [`bounded_trust_region`][] on the Gauss–Newton model over all
  subintervals, for `ODEModel`s (parameters entering nonlinearly, with bounds);
- `"gradient"`: optax (Adam by default) on random batches of subintervals, a `lax.scan`
  over a chunk of steps per call (Algorithm 1), for neural vector fields.
"""

import dataclasses
import time
from collections.abc import Callable
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray, PyTree

from .._results import RESULTS
from ..collocation import SavitzkyGolay
from ..data import as_dataset
from ..library import PolynomialLibrary
from ..model import ODEModel
from ..neural import field_rhs
from ..simulate import integrate
from ._hidden import chained_problem, chained_states, fit_hidden, fit_hidden_gradient, node_times
from ._im_problem import (
    IntegralMatchingProblem,
    collocation_residuals,
    integral_matching_loss,
    integral_matching_problem,
)
from ._result import StatusMixin
from ._trust_region import bounded_trust_region

METHODS = ("auto", "least_squares", "gauss_newton", "gradient")


def _batch_loss(params: tuple, args: PyTree, index: Int[Array, " b"] | None) -> Float[Array, ""]:
    """ℓ of `(params,)` on the subintervals `index`, with `args = (rhs, static, problem)`
    (the gradient loop's form: parameter groups, then everything else as arguments)."""
    rhs, static, problem = args
    return integral_matching_loss(rhs, eqx.combine(params[0], static), problem, index)


class IntegralMatchingSolution(eqx.Module):
    """`theta` (same structure as the start), the full loss at it, the loss after each
    chunk of gradient steps (`history`, NaN past the end; empty for the other solvers),
    the number of steps and the status."""

    theta: PyTree
    loss: Float[Array, ""]
    history: Float[Array, " c"]
    num_steps: Int[Array, ""]
    result: RESULTS


class _Progress(eqx.Module):
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


def _solve_gram(G, b, mask, ridge):
    r"""Least squares on the support `mask` from the normal equations, Jacobi-scaled:
    $(SGS + \lambda I)\hat\theta = Sb$, $\theta = S\hat\theta$ (entries off the support 0)."""
    d = jnp.diagonal(G)
    s = jnp.where(d > 0, 1.0 / jnp.sqrt(jnp.where(d > 0, d, 1.0)), 1.0) * mask
    Gs = s[:, None] * G * s[None, :] + jnp.diag(jnp.where(mask, ridge, 1.0))
    return s * jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(Gs), s * b)


class IntegralMatching(eqx.Module):
    r"""Integral matching on LGR collocation (Anonymous 2025).

    - `order`, `length`: LGR order $K$ and subinterval length $h$ (Anonymous 2025: $K = 30$, $h = 1$).
    - `smoother`: denoising before the node fits (`None` for none); `stride`: spacing of
      subinterval starts in samples (default: a tenth of a subinterval).
    - `method`: `"least_squares"` (polynomial libraries; `threshold` turns on sequential
      thresholding, App. C), `"gauss_newton"` (`ODEModel`s, bounded), `"gradient"`
      (optax on random batches; neural fields) or `"auto"` (that choice by model kind).
    - `optimizer`, `batch_size`, `chunk`, `max_steps`, `patience`, `rtol`: the gradient
      loop: `chunk` steps per compiled call; it stops when the full loss has not improved
      by a factor `1 - rtol` for `patience` chunks (returning the best iterate seen).
    - `ridge`: Tikhonov weight on the Jacobi-scaled normal equations (least squares);
      `gn_rtol`, `gn_atol`, `gn_max_steps`: the trust region's tolerances.
    """

    order: int = 30
    length: float = 1.0
    smoother: SavitzkyGolay | None = SavitzkyGolay()
    stride: int | None = None
    method: Literal["auto", "least_squares", "gauss_newton", "gradient"] = "auto"
    optimizer: optax.GradientTransformation = eqx.field(default=optax.adam(1e-3), static=True)
    batch_size: int = 32
    chunk: int = 200
    max_steps: int = 20_000
    patience: int = 5
    rtol: float = 1e-3
    threshold: float | None = None
    max_threshold_iter: int = 10
    ridge: float = 1e-12
    gn_rtol: float = 1e-10
    gn_atol: float = 1e-10
    gn_max_steps: int = 200

    def __check_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}.")
        for name in ("batch_size", "chunk", "max_steps", "patience", "max_threshold_iter", "gn_max_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)}.")
        if self.threshold is not None and not self.threshold >= 0:
            raise ValueError(f"threshold must be non-negative or None, got {self.threshold}.")

    def problem(self, data) -> IntegralMatchingProblem:
        """The subintervals of `data` with this estimator's order, length, smoother and stride."""
        return integral_matching_problem(data, order=self.order, length=self.length, smoother=self.smoother,
                                         stride=self.stride)

    # -- least squares (linear in Θ) -------------------------------------------------
    def solve_least_squares(
        self, library: PolynomialLibrary, problem: IntegralMatchingProblem
    ) -> IntegralMatchingSolution:
        r"""Exact minimiser of $\ell$ for $f = \Phi(u)\Theta$: per state $k$,
        $\min_{\theta_k} \sum_s \|hA\Phi(X_s)\theta_k - (X_{s,1:K,k} - X_{s,0,k})\|^2$, all sharing
        one Gram matrix, then (with `threshold`) sequential thresholding: zero the
        coefficients below it, refit on the support, until the support stops changing."""
        h, A = problem.length, problem.lgr.A

        def blocks(Xs):
            Z = h * A @ jax.vmap(library.features)(Xs[1:])  # (K, F)
            return Z.T @ Z, Z.T @ (Xs[1:] - Xs[0])

        def add(carry, Xs):
            G, b = blocks(Xs)
            return (carry[0] + G, carry[1] + b), None

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
        theta0 = solve(full, b)
        theta, _, _, i = jax.lax.while_loop(cond, body, (theta0, full, ~full, 0))
        loss = integral_matching_loss(library.rhs, theta, problem)
        result = RESULTS.where(jnp.isfinite(loss), RESULTS.successful, RESULTS.nonfinite)
        return IntegralMatchingSolution(theta, loss, jnp.zeros((0,)), i, result)

    # -- Gauss–Newton (ODEModel) -------------------------------------------------------
    def solve_gauss_newton(
        self, model: ODEModel, problem: IntegralMatchingProblem, p0: Float[Array, " J"],
        lower: Float[Array, " J"], upper: Float[Array, " J"],
    ) -> IntegralMatchingSolution:
        r"""Bounded trust region on the Gauss–Newton model of $\ell$ over all subintervals."""
        scale = 1.0 / jnp.sqrt(problem.X[:, 1:].size)

        def fn(p, problem):
            res = lambda q: scale * collocation_residuals(model.rhs, q, problem).reshape(-1)  # noqa: E731
            r, jac = res(p), jax.jacfwd(res)(p)
            return 0.5 * jnp.dot(r, r), jac.T @ r, jac.T @ jac

        sol = bounded_trust_region(fn, p0, lower, upper, problem, rtol=self.gn_rtol, atol=self.gn_atol,
                                   max_steps=self.gn_max_steps)
        return IntegralMatchingSolution(sol.x, 2.0 * sol.value, jnp.zeros((0,)), sol.num_steps, sol.result)

    # -- stochastic gradient (neural fields, Algorithm 1; hidden states, Algorithm 2) -------
    def _advance(self, loss: Callable, args: PyTree, n_sub: int, lower, upper, state: _Progress) -> _Progress:
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
                grads = jax.grad(lambda x, g=g, ps=params: loss((*ps[:g], x, *ps[g + 1:]), args, index))(params[g])
                updates, opt_g = self.optimizer.update(grads, opt_g, params[g])
                new = optax.apply_updates(params[g], updates)
                if g == 0 and lower is not None:
                    new = jnp.clip(new, lower, upper)
                params = (*params[:g], new, *params[g + 1:])
                states.append(opt_g)
            return (params, tuple(states)), None

        key, sub = jax.random.split(state.key)
        (params, opt_state), _ = jax.lax.scan(step, (state.params, state.opt_state), jax.random.split(sub, self.chunk))
        full = loss(params, args, None)
        better = full < state.best_loss
        improved = full < state.best_loss * (1.0 - self.rtol)
        best = jax.tree.map(lambda new, old: jnp.where(better, new, old), params, state.best)
        return _Progress(params, opt_state, best, jnp.where(better, full, state.best_loss),
                         jnp.where(improved, 0, state.stale + 1), state.chunks + 1,
                         state.history.at[state.chunks].set(full), key)

    def _start(self, loss: Callable, args: PyTree, params: tuple, key) -> _Progress:
        n_chunks = -(-self.max_steps // self.chunk)
        full = loss(params, args, None)
        return _Progress(params, tuple(self.optimizer.init(x) for x in params), params, full, jnp.asarray(0),
                         jnp.asarray(0), jnp.full((n_chunks,), jnp.nan, full.dtype), key)

    @staticmethod
    def _finite(state: _Progress) -> Array:
        """The last full loss (the start's before the first chunk) is finite."""
        last = jnp.where(state.chunks > 0, state.history[jnp.maximum(state.chunks - 1, 0)], state.best_loss)
        return jnp.isfinite(last)

    def _running(self, state: _Progress) -> Array:
        return (state.stale < self.patience) & (state.chunks < state.history.shape[0]) & self._finite(state)

    def gradient_status(self, state: _Progress) -> RESULTS:
        """Status of a finished gradient loop: converged (patience ran out), step limit, or non-finite loss."""
        return RESULTS.where(~self._finite(state), RESULTS.nonfinite, RESULTS.where(
            state.stale >= self.patience, RESULTS.successful, RESULTS.max_steps_reached))

    def run_gradient(self, loss: Callable, args: PyTree, params: tuple, n_sub: int, key: PRNGKeyArray,
                     lower=None, upper=None) -> _Progress:
        """The chunked loop of `_advance` until the stopping rule holds (pure: jit- and
        vmap-able); the best iterate is `state.best`."""
        state = self._start(loss, args, params, key)
        return jax.lax.while_loop(self._running, lambda s: self._advance(loss, args, n_sub, lower, upper, s), state)

    def run_gradient_with_progress(self, loss, args, params, n_sub, key, lower=None, upper=None) -> _Progress:
        """`run_gradient` one compiled chunk per call, with a progress bar."""
        from tqdm.auto import tqdm

        state = eqx.filter_jit(self._start)(loss, args, params, key)
        advance = eqx.filter_jit(self._advance)
        with tqdm(total=self.max_steps, desc="integral matching", unit="step") as bar:
            while bool(self._running(state)):
                state = advance(loss, args, n_sub, lower, upper, state)
                bar.update(self.chunk)
                bar.set_postfix(loss=f"{float(state.history[int(state.chunks) - 1]):.3e}")
        return state

    def solve_gradient(
        self, rhs: Callable, theta0: PyTree, problem: IntegralMatchingProblem, key: PRNGKeyArray,
        lower: Float[Array, " J"] | None = None, upper: Float[Array, " J"] | None = None, *,
        progress: bool = False,
    ) -> IntegralMatchingSolution:
        """Algorithm 1 as one pure function (jit- and vmap-able without `progress`): chunks
        of optimizer steps in a `lax.while_loop` until the stopping rule holds."""
        params, static = eqx.partition(theta0, eqx.is_inexact_array)
        run = self.run_gradient_with_progress if progress else self.run_gradient
        state = run(_batch_loss, (rhs, static, problem), (params,), problem.X.shape[0], key, lower, upper)
        return IntegralMatchingSolution(eqx.combine(state.best[0], static), state.best_loss, state.history,
                                        state.chunks * self.chunk, self.gradient_status(state))

    # -- user-facing fit --------------------------------------------------------------
    def fit(
        self,
        model: "ODEModel | PolynomialLibrary | eqx.Module",
        data,
        theta0: "ArrayLike | eqx.Module | None" = None,
        *,
        key: PRNGKeyArray | None = None,
        bounds="model",
        progress: bool = False,
        hidden0: ArrayLike | None = None,
    ) -> "IntegralMatchingFit":
        r"""Fit `model` to `data` (a `Trajectory`, `Dataset` or list of trajectories).

        `model` is an `ODEModel` (`theta0` = the start $p_0$, required; `bounds` as in
        WENDy's `fit`), a `PolynomialLibrary` (`theta0` defaults to zeros, Anonymous 2025's
        initialisation) or a neural vector field: an `eqx.Module` called as `field(u, t)`
        whose arrays are the parameters (it is its own start; `theta0` must be None).
        `key` seeds the random subintervals of the gradient method; `progress` shows a
        progress bar over its chunks.

        States never observed in `data` (mask all False) are *hidden*: they are
        reconstructed with the parameters (Anonymous 2025, §5; see `_hidden`), starting from
        `hidden0`, their values at the first sample time (required then), integrated
        along the observed states with `theta0` (required, also for libraries; a neural
        field is its own start). `method="gauss_newton"` (the default for ODEModels and
        libraries) solves jointly over both; `"gradient"` (the default and only choice for
        neural fields) is Anonymous 2025'sAlgorithm 2, alternating optimizer steps in the parameters
        and in the hidden node values on random batches of subintervals."""
        given = theta0 is not None
        rhs, theta0, lower, upper = _vector_field(model, theta0, bounds)
        method = self.method
        if method == "auto":
            method = ("least_squares" if isinstance(model, PolynomialLibrary) else
                      "gauss_newton" if isinstance(model, ODEModel) else "gradient")
        if method == "least_squares" and not isinstance(model, PolynomialLibrary):
            raise ValueError("method='least_squares' needs a PolynomialLibrary model.")
        data = as_dataset(data)
        hidden = any(traj.mask is not None and not np.all(np.any(traj.mask, axis=0)) for traj in data)
        if method == "gauss_newton" and not (isinstance(model, ODEModel)
                                             or (hidden and isinstance(model, PolynomialLibrary))):
            raise ValueError("method='gauss_newton' needs an ODEModel (or a PolynomialLibrary with hidden states).")
        if self.threshold is not None and method != "least_squares":
            raise ValueError("threshold (sequential thresholding) is only available with method='least_squares'.")
        if method == "gradient" and key is None:
            raise ValueError("key (a jax.random key) is required by the gradient method: it draws the subintervals.")
        if isinstance(model, (ODEModel, PolynomialLibrary)) and data.n_states != model.n_states:
            raise ValueError(f"data have {data.n_states} state columns but the model has {model.n_states} states.")
        start = time.perf_counter()
        if hidden:
            return self._fit_hidden(model, data, theta0, given, rhs, lower, upper, hidden0, method, key, progress,
                                    start)
        if hidden0 is not None:
            raise ValueError("hidden0 is given but every state is observed somewhere in the data.")
        problem = self.problem(data)
        if method == "least_squares":
            sol = _least_squares(self, model, problem)
        elif method == "gauss_newton":
            sol = _gauss_newton(self, model, problem, theta0, lower, upper)
        elif progress:
            sol = self.solve_gradient(rhs, theta0, problem, key, lower, upper, progress=True)
        else:
            sol = _gradient(self, rhs, theta0, problem, key, lower, upper)
        jax.block_until_ready(sol)
        elapsed = time.perf_counter() - start
        history = np.asarray(sol.history)
        return IntegralMatchingFit(model=model, theta=sol.theta, loss=float(sol.loss), method=method,
                                   num_steps=int(sol.num_steps), status=sol.result,
                                   history=history[np.isfinite(history)], seconds=elapsed, rhs=rhs)

    def _fit_hidden(self, model, data, theta0, given, rhs, lower, upper, hidden0, method, key, progress, start):
        neural = not isinstance(model, (ODEModel, PolynomialLibrary))
        if self.threshold is not None:
            raise ValueError("threshold (sequential thresholding) is not available with hidden states.")
        if method == "least_squares" and isinstance(model, PolynomialLibrary):
            method = "gauss_newton"  # the joint problem is nonlinear in the hidden states
        if method not in ("gauss_newton", "gradient"):
            raise ValueError(f"hidden states are reconstructed by method='gauss_newton' (joint over parameters and "
                             f"hidden states) or 'gradient' (Anonymous 2025 Algorithm 2), got method={self.method!r}.")
        if method == "gauss_newton" and neural:
            raise ValueError("hidden states with a neural vector field need method='gradient' (Anonymous 2025, "
                             "Algorithm 2).")
        if not (given or neural):
            raise ValueError("theta0 is required with hidden states: the hidden states start as the model's "
                             "solution along the observed ones (zero coefficients would make them constant).")
        if len(data) != 1:
            raise ValueError(f"hidden-state reconstruction takes one trajectory, got {len(data)}.")
        hidden = np.flatnonzero(~np.any(data[0].mask, axis=0))
        if hidden0 is None:
            raise ValueError(f"hidden0 (the values of the never-observed states {hidden.tolist()} at the first "
                             "sample time) is required.")
        z0 = jnp.asarray(hidden0, float).reshape(-1)
        if z0.shape != (hidden.size,) or not bool(jnp.all(jnp.isfinite(z0))):
            raise ValueError(f"hidden0 must hold {hidden.size} finite values (one per hidden state), got "
                             f"{np.asarray(hidden0).tolist()}.")
        problem = chained_problem(data, order=self.order, length=self.length, smoother=self.smoother)
        standardised = not isinstance(model, ODEModel)
        features = model.features if isinstance(model, PolynomialLibrary) else None
        if method == "gradient":
            sol = fit_hidden_gradient(self, rhs, theta0, problem, jnp.asarray(hidden), z0, key, lower, upper,
                                      features=features, standardised=standardised, progress=progress)
        else:
            sol = fit_hidden(self, rhs, theta0, problem, jnp.asarray(hidden), z0, lower, upper, features)
        jax.block_until_ready(sol)
        states = np.asarray(chained_states(problem, jnp.asarray(hidden), sol.Z))
        history = np.asarray(sol.history)
        return IntegralMatchingFit(model=model, theta=sol.theta, loss=float(sol.loss), method=method,
                                   num_steps=int(sol.num_steps), status=sol.result,
                                   history=history[np.isfinite(history)], seconds=time.perf_counter() - start,
                                   rhs=rhs, hidden=tuple(hidden.tolist()), node_times=np.asarray(node_times(problem)),
                                   node_states=states, standardised=standardised)


_least_squares = eqx.filter_jit(lambda est, lib, problem: est.solve_least_squares(lib, problem))
_gauss_newton = eqx.filter_jit(lambda est, m, problem, p0, lo, hi: est.solve_gauss_newton(m, problem, p0, lo, hi))
_gradient = eqx.filter_jit(lambda est, rhs, th, problem, key, lo, hi: est.solve_gradient(rhs, th, problem, key, lo, hi))


def _vector_field(model, theta0, bounds):
    """(rhs(u, θ, t), θ0, lower, upper) for each model kind, with the argument checks."""
    if isinstance(model, ODEModel):
        if theta0 is None:
            raise ValueError(f"theta0 (the start p0, shape ({model.n_params},)) is required for an ODEModel.")
        p0 = model.check_params(theta0, "theta0")
        if isinstance(bounds, str) and bounds == "model":
            bounds = model.bounds
        if bounds is None:
            lower, upper = jnp.full_like(p0, -jnp.inf), jnp.full_like(p0, jnp.inf)
        else:
            lower, upper = (jnp.broadcast_to(jnp.asarray(b, float), p0.shape) for b in bounds)
            if not bool(jnp.all((lower <= p0) & (p0 <= upper))):
                raise ValueError(f"theta0 = {np.asarray(p0).tolist()} is outside the bounds "
                                 f"[{np.asarray(lower).tolist()}, {np.asarray(upper).tolist()}].")
        return model.rhs, p0, lower, upper
    if isinstance(model, PolynomialLibrary):
        theta = model.zeros() if theta0 is None else model.check_theta(theta0, "theta0")
        return model.rhs, theta, None, None
    if isinstance(model, eqx.Module) and callable(model):
        if theta0 is not None:
            raise ValueError("a neural vector field is its own starting point: leave theta0 None.")
        return field_rhs, model, None, None
    raise TypeError(f"model must be an ODEModel, a PolynomialLibrary or an equinox Module called as field(u, t), "
                    f"got {type(model).__name__}.")


@dataclasses.dataclass(frozen=True)
class IntegralMatchingFit(StatusMixin):
    """An integral-matching fit: the fitted `theta` (parameter vector, coefficient matrix
    or trained module), the final `loss` ℓ(Θ̂), the `method` that ran, `num_steps`,
    `status`, the loss `history` per chunk (gradient method), wall-clock `seconds`
    (compilation included) and the vector field `rhs(u, θ, t)`.

    With hidden states (Anonymous 2025, §5), `hidden` lists their indices and `node_states` holds
    every state at the chained collocation nodes `node_times` (`node_states[0]` is a full
    initial state for `simulate`); for libraries the hidden ones are `standardised`
    (mean 0, variance 1: defined up to an affine map).

    No covariance: Anonymous 2025 gives no sampling theory for ℓ (the node values are correlated
    smoothed data); refine with `OutputError` or `Hybrid` for confidence intervals."""

    model: object
    theta: PyTree
    loss: float
    method: str
    num_steps: int
    status: RESULTS
    history: np.ndarray
    seconds: float
    rhs: Callable
    hidden: tuple[int, ...] = ()
    node_times: np.ndarray | None = None
    node_states: np.ndarray | None = None
    standardised: bool = False

    @property
    def params(self) -> np.ndarray:
        """The parameter vector (ODEModel) or coefficient matrix (library) as NumPy."""
        if isinstance(self.model, (ODEModel, PolynomialLibrary)):
            return np.asarray(self.theta)
        raise AttributeError("a neural fit has no parameter vector: use `theta` (the trained module).")

    def vector_field(self, u: Float[Array, " D"], t: float = 0.0) -> Float[Array, " D"]:
        """The fitted f(u, Θ̂, t)."""
        return self.rhs(u, self.theta, t)

    def simulate(self, u0: ArrayLike, t: ArrayLike, **kwargs) -> np.ndarray:
        """The fitted ODE solved from `u0` on the grid `t` ([`wendyjax.integrate`][]: rows
        from a failed step on are NaN)."""
        return integrate(self.rhs, self.theta, u0, t, **kwargs)

    def table(self) -> str:
        """Status, loss, steps and time, then the parameters, equations or network size."""
        head = [f"Integral-matching fit ({self.method}): "
                f"{'converged' if self.successful else 'NOT CONVERGED: ' + self.message}",
                f"  ℓ(Θ̂) = {self.loss:.6g}   steps = {self.num_steps}   time = {self.seconds:.3g} s"]
        if self.hidden:
            state_names = getattr(self.model, "state_names", None)  # a neural field has none
            names = [state_names[k] if state_names else f"u[{k}]" for k in self.hidden]
            head.append(f"  hidden states reconstructed: {', '.join(names)}"
                        + (" (standardised)" if self.standardised else ""))
        if isinstance(self.model, ODEModel):
            width = max(len(n) for n in self.model.param_names)
            return "\n".join(head + [f"  {n.ljust(width)}  {v: .6g}" for n, v in
                                     zip(self.model.param_names, self.params)])
        if isinstance(self.model, PolynomialLibrary):
            return "\n".join(head + ["  " + line for line in self.model.equations(self.theta)])
        n = sum(x.size for x in jax.tree.leaves(eqx.filter(self.theta, eqx.is_inexact_array)))
        return "\n".join(head + [f"  neural vector field {type(self.theta).__name__} with {n} parameters"])

    def summary(self) -> None:
        """Print [`table`][]."""
        print(self.table())

    def __str__(self) -> str:
        return self.table()

