"""One benchmark object per zoo system and test process.

`wj.models.<name>()` builds a new model on every call, and its right-hand side is a new
closure each time. The jitted functions of wendyjax take the model as a static argument,
so a new object is traced and compiled again even where every shape is the same. Tests
that share one object per process reuse the compiled simulation, likelihood and fit code
of the tests before them (on the same xdist worker). The benchmarks are immutable equinox
modules, so sharing them carries no state from one test to the next. test_model_data.py
keeps calling the factories themselves: it tests them.
"""

import functools

import wendyjax as wj


@functools.cache
def zoo(name: str) -> wj.models.Benchmark:
    """`wj.models.<name>()`, built once per process."""
    return getattr(wj.models, name)()
