"""The notebooks run top to bottom at toy sizes (SMALL = True injected after their
`parameters` cell, papermill-style, by the docs build's hook, whose cache of executed
notebooks the docs build then reuses) and print what they promise."""

import importlib.util
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
_spec = importlib.util.spec_from_file_location("wendyjax_docs_hooks", ROOT / "docs" / "hooks.py")
assert _spec is not None and _spec.loader is not None
hooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hooks)
EXPECT = {
    "01_quick_start.ipynb": [
        "WENDy-MLE fit of 'lotka_volterra': converged",
        "Output-error fit",
        "relative coefficient",
    ],
    "02_lognormal_and_bounds.ipynb": ["WENDy-MLE fit of 'sir_tdi': converged", "all estimates inside the box: True"],
    "03_coverage_study.ipynb": ["Monte Carlo study of 'logistic'", "device(s)"],
    "04_neural_ode_integral_matching.ipynb": ["Integral-matching fit (gradient)", "adjoint steps in"],
    "05_test_functions_explained.ipynb": ["selected minimum radius", "test functions from"],
    "06_data2ld_linear_systems.ipynb": [
        "Data2LD fit of 'head_impact': converged",
        "degrees of freedom of the smooth",
        "16 of 16 fits successful",
        "coverage of the 95 % intervals",
    ],
    "07_hudson_bay_lynx_hare.ipynb": [
        "Output-error fit of 'lotka_volterra': converged",
        "correlation of the estimates",
        "output error: every estimate inside the Stan 80 % intervals: True",
        "parametric bootstrap: 20 refits",
        "OE profile",
        "verdicts: identifiable",
        "OE recommended",
    ],
    "08_petab_boehm.ipynb": [
        "log-likelihood at the nominal parameters: -138.222",
        "4 starts in",
        "profile of k_phos (log10): 95 % interval",
    ],
}


def test_every_notebook_is_tested():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(EXPECT)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECT))
def test_notebook_runs_small(name):
    source = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert all(not cell.get("outputs") for cell in source.cells if cell.cell_type == "code"), "saved with outputs"
    nb = nbformat.read(hooks.executed(NOTEBOOKS / name), as_version=4)
    text = "\n".join(out.get("text", "") for c in nb.cells if c.cell_type == "code" for out in c.outputs)
    errors = [out for c in nb.cells if c.cell_type == "code" for out in c.outputs if out.output_type == "error"]
    assert not errors
    outputs = [out for c in nb.cells if c.cell_type == "code" for out in c.outputs]
    assert any("image/png" in out.get("data", {}) for out in outputs), f"{name}: no figure (its page would show none)"
    for expected in EXPECT[name]:
        assert expected in text, f"{name}: {expected!r} not printed"
