"""Shared pieces of the paper-suite benchmarks: running a study per model, Markdown
tables, Monte Carlo tolerances."""

import json
import math
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def markdown_table(header: list[str], rows: list[list]) -> list[str]:
    def fmt(v):
        if isinstance(v, float):
            return "—" if math.isnan(v) else f"{v:.3g}"
        return str(v)

    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(fmt(v) for v in row) + " |" for row in rows)]


def mse_tolerance(n_runs: int) -> float:
    """Relative 3-sd Monte Carlo band of a mean-squared quantity from `n_runs` runs
    (sd of a χ²-type mean ≈ √(2/N) of its value)."""
    return 3.0 * math.sqrt(2.0 / n_runs)


def coverage_tolerance(n_runs: int, nominal: float = 0.95) -> float:
    """3 binomial standard deviations of a coverage estimate at `nominal`."""
    return 3.0 * math.sqrt(nominal * (1 - nominal) / n_runs)


def matches(ours: dict, paper: dict, n_runs: int) -> bool:
    """000's medians matched: our MSE ≤ the paper's × (1 + 3√(2/N)) and our 2√C coverage ≥
    the paper's − 3 binomial sd (keys "mse", "cov")."""
    return (ours["mse"] <= paper["mse"] * (1 + mse_tolerance(n_runs))
            and ours["cov"] >= paper["cov"] - coverage_tolerance(n_runs))


def timed_study(fn, **kwargs):
    start = time.perf_counter()
    study = fn(**kwargs)
    return study, time.perf_counter() - start


def save_study(study, directory: Path, name: str) -> None:
    """The metric rows as CSV and the settings (incl. seed and timings) as JSON."""
    directory.mkdir(parents=True, exist_ok=True)
    study.to_csv(directory / f"{name}.csv")
    (directory / f"{name}.settings.json").write_text(json.dumps(study.settings, indent=1, default=float) + "\n")


def median_over(rows: list[dict], key: str) -> float:
    vals = np.array([r.get(key, np.nan) for r in rows], float)
    return float(np.nanmedian(vals)) if np.isfinite(vals).any() else float("nan")
