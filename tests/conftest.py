import os
import shutil
import tempfile

# One BLAS/LAPACK thread per test process. The suite runs on two xdist workers (one per
# core on CI); OpenBLAS's own threads then only contend with the other worker and with
# XLA (measured on 2 cores: the Lorenz MLE recovery test 99 s with 2 OpenBLAS threads,
# 35 s with 1; the dense eigh of test_nonuniform_grid_requires_a_fixed_radius 39 s → 16 s).
# The environment variable reaches the notebook kernels and subprocesses, which load
# OpenBLAS afresh; threadpoolctl limits the libraries already loaded in this process
# (numpy's, and scipy's, whose LAPACK jaxlib calls on CPU). A value set by the user wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# One XLA compilation cache for the whole run, shared by the xdist workers and the notebook
# kernels (they inherit the environment): many tests compile the same programs (the same
# model's likelihood, solver or study at the same shapes) from different closures, which
# the in-memory jit caches miss but the persistent cache, keyed by the compiled program,
# hits. It starts empty each run and is removed at its end (measured on 2 cores:
# tests/test_estimators.py 174 s → 143 s). A directory set by the user wins.
_XLA_CACHE = None
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _XLA_CACHE = os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="wendyjax-tests-xla-")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

# The suite is dominated by compiling many small programs, not by running them, so the tests
# run XLA's CPU backend without LLVM optimisation, which saves more compile time than it costs
# in run time (measured on 2 cores: tests/test_estimators.py + test_discovery.py 239 s → 200 s,
# test_output_error.py 111 s → 97 s): a code-generation choice of the same optimised HLO.
# Not also the classic elemental emitters (--xla_cpu_use_fusion_emitters=false), which saved
# another 25 s on each of three heavy tests: with both flags, on an AMD EPYC without AVX-512
# (jax 0.10.2), jit(vmap(StateParameterRegression().solve)) over two datasets diverged on the
# second (nonlinear_divergence at the first step) while each flag alone, no flag, the
# unjitted vmap and each single jitted solve succeeded (test_discovery's vmapped-solve test).
# Tests only; the benchmarks and users' code keep XLA's defaults. A value set by the user wins.
for _flag, _value in (("--xla_backend_optimization_level", "0"),):
    if _flag not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_flag}={_value}".strip()

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import threadpoolctl  # noqa: E402

_BLAS_LIMIT = threadpoolctl.threadpool_limits(limits=int(os.environ["OPENBLAS_NUM_THREADS"]), user_api="blas")

jax.config.update("jax_enable_x64", True)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def _central_difference(f, x, h):
    """Central finite differences of a scalar or vector function, one column per x_j."""
    x = np.asarray(x, dtype=float)
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = h[j] if np.ndim(h) else h
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * e[j]))
    return np.stack(cols, axis=-1)


@pytest.fixture
def central_difference():
    return _central_difference


os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_unconfigure(config):
    if _XLA_CACHE is not None:  # the process that made the cache (the xdist controller)
        shutil.rmtree(_XLA_CACHE, ignore_errors=True)
