"""Work around an XLA:CPU deadlock before JAX starts its backend.

With jaxlib 0.10 the CPU runtime's concurrency-optimised scheduler can deadlock (every
thread idle on a futex, forever) when a vmapped `lax.while_loop` body holds independent
branches with LAPACK calls, which is exactly a batched trust-region fit: jaxlib's batched
Cholesky splits its batch over XLA:CPU's thread pool and waits for the pieces, and once the
scheduler runs such a call on every pool thread, none is left to run them (`gdb`: every
pool thread waiting in `ParallelBatchMap` under `lapack_dpotrf_ffi`). Turning that
scheduler off fixes it (measured: vmapped MLE fits hang within 10 steps with it, never
without it). The flag is appended to `XLA_FLAGS` unless the user set it; it only takes
effect if no JAX computation ran before `import wendyjax`.
"""

import os
import warnings

_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"


def apply() -> None:
    flags = os.environ.get("XLA_FLAGS", "")
    if _FLAG in flags:
        return
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        warnings.warn(
            "wendyjax was imported after JAX started its backend, so it could not set "
            f"XLA_FLAGS={_FLAG}=false; vmapped fits on CPU may deadlock. Import wendyjax "
            "before running JAX code, or set that flag in the environment.",
            RuntimeWarning, stacklevel=3,
        )
        return
    os.environ["XLA_FLAGS"] = f"{flags} {_FLAG}=false".strip()
