"""The bounded trust-region Newton solver against scipy and brute force."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _typecheck import unchecked
from scipy.optimize import minimize

from wendyjax.estimators import RESULTS, TrustRegion
from wendyjax.estimators._trust_region import _bfgs_update, _bound_curvature, _trust_region_step

minimise = TrustRegion().minimise  # tolerances 1e-8


def _rosen(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def _fgh(x, _):
    return _rosen(x), jax.grad(_rosen)(x), jax.hessian(_rosen)(x)


_solve = jax.jit(lambda x0, lo, hi, solver=TrustRegion(): solver.minimise(_fgh, x0, lo, hi))


@pytest.mark.slow
@pytest.mark.parametrize(
    "options",
    [{}, {"monotone_scaling": False}, {"monotone_scaling": False, "bound_curvature": True}],
    ids=["monotone", "current", "current-bound-curvature"],
)
@pytest.mark.parametrize("n", [2, 5, 10])
def test_rosenbrock_unbounded_and_bounded(n, options):
    x0 = -1.2 * jnp.ones(n)
    inf = jnp.full(n, jnp.inf)
    solve = lambda x0, lo, hi: _solve(x0, lo, hi, TrustRegion(**options))  # noqa: E731
    if not options.get("bound_curvature"):  # without bounds it adds nothing
        sol = solve(x0, -inf, inf)
        assert sol.result == RESULTS.successful
        np.testing.assert_allclose(sol.params, np.ones(n), atol=1e-7)
    lo, hi = np.full(n, -2.0), np.full(n, 0.8)
    sol = solve(x0, jnp.asarray(lo), jnp.asarray(hi))
    ref = minimize(
        lambda x: float(_rosen(jnp.asarray(x))),
        np.asarray(x0),
        jac=lambda x: np.asarray(jax.grad(_rosen)(jnp.asarray(x))),
        method="L-BFGS-B",
        bounds=list(zip(lo, hi)),
        options=dict(ftol=1e-15, gtol=1e-12, maxiter=10_000),
    )
    assert sol.result == RESULTS.successful
    assert float(sol.objective) <= ref.fun + 1e-10
    np.testing.assert_allclose(sol.params, ref.x, atol=1e-5)
    assert np.all(np.asarray(sol.params) <= hi) and np.all(np.asarray(sol.params) >= lo)


def test_a_variable_the_objective_ignores_stays_put():
    """f(x) = (x₀ − 2)²: x₁ has zero gradient and zero curvature. Both used to end at
    `max_steps` (x₁ sent along the null direction to the trust-region boundary, 4e6 away,
    then 0·∞ = NaN in the Cauchy step at a point whose free gradient is exactly 0)."""
    f = lambda x: (x[0] - 2.0) ** 2 + 0.0 * x[1]  # noqa: E731
    fgh = lambda x, _: (f(x), jax.grad(f)(x), jax.hessian(f)(x))  # noqa: E731
    inf = jnp.full(2, jnp.inf)
    for upper, x0_hat in ((inf, 2.0), (jnp.array([1.0, jnp.inf]), 1.0)):
        sol = jax.jit(lambda x0, hi: minimise(fgh, x0, -inf, hi))(jnp.array([0.0, 0.5]), upper)
        assert sol.result == RESULTS.successful and int(sol.num_steps) <= 2
        np.testing.assert_allclose(sol.params, [x0_hat, 0.5], atol=1e-12)


@pytest.mark.slow
def test_subproblem_is_the_exact_minimiser(rng):
    """Against dense random sampling of the ball, including the hard case."""
    for trial in range(40):
        A = rng.standard_normal((3, 3))
        H, g = (A + A.T) / 2, rng.standard_normal(3)
        if trial % 4 == 0:  # hard case: g orthogonal to the lowest eigenvector
            v = np.linalg.eigh(H)[1][:, 0]
            g -= v * (v @ g)
        radius = rng.uniform(0.1, 3.0)
        s = np.asarray(_trust_region_step(jnp.asarray(H), jnp.asarray(g), radius))
        v = rng.standard_normal((20_000, 3))
        v *= (radius * rng.uniform(size=(20_000, 1)) ** (1 / 3)) / np.linalg.norm(v, axis=1, keepdims=True)
        sampled = np.min(v @ g + 0.5 * np.einsum("ni,ij,nj->n", v, H, v))
        assert np.linalg.norm(s) <= radius * (1 + 1e-8)
        assert g @ s + 0.5 * s @ H @ s <= sampled + 1e-9


def test_nonfinite_start_is_reported_not_raised():
    sol = _solve(jnp.array([jnp.nan, 1.0]), -jnp.full(2, jnp.inf), jnp.full(2, jnp.inf))
    assert sol.result == RESULTS.nonfinite


def test_stops_at_the_noise_floor_of_the_objective():
    """A quadratic whose values carry a deterministic 1e-9 jitter (like an objective
    computed through an adaptive ODE solver) while the model (gradient, Hessian) is
    smooth: once steps reach the noise floor the ratio test rejects them at random; the
    collapsed trust region must end the solve successfully instead of running on."""

    def fgh(x, _):
        f = jnp.sum((x - 1.0) ** 2) + 1e-9 * jnp.sin(1e7 * jnp.sum(x))
        return f, 2.0 * (x - 1.0), jnp.eye(x.shape[0])  # a model of half the curvature

    sol = jax.jit(
        lambda x0: TrustRegion(rtol=1e-10, atol=1e-10).minimise(fgh, x0, jnp.full(3, -jnp.inf), jnp.full(3, jnp.inf))
    )(jnp.array([3.0, -2.0, 0.5]))
    assert sol.result == RESULTS.successful
    assert int(sol.num_steps) < 100
    assert np.allclose(sol.params, 1.0, atol=1e-4)


def test_a_collapse_away_from_stationarity_is_stalled_not_successful():
    """A quadratic with a kink 100|x₀ − 1/2| that its gradient and Hessian leave out (an
    objective that is not smooth, or derivatives missing a term). Every step the model
    promises soon raises f, and the trust region collapses at x ≈ (0.55, −1.25, 0.63)
    with the gradient still (−0.9, −4.5, −0.75): the solve must say "stalled" (it said
    "successful" before the Cauchy-reach check)."""

    def fgh(x, _):
        f = jnp.sum((x - 1.0) ** 2) + 100.0 * jnp.abs(x[0] - 0.5)
        return f, 2.0 * (x - 1.0), 2.0 * jnp.eye(x.shape[0])

    sol = jax.jit(lambda x0: minimise(fgh, x0, jnp.full(3, -jnp.inf), jnp.full(3, jnp.inf)))(
        jnp.array([0.4, -2.0, 0.5])
    )
    assert sol.result == RESULTS.stalled
    assert int(sol.num_steps) < 200
    assert np.max(np.abs(sol.grad)) > 0.5  # far from stationary: a success would be a lie


@pytest.mark.parametrize("bound_curvature", [False, True])
@pytest.mark.parametrize("offset", [0.0, 2.2e-16, 1e-12, 1e-9, 1e-2])
def test_a_start_just_off_a_bound_is_not_taken_for_converged(offset, bound_curvature):
    """x₀ pressed against its bound 1 by a strongly coupled quadratic, starting `offset`
    above it. The free Newton step moves x₀ far below the bound, so the truncated step is
    ~`offset` long and the projected one raises the model; x₀ blocked the Cauchy step too.
    Offsets from an ulp (where a truncated step lands) up to the step tolerance used to
    stop at once, "successfully", at f = 722 (Goodwin-3D's MLE did this after one step)."""
    H, c = jnp.array([[1.0, 0.999], [0.999, 1.0]]), jnp.array([-40.0, 3.0])
    fgh = lambda x, _: (0.5 * (x - c) @ H @ (x - c), H @ (x - c), H)  # noqa: E731
    lo, hi = jnp.array([1.0, -jnp.inf]), jnp.full(2, jnp.inf)
    solver = TrustRegion(bound_curvature=bound_curvature)
    sol = jax.jit(lambda x0: solver.minimise(fgh, x0, lo, hi))(jnp.array([1.0 + offset, 0.0]))
    assert sol.result == RESULTS.successful and int(sol.num_steps) >= 1
    # the minimiser with x₀ on its bound: x₁ = c₁ − H₁₀(1 − c₀)/H₁₁
    np.testing.assert_allclose(sol.params, [1.0, 3.0 - 0.999 * 41.0], atol=1e-7)


@pytest.mark.parametrize("flag", ["monotone_scaling", "newton_decrement", "bound_curvature"])
def test_a_flag_that_is_not_a_bool_is_refused(flag):
    with unchecked(), pytest.raises(TypeError, match=f"{flag} must be True or False, got 'no'"):
        TrustRegion(**{flag: "no"})  # pyright: ignore[reportArgumentType]


def test_the_newton_decrement_ends_a_linearly_converging_gauss_newton_sooner():
    """Gauss–Newton on r(x) = (x + 1, x²/2 + x − 1): f* = 1 at x* = 0, where the model's
    curvature JᵀJ = 2 is twice the true one, so the iterates converge linearly at rate 1/2.
    By default the solve runs until the step is below 1e-8; with `newton_decrement=True` it
    stops once the model promises less than atol + rtol·f = 2e-8, where f − f* is about
    twice that promise (the true curvature is half the model's): so f − f* ≤ 4e-8 (twice
    the margin), in fewer steps."""

    def fgh(x, _):
        r = jnp.stack([x[0] + 1.0, 0.5 * x[0] ** 2 + x[0] - 1.0])
        J = jnp.stack([jnp.ones(1), x[:1] + 1.0])  # (2, 1)
        return 0.5 * r @ r, J.T @ r, J.T @ J

    inf = jnp.full(1, jnp.inf)
    solve = lambda solver: jax.jit(lambda x0: solver.minimise(fgh, x0, -inf, inf))(jnp.array([2.0]))  # noqa: E731
    full = solve(TrustRegion())
    early = solve(TrustRegion(newton_decrement=True))
    assert full.result == RESULTS.successful and early.result == RESULTS.successful
    assert abs(float(full.params[0])) < 1e-7
    assert 0.0 <= float(early.objective) - 1.0 <= 4e-8
    assert int(early.num_steps) < int(full.num_steps)


def test_the_hybrid_hessian_ends_a_crawling_gauss_newton():
    """Gauss–Newton on r(x) = (x + 1, 0.9x² + x − 1): at x* = 0 the model's curvature JᵀJ = 2 is
    ten times the true one, 2 − 2·0.9, so Gauss–Newton converges linearly at rate 0.9: its steps
    lie inside the trust region, whose radius then stays put. With `bfgs_after=k` a BFGS
    approximation takes over after k such steps (Fröhlich & Sorger 2022's hybrid): in one
    variable the secant method, superlinear. All reach x* to the tolerance, the hybrid with
    k = 5 in less than a fifth of Gauss–Newton's steps (with k = 20, less than half); the
    solution's Hessian stays fn's."""
    lam = 0.9

    def fgh(x, _):
        r = jnp.stack([x[0] + 1.0, lam * x[0] ** 2 + x[0] - 1.0])
        J = jnp.stack([jnp.ones(1), 2.0 * lam * x[:1] + 1.0])  # (2, 1)
        return 0.5 * r @ r, J.T @ r, J.T @ J

    inf = jnp.full(1, jnp.inf)
    steps = {}
    for after in (None, 5, 20):
        solver = TrustRegion(bfgs_after=after)
        sol = jax.jit(lambda x0, solver=solver: solver.minimise(fgh, x0, -inf, inf))(jnp.array([2.0]))
        assert sol.result == RESULTS.successful
        assert abs(float(sol.params[0])) < 1e-6
        _, _, hess = fgh(sol.params, None)
        np.testing.assert_array_equal(sol.hess, hess)
        steps[after] = int(sol.num_steps)
    assert 5 * steps[5] < steps[None] and 2 * steps[20] < steps[None]


def test_the_bfgs_update_meets_the_secant_condition_or_keeps_the_matrix(rng):
    B = jnp.asarray(np.diag(rng.uniform(1.0, 3.0, 4)))
    s, y = jnp.asarray(rng.normal(size=4)), jnp.asarray(rng.normal(size=4))
    y = jnp.where(y @ s > 0, y, -y)  # positive curvature
    updated = _bfgs_update(B, s, y)
    np.testing.assert_allclose(updated @ s, y, rtol=1e-12)
    np.testing.assert_allclose(updated, updated.T, rtol=1e-12)
    assert np.all(np.linalg.eigvalsh(np.asarray(updated)) > 0)
    np.testing.assert_array_equal(_bfgs_update(B, s, -y), B)  # negative curvature: kept
    np.testing.assert_array_equal(_bfgs_update(B, jnp.zeros(4), y), B)  # no step: kept


@pytest.mark.parametrize("value", [0, -3, 2.5, True])
def test_bfgs_after_must_be_a_positive_count(value):
    with unchecked(), pytest.raises(ValueError, match=f"bfgs_after must be None .* got {value!r}"):
        TrustRegion(bfgs_after=value)  # pyright: ignore[reportArgumentType]


def test_the_bound_curvature_is_the_gradient_over_the_distance_to_the_bound_it_points_at():
    """Coleman & Li (1996): |g_i| / v_i, v_i the distance to the bound that -g_i points at; 0
    towards an infinite bound, where the gradient vanishes, and for a variable held at the
    bound it is pushed against (not free: no 0 · inf in the model)."""
    x = jnp.array([0.5, 0.5, 0.5, 0.5, 2.0])
    g = jnp.array([3.0, -3.0, 0.0, -3.0, 3.0])
    lower = jnp.array([0.0, 0.0, 0.0, 0.0, 2.0])
    upper = jnp.array([2.0, 2.0, 2.0, jnp.inf, 4.0])
    free = jnp.array([True, True, True, True, False])
    np.testing.assert_array_equal(_bound_curvature(x, g, lower, upper, free), [6.0, 2.0, 0.0, 0.0, 0.0])


def test_the_bound_curvature_ends_where_the_plain_step_does():
    """A quadratic whose unconstrained minimiser lies far outside the box in its weakly
    determined variable x₁ (x₀ + x₁ is well determined): the solution has x₁ on its bound and
    x₀ + x₁ = c₀ + c₁. The plain step reaches it in a step or two (projected Newton steps are exact on a
    quadratic); with the bounds' curvature x₁ approaches its bound geometrically, to the
    tolerance, in a few more steps."""
    H, c = jnp.array([[1.0, 1.0], [1.0, 1.0 + 1e-4]]), jnp.array([0.0, 50.0])
    fgh = lambda x, _: (0.5 * (x - c) @ H @ (x - c), H @ (x - c), H)  # noqa: E731
    lo, hi = jnp.array([-100.0, -5.0]), jnp.array([100.0, 5.0])
    ends = {}
    for bound_curvature in (False, True):
        solver = TrustRegion(bound_curvature=bound_curvature)
        sol = jax.jit(lambda x0, solver=solver: solver.minimise(fgh, x0, lo, hi))(jnp.array([3.0, -4.0]))
        assert sol.result == RESULTS.successful
        np.testing.assert_allclose(sol.params, [45.0, 5.0], atol=1e-6)
        ends[bound_curvature] = int(sol.num_steps)
    assert ends[False] <= ends[True] <= 10
