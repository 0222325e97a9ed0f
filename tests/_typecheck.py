"""The run-time type checks of `--jaxtyping-packages=wendyjax,beartype.beartype` (pyproject's
addopts), switched off for a test of what a user sees.

Under those checks an argument of the wrong type (a solver's name where a solver object is
annotated, a float where an int is) is refused by its annotation before the function's own
check runs. A user, who runs without them, gets the function's message: the tests of those
messages call the function inside `unchecked()`."""

import contextlib

import jaxtyping
from beartype import BeartypeConf, beartype


@contextlib.contextmanager
def unchecked():
    """No jaxtyping/beartype checks of wendyjax's annotations inside the block."""
    before = jaxtyping.config.jaxtyping_disable
    jaxtyping.config.update("jaxtyping_disable", True)
    try:
        yield
    finally:
        jaxtyping.config.update("jaxtyping_disable", before)


checker = beartype(conf=BeartypeConf(is_pep484_tower=True))
"""The run-time checker (pyproject's `--jaxtyping-packages=wendyjax,_typecheck.checker`): beartype with
PEP 484's numeric tower, so that an `int` passes where a `float` is annotated, as it does for the type
checker and for every user who writes `level=1` or `eta=9`."""
