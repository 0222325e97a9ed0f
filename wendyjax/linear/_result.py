"""The result of a Data2LD fit: estimate, t-based intervals, the smooth with its bands,
the continuation path."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

from .._results import RESULTS
from ..estimators import AbstractFit
from ._bspline import BSplineBasis
from ._model import LinearODE
from ._problem import Data2LDProblem, fitted, smooth


@dataclasses.dataclass(frozen=True, repr=False)
class Data2LDFit(AbstractFit):
    r"""A Data2LD fit (Carey & Ramsay 2021): [`AbstractFit`][] plus the selected `rho` (`gamma` its
    logit), the spline coefficients `coef` `(D, K)` of $\hat x$, the diagnostics `df`,
    `dof` = N − df, `sigma2` = SSE/dof, `gcv`, `mse` = SSE/N, and the continuation `path`
    (arrays per stage: `gamma`, `rho`, `theta`, `H`, `stderr`, `successful`, `valid`).
    `model` is the companion first-order [`ODEModel`][wendyjax.ODEModel] (for `simulate`);
    `linear_model` the [`LinearODE`][]; `t` and `y` `(n, D)` the data (NaN where missing).
    Intervals use Student t with `dof` degrees of freedom, as the Data2LD code."""

    covariance: np.ndarray  # never None for Data2LD
    linear_model: LinearODE
    basis: BSplineBasis
    problem: Data2LDProblem
    t: np.ndarray
    y: np.ndarray
    rho: float
    gamma: float
    coef: np.ndarray
    df: float
    dof: float
    sigma2: float
    gcv: float
    mse: float
    path: dict

    @classmethod
    def from_solution(
        cls, estimator, model: LinearODE, problem: Data2LDProblem, p0, solution, covariance, kind: str, seconds: float
    ) -> "Data2LDFit":
        ex, path = solution.extras, solution.extras["path"]
        valid = np.asarray(path.valid)
        D = len(model.variables)
        return cls(
            **cls._common(estimator, model.ode_model(), p0, solution, covariance, kind, seconds, "gaussian"),
            linear_model=model,
            basis=estimator.basis,
            problem=problem,
            t=np.asarray(problem.t),
            y=np.where(np.asarray(problem.mask) > 0, np.asarray(problem.y), np.nan),
            rho=float(ex["rho"]),
            gamma=float(ex["gamma"]),
            coef=np.asarray(ex["coef"]).reshape(D, -1),
            df=float(ex["df"]),
            dof=float(ex["dof"]),
            sigma2=float(ex["sigma2"]),
            gcv=float(ex["gcv"]),
            mse=float(solution.objective),
            path={
                "gamma": np.asarray(path.gamma)[valid],
                "rho": np.asarray(path.rho)[valid],
                "theta": np.asarray(path.theta)[valid],
                "H": np.asarray(path.H)[valid],
                "stderr": np.asarray(path.stderr)[valid],
                "successful": np.asarray(path.result == RESULTS.successful)[valid],
                "selected": int(np.sum(valid[: int(path.selected)])),
            },
        )

    def _quantile(self, level: float) -> float:
        if not 0 < level < 1:
            raise ValueError(f"level must lie strictly between 0 and 1, got {level}.")
        return float(scipy.stats.t.ppf(0.5 + level / 2, self.dof))

    def ci(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        r"""$\hat\theta_j \pm t_{(1+c)/2,\,N-df}\,\mathrm{se}_j$ (Carey & Ramsay 2021, §3.3; the code's intervals)."""
        half = self._quantile(level) * self.stderr
        return self.params - half, self.params + half

    def curve(self, t, deriv: int = 0) -> np.ndarray:
        """$D^r\\hat x_v(t)$ of the fitted smooth, shape `(len(t), D)`."""
        t = self.basis.check_points(t, "t")
        return np.asarray(self.basis(t, deriv) @ self.coef.T)

    def bands(self, t, level: float = 0.95) -> dict[str, np.ndarray]:
        r"""Pointwise bands of $\hat x$ at `t` (the Data2LD code, Carey & Ramsay 2021, Fig. 4): the confidence
        band $\hat x \pm t_{N-df}\sqrt{v}$ with $v = \mathrm{diag}(\Phi\,\partial_\theta\hat c\,
        \mathrm{Cov}(\hat\theta)\,\partial_\theta\hat c^T\Phi^T)$ (θ-uncertainty only, as the
        code) and the prediction band $\hat x \pm t_{N-df}\sqrt{v + \hat\sigma^2}$. Returns
        `x`, `lower`, `upper`, `pred_lower`, `pred_upper`, each `(len(t), D)`."""
        t = self.basis.check_points(t, "t")
        q = self._quantile(level)
        phi = self.basis(t)

        def x_of(theta):
            coef, _ = smooth(self.problem, theta, jnp.asarray(self.rho))
            return fitted(self.problem, coef, phi)

        jac = np.asarray(jax.jacfwd(x_of)(jnp.asarray(self.params)))  # (n, D, J)
        x = self.curve(t)
        var = np.einsum("ndj,jk,ndk->nd", jac, self.covariance, jac)
        half, pred = q * np.sqrt(var), q * np.sqrt(var + self.sigma2)
        return {"x": x, "lower": x - half, "upper": x + half, "pred_lower": x - pred, "pred_upper": x + pred}

    def _extra_dict(self) -> dict:
        return {
            "rho": self.rho,
            "gamma": self.gamma,
            "df": self.df,
            "sigma2": self.sigma2,
            "gcv": self.gcv,
            "mse": self.mse,
        }

    @property
    def title(self) -> str:
        return "Data2LD"

    @property
    def model_name(self) -> str:
        """The name of the fitted `LinearODE`."""
        return self.linear_model.name

    def _head(self) -> list[str]:
        return [
            f"Data2LD fit of '{self.linear_model.name}': {self._status_text}",
            f"  ρ = {self.rho:.6g} (γ = {self.gamma:g})   df = {self.df:.4g}   MSE = {self.mse:.4g}   "
            f"σ̂ = {np.sqrt(self.sigma2):.4g}   GCV = {self.gcv:.4g}   GN steps = {self.num_steps}   "
            f"covariance: {self.covariance_method} (t, {self.dof:.4g} dof)",
        ]
