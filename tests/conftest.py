import os

# One BLAS/LAPACK thread per test process. The suite runs on two xdist workers (one per
# core on CI); OpenBLAS's own threads then only contend with the other worker and with
# XLA (measured on 2 cores: the Lorenz MLE recovery test 99 s with 2 OpenBLAS threads,
# 35 s with 1; the dense eigh of test_nonuniform_grid_requires_a_fixed_radius 39 s → 16 s).
# The environment variable reaches the notebook kernels and subprocesses, which load
# OpenBLAS afresh; threadpoolctl limits the libraries already loaded in this process
# (numpy's, and scipy's, whose LAPACK jaxlib calls on CPU). A value set by the user wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# XLA's classic CPU emitters instead of its MLIR fusion emitters, and otherwise its defaults
# (no persistent compilation cache): three compile-heavy tests take 55 s instead of 76 s on a
# 2-core AMD EPYC without AVX-512 (the docs' Validation page, "The test suite's XLA flags").
# Flags tried before: with --xla_backend_optimization_level=0 StateParameterRegression's fits of
# test_discovery's oscillator once diverged at their first step (on 2026-12-05 the suite took 18 %
# less time that way, but a checked guide printed other rounding). Workers used to die inside
# XLA half-way through the suite: too many memory mappings (_release_compiled_programs below);
# pyproject.toml still reruns a test whose worker died. A value set by the user wins.
#
# Newer XLA (jax 0.11) removed the classic emitters and aborts the process on a flag it does
# not know, before pytest prints anything. So the flag is set only where the running XLA
# accepts it: one short probe in a subprocess, in the process that starts the suite (xdist's
# workers and the tests' subprocesses inherit the result through the environment).
_CLASSIC_EMITTERS = "--xla_cpu_use_fusion_emitters=false"


def _xla_accepts(flags: str) -> bool:
    import subprocess
    import sys

    probe = "import jax; jax.devices()"
    env = {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"}
    try:
        return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, timeout=120).returncode == 0
    except subprocess.TimeoutExpired:
        return False


if "XLA_FLAGS" not in os.environ:
    os.environ["XLA_FLAGS"] = _CLASSIC_EMITTERS if _xla_accepts(_CLASSIC_EMITTERS) else ""

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import threadpoolctl  # noqa: E402

_BLAS_LIMIT = threadpoolctl.threadpool_limits(limits=int(os.environ["OPENBLAS_NUM_THREADS"]), user_api="blas")

jax.config.update("jax_enable_x64", True)


def _memory_mappings() -> tuple[int, int]:
    """This process's memory mappings and the most it may hold (Linux's `vm.max_map_count`);
    (1, 0) where /proc does not say, so that the caller always releases."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            held = sum(1 for _ in maps)
        with open("/proc/sys/vm/max_map_count") as limit:
            return held, int(limit.read())
    except (OSError, ValueError):
        return 1, 0


@pytest.fixture(autouse=True)
def _release_compiled_programs():
    """Compiled XLA:CPU programs hold memory mappings, and a process dies inside XLA once it
    holds `vm.max_map_count` of them (65530 by default): the xdist workers that died "now and
    then" died at the same tests run after run, about half-way through their share of the suite
    (with the limit set to 20000, tests/test_estimators.py and test_contract.py in one process
    abort after 38 tests). The count is checked after every test, not after every module (one
    test adds at most a few thousand, while one module, tests/test_docs_code.py, adds tens of
    thousands), and past half the limit the programs are dropped; below it they are kept for
    later tests that compile the same ones."""
    yield
    held, limit = _memory_mappings()
    if held > limit // 2:
        jax.clear_caches()


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
