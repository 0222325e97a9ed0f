r"""Sparse state-and-parameter regression (Meissner & Glasner 2024): states and coefficients fitted jointly by
Levenberg–Marquardt (Algorithm 2), terms selected by drop-$k$ subset search scored by an
information criterion (Algorithm 1)."""

import math
import time
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from .._compile import cpu_safe_jit
from .._results import RESULTS, status_names
from ..library import AbstractLibrary
from ._levenberg_marquardt import LevenbergMarquardt, LMSolution
from ._problem import HESSIAN_KINDS, DiscoveryProblem, discovery_problem
from ._result import Candidate, Discovery
from ._start import fill_missing, interpolate_missing, smooth_missing


def _drop(mask: np.ndarray, theta: np.ndarray, k: int) -> np.ndarray:
    """`mask` with its `k` active entries of least |theta| switched off (ranked over the
    whole coefficient matrix, as Meissner & Glasner 2024's code does)."""
    active = np.flatnonzero(mask.ravel())
    order = active[np.argsort(np.abs(theta.ravel()[active]), kind="stable")]
    out = mask.copy().ravel()
    out[order[:k]] = False
    return out.reshape(mask.shape)


class StateParameterRegression(eqx.Module):
    r"""Equation discovery by sparse state and parameter regression (Meissner & Glasner, Meissner & Glasner 2024).

    Minimises Meissner & Glasner 2024, eq. 12 over the states $u$ and the coefficients $\Theta$ jointly, with the
    states tied to the data by $\lambda$ on the observed entries only, for a sequence of
    term masks chosen by Algorithm 1: from the full library, drop the `k0` smallest
    coefficients of the penalised fit ($R$ > 0, eq. 11) while the information criterion of
    the unpenalised fit (eq. 10; BIC eq. 9 or AIC) improves; at the first rejection go back
    to the last accepted model and drop one term at a time; if even one dropped term is
    rejected, add terms back one at a time from the second-best model. Where Meissner & Glasner 2024's
    pseudocode and prose disagree this follows the prose (and its authors' code): after a
    one-term drop has been accepted, the next rejection ends the search; a rejection in the
    backward phase ends it too.

    **Arguments:** `lam` ($\lambda$, model/data variance ratio), `penalty` ($R$), `eps` (the
    smoothed-$\ell_0$ width $\varepsilon$; Meissner & Glasner 2024 gives no value, its code uses $2\varepsilon^2 = 1$),
    `k0` (terms dropped per forward step; Meissner & Glasner 2024's code uses 3), `criterion` ("bic" or "aic"),
    `solver` (the Levenberg–Marquardt settings)."""

    lam: float = 1e-2
    penalty: float = 1e-4
    eps: float = 1.0 / math.sqrt(2.0)
    k0: int = eqx.field(static=True, default=3)
    criterion: Literal["bic", "aic"] = eqx.field(static=True, default="bic")
    solver: LevenbergMarquardt = LevenbergMarquardt()

    def __check_init__(self):
        if not (self.lam > 0 and self.penalty >= 0 and self.eps > 0):
            raise ValueError(f"lam and eps must be positive and penalty non-negative, got lam={self.lam}, "
                             f"penalty={self.penalty}, eps={self.eps}.")
        if not (isinstance(self.k0, int) and self.k0 >= 1):
            raise ValueError(f"k0 must be a positive integer, got {self.k0!r}.")
        if self.criterion not in ("bic", "aic"):
            raise ValueError(f"criterion must be 'bic' or 'aic', got {self.criterion!r}.")

    def solve(self, problem: DiscoveryProblem, u0: Array, theta0: Array, mask: Array, penalty: ArrayLike) -> LMSolution:
        """One fit of eq. 12 for the term `mask` (eqs. 10-11), a pure function of arrays."""
        return self.solver(problem, u0, theta0, mask, self.lam, penalty, self.eps)

    @cpu_safe_jit
    def _solve_pair(self, problem, u0, theta0, mask):
        """The unpenalised and the penalised fit from one start, vmapped (Meissner & Glasner 2024: "in parallel")."""
        return jax.vmap(self.solve, in_axes=(None, None, None, None, 0))(
            problem, u0, theta0, mask, jnp.asarray([0.0, self.penalty]))

    def information_criterion(self, problem: DiscoveryProblem, loss_lambda: ArrayLike, n_terms: int) -> float:
        r"""Meissner & Glasner 2024, eq. 9: $\hat n \ln \mathcal L_\lambda + \ln(\hat n)\, d$ (BIC) or
        $\hat n \ln \mathcal L_\lambda + 2d$ (AIC), $\hat n$ the number of observed values and $d$ the
        number of active terms."""
        n_hat = float(problem.n_observed)
        weight = math.log(n_hat) if self.criterion == "bic" else 2.0
        return n_hat * math.log(float(loss_lambda)) + weight * n_terms

    def fit(self, data: ArrayLike, library: AbstractLibrary, dt: float, mask: ArrayLike | None = None,
            theta0: ArrayLike | float = 0.1, u0: ArrayLike | Literal["data", "smoothed", "interpolated"] = "data",
            max_models: int = 100,
            verbose: bool = False) -> Discovery:
        """Discover which library terms the data follow.

        **Arguments:**

        - `data`: shape `(T, D)` for ODEs, `(T, *space, D)` for fields (`D` may be left out
          for one field), on a uniform time grid of step `dt`; missing entries NaN or marked
          False in `mask`.
        - `library`: a `PolynomialLibrary` (ODEs) or `FiniteDifferenceLibrary` (PDEs).
        - `theta0`: starting coefficients (a number for all; Meissner & Glasner 2024's code uses 0.1).
        - `u0`: starting states: `"data"` (Meissner & Glasner 2024, §5: the data, missing entries filled from the
          next observation of the same point), `"smoothed"` (a Gaussian kernel smoother of the
          observations, widths chosen by leave-one-out cross-validation, `smooth_missing`;
          not Meissner & Glasner 2024's: for heavy noise, where the fit from the raw data can go astray),
          `"interpolated"` (the data, missing entries from that smoother,
          `interpolate_missing`: forward filling gives a point missing at one of few time
          levels a zero time difference), or an array of the states' shape.
        - `max_models`: a bound on the number of masks tested.
        - `verbose`: print a line per tested model (terms, score, steps, seconds).
        """
        starts = {"data": fill_missing, "smoothed": lambda p: smooth_missing(p)[0], "interpolated": interpolate_missing}
        if isinstance(u0, str) and u0 not in starts:
            raise ValueError(f"u0 must be 'data', 'smoothed', 'interpolated' or an array of the states' shape, "
                             f"got {u0!r}.")
        problem = discovery_problem(data, library, dt, mask,
                                    hessian=HESSIAN_KINDS[self.solver.linear_solver])
        shape = problem.state_shape
        if isinstance(u0, str):
            u0 = starts[u0](problem)
        u0 = jnp.asarray(u0, float)
        if u0.shape != shape:
            raise ValueError(f"u0 must have the shape of the states {shape}, got {u0.shape}.")
        theta0 = jnp.broadcast_to(jnp.asarray(theta0, float), (library.n_features, library.n_states))
        if not (jnp.all(jnp.isfinite(u0)) and jnp.all(jnp.isfinite(theta0))):
            raise ValueError("u0 and theta0 must be finite.")
        if not (isinstance(max_models, int) and max_models >= 1):
            raise ValueError(f"max_models must be a positive integer, got {max_models!r}.")

        history: list[Candidate] = []
        accepted: list[Candidate] = []

        def test(mask: np.ndarray, start: tuple[Array, Array]) -> tuple[Candidate, bool]:
            clock = time.perf_counter()
            pair = self._solve_pair(problem, *start, jnp.asarray(mask, float))
            plain, sparse = (jax.tree.map(lambda x, i=i: x[i], pair) for i in (0, 1))
            ok = bool(plain.successful) or bool(plain.result == RESULTS.max_steps_reached)
            ic = self.information_criterion(problem, plain.loss_lambda, int(mask.sum())) if ok else math.inf
            best = min((c.ic for c in accepted), default=math.inf)
            candidate = Candidate(mask=mask, theta=np.asarray(plain.theta), theta_sparse=np.asarray(sparse.theta),
                                  u=np.asarray(plain.u), u_sparse=sparse.u, loss=float(plain.loss_lambda), ic=ic,
                                  status=(plain.result, sparse.result),
                                  n_steps=(int(plain.n_steps), int(sparse.n_steps)),
                                  seconds=time.perf_counter() - clock)
            history.append(candidate)
            if verbose:
                print(f"model {len(history) - 1}: {candidate.n_terms} terms, {self.criterion.upper()} {ic:.6g}"
                      f"{' (accepted)' if ic < best else ''}, {candidate.n_steps[0]}/{candidate.n_steps[1]} steps, "
                      f"{candidate.seconds:.1f} s", flush=True)
            return candidate, ic < best

        mask = np.ones((library.n_features, library.n_states), bool)
        start = (u0, theta0)
        k, forward, single_accepted, second_best = self.k0, True, False, None
        while k > 0 and len(history) < max_models:
            candidate, accept = test(mask, start)
            if accept:
                accepted.append(candidate)
                start = (candidate.u_sparse, jnp.asarray(candidate.theta_sparse))
                if forward:
                    single_accepted |= k == 1
                    base = candidate
                else:
                    k -= 1
                    base = second_best
            elif forward and k > 1 and len(accepted) >= 1:  # first rejection of a bulk drop: refine
                second_best = accepted[-2] if len(accepted) >= 2 else None
                k, base = 1, accepted[-1]
                start = (base.u_sparse, jnp.asarray(base.theta_sparse))
            elif forward and not single_accepted and second_best is not None:  # add terms back
                forward, k, base = False, self.k0 - 1, second_best
                start = (base.u_sparse, jnp.asarray(base.theta_sparse))
            else:
                break
            k = min(k, int(base.mask.sum()) - 1)
            if k > 0:
                mask = _drop(base.mask, base.theta_sparse, k)
        if not accepted:
            raise RuntimeError(f"the fit of the full library failed ({status_names(history[0].status[0])}): no model "
                               f"to start the search from. Try another theta0 or u0.")
        return Discovery(library=library, problem=problem, best=min(accepted, key=lambda c: c.ic), history=history,
                         criterion=self.criterion)
