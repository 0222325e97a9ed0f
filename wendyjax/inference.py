r"""Uncertainty of an estimate: parameter covariance, standard errors, confidence intervals,
and the forward-simulation check of a fit.

The covariance functions are pure (jit/vmap over likelihoods and estimates):

- `sandwich_covariance`: Rummel et al. 2025, eq. (9), $(\nabla_p g)^+ S(\hat p) (\nabla_p g)^{+T}$, which
  for a model linear in the parameters is Bortz et al. 2023, eq. (15),
  $\hat\sigma^2 (G^TG)^{-1}G^T \hat C G (G^TG)^{-1}$ ($S$ carries $\hat\sigma^2$ here);
- `hessian_covariance`: the inverse Hessian of ℓ at $\hat p$ (observed information).
"""

import dataclasses
from collections.abc import Callable

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats
from jaxtyping import Array, Bool, Float

from . import _typing
from ._checks import as_ode_solver
from ._compile import cpu_safe_jit
from ._derived import derived_values
from ._table import fixed_width
from .model import ODEModel
from .simulate import _solve
from .weak import WeakLikelihood, covariance, nll_hessian, residual, spd_inverse

COVARIANCES = ("sandwich", "hessian")


def _scaled_svd(jac):
    """SVD of `jac` with its columns scaled to unit length: (column norms, singular values,
    right singular vectors (j, j), left ones, null mask). Fewer rows than columns are
    padded with zero rows, so that the null space is complete."""
    m, j = jac.shape
    if m < j:
        jac = jnp.concatenate([jac, jnp.zeros((j - m, j), jac.dtype)])
    norms = jnp.linalg.norm(jac, axis=0)
    u, s, vt = jnp.linalg.svd(jac / jnp.where(norms > 0, norms, 1.0), full_matrices=False)
    null = s <= jnp.max(s) * max(m, j) * jnp.finfo(jac.dtype).eps
    return norms, s, vt, u[:m], null


def _flag(norms, vt, null):
    return (norms == 0) | jnp.any(null[:, None] & (jnp.abs(vt) > 1e-6), axis=0)


def undetermined(jac: Float[Array | np.ndarray, "m j"]) -> Bool[Array, " j"]:
    """The parameters that a Jacobian `jac` does not determine: a zero column, or weight in
    its numerical null space once its columns are scaled to unit length (so that parameters
    of very different magnitudes are not mistaken for undetermined ones)."""
    norms, _, vt, _, null = _scaled_svd(jac)
    return _flag(norms, vt, null)


def determined_pinv(jac: Float[Array | np.ndarray, "m j"]) -> Float[Array, "j m"]:
    """The pseudo-inverse of `jac` from the SVD of its column-scaled form, with NaN in the
    rows of the [`undetermined`][] parameters (a plain pseudo-inverse gives them variance 0:
    the most confident answer where there is none). One SVD, never of $J^TJ$, whose squared
    condition number would drop weakly determined directions as if they were null."""
    norms, s, vt, u, null = _scaled_svd(jac)
    inv_s = jnp.where(null, 0.0, 1.0 / jnp.where(null, 1.0, s))
    pinv = (vt.T * inv_s) @ u.T / jnp.where(norms > 0, norms, 1.0)[:, None]
    return jnp.where(_flag(norms, vt, null)[:, None], jnp.nan, pinv)


@cpu_safe_jit
def sandwich_covariance(lik: WeakLikelihood, p: Float[Array, " j"]) -> Float[Array, "j j"]:
    r"""$(\nabla_p g)^+ S(p) (\nabla_p g)^{+T}$ (Rummel et al. 2025, eq. 9; Bortz et al. 2023, eq. 15), summed over
    trajectories: $\nabla_p g$ is stacked over them and $S$ is block diagonal. NaN for the
    parameters $\nabla_p g$ does not determine."""
    jac = jax.jacfwd(residual, argnums=1)(lik, p)  # (r, dk, j)
    r, dk, j = jac.shape
    pinv = determined_pinv(jac.reshape(r * dk, j)).reshape(j, r, dk)
    return jnp.einsum("irk,rkl,jrl->ij", pinv, covariance(lik, p), pinv)


@cpu_safe_jit
def hessian_covariance(lik: WeakLikelihood, p: Float[Array, " j"]) -> Float[Array, "j j"]:
    r"""$(\nabla^2\ell(p))^{-1}$: NaN for the parameters the Hessian does not determine
    ([`undetermined`][]), the inverse of its block on the others; all NaN where that block
    is not positive definite (not a minimum)."""
    return _inverse_hessian(nll_hessian(lik, p))


def _inverse_hessian(hess: Float[Array, "j j"]) -> Float[Array, "j j"]:
    """[`hessian_covariance`][] from the Hessian itself."""
    bad = undetermined(hess)
    both = bad[:, None] | bad[None, :]
    inv = spd_inverse(jnp.where(both, jnp.eye(hess.shape[0], dtype=hess.dtype), hess))
    return jnp.where(both, jnp.nan, inv)


def parameter_covariance(
    lik: WeakLikelihood, p: Float[Array, " j"], kind: str = "sandwich", *, hessian: Float[Array, "j j"] | None = None
) -> Float[Array, "j j"]:
    r"""Covariance of the estimate `p` by `kind`: `"sandwich"` or `"hessian"`. `hessian`:
    $\nabla^2\ell(p)$ where it is at hand (WENDy-MLE's trust region ends with it), used by
    `"hessian"` instead of computing it again."""
    if kind == "sandwich":
        return sandwich_covariance(lik, p)
    if kind == "hessian":
        return hessian_covariance(lik, p) if hessian is None else _inverse_hessian(hessian)
    raise ValueError(f"covariance must be one of {COVARIANCES}, got {kind!r}.")


def weak_directions(
    p: _typing.ArrayLike, cov: _typing.ArrayLike, level: float = 0.95
) -> list[tuple[float, np.ndarray]]:
    r"""The combinations of parameters whose normal `level` interval contains 0 (relative
    standard error above $1/z_{(1+c)/2}$, 0.51 at 95 %: not even the sign of the combination
    is determined), weakest first, as `(relative standard error, unit weights)`; the
    weights act on $p_j/|\hat p_j|$.

    Eigen-directions of $D^{-1} C D^{-1}$, $D = \mathrm{diag}|\hat p|$, over the parameters
    with a finite variance and a non-zero estimate. One weak parameter gives a direction
    along itself; two that only their product or ratio fixes (constant data, parameters
    entering together) give one along their combination."""
    p, cov = np.asarray(p, float), np.asarray(cov, float)
    if p.ndim != 1 or cov.shape != (p.size, p.size):
        return []
    keep = np.flatnonzero(np.isfinite(np.diagonal(cov)) & (p != 0))
    sub = cov[np.ix_(keep, keep)]
    if keep.size == 0 or not np.all(np.isfinite(sub)):
        return []
    threshold = 1.0 / scipy.stats.norm.ppf(0.5 + level / 2)
    scale = np.abs(p[keep])
    lam, vec = np.linalg.eigh(sub / np.outer(scale, scale))
    out = []
    for i in np.argsort(lam)[::-1]:
        if lam[i] <= threshold**2:
            break
        w = np.zeros(p.size)
        w[keep] = vec[:, i] * np.sign(vec[np.argmax(np.abs(vec[:, i])), i])
        out.append((float(np.sqrt(lam[i])), w))
    return out


def confidence_intervals(
    p: _typing.ArrayLike, cov: _typing.ArrayLike, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    r"""Normal confidence intervals $\hat p_j \pm z_{(1+c)/2}\sqrt{C_{jj}}$ (Bortz et al. 2023, eq. 16)."""
    if not 0 < level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}.")
    p, cov = np.asarray(p), np.asarray(cov)
    half = scipy.stats.norm.ppf(0.5 + level / 2) * np.sqrt(np.diagonal(cov, axis1=-2, axis2=-1))
    return p - half, p + half


@cpu_safe_jit
def forward_simulation_error(
    model: ODEModel,
    p: Float[Array | np.ndarray, " j"],
    u0: Float[Array | np.ndarray, " d"],
    t: Float[Array | np.ndarray, " n"],
    reference: Float[Array | np.ndarray, "n d"],
    solver: diffrax.AbstractSolver = diffrax.Tsit5(),
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int = 100_000,
) -> tuple[Float[Array, ""], Bool[Array, ""]]:
    r"""$\|\hat U(p, u_0) - U_{\rm ref}\|_F / \|U_{\rm ref}\|_F$ (Rummel et al. 2025, eq. 13) and whether
    the forward solve succeeded (Rummel et al. 2025, eq. 14 counts a failure); inf when it failed.
    Pure: vmappable over estimates and datasets."""
    as_ode_solver("solver", solver)
    ys, result = _solve(model.rhs, p, u0, t, solver, jnp.asarray(rtol), jnp.asarray(atol), max_steps, model.jump_ts)
    ok = (result == diffrax.RESULTS.successful) & jnp.all(jnp.isfinite(ys))
    err = jnp.linalg.norm(jnp.where(ok, ys, 0.0) - reference) / jnp.linalg.norm(reference)
    return jnp.where(ok, err, jnp.inf), ok


__all__ = [
    "COVARIANCES",
    "undetermined",
    "determined_pinv",
    "sandwich_covariance",
    "hessian_covariance",
    "parameter_covariance",
    "weak_directions",
    "confidence_intervals",
    "forward_simulation_error",
]


def delta_method(fn: Callable, params: _typing.ArrayLike, cov: _typing.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    r"""`fn(params)` and its covariance $J\,C\,J^T$ by the delta method, $J$ the Jacobian of
    `fn` (autodiff). A quantity that depends on a parameter without a standard error (NaN
    in `cov`) gets NaN; one that does not depend on it is unaffected."""
    value, jac = derived_values(fn, params)
    cov = np.asarray(cov, float)
    unknown = ~np.isfinite(np.diagonal(cov))
    out = jac @ np.where(np.isfinite(cov), cov, 0.0) @ jac.T
    touched = np.any(jac[:, unknown] != 0, axis=1)
    out[touched, :] = np.nan
    out[:, touched] = np.nan
    return value, out


@dataclasses.dataclass(frozen=True)
class Derived:
    """Quantities derived from a fit's parameters (e.g. R0 = β/γ) with their covariance by
    the delta method ([`fit.derived`][wendyjax.estimators.AbstractFit.derived]): `names`,
    `estimate`, `covariance`, and the `covariance_method` of the fit they come from."""

    names: tuple[str, ...]
    estimate: np.ndarray
    covariance: np.ndarray
    covariance_method: str

    @property
    def stderr(self) -> np.ndarray:
        """Standard errors (NaN where a parameter they depend on has none)."""
        return np.sqrt(np.diagonal(self.covariance))

    def ci(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) normal intervals at `level`: local, like the fit's Wald intervals;
        a bootstrap's ([`Bootstrap.derived`][wendyjax.studies.Bootstrap.derived]) follow
        the quantity where it is not linear in the parameters."""
        return confidence_intervals(self.estimate, self.covariance, level)

    def table(self, level: float = 0.95) -> str:
        """Estimate, standard error and interval of each quantity."""
        lo, hi = self.ci(level)
        pct = f"{100 * level:g}%"
        rows = [[n, *(f"{v: .6g}" for v in vals)] for n, *vals in zip(self.names, self.estimate, self.stderr, lo, hi)]
        head = f"derived quantities, delta method from the {self.covariance_method} covariance"
        return "\n".join([head, *fixed_width(["name", "estimate", "std err", f"{pct} lower", f"{pct} upper"], rows)])

    def __str__(self) -> str:
        return self.table()
