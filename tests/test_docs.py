"""The documentation site builds with `--strict` (a broken reference fails), its API
reference has a section for every public name, and in a browser cut off from the network
its formulas render and its figures show (docs/browser_check.py)."""

import importlib
import importlib.util
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a whole site build
ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("wendyjax_browser_check", ROOT / "docs" / "browser_check.py")
assert _spec is not None and _spec.loader is not None
browser_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(browser_check)
MODULES = [
    "wendyjax",
    "wendyjax.estimators",
    "wendyjax.weak",
    "wendyjax.inference",
    "wendyjax.studies",
    "wendyjax.models",
    "wendyjax.datasets",
    "wendyjax.collocation",
    "wendyjax.library",
    "wendyjax.neural",
    "wendyjax.linear",
    "wendyjax.discovery",
    "wendyjax.baselines",
    "wendyjax.plot",
    "wendyjax.cli",
    "wendyjax.petab",
]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "WENDYJAX_DOCS_EXECUTE": "0", "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "docs" / "mkdocs.yml"), "-d", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return out


def _public(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in dir(module) if not n.startswith("_")]
    out = []
    for n in names:
        obj = getattr(module, n)
        if inspect.ismodule(obj) or n.isupper() and not callable(obj):
            continue  # submodules have their own pages; constants need no section
        if getattr(obj, "__module__", module_name).startswith("wendyjax"):
            out.append(n)
    return out


def test_every_public_name_has_a_section_in_the_api_reference(site):
    ids = set()
    for page in (site / "api").rglob("*.html"):
        ids |= set(re.findall(r'id="(wendyjax[\w.]*)"', page.read_text()))
    missing = [f"{m}.{n}" for m in MODULES for n in _public(m) if not any(i.endswith("." + n) for i in ids)]
    assert not missing, f"no API section for {missing}"


def test_pages_notebooks_and_search_are_built(site):
    for page in [
        "index.html",
        "guides/uncertainty.html",
        "papers/rummel2025.html",
        "changes.html",
        "api/estimators.html",
    ]:
        assert (site / page).is_file(), page
    for nb in (ROOT / "notebooks").glob("*.ipynb"):
        html = (site / "notebooks" / f"{nb.stem}.html").read_text()
        assert "jupyter-wrapper" in html or "jp-Notebook" in html, nb.name
    index = (site / "search" / "search_index.json").read_text()
    assert "WENDy-MLE" in index and "AbstractEstimator" in index
    for page in site.rglob("*.html"):  # an autoref that did not resolve leaves its markdown behind
        text = page.read_text()
        assert "][]" not in text and "<autoref" not in text, page


def test_formulas_and_figures_show_in_a_browser_without_network(site):
    if not Path(browser_check.CHROMIUM).exists():
        if os.environ.get("CI"):  # .ci/run installs it
            pytest.fail(f"{browser_check.CHROMIUM} is missing: apt-get install chromium")
        pytest.skip("no chromium here (apt-get install chromium)")
    pages = [
        "index.html",
        "papers/rummel2025.html",
        "guides/uncertainty.html",
        "guides/real-data.html",
        "api/weak.html",
        "notebooks/07_hudson_bay_lynx_hare.html",
    ]
    # No search here: inside the loaded suite the search showed no result in 120 s in two runs of
    # 2026-12-06 (alone, and beside two busy processes, it answers within the test's 22-35 s);
    # .ci/run's last step runs the whole check, search included, on the executed build.
    report, _ = browser_check.check(site, pages, query=None)
    assert not browser_check.problems(report)
    assert report["papers/rummel2025.html"]["typeset"] > 100  # formulas there, and typeset
    assert report["guides/real-data.html"]["drawn"] >= 1  # the outbreak's figure
