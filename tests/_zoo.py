"""One benchmark object per zoo system and test process.

The zoo's models reuse their compiled programs across calls (their right-hand sides are
module-level functions; tested in test_contract.py), so this cache only saves building
each model's checks (index check, linearity detection) again. The benchmarks are
immutable equinox modules, so sharing them carries no state from one test to the next.
test_model_data.py keeps calling the factories themselves: it tests them.
"""

import functools

import wendyjax as wj


@functools.cache
def zoo(name: str) -> wj.models.Benchmark:
    """`wj.models.<name>()`, built once per process."""
    return getattr(wj.models, name)()


@functools.cache
def logistic_small() -> tuple[wj.models.Benchmark, wj.Trajectory, "wj.WENDyFit"]:
    """The logistic at 5 % noise on 65 samples (subsample 16, seed 0) and its WENDy-MLE fit
    with the inverse-Hessian covariance: the bootstrap's and the profiles' test problem."""
    import jax

    bench = zoo("logistic")
    data = bench.simulate(jax.random.key(0), 0.05, subsample=16)
    return bench, data, wj.MLE().fit(bench.model, data, covariance="hessian")
