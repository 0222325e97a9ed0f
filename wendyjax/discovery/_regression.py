r"""Sparse state-and-parameter regression (Meissner & Glasner 2024): states and coefficients fitted jointly by
Levenberg–Marquardt (Algorithm 2), terms selected by drop-$k$ subset search scored by an
information criterion (Algorithm 1), the whole search one `lax.while_loop`."""

import math
from collections.abc import Callable
from typing import ClassVar, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int, PRNGKeyArray, PyTree

from .. import _typing
from .._results import RESULTS
from ..data import Batch, Dataset, Field, as_data
from ..estimators import AbstractEstimator, Solution
from ..library import AbstractLibrary
from ._levenberg_marquardt import LevenbergMarquardt, LMSolution
from ._problem import HESSIAN_KINDS, DiscoveryProblem, discovery_problem
from ._result import Discovery, SearchHistory
from ._start import fill_missing, interpolate_missing, smooth_missing

_STARTS = {"data": fill_missing, "smoothed": lambda p: smooth_missing(p)[0], "interpolated": interpolate_missing}


def drop_terms(mask: Bool[Array, "F D"], theta: Float[Array, "F D"], k: Int[ArrayLike, ""]) -> Bool[Array, "F D"]:
    """`mask` with its `k` active entries of least |theta| switched off, ranked over the whole
    coefficient matrix (as Meissner & Glasner 2024's code does), ties by position (a stable sort)."""
    active, size = mask.ravel(), jnp.abs(theta).ravel()
    by_size = jnp.argsort(size, stable=True)
    order = by_size[jnp.argsort(~active[by_size], stable=True)]  # active entries first, by size
    off = jnp.zeros(active.shape, bool).at[order].set(jnp.arange(active.size) < k)
    return (active & ~off).reshape(mask.shape)


class SearchProblem(eqx.Module):
    """What [`StateParameterRegression.solve`][] takes: the regression `problem`, the starting
    states `u0` and `max_models`, the most models the search tests (static: the length of
    its history arrays)."""

    problem: DiscoveryProblem
    u0: Float[Array, "T *space D"]
    max_models: int = eqx.field(static=True)


class _Model(eqx.Module):
    """One tested mask in the search's carry: both fits' coefficients and states, its score."""

    mask: Array
    params: Array
    params_sparse: Array
    states: Array
    states_sparse: Array
    criterion: Array


class _Search(eqx.Module):
    """State of Algorithm 1: models tested, drop size `k`, phase, the last two accepted models
    (`last` is the full library's fit while none is accepted), the second-best model terms
    are added back to, the next mask and its start, and the record."""

    count: Array
    k: Array
    forward: Array
    single: Array  # a one-term drop was accepted in the forward phase
    n_accepted: Array
    has_second: Array
    running: Array
    mask: Array
    start: tuple[Array, Array]
    last: _Model
    before: _Model
    second: _Model
    history: SearchHistory


def _pick(condition: Array, a: PyTree, b: PyTree) -> PyTree:
    return jax.tree.map(lambda x, y: jnp.where(condition, x, y), a, b)


class StateParameterRegression(AbstractEstimator):
    r"""Equation discovery by sparse state and parameter regression (Meissner & Glasner 2024).

    Minimises Meissner & Glasner 2024, eq. 12 over the states $u$ and the coefficients $\Theta$
    jointly, the states tied to the data by $\lambda$ on the observed entries only, for a
    sequence of term masks chosen by Algorithm 1: from the full library, drop the `k0`
    smallest coefficients of the penalised fit ($R$ > 0, eq. 11) while the information
    criterion of the unpenalised fit (eq. 10; BIC eq. 9 or AIC) improves; at the first
    rejection go back to the last accepted model and drop one term at a time; if even one
    dropped term is rejected, add terms back one at a time from the second-best model.
    Where the paper's pseudocode and prose disagree this follows the prose (and its authors'
    code): after a one-term drop has been accepted, the next rejection ends the search; a
    rejection in the backward phase ends it too. A fit that fails (status other than
    converged or step limit) scores +inf and is rejected.

    **Arguments:** `lam` ($\lambda$, model/data variance ratio), `penalty` ($R$), `eps` (the
    smoothed-$\ell_0$ width $\varepsilon$; the paper gives no value, its code uses
    $2\varepsilon^2 = 1$), `k0` (terms dropped per forward step; the paper's code uses 3),
    `criterion` ("bic" or "aic"), `solver` (the Levenberg–Marquardt settings).

    `fit(model, data, p0=None, *, u0="data", max_models=100)`: `model` a `PolynomialLibrary`
    (ODEs) or `FiniteDifferenceLibrary` (PDEs); `data` a [`Trajectory`][wendyjax.Trajectory]
    (or a `Dataset` of one) for ODEs, a [`Field`][wendyjax.Field] for PDEs, on a uniform
    time grid, the mask marking the missing entries; `p0` the starting coefficient matrix
    `(n_features, n_states)` or one number for all (default 0.1, the paper's code's); no
    bounds (the fits are unconstrained). Options: `u0`, the starting states: `"data"`
    (Meissner & Glasner 2024, §5: the data, missing entries filled from the next
    observation of the same point), `"smoothed"` (a Gaussian kernel smoother of the
    observations, widths by leave-one-out cross-validation, `smooth_missing`: not the
    paper's, for heavy noise), `"interpolated"` (the data, missing entries from that
    smoother, `interpolate_missing`) or an array of the states' shape `(T, *space, D)`;
    `max_models`, the most models tested (a static size: another value compiles again). A
    failed fit of the full library (no model to start the search from) raises, or with
    `throw=False` is the status.

    `solve` runs the whole search in one `lax.while_loop` (jit- and vmap-able: a Monte Carlo
    of discovery runs vmapped); its [`Solution`][wendyjax.estimators.Solution]: `params` the selected
    coefficient matrix, `objective` its information criterion, `num_steps` the models tested,
    `extras` the selected `support` and `states` and the `history` ([`SearchHistory`][]).
    No covariance (`covariances = ()`)."""

    lam: float = 1e-2
    penalty: float = 1e-4
    eps: float = 1.0 / math.sqrt(2.0)
    k0: int = eqx.field(static=True, default=3)
    criterion: Literal["bic", "aic"] = eqx.field(static=True, default="bic")
    solver: LevenbergMarquardt = LevenbergMarquardt()
    method: ClassVar[str] = "state_parameter_regression"
    covariances: ClassVar[tuple[str, ...]] = ()
    fit_type: ClassVar[type] = Discovery

    def __check_init__(self):
        if not (self.lam > 0 and self.penalty >= 0 and self.eps > 0):
            raise ValueError(
                f"lam and eps must be positive and penalty non-negative, got lam={self.lam}, "
                f"penalty={self.penalty}, eps={self.eps}."
            )
        if not (isinstance(self.k0, int) and self.k0 >= 1):
            raise ValueError(f"k0 must be a positive integer, got {self.k0!r}.")
        if self.criterion not in ("bic", "aic"):
            raise ValueError(f"criterion must be 'bic' or 'aic', got {self.criterion!r}.")

    # -- the estimator contract -------------------------------------------------------
    def problem(
        self,
        model: AbstractLibrary,
        data: Field | Dataset,
        *,
        key: PRNGKeyArray | None = None,
        u0: _typing.ArrayLike | Literal["data", "smoothed", "interpolated"] = "data",
        max_models: int = 100,
    ) -> SearchProblem:
        """The regression problem of `data` for the library `model` ([`discovery_problem`][]),
        its starting states `u0` and the bound `max_models` (see the class); `key` is unused."""
        if not isinstance(model, AbstractLibrary):
            raise TypeError(
                f"model must be a wendyjax library (PolynomialLibrary, FiniteDifferenceLibrary) for "
                f"{type(self).__name__}, got {type(model).__name__}."
            )
        if isinstance(u0, str) and u0 not in _STARTS:
            raise ValueError(
                f"u0 must be 'data', 'smoothed', 'interpolated' or an array of the states' shape, got {u0!r}."
            )
        if not (isinstance(max_models, int) and not isinstance(max_models, bool) and max_models >= 1):
            raise ValueError(f"max_models must be a positive integer, got {max_models!r}.")
        problem = discovery_problem(data, model, hessian=HESSIAN_KINDS[self.solver.linear_solver])
        states = jnp.asarray(_STARTS[u0](problem) if isinstance(u0, str) else u0, float)
        if states.shape != problem.state_shape:
            raise ValueError(f"u0 must have the shape of the states {problem.state_shape}, got {states.shape}.")
        if not jnp.all(jnp.isfinite(states)):
            raise ValueError("u0 must be finite.")
        return SearchProblem(problem, states, max_models)

    def init(self, model: AbstractLibrary, problem: SearchProblem, p0, lower, upper) -> Float[Array, "F D"]:
        """`p0` as a finite coefficient matrix of the library (a number for every entry; 0.1 by default)."""
        theta = np.asarray(0.1 if p0 is None else p0, float)
        if theta.ndim == 0:
            theta = np.full((model.n_features, model.n_states), theta)
        theta = model.check_theta(theta, "p0")
        if not jnp.all(jnp.isfinite(theta)):
            raise ValueError("p0 (the starting coefficients) must be finite.")
        return theta

    def solve(self, problem: SearchProblem, p0: Float[Array, "F D"], lower=None, upper=None) -> Solution:
        """Algorithm 1 from the full library and the start `(problem.u0, p0)` (pure: jit/vmap
        it; `lower`, `upper` unused). `result`: successful once a model is accepted; if the
        full library's fit fails, `nonfinite` (a non-finite objective at the start) or
        `nonlinear_divergence` (the fit stalled), with that fit as the estimate."""
        reg, size = problem.problem, problem.max_models

        def fits(start: tuple[Array, Array], mask) -> tuple[LMSolution, LMSolution]:
            pair = self.fit_pair(reg, *start, mask.astype(p0.dtype))
            return tuple(jax.tree.map(lambda x, i=i: x[i], pair) for i in (0, 1))

        zero = _Model(jnp.zeros(p0.shape, bool), p0, p0, problem.u0, problem.u0, jnp.asarray(jnp.inf, p0.dtype))
        history = SearchHistory(
            masks=jnp.zeros((size, *p0.shape), bool),
            params=jnp.zeros((size, *p0.shape), p0.dtype),
            params_sparse=jnp.zeros((size, *p0.shape), p0.dtype),
            loss=jnp.full(size, jnp.nan, p0.dtype),
            criterion=jnp.full(size, jnp.nan, p0.dtype),
            result=jax.tree.map(lambda x: jnp.zeros((size, 2), jnp.asarray(x).dtype), RESULTS.successful),
            num_steps=jnp.zeros((size, 2), int),
            accepted=jnp.zeros(size, bool),
        )
        search = _Search(
            count=jnp.asarray(0),
            k=jnp.asarray(self.k0),
            forward=jnp.asarray(True),
            single=jnp.asarray(False),
            n_accepted=jnp.asarray(0),
            has_second=jnp.asarray(False),
            running=jnp.asarray(True),
            mask=jnp.ones(p0.shape, bool),
            start=(problem.u0, p0),
            last=zero,
            before=zero,
            second=zero,
            history=history,
        )

        def body(s: _Search) -> _Search:
            plain, sparse = fits(s.start, s.mask)
            ok = plain.successful | (plain.result == RESULTS.max_steps_reached)
            score = jnp.where(ok, self.information_criterion(reg, plain.loss_lambda, jnp.sum(s.mask)), jnp.inf)
            accept = score < jnp.where(s.n_accepted > 0, s.last.criterion, jnp.inf)
            new = _Model(s.mask, plain.params, sparse.params, plain.states, sparse.states, score)
            refine = ~accept & s.forward & (s.k > 1) & (s.n_accepted >= 1)  # first rejected bulk drop
            back = ~accept & ~refine & s.forward & ~s.single & s.has_second  # add terms back
            base = _pick(accept & s.forward, new, _pick(refine, s.last, s.second))  # the model to drop from
            k = jnp.where(accept, jnp.where(s.forward, s.k, s.k - 1), jnp.where(refine, 1, self.k0 - 1))
            k = jnp.minimum(k, jnp.sum(base.mask) - 1)
            start = _pick(accept, new, base)
            statuses = jax.tree.map(lambda a, b: jnp.stack([a, b]), plain.result, sparse.result)
            row = SearchHistory(
                s.mask,
                plain.params,
                sparse.params,
                plain.loss_lambda,
                score,
                statuses,
                jnp.stack([plain.num_steps, sparse.num_steps]),
                accept,
            )
            history = jax.tree.map(lambda h, x: h.at[s.count].set(x), s.history, row)
            count = s.count + 1
            return _Search(
                count=count,
                k=k,
                forward=s.forward & ~back,
                single=s.single | (accept & s.forward & (s.k == 1)),
                n_accepted=s.n_accepted + accept,
                has_second=jnp.where(refine, s.n_accepted >= 2, s.has_second),
                running=(accept | refine | back) & (k > 0) & (count < size),
                mask=jnp.where(k > 0, drop_terms(base.mask, base.params_sparse, k), s.mask),
                start=(start.states_sparse, start.params_sparse),
                last=_pick(accept | (s.count == 0), new, s.last),
                before=_pick(accept, s.last, s.before),
                second=_pick(refine, s.before, s.second),
                history=history,
            )

        final = jax.lax.while_loop(lambda s: s.running, body, search)
        first = jax.tree.map(lambda x: x[0, 0], final.history.result)
        result = RESULTS.where(
            final.n_accepted > 0,
            RESULTS.successful,
            RESULTS.where(first == RESULTS.nonfinite, RESULTS.nonfinite, RESULTS.nonlinear_divergence),
        )
        best = final.last
        return Solution(
            best.params,
            best.criterion,
            final.count,
            result,
            {"support": best.mask, "states": best.states, "history": final.history},
        )

    def covariance(self, problem: SearchProblem, solution: Solution, kind: str | None = None) -> Float[Array, "j j"]:
        """No covariance (Meissner & Glasner 2024 give no sampling theory for the selected
        model): NaN, one row per coefficient (the order of the library's `param_names`)."""
        n = jnp.size(solution.params)
        return jnp.full((n, n), jnp.nan)

    def batch_problems(
        self, model: AbstractLibrary, datasets: "Batch | list", **options
    ) -> tuple[Callable, list[dict]]:
        """One problem per dataset, stacked (all of one shape, so one compiled search serves all)."""
        problems = [self.problem(model, as_data(d), **options) for d in datasets]

        def make(indices):
            arrays, static = eqx.partition([problems[i] for i in indices], eqx.is_array)
            return eqx.combine(jax.tree.map(lambda *x: jnp.stack(x), *arrays), static[0])

        return make, [{} for _ in datasets]

    # -- the pieces -----------------------------------------------------------------------
    def fit_terms(
        self,
        problem: DiscoveryProblem,
        u0: Float[Array, "T *space D"],
        theta0: Float[Array, "F D"],
        mask: Float[Array, "F D"],
        penalty: ArrayLike,
    ) -> LMSolution:
        """One fit of eq. 12 for the term `mask` (eqs. 10-11), a pure function of arrays."""
        return self.solver(problem, u0, theta0, mask, self.lam, penalty, self.eps)

    def fit_pair(
        self,
        problem: DiscoveryProblem,
        u0: Float[Array, "T *space D"],
        theta0: Float[Array, "F D"],
        mask: Float[Array, "F D"],
    ) -> LMSolution:
        """The unpenalised and the penalised fit from one start, vmapped (the paper: "in
        parallel"): an `LMSolution` batched along a leading axis of 2."""
        return jax.vmap(self.fit_terms, in_axes=(None, None, None, None, 0))(
            problem, u0, theta0, mask, jnp.asarray([0.0, self.penalty])
        )

    def information_criterion(
        self, problem: DiscoveryProblem, loss_lambda: Float[ArrayLike, ""], n_terms: Int[ArrayLike, ""]
    ) -> Float[Array, ""]:
        r"""Meissner & Glasner 2024, eq. 9: $\hat n \ln \mathcal L_\lambda + \ln(\hat n)\, d$ (BIC) or
        $\hat n \ln \mathcal L_\lambda + 2d$ (AIC), $\hat n$ the number of observed values and $d$ the
        number of active terms."""
        n_hat = problem.n_observed.astype(float)
        weight = jnp.log(n_hat) if self.criterion == "bic" else 2.0
        return n_hat * jnp.log(loss_lambda) + weight * n_terms
