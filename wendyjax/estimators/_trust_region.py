r"""Box-constrained trust-region Newton method in pure JAX (`lax.while_loop`).

optimistix has no box constraints, so this is written here for the small dense problems
of WENDy ($J \lesssim 50$ parameters). Each step

1. fixes the *active* variables (within the step tolerance of a bound, with the
   gradient pushing outwards) and
   solves the trust-region subproblem
   $\min_s g^T s + \tfrac12 s^T H s,\ \|D s\| \le \Delta$ exactly on the free ones
   (eigendecomposition and the secular equation of Moré & Sorensen 1983, hard case
   included), with Moré's scaling $D_i = \max_k \sqrt{|H^{(k)}_{ii}|}$ over the iterates
   $k$ so far (or, with `monotone_scaling=False`, the current iterate's $\sqrt{|H_{ii}|}$);
   variables at a bound that the step pushes outwards join the active set and the
   subproblem is re-solved (at most three more rounds, only while that set changes); with
   `bound_curvature=True` the step's model adds Coleman & Li (1996)'s curvature
   $|g_i|/v_i$ towards the bound at distance $v_i$ that the gradient pushes $x_i$ to;
2. makes the step feasible, keeping whichever of the projected step
   $P(x + s) - x$, the truncated step $\tau s$ (largest feasible $\tau\le1$) and the
   scaled projected-gradient Cauchy step has the lowest model value (the last
   guarantees a decrease wherever the projected gradient is non-zero);
3. accepts it when the actual/predicted reduction ratio exceeds $10^{-4}$ and updates
   $\Delta$ by the usual ratio test.

It stops when the next step, inside the trust region, predicts a reduction below
`atol + rtol·|f|` with every component below `atol + rtol·max|x|` (a Newton step that
is both small and changes nothing: it is not taken, which saves one evaluation); with
`newton_decrement=True` also when the full Newton step on the free set, whatever its
length and the radius, predicts a reduction below `atol + rtol·|f|`; when
the scaled trust region shrinks below `atol + rtol·‖Dx‖` (MINPACK's xtol test: every
step at the noise floor of f is rejected), or after `max_steps`. A collapse counts as
convergence only where the model decrease along the projected gradient, over a scaled
step as long as $1 + \|Dx\|$, is below $10^4$ times that reduction tolerance; otherwise
the status is `stalled` (the objective contradicts its derivatives there).
"""

import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PyTree

from .._results import RESULTS

_ETA = 1e-4  # acceptance threshold on the reduction ratio
_ACTIVE_SET_ROUNDS = 3
_STALL_FACTOR = 1e4  # a collapse is "stalled" where the long Cauchy step predicts > this × (atol + rtol|f|)


class TrustRegionSolution(eqx.Module):
    """Result of [`TrustRegion.minimise`][]: the point `params`, the `objective` there, its
    gradient and Hessian, the number of steps and the status; `aux`: `fn`'s fourth output
    there (None unless asked for)."""

    params: Float[Array, " j"]
    objective: Float[Array, ""]
    grad: Float[Array, " j"]
    hess: Float[Array, "j j"]
    num_steps: Int[Array, ""]
    result: RESULTS
    aux: PyTree = None


def _trust_region_step(H, g, radius, n_iter: int = 60):
    r"""Exact minimiser of $g^T s + \frac12 s^T H s$ over $\|s\| \le \Delta$.

    $s(\mu) = -(H + \mu I)^{-1} g$ with $\mu \ge \max(0, -\lambda_{\min})$ solving
    $1/\|s(\mu)\| = 1/\Delta$ by safeguarded Newton iterations (the function is nearly
    linear in $\mu$); in the hard case ($g \perp$ the lowest eigenvector) a multiple of
    that eigenvector fills the step to the boundary.
    """
    lam, V = jnp.linalg.eigh(H)
    a = V.T @ g
    scale = jnp.maximum(jnp.max(jnp.abs(lam)), jnp.finfo(H.dtype).tiny)
    tiny = 1e3 * jnp.finfo(H.dtype).eps * scale

    def coeffs(mu):
        den = lam + mu
        # components whose shifted eigenvalue vanishes contribute nothing when their
        # gradient component vanishes too (the hard case); otherwise they blow up
        return jnp.where(
            jnp.abs(den) > tiny,
            a / jnp.where(jnp.abs(den) > tiny, den, 1.0),
            jnp.where(jnp.abs(a) > tiny * radius, jnp.inf, 0.0),
        )

    mu_lo = jnp.maximum(0.0, -lam[0])
    c_lo = coeffs(mu_lo)
    norm_lo = jnp.linalg.norm(c_lo)
    # positive semi-definite with the minimum-norm minimiser inside: no move along null
    # directions of H that the gradient does not enter (a parameter the objective ignores)
    interior = (lam[0] > -tiny) & (norm_lo <= radius)
    hard = ~interior & (norm_lo < radius)

    mu_hi = mu_lo + jnp.linalg.norm(g) / radius + tiny

    def body(_, state):
        mu, lo, hi = state
        c = a / (lam + mu)
        n = jnp.linalg.norm(c)
        phi = 1.0 / n - 1.0 / radius
        lo = jnp.where(phi < 0, mu, lo)
        hi = jnp.where(phi >= 0, mu, hi)
        dphi = jnp.sum(c**2 / (lam + mu)) / n**3
        newton = mu - phi / dphi
        bad = ~jnp.isfinite(newton) | (newton <= lo) | (newton >= hi)
        return jnp.where(bad, 0.5 * (lo + hi), newton), lo, hi

    mu0 = 0.5 * (mu_lo + mu_hi)
    mu, _, _ = jax.lax.fori_loop(0, n_iter, body, (mu0, mu_lo, mu_hi))
    c_boundary = a / (lam + mu)
    # hard case: c_lo (finite) plus τ along the lowest eigenvector to reach the boundary
    tau = jnp.sqrt(jnp.maximum(radius**2 - jnp.where(hard, norm_lo, 0.0) ** 2, 0.0))
    c_hard = jnp.where(hard, c_lo, 0.0).at[0].add(-tau)
    c = jnp.where(interior, jnp.where(interior, c_lo, 0.0), jnp.where(hard, c_hard, c_boundary))
    return -V @ c


class _State(eqx.Module):
    x: Array
    f: Array
    g: Array
    H: Array
    D: Array
    radius: Array
    proposal: Array
    predicted: Array
    step: Array
    done: Array
    result: RESULTS
    first: Array
    aux: PyTree
    B: Array | None  # the BFGS approximation (`bfgs_after`; None without)
    calm: Array  # steps in a row that left the radius unchanged
    switched: Array  # whether B has replaced fn's Hessian as the step's model


def _model(g, H, s):
    return g @ s + 0.5 * s @ H @ s


def _max_feasible_fraction(x, s, lower, upper, cap=1.0):
    """Largest τ ∈ [0, cap] with lower ≤ x + τ s ≤ upper."""
    up = jnp.where(s > 0, (upper - x) / jnp.where(s > 0, s, 1.0), jnp.inf)
    down = jnp.where(s < 0, (lower - x) / jnp.where(s < 0, s, 1.0), jnp.inf)
    return jnp.clip(jnp.minimum(jnp.min(up), jnp.min(down)), 0.0, cap)


def _scaled_free(H, g, D, free):
    """The model in the scaled variables on the free set: the Hessian (identity on the fixed
    variables) and the gradient (zero there)."""
    both = free[:, None] & free[None, :]
    return jnp.where(both, H / jnp.outer(D, D), jnp.eye(g.size, dtype=g.dtype)), jnp.where(free, g / D, 0.0)


def _free_step(H, g, D, free, radius):
    """Trust-region step in the scaled variables on the free set (zero elsewhere), and
    whether it lies strictly inside the trust region."""
    z = _trust_region_step(*_scaled_free(H, g, D, free), radius)
    return jnp.where(free, z / D, 0.0), jnp.linalg.norm(z) < 0.99 * radius


def _cauchy_step(g, H, D, x, lower, upper, free, radius):
    """Minimiser of the model along the scaled steepest descent $-D^{-2}g$ on the free
    set, within the trust region and the box."""
    d = jnp.where(free, -g / D**2, 0.0)
    length = jnp.linalg.norm(D * d)  # 0 at a stationary point of the free set: no step
    t_max = jnp.minimum(
        jnp.where(length > 0, radius / jnp.where(length > 0, length, 1.0), 0.0),
        _max_feasible_fraction(x, d, lower, upper, jnp.inf),
    )
    curv = d @ H @ d
    t = jnp.where(curv > 0, jnp.minimum(-(g @ d) / jnp.where(curv > 0, curv, 1.0), t_max), t_max)
    return t * d


def _finite(*xs) -> Bool[Array, ""]:
    return jnp.all(jnp.array([jnp.all(jnp.isfinite(x)) for x in xs]))


class TrustRegion(eqx.Module):
    r"""The box-constrained trust-region Newton method of this module, as a solver object
    (the optimiser of WENDy, output error, Data2LD and integral matching's Gauss–Newton):
    `rtol` and `atol` are its relative and absolute tolerances (see the module's stopping
    rule); the step limit `max_steps` is the estimator's, as in optimistix.

    `monotone_scaling`: the trust region is measured in $\|Ds\|$ with $D_i$ the largest
    $\sqrt{|H_{ii}|}$ of any iterate so far (Moré 1978; steady along curved valleys), or
    with `False` the current iterate's: for starts far from the optimum, whose first
    iterates' curvature (objectives of 1e10 and more) would fix $D$ so large that the later
    steps crawl (the PEtab fits' choice).

    `newton_decrement`: also stop where the model's own minimum on the free set lies less
    than `atol + rtol·|f|` below `f` (half the squared Newton decrement, Boyd & Vandenberghe
    2004, §9.5), however long that Newton step and however small the radius: for a
    likelihood, whose weakly determined directions are not worth resolving to
    `atol + rtol·max|x|` and whose last steps, at the ODE solver's noise floor, are mostly
    rejected (the PEtab fits' choice).

    `bound_curvature`: the step minimises the model plus Coleman & Li (1996)'s affine-scaling
    curvature $|g_i|/v_i$, $v_i$ the distance to the bound that the gradient pushes $x_i$
    towards (the predicted reduction stays the model's): a variable the objective barely
    curves along moves about to that bound and no further, and the others' step is solved
    with it so held, instead of a step computed for a point far outside the box and then cut
    or projected onto it (the PEtab fits' choice, whose boxes span decades). Where the
    quadratic model is good it costs steps: a solution on a bound is then approached
    geometrically rather than reached at once.

    `bfgs_after`: with an integer $k$, a BFGS approximation of the Hessian (from the identity,
    updated with every accepted step's change of gradient where its curvature is positive)
    replaces `fn`'s Hessian as the step's model for good once $k$ steps in a row left the
    radius unchanged: the hybrid scheme of Fröhlich & Sorger (2022, fides' `HybridFixed`,
    pyPESTO's default with $k = 20$), for Fisher-information or Gauss–Newton models, whose
    steps far from the optimum (large residuals, curvature they leave out) can crawl for
    hundreds of steps. The solution's `hess` stays `fn`'s (the PEtab fits' choice)."""

    rtol: float = 1e-8
    atol: float = 1e-8
    monotone_scaling: bool = eqx.field(default=True, static=True)
    newton_decrement: bool = eqx.field(default=False, static=True)
    bound_curvature: bool = eqx.field(default=False, static=True)
    bfgs_after: int | None = eqx.field(default=None, static=True)

    def __check_init__(self):
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value < 1):
                raise ValueError(
                    f"TrustRegion: {name} must lie in [0, 1) (e.g. 1e-8), got {value!r}: a tolerance "
                    f"of 1 or more declares any start converged."
                )
        if self.rtol == 0 and self.atol == 0:
            raise ValueError("TrustRegion: rtol and atol cannot both be 0 (the iteration would never stop).")
        for name in ("monotone_scaling", "newton_decrement", "bound_curvature"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"TrustRegion: {name} must be True or False, got {getattr(self, name)!r}.")
        after = self.bfgs_after
        if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 1):
            raise ValueError(
                f"TrustRegion: bfgs_after must be None (always fn's Hessian) or a number of steps of at least 1 "
                f"(e.g. 20), got {after!r}."
            )

    def minimise(
        self,
        fn: Callable[[Float[Array, " j"], PyTree], tuple[Array, Array, Array] | tuple[Array, Array, Array, PyTree]],
        x0: Float[Array, " j"],
        lower: Float[Array, " j"],
        upper: Float[Array, " j"],
        args: PyTree = None,
        *,
        max_steps: int = 500,
        aux: PyTree = None,
    ) -> TrustRegionSolution:
        r"""Minimise $f$ over the box `lower ≤ x ≤ upper` (entries may be ±inf) in at most
        `max_steps` steps.

        `fn(x, args)` returns $(f, \nabla f, H)$ with $H$ the Hessian or any symmetric model
        of it (e.g. Gauss–Newton $J^TJ$). `x0` is projected onto the box. Pure JAX: can be
        jitted and vmapped; failure is reported in `result`, never raised.

        With `aux` (a value of the shape and dtype it will have, e.g. zeros), `fn` returns a
        fourth output, kept from the accepted points and returned as the solution's `aux`:
        what a caller needs at the solution besides $f$, $\nabla f$ and $H$ (e.g. the Jacobian
        of a covariance), without evaluating `fn` there again.
        """
        with_aux = fn if aux is not None else lambda x, a: (*fn(x, a), None)
        return _minimise(
            with_aux, x0, lower, upper, args, self.rtol, self.atol, self.monotone_scaling, self.newton_decrement,
            self.bound_curvature, self.bfgs_after, max_steps, aux,
        )  # fmt: skip


def _bound_curvature(x, g, lower, upper, free):
    r"""Coleman & Li (1996)'s affine-scaling curvature $|g_i| / v_i$ of the `free` variables,
    $v_i > 0$ the distance from $x_i$ to the bound its gradient pushes it towards; 0 where
    that bound is infinite, the gradient vanishes or the variable is held at its bound."""
    v = jnp.where(g < 0, upper - x, jnp.where(g > 0, x - lower, jnp.inf))
    return jnp.where(free, jnp.abs(g) / jnp.where(free, v, 1.0), 0.0)


def _newton_reduction(H, g, D, free):
    """The reduction the model predicts for its full Newton step on the `free` set (half the
    squared Newton decrement), with curvatures below the eigensolver's resolution raised to
    it (a gradient of rounding size along a direction without curvature adds nothing, a real
    one a large amount); `inf` where the model has negative curvature there."""
    Hs, gs = _scaled_free(H, g, D, free)
    lam, V = jnp.linalg.eigh(Hs)
    a = V.T @ gs
    tiny = 1e3 * jnp.finfo(H.dtype).eps * jnp.maximum(jnp.max(jnp.abs(lam)), jnp.finfo(H.dtype).tiny)
    return jnp.where(lam[0] < -tiny, jnp.inf, jnp.sum(0.5 * a**2 / jnp.maximum(lam, tiny)))


def _bfgs_update(B, s, y):
    """BFGS's update of the Hessian approximation `B` by the step `s` and the change of
    gradient `y`; `B` unchanged where the curvature `y·s` is not positive (the update would
    lose positive definiteness) or the step is zero."""
    Bs = B @ s
    ys, sBs = y @ s, s @ Bs
    ok = (ys > 0) & (sBs > 0)
    update = jnp.outer(y, y) / jnp.where(ok, ys, 1.0) - jnp.outer(Bs, Bs) / jnp.where(ok, sBs, 1.0)
    return jnp.where(ok, B + update, B)


def _minimise(
    fn, x0, lower, upper, args, rtol, atol, monotone, decrement, bound_curvature, bfgs_after, max_steps, aux=None
) -> TrustRegionSolution:
    x0 = jnp.clip(x0, lower, upper)

    def propose(x, f, g, H, D, radius):
        """The next step, its predicted reduction, and whether it shows convergence."""
        # variables at a bound that the gradient, or then the Newton-like step, pushes
        # outwards are fixed; the subproblem is re-solved on the rest while that set changes
        # (at most _ACTIVE_SET_ROUNDS times: one eigendecomposition when no bound is hit).
        # "At a bound" means within the step tolerance of it: a truncated step lands an ulp
        # off the bound it was cut at, and a variable left free there blocks every feasible
        # step (truncated and Cauchy alike) at a length the convergence test takes for zero
        xtol = atol + rtol * jnp.max(jnp.abs(x))
        at_lower, at_upper = x - lower <= xtol, upper - x <= xtol
        kkt_free = ~((at_lower & (g > 0)) | (at_upper & (g < 0)))
        # the step's model: with `bound_curvature`, H plus the curvature of the distance to
        # the bound each free variable's gradient pushes it towards; the reductions are H's
        M = H + jnp.diag(_bound_curvature(x, g, lower, upper, kkt_free)) if bound_curvature else H

        def refine(state):
            free, _, _, _, rounds = state
            step, inside = _free_step(M, g, D, free, radius)
            fixed = free & ((at_lower & (step < 0)) | (at_upper & (step > 0)))
            changed = jnp.any(fixed) & (rounds < _ACTIVE_SET_ROUNDS)
            return jnp.where(changed, free & ~fixed, free), step, inside, changed, rounds + 1

        free, step, inside, _, _ = jax.lax.while_loop(
            lambda state: state[3], refine, (kkt_free, jnp.zeros_like(x), jnp.array(False), jnp.array(True), 0)
        )
        # feasible candidates: projected, truncated, and the scaled projected-gradient
        # (Cauchy) step that guarantees progress; the lowest model value wins
        candidates = jnp.stack(
            [
                jnp.clip(x + step, lower, upper) - x,
                _max_feasible_fraction(x, step, lower, upper) * step,
                _cauchy_step(g, M, D, x, lower, upper, free, radius),
            ]
        )
        step = candidates[jnp.argmin(jax.vmap(lambda c: _model(g, M, c))(candidates))]
        predicted = -_model(g, H, step)
        small_x = jnp.max(jnp.abs(step)) <= xtol
        small_f = predicted <= atol + rtol * jnp.abs(f)
        # MINPACK's xtol test: a trust region shrunk below the step tolerance (rejections
        # at the noise floor of f, e.g. an objective through an adaptive ODE solver)
        collapsed = radius <= atol + rtol * jnp.linalg.norm(D * x)
        # ... which is convergence only near a stationary point: where a step along the
        # projected gradient as long as x itself (scaled) would still lower the model by
        # more than the noise allowance, the objective contradicts its own derivatives
        # (not smooth there, or a gradient that is wrong): "stalled", never "successful"
        reach = -_model(g, H, _cauchy_step(g, H, D, x, lower, upper, kkt_free, 1.0 + jnp.linalg.norm(D * x)))
        stalled = collapsed & ~(reach <= _STALL_FACTOR * (atol + rtol * jnp.abs(f)))
        converged = inside & small_x & small_f
        if decrement:  # the model's own minimum lies within the tolerance of f
            converged = converged | (_newton_reduction(H, g, D, free) <= atol + rtol * jnp.abs(f))
        # a converged step is not taken: it changes x by less than the tolerance (or, by the
        # Newton decrement, the objective by less than its tolerance)
        return step, predicted, converged | collapsed, stalled

    # The loop's first pass evaluates `fn` at x0 (a zero proposal, always accepted, not
    # counted as a step): `fn` and the step are traced and compiled once, not twice.
    zero = jnp.zeros_like(x0)
    init = _State(
        x0,
        jnp.array(jnp.inf, x0.dtype),
        zero,
        jnp.zeros((x0.size, x0.size), x0.dtype),
        zero + 1.0,
        jnp.array(0.0, x0.dtype),
        zero,
        jnp.array(0.0, x0.dtype),
        jnp.array(0),
        jnp.array(False),
        RESULTS.successful,
        jnp.array(True),
        aux,
        None if bfgs_after is None else jnp.eye(x0.size, dtype=x0.dtype),
        jnp.array(0),
        jnp.array(False),
    )

    def cond(s: _State):
        return s.first | (~s.done & (s.step < max_steps))

    def body(s: _State):
        x_new = jnp.clip(s.x + s.proposal, lower, upper)
        f_new, g_new, H_new, aux_new = fn(x_new, args)
        ratio = (s.f - f_new) / jnp.where(s.predicted > 0, s.predicted, jnp.inf)
        ok = _finite(f_new, g_new, H_new)
        accept = s.first | (ok & (s.predicted > 0) & (ratio > _ETA))
        scaled_step = jnp.linalg.norm(s.D * s.proposal)

        def pick(new, old):
            return jnp.where(accept, new, old)

        x, f, g, H = pick(x_new, s.x), pick(f_new, s.f), pick(g_new, s.g), pick(H_new, s.H)
        aux = jax.tree.map(pick, aux_new, s.aux)
        current = jnp.sqrt(jnp.maximum(jnp.abs(jnp.diagonal(H)), _diag_floor(H)))
        D = jnp.where(s.first, current, jnp.maximum(s.D, jnp.sqrt(jnp.abs(jnp.diagonal(H))))) if monotone else current
        radius = jnp.where(
            s.first,
            jnp.maximum(jnp.linalg.norm(g / D), 1e-8 * (1.0 + jnp.linalg.norm(D * x))),
            jnp.where(
                ~ok | (ratio < 0.25),
                0.25 * jnp.minimum(scaled_step, s.radius),
                jnp.where((ratio > 0.75) & (scaled_step > 0.9 * s.radius), 2.0 * s.radius, s.radius),
            ),
        )
        if bfgs_after is None:
            B, calm, switched, model = s.B, s.calm, s.switched, H
        else:
            assert s.B is not None  # made with bfgs_after
            update = accept & ~s.first
            B = jnp.where(update, _bfgs_update(s.B, x - s.x, g - s.g), s.B)
            calm = jnp.where(~s.first & (radius == s.radius), s.calm + 1, 0)
            switched = s.switched | (calm >= bfgs_after)
            model = jnp.where(switched, B, H)
        step, predicted, converged, stalled = propose(x, f, g, model, D, radius)
        failed_start = s.first & ~ok
        result = RESULTS.where(failed_start, RESULTS.nonfinite, RESULTS.where(stalled, RESULTS.stalled, s.result))
        return _State(
            x,
            f,
            g,
            H,
            D,
            radius,
            step,
            predicted,
            s.step + jnp.where(s.first, 0, 1),
            converged | failed_start,
            result,
            jnp.array(False),
            aux,
            B,
            calm,
            switched,
        )

    final = jax.lax.while_loop(cond, body, init)
    result = RESULTS.where(final.done, final.result, RESULTS.max_steps_reached)
    return TrustRegionSolution(final.x, final.f, final.g, final.H, final.step, result, final.aux)


def _diag_floor(H):
    return 1e-12 * jnp.maximum(jnp.max(jnp.abs(jnp.diagonal(H))), jnp.finfo(H.dtype).tiny)
