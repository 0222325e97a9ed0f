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
from collections.abc import Callable
from typing import ClassVar, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray, PyTree

from .._compile import cpu_safe_jit
from .._results import RESULTS
from ..collocation import SavitzkyGolay
from ..data import Dataset, as_dataset
from ..library import PolynomialLibrary
from ..model import ODEModel
from ..neural import field_rhs
from ..simulate import integrate
from ._base import AbstractEstimator
from ._hidden import chained_problem, chained_states, fit_hidden, fit_hidden_gradient, node_times
from ._im_problem import (
    IntegralMatchingProblem,
    collocation_residuals,
    integral_matching_loss,
    integral_matching_problem,
)
from ._result import AbstractFit
from ._solution import Solution
from ._trust_region import bounded_trust_region

ALGORITHMS = ("auto", "least_squares", "gauss_newton", "gradient")


def _batch_loss(params: tuple, args: PyTree, index: Int[Array, " b"] | None) -> Float[Array, ""]:
    """ℓ of `(params,)` on the subintervals `index`, with `args = (rhs, static, problem)`
    (the gradient loop's form: parameter groups, then everything else as arguments)."""
    rhs, static, problem = args
    return integral_matching_loss(rhs, eqx.combine(params[0], static), problem, index)


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


@dataclasses.dataclass(frozen=True)
class IntegralMatchingFit(AbstractFit):
    """An integral-matching fit: [`AbstractFit`][] (`params`: the parameter vector,
    coefficient matrix or trained module; `objective`: the final loss ℓ(Θ̂); no
    covariance) plus the `algorithm` that ran, the loss `history` per chunk (gradient
    algorithm) and the vector field `rhs(u, θ, t)`.

    With hidden states (Anonymous 2025, §5), `hidden` lists their indices and
    `node_states` holds every state at the chained collocation nodes `node_times`
    (`node_states[0]` is a full initial state for `simulate`); for libraries and neural
    fields the hidden ones are `standardised` (mean 0, variance 1: defined up to an
    affine map).

    No covariance: Anonymous 2025 gives no sampling theory for ℓ (the node values are
    correlated smoothed data); refine with `OutputError` or `Hybrid` for intervals."""

    algorithm: str
    history: np.ndarray
    rhs: Callable
    hidden: tuple[int, ...] = ()
    node_times: np.ndarray | None = None
    node_states: np.ndarray | None = None
    standardised: bool = False

    @classmethod
    def from_solution(cls, estimator, model, problem, p0, solution, covariance, kind, seconds):
        vector = problem.kind != "neural"
        history = np.asarray(solution.extras["history"])
        hidden = problem.hidden
        return cls(
            model=model, params=np.asarray(solution.params) if vector else solution.params, covariance=None,
            covariance_method=None, p0=np.asarray(p0) if vector else p0, num_steps=int(solution.num_steps),
            status=solution.result, method=estimator.method, objective=float(solution.objective), noise=None,
            seconds=seconds, algorithm=problem.algorithm, history=history[np.isfinite(history)], rhs=problem.rhs,
            hidden=hidden, node_times=np.asarray(node_times(problem.subintervals)) if hidden else None,
            node_states=np.asarray(solution.extras["node_states"]) if hidden else None,
            standardised=bool(hidden) and problem.kind != "ode")

    @property
    def title(self) -> str:
        return "Integral matching"

    @property
    def model_name(self) -> str:
        return getattr(self.model, "name", type(self.model).__name__)

    @property
    def start_text(self) -> str:
        return "the given module" if isinstance(self.p0, eqx.Module) else str(np.asarray(self.p0).tolist())

    def vector_field(self, u: Float[Array, " D"], t: float = 0.0) -> Float[Array, " D"]:
        """The fitted f(u, Θ̂, t)."""
        return self.rhs(u, self.params, t)

    def simulate(self, u0: ArrayLike, t: ArrayLike, **kwargs) -> np.ndarray:
        """The fitted ODE solved from `u0` on the grid `t` ([`wendyjax.integrate`][]: rows
        from a failed step on are NaN)."""
        return integrate(self.rhs, self.params, u0, t, **kwargs)

    def to_dict(self) -> dict:
        """Plain Python/NumPy view: status, loss, steps, algorithm and the parameters (by
        name for an ODEModel)."""
        params = (dict(zip(self.model.param_names, self.params.tolist())) if isinstance(self.model, ODEModel)
                  else self.params.tolist() if isinstance(self.params, np.ndarray) else None)
        return {"model": self.model_name, "method": self.method, "algorithm": self.algorithm,
                "status": self.message or "successful", "objective": self.objective, "params": params,
                "num_steps": self.num_steps, "seconds": self.seconds}

    def _head(self) -> list[str]:
        head = [f"Integral-matching fit ({self.algorithm}): {self._status_text}",
                f"  ℓ(Θ̂) = {self.objective:.6g}   steps = {self.num_steps}   time = {self.seconds:.3g} s   "
                f"no covariance (refine with OutputError or Hybrid for intervals)"]
        if self.hidden:
            state_names = getattr(self.model, "state_names", None)  # a neural field has none
            names = [state_names[k] if state_names else f"u[{k}]" for k in self.hidden]
            head.append(f"  hidden states reconstructed: {', '.join(names)}"
                        + (" (standardised)" if self.standardised else ""))
        return head

    def table(self, level: float = 0.95, truth=None) -> str:
        """Status, loss, steps and time, then the parameters, equations or network size
        (`level` and `truth` as for the other fits, for an ODEModel)."""
        if isinstance(self.model, ODEModel):
            return super().table(level, truth)
        if isinstance(self.model, PolynomialLibrary):
            return "\n".join(self._head() + ["  " + line for line in self.model.equations(self.params)])
        n = sum(x.size for x in jax.tree.leaves(eqx.filter(self.params, eqx.is_inexact_array)))
        return "\n".join(self._head() + [f"  neural vector field {type(self.params).__name__} with {n} parameters"])


class IntegralMatching(AbstractEstimator):
    r"""Integral matching on LGR collocation (Anonymous 2025).

    - `order`, `length`: LGR order $K$ and subinterval length $h$ (Anonymous 2025: $K = 30$, $h = 1$).
    - `smoother`: denoising before the node fits (`None` for none); `stride`: spacing of
      subinterval starts in samples (default: a tenth of a subinterval).
    - `algorithm`: `"least_squares"` (polynomial libraries; `threshold` turns on sequential
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
    algorithm: Literal["auto", "least_squares", "gauss_newton", "gradient"] = "auto"
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
    method: ClassVar[str] = "integral_matching"
    covariances: ClassVar[tuple[str, ...]] = ()
    fit_type: ClassVar[type] = IntegralMatchingFit

    def __check_init__(self):
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}.")
        for name in ("batch_size", "chunk", "max_steps", "patience", "max_threshold_iter", "gn_max_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)}.")
        if self.threshold is not None and not self.threshold >= 0:
            raise ValueError(f"threshold must be non-negative or None, got {self.threshold}.")

    def subintervals(self, data) -> IntegralMatchingProblem:
        """The subintervals of `data` with this estimator's order, length, smoother and stride."""
        return integral_matching_problem(data, order=self.order, length=self.length, smoother=self.smoother,
                                         stride=self.stride)

    # -- least squares (linear in Θ) -------------------------------------------------
    def solve_least_squares(
        self, library: PolynomialLibrary, problem: IntegralMatchingProblem
    ) -> Solution:
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
        return Solution(theta, loss, i, result, {"history": jnp.zeros((0,), loss.dtype)})

    # -- Gauss–Newton (ODEModel) -------------------------------------------------------
    def solve_gauss_newton(
        self, rhs: Callable, problem: IntegralMatchingProblem, p0: Float[Array, " J"],
        lower: Float[Array, " J"], upper: Float[Array, " J"],
    ) -> Solution:
        r"""Bounded trust region on the Gauss–Newton model of $\ell$ over all subintervals."""
        scale = 1.0 / jnp.sqrt(problem.X[:, 1:].size)

        def fn(p, problem):
            res = lambda q: scale * collocation_residuals(rhs, q, problem).reshape(-1)  # noqa: E731
            r, jac = res(p), jax.jacfwd(res)(p)
            return 0.5 * jnp.dot(r, r), jac.T @ r, jac.T @ jac

        sol = bounded_trust_region(fn, p0, lower, upper, problem, rtol=self.gn_rtol, atol=self.gn_atol,
                                   max_steps=self.gn_max_steps)
        history = jnp.zeros((0,), sol.value.dtype)
        return Solution(sol.x, 2.0 * sol.value, sol.num_steps, sol.result, {"history": history})

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

        state = cpu_safe_jit(self._start)(loss, args, params, key)
        advance = cpu_safe_jit(self._advance)
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
    ) -> Solution:
        """Algorithm 1 as one pure function (jit- and vmap-able without `progress`): chunks
        of optimizer steps in a `lax.while_loop` until the stopping rule holds."""
        params, static = eqx.partition(theta0, eqx.is_inexact_array)
        run = self.run_gradient_with_progress if progress else self.run_gradient
        state = run(_batch_loss, (rhs, static, problem), (params,), problem.X.shape[0], key, lower, upper)
        return Solution(eqx.combine(state.best[0], static), state.best_loss, state.chunks * self.chunk,
                        self.gradient_status(state), {"history": state.history})

    # -- the estimator contract -------------------------------------------------------
    def problem(self, model, data: Dataset, *, key: PRNGKeyArray | None = None, u0=None) -> "IntegralMatchingData":
        r"""The subintervals of `data` for `model`: an `ODEModel`, a `PolynomialLibrary` or a
        neural vector field (an `eqx.Module` called as `field(u, t)` whose arrays are the
        parameters). `key` seeds the random subintervals of the gradient algorithm
        (required there).

        States never observed in `data` (mask all False) are *hidden*: they are
        reconstructed with the parameters (Anonymous 2025, §5), starting from `u0`, the
        initial state (`(D,)`; only its hidden entries are used) or the hidden states'
        values at the first sample time alone. `algorithm="gauss_newton"` (the default for
        ODEModels and libraries) solves jointly over both; `"gradient"` (the default and only
        choice for neural fields) is Algorithm 2, alternating optimizer steps in the
        parameters and in the hidden node values on random batches of subintervals."""
        kind = "ode" if isinstance(model, ODEModel) else "library" if isinstance(model, PolynomialLibrary) else None
        if kind is None:
            if not (isinstance(model, eqx.Module) and callable(model)):
                raise TypeError(f"model must be an ODEModel, a PolynomialLibrary or an equinox Module called as "
                                f"field(u, t), got {type(model).__name__}.")
            kind = "neural"
        algorithm = self.algorithm
        if algorithm == "auto":
            algorithm = {"library": "least_squares", "ode": "gauss_newton", "neural": "gradient"}[kind]
        if kind != "neural" and data.n_states != model.n_states:
            raise ValueError(f"data have {data.n_states} state columns but the model has {model.n_states} states.")
        hidden = np.flatnonzero(~np.all([np.any(np.ones(tr.u.shape, bool) if tr.mask is None else tr.mask, axis=0)
                                         for tr in data], axis=0))
        if algorithm == "least_squares" and kind != "library":
            raise ValueError("algorithm='least_squares' needs a PolynomialLibrary model.")
        if algorithm == "gauss_newton" and not (kind == "ode" or (hidden.size and kind == "library")):
            raise ValueError("algorithm='gauss_newton' needs an ODEModel (or a PolynomialLibrary with hidden "
                             "states).")
        if self.threshold is not None and algorithm != "least_squares":
            raise ValueError("threshold (sequential thresholding) is only available with algorithm='least_squares'.")
        if self.threshold is not None and hidden.size:
            raise ValueError("threshold (sequential thresholding) is not available with hidden states.")
        if algorithm == "gradient" and key is None:
            raise ValueError("key (a jax.random key) is required by the gradient algorithm: it draws the "
                             "subintervals.")
        if not hidden.size:
            if u0 is not None:
                raise ValueError("u0 (the start of hidden states) is given but every state is observed somewhere "
                                 "in the data.")
            return IntegralMatchingData(self.subintervals(data), _rhs(model, kind), kind, algorithm,
                                        model if kind == "library" else None, key)
        if algorithm == "least_squares":
            algorithm = "gauss_newton"  # the joint problem is nonlinear in the hidden states
        if algorithm == "gauss_newton" and kind == "neural":
            raise ValueError("hidden states with a neural vector field need algorithm='gradient' (Anonymous 2025, "
                             "Algorithm 2).")
        if len(data) != 1:
            raise ValueError(f"hidden-state reconstruction takes one trajectory, got {len(data)}.")
        if u0 is None:
            raise ValueError(f"u0 (the initial state, or the values of the never-observed states {hidden.tolist()} at "
                             "the first sample time) is required.")
        z0 = np.asarray(u0, float).reshape(-1)
        z0 = z0[hidden] if z0.size == data.n_states and hidden.size != data.n_states else z0
        if z0.shape != (hidden.size,) or not np.all(np.isfinite(z0)):
            raise ValueError(f"u0 must hold {hidden.size} finite values (one per hidden state) or a whole initial "
                             f"state of {data.n_states}, got {np.asarray(u0).tolist()}.")
        chained = chained_problem(data, order=self.order, length=self.length, smoother=self.smoother)
        return IntegralMatchingData(chained, _rhs(model, kind), kind, algorithm, model if kind == "library" else None,
                                    key, tuple(hidden.tolist()), jnp.asarray(z0))

    def init(self, model, problem: "IntegralMatchingData", p0, lower, upper) -> PyTree:
        """`p0` checked: required for an ODEModel (and with hidden states); zeros for a
        library (Anonymous 2025's initialisation); the field itself for a neural field."""
        if problem.kind == "ode":
            if p0 is None:
                raise ValueError(f"p0 (the start, shape ({model.n_params},)) is required for an ODEModel.")
            return jnp.asarray(p0, float)
        if p0 is None and problem.hidden and problem.kind == "library":
            raise ValueError("p0 is required with hidden states: the hidden states start as the model's solution "
                             "along the observed ones (zero coefficients would make them constant).")
        if problem.kind == "library":
            return model.zeros() if p0 is None else model.check_theta(p0, "p0")
        if p0 is None:
            return model
        if jax.tree.structure(p0) != jax.tree.structure(model):
            raise ValueError("p0 for a neural field must be a module of the field's structure (or None: the field "
                             "is its own start).")
        return p0

    def solve(self, problem: "IntegralMatchingData", p0, lower, upper) -> Solution:
        """Integral matching from `p0` by the problem's algorithm (pure: jit/vmap it).
        `extras["history"]`: the full loss after each chunk of gradient steps (NaN past the
        end; empty for the other algorithms); with hidden states `extras["node_states"]`,
        every state at the chained collocation nodes."""
        sub = problem.subintervals
        if problem.hidden:
            hidden = jnp.asarray(problem.hidden)
            standardised = problem.kind != "ode"
            features = problem.library.features if problem.kind == "library" else None
            if problem.algorithm == "gradient":
                sol = fit_hidden_gradient(self, problem.rhs, p0, sub, hidden, problem.z0, problem.key, lower, upper,
                                          features=features, standardised=standardised)
            else:
                sol = fit_hidden(self, problem.rhs, p0, sub, hidden, problem.z0, lower, upper, features)
            extras = {"history": sol.history, "node_states": chained_states(sub, hidden, sol.Z)}
            return Solution(sol.theta, sol.loss, sol.num_steps, sol.result, extras)
        if problem.algorithm == "least_squares":
            return self.solve_least_squares(problem.library, sub)
        if problem.algorithm == "gauss_newton":
            return self.solve_gauss_newton(problem.rhs, sub, p0, lower, upper)
        return self.solve_gradient(problem.rhs, p0, sub, problem.key, lower, upper)

    def covariance(self, problem, solution: Solution, kind: str | None = None):
        """Integral matching has no covariance (Anonymous 2025 gives no sampling theory for
        ℓ): refine with `OutputError` or `Hybrid` for intervals. NaN, shaped like a
        parameter vector's covariance where the parameters are a vector."""
        n = jnp.size(solution.params) if problem.kind == "ode" else 0
        return jnp.full((n, n), jnp.nan)

    def batch_problems(self, model, datasets: list, *, key: PRNGKeyArray | None = None, **options):
        """One problem per dataset, each with its own key (split from `key`) for the gradient
        algorithm; all datasets must give the same number of subintervals."""
        keys = [None] * len(datasets) if key is None else list(jax.random.split(key, len(datasets)))
        problems = [self.problem(model, as_dataset(d), key=k, **options) for d, k in zip(datasets, keys)]

        def make(indices):
            arrays, static = eqx.partition([problems[i] for i in indices], eqx.is_array)
            return eqx.combine(jax.tree.map(lambda *x: jnp.stack(x), *arrays), static[0])

        return make, [{} for _ in datasets]


class IntegralMatchingData(eqx.Module):
    """The problem an [`IntegralMatching`][] solve takes: the `subintervals` (chained ones
    with hidden states), the vector field `rhs(u, θ, t)`, the model `kind` ("ode",
    "library" or "neural"), the `algorithm` that runs, the `library` (least squares and
    standardised hidden states), the `key` of the gradient algorithm, and the `hidden`
    state indices with their start `z0`."""

    subintervals: IntegralMatchingProblem
    rhs: Callable = eqx.field(static=True)
    kind: str = eqx.field(static=True)
    algorithm: str = eqx.field(static=True)
    library: PolynomialLibrary | None = None
    key: PRNGKeyArray | None = None
    hidden: tuple[int, ...] = eqx.field(static=True, default=())
    z0: Float[Array, " H"] | None = None


def _rhs(model, kind: str) -> Callable:
    return field_rhs if kind == "neural" else model.rhs
