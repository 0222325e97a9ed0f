"""Monte Carlo studies and parameter sweeps (Rummel et al. 2025, §3.3–3.4) and their result."""

import csv
import dataclasses
import io
import json
import math
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats
from jaxtyping import PRNGKeyArray

from .._checks import as_count, as_key, as_level, as_ratio
from .._compile import resolve_vectorize
from .._progress import progress_bar
from .._table import fixed_width
from .._typing import ArrayLike
from .._version import __version__
from ..estimators import AbstractEstimator, check_start, get_estimator, model_box
from ..models import Benchmark
from ..noise import AbstractNoise
from ..weak import TestFunctionConfig
from . import _metrics as metrics
from ._engine import Cell, CellRuns, check_host_memory, check_processes, forward_errors, run_cells
from ._intervals import AbstractIntervals, Wald, as_interval_methods, run_intervals
from ._timings import timings_text


@dataclasses.dataclass(frozen=True, eq=False)
class Study:
    """The runs of a study and their metrics (Rummel et al. 2025, Table 1).

    `cells[i]` is a setting (truth, initial condition, noise ratio, subsampling) and
    `runs[i]` its per-run outputs: estimates, starts, covariances, solver statuses, ℓ,
    forward-simulation errors, K and the selected radius. `settings` records everything
    that produced the study (model, estimator, key data and generator, float width,
    covariance, level, chunking, versions) and [`timings`][] the seconds of each stage.
    [`to_json`][] saves it all and [`load`][] reads it back.

    A run **fails** when the forward simulation of its estimate fails (Rummel et al. 2025, eq. 14), the
    estimator's own forward solve failed (output error's `forward_failed`), or the estimate
    or (for an estimator that has one) its covariance is not finite. Following Rummel et al. 2025, §3.3, a failed run's
    coefficient and forward-simulation errors are those of its start p₀; bias, variance,
    MSE and coverage are taken over the runs that did not fail.
    """

    model_name: str
    param_names: tuple[str, ...]
    cells: tuple[Cell, ...]
    runs: tuple[CellRuns, ...]
    settings: dict
    p0_forward_error: tuple[np.ndarray, ...]
    state_names: tuple[str, ...] = ()

    @property
    def timings(self) -> dict:
        """Seconds by stage: `simulate_s` (the noisy datasets), `build_s` (their problems:
        test functions, noise levels, likelihood blocks), `fit_s` (the fits),
        `diagnostics_s` (covariances, forward-simulation errors), `intervals_s` (the
        refitting interval methods, where asked for) and `total_s`; compilation included."""
        timings = self.settings.get("timings")
        if timings is None:  # a study saved before timings were grouped: its stage seconds at the top level
            timings = {k: v for k, v in self.settings.items() if k in ("simulate_s", "build_s", "fit_s")}
        return dict(timings)

    @property
    def interval_methods(self) -> tuple[str, ...]:
        """The names of the interval methods whose intervals the runs hold (`intervals=`)."""
        return tuple(self.runs[0].intervals) if self.runs else ()

    def failed(self, i: int) -> np.ndarray:
        """Which runs of cell `i` failed."""
        return _failed(self.runs[i], self.settings.get("covariance", "") is not None)

    def rows(self) -> list[dict]:
        """One row per cell and parameter: the metrics of Rummel et al. 2025, Table 1, plus nominal-level
        coverage, solver statuses, run counts and estimates on the parameter box's bounds
        (`at_bound`: the fraction of the runs that did not fail whose estimate of this
        parameter is on a bound; `n_at_bound`: those runs with any parameter on one).
        `cell` is the setting's index and `u0_<state>` its initial condition, which with
        `p_true` tell the settings of a sweep apart."""
        level = self.settings["level"]
        lower, upper = self.settings.get("bounds", (-np.inf, np.inf))  # a study built by hand may record no box
        z = float(scipy.stats.norm.ppf(0.5 + level / 2))
        has_cov = self.settings.get("covariance", "") is not None
        nan = np.full(len(self.param_names), np.nan)
        out = []
        for i, (cell, r) in enumerate(zip(self.cells, self.runs)):
            failed = self.failed(i)
            ok = ~failed
            coef = np.where(
                failed,
                metrics.relative_coefficient_error(r.p0, cell.p_true),
                metrics.relative_coefficient_error(r.params, cell.p_true),
            )
            fwd = np.where(failed, self.p0_forward_error[i], r.forward_error)
            p_ok = r.params[ok]
            method_stats = _method_stats(r, ok, cell.p_true, z) if ok.any() else {}
            bound = metrics.on_bound(p_ok, lower, upper)
            se = np.sqrt(np.diagonal(r.covariance[ok], axis1=1, axis2=2))
            stats = (
                {
                    "rel_sq_bias": metrics.relative_squared_bias(p_ok, cell.p_true),
                    "rel_variance": metrics.relative_variance(p_ok, cell.p_true),
                    "rel_mse": metrics.relative_mse(p_ok, cell.p_true),
                    # an estimator without a covariance has no intervals: coverage NaN, not 0
                    "coverage_2se": metrics.coverage(p_ok, cell.p_true, se, 2.0) if has_cov else nan,
                    f"coverage_{level:g}": metrics.coverage(p_ok, cell.p_true, se, z) if has_cov else nan,
                    "at_bound": bound.mean(axis=0),
                    **method_stats,
                }
                if ok.any()
                else {}
            )
            common = {
                "cell": i,
                **{f"u0_{name}": float(v) for name, v in zip(self._state_names, cell.u0)},
                "noise_ratio": cell.noise_ratio,
                "M": r.m,
                "subsample": cell.subsample,
                "n_runs": len(failed),
                "n_ok": int(ok.sum()),
                "failure_rate": float(failed.mean()),
                "solver_unsuccessful": int(np.sum(r.status != "successful")),
                "n_at_bound": int(bound.any(axis=1).sum()),
                "median_coef_error": float(np.median(coef)),
                "median_forward_error": float(np.median(fwd)),
                "median_steps": float(np.median(r.num_steps)),
                "median_k": float(np.median(r.k)),
            }
            if r.intervals:
                common["binomial_se"] = math.sqrt(level * (1 - level) / max(int(ok.sum()), 1))
            for j, name in enumerate(self.param_names):
                row = {**common, "param": name, "p_true": float(cell.p_true[j])}
                row.update({key: float(v[j]) for key, v in stats.items()})
                out.append(row)
        return out

    @property
    def _state_names(self) -> tuple[str, ...]:
        d = len(self.cells[0].u0) if self.cells else 0
        return self.state_names or tuple(f"x{e + 1}" for e in range(d))

    def table(self) -> str:
        """The metrics as a readable fixed-width table (relative quantities in %); a sweep's
        rows also show their setting (`cell`, as in [`rows`][]) and true value. A study with
        interval methods adds a second block: per method, coverage and median width over the
        ideal width."""
        level = self.settings["level"]
        sweep = [("cell", "cell", "{:d}"), ("p*", "p_true", "{:.4g}")] if self.settings.get("kind") == "sweep" else []
        keys = [
            *sweep[:1],
            ("noise", "noise_ratio", "{:.3g}"),
            ("M", "M", "{:d}"),
            ("param", "param", "{}"),
            *sweep[1:],
        ]
        cols = [
            *keys,
            ("bias² %", "rel_sq_bias", "{:.3g}"),
            ("var %", "rel_variance", "{:.3g}"),
            ("MSE %", "rel_mse", "{:.3g}"),
            ("cov 2se", "coverage_2se", "{:.2f}"),
            (f"cov {level:g}", f"coverage_{level:g}", "{:.2f}"),
            ("coef err", "median_coef_error", "{:.3g}"),
            ("fwd err", "median_forward_error", "{:.3g}"),
            ("fail", "failure_rate", "{:.2f}"),
            ("on box", "at_bound", "{:.2f}"),
        ]
        pct = {"rel_sq_bias", "rel_variance", "rel_mse"}
        rows = self.rows()

        def cell(row: dict, key: str, fmt: str) -> str:
            v = row.get(key, float("nan"))
            return fmt.format(int(v) if fmt == "{:d}" else 100 * v if key in pct else v)

        heads = [h for h, _, _ in cols]
        lines = [[cell(row, key, fmt) for _, key, fmt in cols] for row in rows]
        s = self.settings
        out = [
            f"Monte Carlo study of '{self.model_name}': {s['estimator']}, {s['n_runs']} runs per setting, "
            f"seed {s['seed']}, covariance {s['covariance']}",
            *fixed_width(heads, lines, label=False),
        ]
        on_box = sum(row["n_at_bound"] for row in rows if row["param"] == self.param_names[0])
        if on_box:
            out.append(
                f"{on_box} run(s) that did not fail ended with an estimate on the parameter box's bounds "
                f"(column 'on box'): minima on the box's edge, check them before trusting the metrics."
            )
        unfinished = [r.status[~self.failed(i) & (r.status != "successful")] for i, r in enumerate(self.runs)]
        if n := sum(len(u) for u in unfinished):
            out.append(
                f"{n} run(s) that did not fail stopped with a solver status other than successful "
                f"({', '.join(sorted(set(np.concatenate(unfinished))))}): they count in the metrics (a run "
                f"fails only where its forward simulation does or its estimate or covariance is not finite); "
                f"check them before trusting the metrics, e.g. with a larger max_steps or another start."
            )
        if self.interval_methods:
            se = max(row.get("binomial_se", 0.0) for row in rows)
            heads = [h for h, _, _ in keys] + list(self.interval_methods)
            nan = float("nan")
            lines = [
                [cell(row, key, fmt) for _, key, fmt in keys]
                + [
                    f"{row.get(f'coverage_{m}', nan):.2f} ({row.get(f'width_ratio_{m}', nan):.2f})"
                    for m in self.interval_methods
                ]
                for row in rows
            ]
            out += [
                "",
                f"{level:g} intervals: coverage (median width / ideal width), binomial error {se:.3f} at the "
                f"nominal level; the ideal width is 2z × the estimates' standard deviation.",
                *fixed_width(heads, lines, label=False),
            ]
            for name, e in s.get("interval_errors", {}).items():
                out.append(
                    f"{name}: no interval for {e['runs']} run(s) that did not fail, left out of its "
                    f"coverage; the first because {e['first']}"
                )
        if timings := self.timings:
            out.append(timings_text(timings))
        return "\n".join(out)

    def __str__(self) -> str:
        return self.table()

    def to_csv(self, path: str | Path | None = None) -> str:
        """The metric rows as CSV (written to `path` when given)."""
        rows = self.rows()
        keys = list(dict.fromkeys(k for row in rows for k in row))
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
        if path is not None:
            Path(path).write_text(buf.getvalue())
        return buf.getvalue()

    def to_dict(self) -> dict:
        """Settings, metric rows and every run's outputs (with the forward-simulation
        errors of failed runs' starts, `p0_forward_error`) as plain Python lists;
        [`from_dict`][] rebuilds the study."""
        runs = [
            {
                f.name: (
                    {k: v.tolist() for k, v in r.intervals.items()}
                    if f.name == "intervals"
                    else np.asarray(getattr(r, f.name)).tolist()
                )
                for f in dataclasses.fields(r)
            }
            for r in self.runs
        ]
        cells = [
            {"p_true": c.p_true.tolist(), "u0": c.u0.tolist(), "noise_ratio": c.noise_ratio, "subsample": c.subsample}
            for c in self.cells
        ]
        return {
            "model": self.model_name,
            "params": list(self.param_names),
            "states": list(self._state_names),
            "settings": self.settings,
            "metrics": self.rows(),
            "cells": cells,
            "runs": runs,
            "p0_forward_error": [e.tolist() for e in self.p0_forward_error],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Study":
        """The study [`to_dict`][] (or a JSON file of it, read back) describes."""

        def array(x):
            return np.array(_from_json(x, nan=True))

        cells = tuple(
            Cell(
                array(c["p_true"]).astype(float),
                array(c["u0"]).astype(float),
                float(c["noise_ratio"]),
                int(c["subsample"]),
            )
            for c in data["cells"]
        )

        def run(r):  # files written before intervals were saved have none
            fields: dict[str, Any] = {
                f.name: int(r[f.name]) if f.name == "m" else array(r[f.name])
                for f in dataclasses.fields(CellRuns)
                if f.name != "intervals"
            }
            return CellRuns(**fields, intervals={k: array(v).astype(float) for k, v in r.get("intervals", {}).items()})

        runs = tuple(run(r) for r in data["runs"])
        # files written before p0_forward_error was saved: unknown (NaN)
        p0_errors = data.get("p0_forward_error") or [[None] * len(r.p0) for r in runs]
        return cls(
            data["model"],
            tuple(data["params"]),
            cells,
            runs,
            _from_json(data["settings"], nan=False),
            tuple(array(e).astype(float) for e in p0_errors),
            tuple(data.get("states", ())),
        )

    def to_json(self, path: str | Path | None = None) -> str:
        """[`to_dict`][] as strict JSON (NaN written as `null`, infinities as "inf" and
        "-inf"; written to `path` when given); [`load`][] reads it back."""
        text = json.dumps(_to_json(self.to_dict()), indent=1, allow_nan=False)
        if path is not None:
            Path(path).write_text(text + "\n")
        return text

    @classmethod
    def load(cls, path: str | Path) -> "Study":
        """A study saved with [`to_json`][]."""
        try:
            data = json.loads(Path(path).read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{path} is not a saved study (not JSON text: {e}).") from e
        missing = [k for k in _SAVED_KEYS if not isinstance(data, dict) or k not in data]
        if missing:
            raise ValueError(
                f"{path} is not a saved study: it lacks {', '.join(missing)} (write one with Study.to_json)."
            )
        try:  # a file edited by hand: refused here, not later in the table
            study = cls.from_dict(data)
            study.table()
        except Exception as e:  # noqa: BLE001 - any inconsistency, re-raised with the file's name
            raise ValueError(
                f"{path} does not hold a consistent saved study ({type(e).__name__}: {e}); write one "
                f"with Study.to_json."
            ) from e
        return study


#: the keys `Study.to_dict` always writes
_SAVED_KEYS = ("model", "params", "cells", "runs", "settings")


def _to_json(x):
    """`x` (nested dicts, lists, numbers) in strict JSON: NaN as `None`, ±inf as "inf"/"-inf"."""
    if isinstance(x, dict):
        return {k: _to_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_to_json(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None if math.isnan(x) else "inf" if x > 0 else "-inf"
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def _from_json(x, nan: bool) -> Any:
    """Undo [`_to_json`][] on nested dicts and lists: "inf"/"-inf" back to floats and, with
    `nan`, `None` to NaN (in arrays; the settings keep their `None`s)."""
    if isinstance(x, dict):
        return {k: _from_json(v, nan) for k, v in x.items()}
    if isinstance(x, list):
        return [_from_json(v, nan) for v in x]
    if x is None and nan:
        return np.nan
    return {"inf": np.inf, "-inf": -np.inf}.get(x, x) if isinstance(x, str) else x


def _method_stats(r: CellRuns, ok: np.ndarray, p_true: np.ndarray, z: float) -> dict:
    """Per interval method of the runs that did not fail: coverage, median width, that width
    over the ideal one (2z × the estimates' standard deviation), and the runs whose interval
    could not be computed (NaN; left out of the coverage)."""
    if not r.intervals:
        return {}
    ideal = 2 * z * np.std(r.params[ok], axis=0, ddof=1) if ok.sum() > 1 else np.full(p_true.shape, np.nan)
    out = {"ideal_width": ideal}
    for name, ends in r.intervals.items():
        lo, hi = ends[ok, 0], ends[ok, 1]
        have = ~(np.isnan(lo) | np.isnan(hi))
        n = have.sum(axis=0)
        covered = np.sum(have & (lo <= p_true) & (p_true <= hi), axis=0)
        width = np.array([np.median((hi - lo)[have[:, j], j]) if n[j] else np.nan for j in range(lo.shape[1])])
        out |= {
            f"coverage_{name}": np.where(n > 0, covered / np.maximum(n, 1), np.nan),
            f"width_{name}": width,
            f"width_ratio_{name}": width / ideal,
            f"missing_{name}": len(lo) - n,
        }
    return out


def _failed(r: CellRuns, with_covariance: bool = True) -> np.ndarray:
    finite = np.all(np.isfinite(r.params), axis=1)
    if with_covariance:
        finite &= np.all(np.isfinite(r.covariance), axis=(1, 2))
    return ~(r.forward_ok & finite) | (r.status == "forward_failed")


def _key_seed(key) -> list[int]:
    data = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    return np.asarray(data).ravel().tolist()


def _p0_sampler(p0, model, lo, hi) -> "Callable | np.ndarray":
    if isinstance(p0, str) and p0 == "box":
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise ValueError(
                f"p0='box' draws starts uniformly from the parameter box, but model '{model.name}' "
                f"has no finite box: pass bounds=(lower, upper) or a fixed p0."
            )
        return lambda key, n: jax.random.uniform(key, (n, model.n_params), minval=lo, maxval=hi)
    if isinstance(p0, str):
        raise ValueError(
            f"p0 must be 'box' (starts drawn from the parameter box) or one start of "
            f"{model.n_params} parameters, got {p0!r}."
        )
    return check_start(model, p0, lo, hi)


def _check_benchmark(bench):
    if not isinstance(bench, Benchmark):
        raise TypeError(
            f"benchmark must be a wendyjax.models.Benchmark (e.g. wj.models.lorenz()), got {type(bench).__name__}."
        )
    if not isinstance(bench.noise, AbstractNoise):
        raise ValueError(
            f"a study draws its data with noise of given ratios (wj.AdditiveGaussian or wj.LogNormal), "
            f"but the benchmark's noise is {type(bench.noise).__name__}: a study of counts is not "
            f"supported; for a count fit's intervals, bootstrap it (wj.studies.bootstrap)."
        )


def _study_estimator(estimator, bench: Benchmark) -> AbstractEstimator:
    """An estimator from a name or instance; a named estimator that solves the ODE does
    so with the benchmark's solver (e.g. Kvaerno5 for the stiff systems)."""
    est = get_estimator(estimator)
    if isinstance(estimator, str) and hasattr(est, "ode_solver"):
        return eqx.tree_at(lambda e: e.ode_solver, est, bench.solver)
    if isinstance(estimator, str) and hasattr(est, "output_error"):
        return eqx.tree_at(lambda e: e.output_error.ode_solver, est, bench.solver)
    return est


def _run_study(
    bench,
    estimator,
    cells,
    n_runs,
    key,
    p0,
    bounds,
    covariance,
    level,
    test_functions,
    batch_size,
    devices,
    vectorize,
    progress,
    kind,
    intervals,
) -> Study:
    estimator = _study_estimator(estimator, bench)
    if covariance is None:  # the estimator's default; None for one without a covariance
        covariance = estimator.covariances[0] if estimator.covariances else None
    n_runs = as_count("n_runs", n_runs, 2)
    check_host_memory(
        n_runs,
        sum(len(np.asarray(bench.t)[:: c.subsample]) for c in cells) * bench.model.n_states,
        f"a study of {n_runs} runs per setting",
        "use fewer runs per setting (the binomial error of "
        "a coverage falls as 1/√runs: a few hundred give ±0.01 to 0.02), or several studies.",
    )
    if not (isinstance(batch_size, str) and batch_size == "auto"):
        batch_size = as_count("batch_size", batch_size, 1)
    if not isinstance(test_functions, TestFunctionConfig):
        raise TypeError(
            f"test_functions must be a TestFunctionConfig (each run's test functions are built from "
            f"its own data), got {type(test_functions).__name__}."
        )
    if covariance not in (estimator.covariances or (None,)):
        raise ValueError(
            f"covariance must be one of {estimator.covariances} for {type(estimator).__name__}, got {covariance!r}."
        )
    level = as_level(level)
    methods = tuple(
        m.simulating_with(bench.solver)  # bootstraps simulate with the benchmark's solver
        for m in as_interval_methods(intervals, estimator, covariance, level)
    )
    kinds = (
        covariance,
        *dict.fromkeys(m.covariance for m in methods if isinstance(m, Wald) and m.covariance != covariance),
    )
    model = bench.model
    lo, hi = model_box(model, bounds)
    assert lo is not None and hi is not None  # an ODEModel's box
    outside = [i for i, c in enumerate(cells) if np.any(c.p_true < lo) or np.any(c.p_true > hi)]
    if outside:
        raise ValueError(
            f"p_true of setting(s) {outside[:5]} (e.g. {cells[outside[0]].p_true.tolist()}) lies "
            f"outside the box the fits are held to, [{lo.tolist()}, {hi.tolist()}]: no fit could "
            f"recover it. Widen bounds= or choose true parameters inside."
        )
    sampler = _p0_sampler(p0, model, lo, hi)
    devices = list(jax.devices() if devices is None else devices)
    check_processes(devices)
    vectorize = resolve_vectorize(vectorize, devices)
    start = time.perf_counter()
    runs, info, extras = run_cells(
        bench,
        estimator,
        cells,
        n_runs,
        key,
        p0=sampler,
        lower=lo,
        upper=hi,
        covariances=kinds,
        test_functions=test_functions,
        batch_size=batch_size,
        devices=devices,
        vectorize=vectorize,
        progress=progress,
    )
    timings = info.pop("timings")
    if methods:
        clock = time.perf_counter()
        runs, info["interval_s"], info["interval_errors"] = _study_intervals(
            bench, estimator, runs, extras, methods, key, lo, hi, covariance, level, test_functions, progress
        )
        timings["intervals_s"] = time.perf_counter() - clock
    p0_errors = []
    for cell, r in zip(cells, runs):
        err = np.full(n_runs, np.nan)
        failed = _failed(r, covariance is not None)
        if failed.any():
            err[failed] = forward_errors(bench, cell, r.p0[failed])[0]
        p0_errors.append(err)
    t = np.asarray(bench.t)
    settings = {
        "kind": kind,
        "estimator": repr(estimator),
        "n_runs": n_runs,
        "seed": _key_seed(key),
        "key_impl": str(jax.random.key_impl(key)),
        "x64": bool(jax.config.read("jax_enable_x64")),
        "p0": "uniform in the box" if callable(sampler) else np.asarray(sampler).tolist(),
        "bounds": [lo.tolist(), hi.tolist()],
        "covariance": covariance,
        "level": level,
        "test_functions": dataclasses.asdict(test_functions),
        "batch_size": batch_size,
        "devices": [str(d) for d in devices],
        "vectorize": vectorize,
        "noise": repr(bench.noise),
        "grid": {"t0": float(t[0]), "t1": float(t[-1]), "n": len(t)},
        "benchmark_source": bench.source,
        "versions": {"wendyjax": __version__, "jax": jax.__version__},
        "intervals": [repr(m) for m in methods],
        **info,
        "timings": {**timings, "total_s": time.perf_counter() - start},
    }
    return Study(
        model.name,
        tuple(model.param_names),
        tuple(cells),
        tuple(runs),
        settings,
        tuple(p0_errors),
        tuple(model.state_names),
    )


def _study_intervals(
    bench, estimator, runs, extras, methods, key, lo, hi, covariance, level, test_functions, progress
) -> tuple[list[CellRuns], dict, dict]:
    """Every run's intervals by each of `methods` (NaN for failed runs): Wald ones from the
    covariances the chunks computed; the others from a fit of the run's data started at its
    estimate, so that the bootstrap and the profiles have a fit to work on. Also the seconds
    per run each method took, and per method the number of runs without an interval and the
    first reason."""
    z = float(scipy.stats.norm.ppf(0.5 + level / 2))
    noise = "lognormal" if bench.noise.log_space else "gaussian"
    options = {k: v for k, v in {"noise": noise, "test_functions": test_functions}.items() if k in estimator.options()}
    refitting = [m for m in methods if not isinstance(m, Wald)]
    bar = progress_bar(
        total=sum(len(r.params) for r in runs) * len(refitting),
        desc=f"{bench.model.name} intervals",
        unit="interval",
        disable=not progress or not refitting,
    )
    seconds = dict.fromkeys((m.name for m in refitting), 0.0)
    errors = {}
    out = []
    for c, (r, (batch, covs)) in enumerate(zip(runs, extras)):
        failed = _failed(r, covariance is not None)
        ends = {}
        for m in methods:
            if isinstance(m, Wald):
                kind = m.kind(estimator)
                se = np.sqrt(np.diagonal(r.covariance if kind == covariance else covs[kind], axis1=1, axis2=2))
                ends[m.name] = np.stack([r.params - z * se, r.params + z * se], axis=1)
            else:
                ends[m.name] = np.full((len(r.params), 2, r.params.shape[1]), np.nan)
        for i in np.flatnonzero(~failed) if refitting else ():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = estimator.fit(
                    bench.model, batch[i], r.params[i], bounds=(lo, hi), throw=False, covariance=covariance, **options
                )
            run_key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(key, 2**31 - 2), c), int(i))
            run_ends, run_seconds, run_errors = run_intervals(refitting, estimator, fit, batch[i], level, run_key)
            for m in refitting:
                ends[m.name][i] = run_ends[m.name]
                seconds[m.name] += run_seconds[m.name]
            for name, why in run_errors.items():
                count, first = errors.get(name, (0, why))
                errors[name] = (count + 1, first)
            bar.update(len(refitting))
        bar.update(len(refitting) * int(failed.sum()))
        out.append(dataclasses.replace(r, intervals=ends))
    bar.close()
    n_ok = max(sum(int((~_failed(r, covariance is not None)).sum()) for r in runs), 1)
    return (
        out,
        {name: t / n_ok for name, t in seconds.items()},
        {name: {"runs": count, "first": first} for name, (count, first) in errors.items()},
    )


def _as_list(values) -> list:
    """A scalar as a one-element list, a sequence as a list."""
    return [values] if np.ndim(values) == 0 else list(values)


def monte_carlo(
    benchmark: Benchmark,
    estimator: "str | AbstractEstimator" = "mle",
    noise_levels: float | Sequence[float] = (0.05,),
    subsamples: int | Sequence[int] = (1,),
    n_runs: int = 100,
    key: "PRNGKeyArray | int | None" = None,
    *,
    p0: "str | ArrayLike" = "box",
    bounds: Any = "model",
    covariance: str | None = None,
    level: float = 0.95,
    test_functions: TestFunctionConfig = TestFunctionConfig(),
    batch_size: "int | str" = "auto",
    devices: Sequence | None = None,
    vectorize: "str | bool" = "auto",
    progress: bool = True,
    intervals: Sequence[AbstractIntervals] = (),
) -> Study:
    """Monte Carlo study of an estimator on a benchmark (Rummel et al. 2025, §3.4 protocol).

    For every noise level and subsampling factor (M + 1 = ⌈(N + 1)/s⌉ samples of the
    benchmark grid) it draws `n_runs` noisy datasets (vmapped), builds their problems
    together (for WENDy one batched build per grid: the radius search of every dataset at
    once, the test functions once per selected radius, every likelihood padded to the
    largest K), fits them all in jit-compiled chunks of `batch_size` runs, each chunk's
    problems assembled on the devices (sharded over `devices`, default all; settings on
    one grid share chunks), computes each estimate's covariance and forward-simulation
    error, and returns a [`Study`][] with Rummel et al. 2025, Table 1's metrics and the
    seconds of each stage ([`Study.timings`][wendyjax.studies.Study.timings]).

    - `p0`: "box" draws each run's start uniformly from the bounds (Rummel et al. 2025); or one array.
    - `noise_levels`, `subsamples`: a value or a sequence of values each.
    - `key`: a PRNG key or an integer seed (default 0); each setting draws its noise and
      starts from `fold_in(key, i)`, `i` its position in the study (noise level major,
      then subsampling); a study split into pieces of one setting each with the same key
      therefore uses the same keys in every piece (the same starts p₀ in each; common
      random numbers), unless each piece gets its own key.
    - `bounds`: "model" (the benchmark's box), `None` or `(lower, upper)`.
    - `estimator`: a name of [`wendyjax.estimators.ESTIMATORS`][] ("mle", the default,
      "irls", "wls", "output_error", "hybrid") or any estimator object of the contract
      (`OutputError` fits each run's initial state too, from its first sample).
    - `covariance`: "sandwich" (default) or "hessian" for WENDy, "gauss_newton" for output
      error and hybrids; `level`: nominal level of the second coverage.
    - `batch_size`: runs per chunk; "auto": 64 on CPU (where a chunk's fits run one after
      another, so its size only bounds memory), on an accelerator as many as keep 8 times
      their problems' bytes within half of each device's memory (all of them where they fit).
    - `vectorize`: `True` vmaps the fits of a chunk, `False` runs them one after another
      in the same compiled call; "auto" vmaps on GPU/TPU and not on CPU, where it is
      slower (the docs' Troubleshooting page). `True` with several CPU
      devices is refused (it deadlocks jaxlib 0.10's batched LAPACK kernels).
    - `devices`: each chunk's runs are sharded over them (`jax.sharding`: a `Mesh` of the
      devices and one `shard_map` program), every device fitting its shard at the same time. Under
      `jax.distributed` the default (all devices) spans the processes: call the study
      with the same arguments in every process; each fits its own devices' shards and
      every process returns the whole study. The devices must be this process's own or
      the same number of every process's.
    - `intervals`: interval methods whose coverage and width the study measures beside
      the `covariance`'s ([`Wald`][wendyjax.studies.Wald],
      [`BootstrapIntervals`][wendyjax.studies.BootstrapIntervals],
      [`ProfileIntervals`][wendyjax.studies.ProfileIntervals],
      [`BootstrapOrProfile`][wendyjax.studies.BootstrapOrProfile]); the bootstrap and the
      profiles refit each run's data (a bootstrap of B refits per run), after the study's
      own fits.
    """
    _check_benchmark(benchmark)
    key = as_key(0 if key is None else key)
    levels = [as_ratio("noise_levels", v) for v in _as_list(noise_levels)]
    subsamples = [as_count("subsamples", s, 1) for s in _as_list(subsamples)]
    cells = [
        Cell(np.asarray(benchmark.p_true, float), np.asarray(benchmark.u0, float), nr, s)
        for nr in levels
        for s in subsamples
    ]
    if not cells:
        raise ValueError("noise_levels and subsamples must be non-empty.")
    return _run_study(
        benchmark,
        estimator,
        cells,
        n_runs,
        key,
        p0,
        bounds,
        covariance,
        level,
        test_functions,
        batch_size,
        devices,
        vectorize,
        progress,
        "monte_carlo",
        intervals,
    )


def sweep(
    benchmark: Benchmark,
    estimator: "str | AbstractEstimator" = "mle",
    *,
    p_true: ArrayLike | None = None,
    u0: ArrayLike | None = None,
    noise_level: float = 0.05,
    subsample: int = 1,
    n_runs: int = 20,
    key: "PRNGKeyArray | int | None" = None,
    p0: "str | ArrayLike" = "box",
    bounds: Any = "model",
    covariance: str | None = None,
    level: float = 0.95,
    test_functions: TestFunctionConfig = TestFunctionConfig(),
    batch_size: "int | str" = "auto",
    devices: Sequence | None = None,
    vectorize: "str | bool" = "auto",
    progress: bool = True,
    intervals: Sequence[AbstractIntervals] = (),
) -> Study:
    """A study over a grid of true parameters `p_true` (G, J) and/or initial conditions
    `u0` (G, D) (one given, or both with the same G), at one noise level and subsampling;
    otherwise as [`monte_carlo`][]."""
    _check_benchmark(benchmark)
    j, d = benchmark.model.n_params, benchmark.model.n_states
    grids = {}
    for name, value, width in (("p_true", p_true, j), ("u0", u0, d)):
        if value is not None:
            value = np.asarray(value, float)
            if value.ndim != 2 or value.shape[1] != width or len(value) == 0:
                raise ValueError(f"{name} must be a non-empty grid of shape (G, {width}), got {value.shape}.")
            if not np.all(np.isfinite(value)):
                raise ValueError(f"{name} contains NaN or inf.")
            grids[name] = value
    if not grids:
        raise ValueError("sweep needs a grid: pass p_true=(G, J) and/or u0=(G, D).")
    sizes = {len(v) for v in grids.values()}
    if len(sizes) > 1:
        raise ValueError(f"p_true and u0 grids must have the same length, got {sorted(sizes)}.")
    g = sizes.pop()
    ps = grids.get("p_true", np.broadcast_to(np.asarray(benchmark.p_true, float), (g, j)))
    us = grids.get("u0", np.broadcast_to(np.asarray(benchmark.u0, float), (g, d)))
    noise_level, subsample = as_ratio("noise_level", noise_level), as_count("subsample", subsample, 1)
    cells = [Cell(np.array(p), np.array(u), noise_level, subsample) for p, u in zip(ps, us)]
    key = as_key(0 if key is None else key)
    return _run_study(
        benchmark,
        estimator,
        cells,
        n_runs,
        key,
        p0,
        bounds,
        covariance,
        level,
        test_functions,
        batch_size,
        devices,
        vectorize,
        progress,
        "sweep",
        intervals,
    )
