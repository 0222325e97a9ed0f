r"""Uncertainty of an estimate: parameter covariance, standard errors, confidence intervals,
and the forward-simulation check of a fit.

The covariance functions are pure (jit/vmap over likelihoods and estimates):

- `sandwich_covariance`: Rummel et al. 2025, eq. (9), $(\nabla_p g)^+ S(\hat p) (\nabla_p g)^{+T}$, which
  for a model linear in the parameters is Bortz et al. 2023, eq. (15),
  $\hat\sigma^2 (G^TG)^{-1}G^T \hat C G (G^TG)^{-1}$ ($S$ carries $\hat\sigma^2$ here);
- `hessian_covariance`: the inverse Hessian of ℓ at $\hat p$ (observed information).
"""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats
from jaxtyping import Array, ArrayLike, Bool, Float

from ._compile import cpu_safe_jit
from .model import ODEModel
from .simulate import _solve
from .weak import WeakLikelihood, covariance, nll_hessian, residual, spd_inverse

COVARIANCES = ("sandwich", "hessian")


def undetermined(jac: Float[Array, "m j"]) -> Bool[Array, " j"]:
    """The parameters that a Jacobian `jac` does not determine: a zero column, or weight in
    its numerical null space once its columns are scaled to unit length (so that parameters
    of very different magnitudes are not mistaken for undetermined ones)."""
    norms = jnp.linalg.norm(jac, axis=0)
    _, s, vt = jnp.linalg.svd(jac / jnp.where(norms > 0, norms, 1.0), full_matrices=True)
    j = jac.shape[1]
    s = jnp.zeros(j, s.dtype).at[: s.size].set(s[:j])
    null = s <= jnp.max(s) * max(jac.shape) * jnp.finfo(jac.dtype).eps
    return (norms == 0) | jnp.any(null[:, None] & (jnp.abs(vt) > 1e-6), axis=0)


def without_undetermined(cov: Float[Array, "j j"], jac: Float[Array, "m j"]) -> Float[Array, "j j"]:
    """`cov` with NaN in the rows and columns of the [`undetermined`][] parameters (a
    pseudo-inverse gives them variance 0: the most confident answer where there is none)."""
    bad = undetermined(jac)
    return jnp.where(bad[:, None] | bad[None, :], jnp.nan, cov)


@cpu_safe_jit
def sandwich_covariance(lik: WeakLikelihood, p: Float[Array, " j"]) -> Float[Array, "j j"]:
    r"""$(\nabla_p g)^+ S(p) (\nabla_p g)^{+T}$ (Rummel et al. 2025, eq. 9; Bortz et al. 2023, eq. 15), summed over
    trajectories: $\nabla_p g$ is stacked over them and $S$ is block diagonal. NaN for the
    parameters $\nabla_p g$ does not determine."""
    jac = jax.jacfwd(residual, argnums=1)(lik, p)  # (r, dk, j)
    r, dk, j = jac.shape
    pinv = jnp.linalg.pinv(jac.reshape(r * dk, j)).reshape(j, r, dk)
    return without_undetermined(jnp.einsum("irk,rkl,jrl->ij", pinv, covariance(lik, p), pinv),
                                jac.reshape(r * dk, j))


@cpu_safe_jit
def hessian_covariance(lik: WeakLikelihood, p: Float[Array, " j"]) -> Float[Array, "j j"]:
    r"""$(\nabla^2\ell(p))^{-1}$; NaN where the Hessian is not positive definite."""
    return spd_inverse(nll_hessian(lik, p))


def parameter_covariance(lik: WeakLikelihood, p: Float[Array, " j"], kind: str = "sandwich"):
    """Covariance of the estimate `p` by `kind`: `"sandwich"` or `"hessian"`."""
    if kind == "sandwich":
        return sandwich_covariance(lik, p)
    if kind == "hessian":
        return hessian_covariance(lik, p)
    raise ValueError(f"covariance must be one of {COVARIANCES}, got {kind!r}.")


def confidence_intervals(
    p: ArrayLike, cov: ArrayLike, level: float = 0.95
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
    p: Float[Array, " j"],
    u0: Float[Array, " d"],
    t: Float[Array, " n"],
    reference: Float[Array, "n d"],
    solver: diffrax.AbstractSolver = diffrax.Tsit5(),
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int = 100_000,
) -> tuple[Float[Array, ""], Bool[Array, ""]]:
    r"""$\|\hat U(p, u_0) - U_{\rm ref}\|_F / \|U_{\rm ref}\|_F$ (Rummel et al. 2025, eq. 13) and whether
    the forward solve succeeded (Rummel et al. 2025, eq. 14 counts a failure); inf when it failed.
    Pure: vmappable over estimates and datasets."""
    ys, result = _solve(model.rhs, p, u0, t, solver, jnp.asarray(rtol), jnp.asarray(atol), max_steps,
                        model.jump_ts)
    ok = (result == diffrax.RESULTS.successful) & jnp.all(jnp.isfinite(ys))
    err = jnp.linalg.norm(jnp.where(ok, ys, 0.0) - reference) / jnp.linalg.norm(reference)
    return jnp.where(ok, err, jnp.inf), ok
