import os

import jax
import numpy as np
import pytest

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
