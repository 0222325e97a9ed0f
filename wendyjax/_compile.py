"""Compiling wendyjax's own batched programs safely on CPU.

jaxlib 0.10's batched LAPACK kernels (a vmapped Cholesky, as in a batch of trust-region
fits) split their batch over XLA:CPU's thread pool and wait for the pieces; under XLA's
concurrency-optimised scheduler every pool thread can end up waiting, and the program
hangs (`gdb`: every pool thread in `ParallelBatchMap` under `lapack_dpotrf_ffi`). XLA's
memory-optimised scheduler does not do this. wendyjax asks for it per compiled program,
only for the programs it compiles itself and only on CPU: importing wendyjax changes
nothing else in the process (no `XLA_FLAGS`, no JAX configuration).
"""

import functools
import os
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import equinox as eqx
import jax

#: XLA options under which vmapped fits cannot deadlock XLA:CPU. wendyjax passes them to
#: the programs it compiles itself on CPU. Calling its solvers inside your own `jax.jit`
#: (or `grad`, `lax.map`, …) leaves the choice to your outermost compilation: pass
#: `compiler_options=wendyjax.CPU_COMPILER_OPTIONS` to that `jax.jit`, or set
#: `XLA_FLAGS=--xla_cpu_scheduler_type=CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED` before JAX starts.
CPU_COMPILER_OPTIONS = {"xla_cpu_scheduler_type": "CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED"}

_USER_CHOICE = ("xla_cpu_scheduler_type", "xla_cpu_enable_concurrency_optimized_scheduler")

_Args = ParamSpec("_Args")
_Out = TypeVar("_Out")


def cpu_safe_jit(fun: Callable[_Args, _Out]) -> Callable[_Args, _Out]:
    """`eqx.filter_jit(fun)`, compiled on CPU with [`CPU_COMPILER_OPTIONS`][] unless the
    user chose a scheduler in `XLA_FLAGS`. JAX accepts compiler options only on an
    outermost `jit`: traced inside another transformation, `fun` compiles as part of it."""
    scoped = eqx.filter_jit(fun, compiler_options=CPU_COMPILER_OPTIONS)  # pyright: ignore[reportCallIssue]  # equinox's overloads omit the **jitkwargs it passes to jax.jit
    plain = eqx.filter_jit(fun)

    @functools.wraps(fun)
    def call(*args: _Args.args, **kwargs: _Args.kwargs) -> _Out:
        flags = os.environ.get("XLA_FLAGS", "")
        if jax.default_backend() != "cpu" or any(name in flags for name in _USER_CHOICE):
            return plain(*args, **kwargs)
        try:
            return scoped(*args, **kwargs)
        except ValueError as e:  # traced inside a caller's transformation
            if "can only be passed to top-level" not in str(e):
                raise
            return plain(*args, **kwargs)

    return call


def per_run(vectorize: bool, fn, *args):
    """`fn` over the leading axis of `args`: vmapped, or one run after another inside the
    compiled call (`lax.map`), which is faster on CPU, where batched small matrix products
    and factorisations are slower per run than unbatched ones."""
    if vectorize:
        return jax.vmap(fn)(*args)
    return jax.lax.map(lambda a: fn(*a), args)


def resolve_vectorize(vectorize, devices) -> bool:
    """`vectorize` ("auto", True or False) as a bool for `devices`: "auto" vectorizes on
    accelerators and maps on CPU; True on several CPU devices is refused."""
    if vectorize == "auto":
        return any(d.platform != "cpu" for d in devices)
    if not isinstance(vectorize, bool):
        raise ValueError(f"vectorize must be 'auto', True or False, got {vectorize!r}.")
    if vectorize and sum(d.platform == "cpu" for d in devices) > 1:
        # jaxlib 0.10's batched LAPACK kernels (a vmapped Cholesky) split the batch over
        # XLA:CPU's thread pool and wait for the pieces; with every pool thread running one
        # device's shard, all of them wait forever (measured: 2 CPU devices on 2 cores)
        raise ValueError(
            "vectorize=True with several CPU devices deadlocks XLA:CPU's batched LAPACK kernels; "
            "use vectorize=False (the CPU default) or one CPU device."
        )
    return vectorize
