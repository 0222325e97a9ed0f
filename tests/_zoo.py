"""One benchmark object per zoo system and test process.

The zoo's models reuse their compiled programs across calls (their right-hand sides are
module-level functions; tested in test_contract.py), so this cache only saves building
each model's checks (index check, linearity detection) again. The benchmarks are
immutable equinox modules, so sharing them carries no state from one test to the next.
test_model_data.py keeps calling the factories themselves: it tests them.
"""

import functools

import pytest

import wendyjax as wj


@functools.cache
def zoo(name: str) -> wj.models.Benchmark:
    """`wj.models.<name>()`, built once per process."""
    return getattr(wj.models, name)()


@functools.cache
def logistic_small_data() -> wj.Trajectory:
    """The logistic at 5 % noise on 65 samples (subsample 16, seed 0), without the fit of
    `logistic_small()` (about 5 s) for the tests that need only the data."""
    import jax

    return zoo("logistic").simulate(jax.random.key(0), 0.05, subsample=16)


@functools.cache
def logistic_small() -> tuple[wj.models.Benchmark, wj.Trajectory, "wj.WENDyFit"]:
    """`logistic_small_data()` and its WENDy-MLE fit with the inverse-Hessian covariance:
    the bootstrap's and the profiles' test problem."""
    bench, data = zoo("logistic"), logistic_small_data()
    return bench, data, wj.MLE().fit(bench.model, data, covariance="hessian")


# The module-scoped fixtures `data` and `mle_fit` of the modules that test the bootstrap, the
# profiles and fit records on logistic_small(): imported there (pytest registers a fixture
# under its `name`, whatever the module calls the import).
@pytest.fixture(scope="module", name="data")
def logistic_small_data_fixture() -> wj.Trajectory:
    """`logistic_small_data()`: 65 samples, 5 % noise."""
    return logistic_small_data()


@pytest.fixture(scope="module", name="mle_fit")
def logistic_small_fit_fixture() -> "wj.WENDyFit":
    """The WENDy-MLE fit of `logistic_small()`."""
    return logistic_small()[2]
