"""A warning when a fit is set up in float32, JAX's default."""

import warnings

import jax


def warn_if_float32(what: str, stacklevel: int) -> None:
    """Warn that `what` will compute in float32 unless `jax_enable_x64` is on: the weak
    covariances' Cholesky factorisations and the solvers' stopping tolerances (1e-8) are
    meant for float64. `stacklevel`: as `warnings.warn`'s, counted from the caller."""
    if not jax.config.jax_enable_x64:
        warnings.warn(
            f"{what}: JAX is in float32 (jax_enable_x64 is off), so the fit's covariance "
            "factorisations and solver tolerances (1e-8) work with 7 digits; estimates and "
            "intervals can differ from float64's. Call jax.config.update('jax_enable_x64', True) "
            "at the start of the program.",
            UserWarning, stacklevel=stacklevel + 1,
        )
