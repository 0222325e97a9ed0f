"""Merging saved pieces of a paper-000 grid (benchmarks/paper000_merge.py): what it accepts
and what it refuses."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import paper000_merge  # noqa: E402

_FIELDS = "noise_ratio,M,n_runs,param,rel_sq_bias,rel_variance,rel_mse,coverage_2se,failure_rate"


def _piece(root: Path, study: str, cells, *, n_runs=100, estimator="MLE()", k_max=200):
    """A saved piece: two parameter rows per (noise, M) cell, and its settings."""
    rows = [f"{noise},{m},{n_runs},{p},0.01,0.02,0.03,0.95,0.0" for noise, m in cells for p in ("p1", "p2")]
    (root / f"{study}_logistic.csv").write_text("\n".join([_FIELDS, *rows]) + "\n")
    settings = {"estimator": estimator, "test_functions": {"eta": 9.0, "k_max": k_max}}
    (root / f"{study}_logistic.settings.json").write_text(json.dumps(settings))


@pytest.fixture
def results(tmp_path, monkeypatch):
    (tmp_path / "paper000").mkdir()
    monkeypatch.setattr(paper000_merge, "RESULTS", tmp_path)
    return tmp_path / "paper000"


def test_disjoint_pieces_merge(results):
    _piece(results, "a", [(0.01, 256), (0.02, 256)])
    _piece(results, "b", [(0.01, 512)])
    rows = paper000_merge.read_rows("logistic", ["a", "b"])
    assert len(rows) == 6
    assert {(r["noise_ratio"], r["M"]) for r in rows} == {(0.01, 256.0), (0.02, 256.0), (0.01, 512.0)}
    assert all(isinstance(r["param"], str) and isinstance(r["rel_mse"], float) for r in rows)


@pytest.mark.parametrize(("second", "message"), [
    (dict(cells=[(0.01, 256)]), "is in both a and b"),
    (dict(cells=[(0.01, 512)], n_runs=20), "different numbers of runs"),
    (dict(cells=[(0.01, 512)], estimator="MLE(start='both')"), "differ in estimator or test-function"),
    (dict(cells=[(0.01, 512)], k_max=500), "differ in estimator or test-function"),
])
def test_incompatible_pieces_are_refused(results, second, message):
    _piece(results, "a", [(0.01, 256)])
    _piece(results, "b", **second)
    with pytest.raises(SystemExit, match=message):
        paper000_merge.read_rows("logistic", ["a", "b"])


def test_missing_or_repeated_pieces_are_refused(results):
    _piece(results, "a", [(0.01, 256)])
    with pytest.raises(SystemExit, match="no saved study"):
        paper000_merge.read_rows("logistic", ["a", "c"])
    with pytest.raises(SystemExit, match="named twice"):
        paper000_merge.read_rows("logistic", ["a", "a"])
