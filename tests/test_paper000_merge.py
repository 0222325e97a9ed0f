"""Merging saved pieces of a paper-000 grid (`benchmarks/paper000_suite.py --merge`), run as a user
runs it: what it accepts and what it refuses."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "paper000_suite.py"
_FIELDS = "noise_ratio,M,n_runs,param,rel_sq_bias,rel_variance,rel_mse,coverage_2se,failure_rate"


def _piece(root: Path, study: str, cells, *, n_runs=100, estimator="MLE()", k_max=200):
    """A saved piece: two parameter rows per (noise, M) cell, and its settings."""
    rows = [f"{noise},{m},{n_runs},{p},0.01,0.02,0.03,0.95,0.0" for noise, m in cells for p in ("p1", "p2")]
    (root / "paper000" / f"{study}_logistic.csv").write_text("\n".join([_FIELDS, *rows]) + "\n")
    settings = {"estimator": estimator, "test_functions": {"eta": 9.0, "k_max": k_max}}
    (root / "paper000" / f"{study}_logistic.settings.json").write_text(json.dumps(settings))


def _merge(root: Path, *studies: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WENDYJAX_BENCHMARK_RESULTS": str(root)}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--models", "logistic", "--merge", *studies, "--out", "merged"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def results(tmp_path):
    (tmp_path / "paper000").mkdir()
    return tmp_path


def test_disjoint_pieces_merge(results):
    _piece(results, "a", [(0.01, 256), (0.02, 256)])
    _piece(results, "b", [(0.01, 512)])
    run = _merge(results, "a", "b")
    assert run.returncode == 0, run.stderr
    merged = json.loads((results / "merged.json").read_text())
    assert merged["n_cells"] == 3 and merged["n_runs"] == 100 and merged["studies"] == ["a", "b"]
    # every row has rel_mse 0.03 and coverage 0.95: the medians are those values
    assert merged["ours"]["mse"] == pytest.approx(3.0) and merged["ours"]["cov"] == pytest.approx(0.95)
    assert "medians over 3 cells of 2 saved studies" in (results / "merged.md").read_text()


@pytest.mark.parametrize(
    ("second", "message"),
    [
        (dict(cells=[(0.01, 256)]), "is in both a and b"),
        (dict(cells=[(0.01, 512)], n_runs=20), "different numbers of runs"),
        (dict(cells=[(0.01, 512)], estimator="MLE(start='both')"), "differ in estimator or test-function"),
        (dict(cells=[(0.01, 512)], k_max=500), "differ in estimator or test-function"),
    ],
)
def test_incompatible_pieces_are_refused(results, second, message):
    _piece(results, "a", [(0.01, 256)])
    _piece(results, "b", **second)
    run = _merge(results, "a", "b")
    assert run.returncode == 1 and message in run.stderr and not (results / "merged.json").exists()


@pytest.mark.slow
def test_missing_or_repeated_pieces_are_refused(results):
    _piece(results, "a", [(0.01, 256)])
    for studies, message in ((("a", "c"), "no saved study"), (("a", "a"), "named twice")):
        run = _merge(results, *studies)
        assert run.returncode == 1 and message in run.stderr
