"""Loss gradients through diffrax (backprop, continuous adjoint, forward mode) and their
vector-field evaluation counts."""

from typing import Any

import equinox as eqx
import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest
from _typecheck import unchecked

from wendyjax.baselines import trajectory_loss_gradient


@pytest.fixture(scope="module")
def neural_ode():
    mlp = eqx.nn.MLP(2, 2, 8, 2, activation=jnp.tanh, key=jax.random.key(0))
    theta, static = eqx.partition(mlp, eqx.is_array)

    def vector_field(t, x, th):
        return eqx.combine(th, static)(x)

    t = jnp.linspace(0.0, 2.0, 21)
    y = jnp.stack([jnp.cos(t), -jnp.sin(t)], axis=1)
    return vector_field, theta, jnp.array([1.0, 0.0]), t, y


@pytest.mark.slow
def test_gradient_modes_agree_with_each_other_and_finite_differences(neural_ode):
    f, theta, x0, t, y = neural_ode
    tight: dict[str, Any] = {"rtol": 1e-10, "atol": 1e-10}
    flat = {}
    for mode in ("backprop", "backsolve", "forward"):
        value, grad, counts = trajectory_loss_gradient(f, theta, x0, t, y, mode=mode, **tight)
        assert counts is None
        flat[mode] = np.asarray(jax.flatten_util.ravel_pytree(grad)[0])
    scale = np.linalg.norm(flat["backprop"])
    # forward mode differentiates the same discrete solve as backpropagation
    assert np.linalg.norm(flat["forward"] - flat["backprop"]) < 1e-8 * scale
    # the continuous adjoint solves the adjoint ODE to the tolerance: close, not equal
    assert np.linalg.norm(flat["backsolve"] - flat["backprop"]) < 1e-5 * scale
    # central difference along a random direction
    v_flat, unravel = jax.flatten_util.ravel_pytree(theta)
    direction = np.random.default_rng(0).normal(size=v_flat.shape)
    h = 1e-5

    def loss(v):
        return float(trajectory_loss_gradient(f, unravel(jnp.asarray(v)), x0, t, y, **tight)[0])

    fd = (loss(v_flat + h * direction) - loss(v_flat - h * direction)) / (2 * h)
    assert fd == pytest.approx(float(flat["backprop"] @ direction), rel=1e-6)


@pytest.mark.slow
def test_evaluation_counts(neural_ode):
    f, theta, x0, t, y = neural_ode
    n_params = jax.flatten_util.ravel_pytree(theta)[0].size
    _, _, bp = trajectory_loss_gradient(f, theta, x0, t, y, mode="backprop", count=True)
    _, _, fw = trajectory_loss_gradient(f, theta, x0, t, y, mode="forward", count=True)
    _, _, bs = trajectory_loss_gradient(f, theta, x0, t, y, mode="backsolve", count=True)
    assert bp is not None and fw is not None and bs is not None  # count=True
    # forward mode: the value solve and the tangent solve make the same n_f primal calls,
    # and the tangent solve one JVP per parameter at each of them
    n_f = fw.primal // 2
    assert fw.primal == 2 * n_f and fw.vjp == 0 and fw.jvp == n_params * n_f
    # backpropagation: one VJP per stage evaluation of the forward solve, which is
    # recomputed from checkpoints in the backward pass
    assert bp.vjp == n_f and bp.primal >= 2 * n_f and bp.jvp == 0
    # the continuous adjoint solves a second (augmented) ODE backwards
    assert bs.vjp > 0 and bs.primal > n_f and bs.total > bp.total


@pytest.mark.slow
def test_batch_of_windows_is_the_mean_of_single_windows(neural_ode):
    f, theta, _, t, y = neural_ode
    starts = [0, 5, 11]
    ts, ys = (jnp.stack([a[s : s + 8] for s in starts]) for a in (t, y))
    x0s = ys[:, 0]
    value, grad, _ = trajectory_loss_gradient(f, theta, x0s, ts, ys)
    singles = [trajectory_loss_gradient(f, theta, x0s[i], ts[i], ys[i]) for i in range(3)]
    assert float(value) == pytest.approx(np.mean([float(v) for v, _, _ in singles]), rel=1e-12)
    mean_grad = jax.tree.map(lambda *g: sum(g) / 3, *[g for _, g, _ in singles])
    for a, b in zip(jax.tree.leaves(grad), jax.tree.leaves(mean_grad)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-14)
    with pytest.raises(ValueError, match="same leading axis"):
        trajectory_loss_gradient(f, theta, x0s[:2], ts, ys)
    with pytest.raises(ValueError, match="count=False"):
        trajectory_loss_gradient(f, theta, x0s, ts, ys, count=True)


def test_bad_arguments(neural_ode):
    """The function's own messages (under the run-time type checks the annotations' shapes and
    `mode`'s literal refuse these first)."""
    f, theta, x0, t, y = neural_ode
    with pytest.raises(ValueError, match="mode must be one of"), unchecked():
        trajectory_loss_gradient(f, theta, x0, t, y, mode="adjoint")  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(ValueError, match="y must have shape"), unchecked():
        trajectory_loss_gradient(f, theta, x0, t, y[:, :1])
    with pytest.raises(ValueError, match="t must have shape"), unchecked():
        trajectory_loss_gradient(f, theta, x0, t[:1], y[:1])
