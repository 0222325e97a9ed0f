"""A step-size controller that ends a solve which has stopped advancing."""

import diffrax
import equinox as eqx
import jax.numpy as jnp


class RejectionLimit(diffrax.AbstractAdaptiveStepSizeController):
    """`controller`'s steps; the solve fails (diffrax's `dt_min_reached`) where one step has
    been rejected `limit` times in a row. Such a solve has stopped advancing (a trial point of
    a fit where the solution blows up: the steps shrink to the resolution of t and none is
    accepted again) and would otherwise spend every remaining step of `max_steps` on
    rejections. CVODES, behind AMICI, gives up on a step after 7 failed error tests or 10
    failed Newton iterations (its defaults `maxnef`, `maxncf`); this limit is meant to be far
    more patient. Solves that end within it are unchanged."""

    controller: diffrax.AbstractAdaptiveStepSizeController
    limit: int = eqx.field(static=True)

    def __init__(self, controller: diffrax.AbstractAdaptiveStepSizeController, limit: int):
        self.controller, self.limit = controller, limit

    # the controller's tolerances and norm, which diffrax's implicit solvers may take as theirs
    @property
    def rtol(self):
        return self.controller.rtol

    @property
    def atol(self):
        return self.controller.atol

    @property
    def norm(self):
        return self.controller.norm

    def wrap(self, direction):
        controller = self.controller.wrap(direction)
        assert isinstance(controller, diffrax.AbstractAdaptiveStepSizeController)  # as it was
        return RejectionLimit(controller, self.limit)

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        t_next, state = self.controller.init(terms, t0, t1, y0, dt0, args, func, error_order)
        return t_next, (state, jnp.array(0))

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state):
        state, rejected = controller_state
        keep, t_prev, t_next, made_jump, state, result = self.controller.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, state
        )
        rejected = jnp.where(keep, 0, rejected + 1)
        result = diffrax.RESULTS.where(rejected >= self.limit, diffrax.RESULTS.dt_min_reached, result)
        return keep, t_prev, t_next, made_jump, (state, rejected), result
