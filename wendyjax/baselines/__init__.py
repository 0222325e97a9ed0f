"""Baselines on diffrax that the weak-form and integral-matching estimators are compared
with: loss gradients through the ODE solver (backpropagation, continuous adjoint,
forward mode) with exact vector-field evaluation counts. Output error itself is an
estimator: [`wendyjax.OutputError`][wendyjax.estimators.OutputError]."""

from ._gradients import (
    GRADIENT_MODES as GRADIENT_MODES,
    EvaluationCounts as EvaluationCounts,
    trajectory_loss_gradient as trajectory_loss_gradient,
)

__all__ = [
    "GRADIENT_MODES",
    "EvaluationCounts",
    "trajectory_loss_gradient",
]
