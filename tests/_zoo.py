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
