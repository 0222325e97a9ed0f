"""The notebooks run top to bottom at toy sizes (SMALL = True injected after their
`parameters` cell, papermill-style) and print what they promise."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
EXPECT = {
    "01_quick_start.ipynb": ["WENDy-MLE fit of 'lotka_volterra': converged", "Output-error fit",
                             "relative coefficient"],
    "02_lognormal_and_bounds.ipynb": ["WENDy-MLE fit of 'sir_tdi': converged", "all estimates inside the box: True"],
    "03_coverage_study.ipynb": ["Monte Carlo study of 'logistic'", "device(s)"],
    "04_neural_ode_integral_matching.ipynb": ["Integral-matching fit (gradient)", "adjoint steps in"],
    "05_test_functions_explained.ipynb": ["selected minimum radius", "test functions from"],
    "06_data2ld_linear_systems.ipynb": ["Data2LD fit of 'head_impact': converged", "degrees of freedom of the smooth",
                                        "16 of 16 fits successful", "coverage of the 95 % intervals"],
    "07_hudson_bay_lynx_hare.ipynb": ["Output-error fit of 'lotka_volterra': converged", "correlation of the estimates",
                                      "output error: every estimate inside the Stan 80 % intervals: True",
                                      "parametric bootstrap: 20 refits", "OE profile", "verdicts: identifiable",
                                      "OE recommended"],
}


def test_every_notebook_is_tested():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(EXPECT)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECT))
def test_notebook_runs_small(name, tmp_path):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert all(not cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"), "saved with outputs"
    (i,) = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell("SMALL = True"))
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "\n".join(out.get("text", "") for c in nb.cells if c.cell_type == "code" for out in c.outputs)
    errors = [out for c in nb.cells if c.cell_type == "code" for out in c.outputs if out.output_type == "error"]
    assert not errors
    for expected in EXPECT[name]:
        assert expected in text, f"{name}: {expected!r} not printed"
