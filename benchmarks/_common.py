"""Shared by the benchmark scripts: float64, the machine description, timing, Markdown tables,
the results files under `benchmarks/results/` and the paper suites' Monte Carlo tolerances.

Importing it turns on float64 and selects XLA:CPU's memory-optimised scheduler for the whole
process (unless `XLA_FLAGS` names one): the default one can deadlock the vmapped fits the
scripts jit themselves, where `wj.CPU_COMPILER_OPTIONS` does not reach.
"""

import argparse
import datetime
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

_FLAGS = os.environ.get("XLA_FLAGS", "")
if "scheduler" not in _FLAGS:
    os.environ["XLA_FLAGS"] = f"{_FLAGS} --xla_cpu_scheduler_type=CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED".strip()

import equinox  # noqa: E402
import jax  # noqa: E402
import jaxlib  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

#: Where results are written: `benchmarks/results`, or the folder named by the environment
#: variable WENDYJAX_BENCHMARK_RESULTS (`smoke.py` runs everything into a scratch copy).
RESULTS = Path(os.environ.get("WENDYJAX_BENCHMARK_RESULTS") or Path(__file__).resolve().parent / "results")

# threading knobs that change CPU timings (jax's CPU LAPACK kernels run in scipy's OpenBLAS)
TIMING_ENV = ("OPENBLAS_NUM_THREADS", "OPENBLAS_THREAD_TIMEOUT", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS")


def parser(doc: str) -> argparse.ArgumentParser:
    """The script's argument parser, described by its docstring's first line."""
    return argparse.ArgumentParser(description=doc.splitlines()[0])


def cpu_busy_seconds():
    """(all CPUs' busy seconds from /proc/stat, this process's CPU seconds), or None."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    busy = (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")  # user..steal, without guest (counted in user)
    return busy, sum(os.times()[:2])


def other_cpu_load(start, end, elapsed):
    """Mean number of cores used by other processes between two `cpu_busy_seconds`."""
    if start is None or end is None or elapsed <= 0:
        return None
    return max((end[0] - start[0]) - (end[1] - start[1]), 0.0) / elapsed


def machine_info() -> dict:
    """The machine, the versions and the timing-relevant environment, for the results files."""
    u = platform.uname()
    try:  # the CPU's model name (Linux), where `platform.processor()` is empty
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "")
    except OSError:
        model = ""
    info = {"processor": platform.processor() or model, "uname": {k: getattr(u, k) for k in u._fields[:5]}}
    info |= {"cpu_count": os.cpu_count(), "python": sys.version.split()[0]}
    info |= {m.__name__: m.__version__ for m in (jax, np, jaxlib, equinox)}
    info["devices"] = [str(d) if d.platform == "cpu" else f"{d} ({d.device_kind})" for d in jax.devices()]
    info |= {"x64": bool(jax.config.jax_enable_x64), **({"cpu_model": model} if model else {})}
    info |= {"cpus_usable": len(os.sched_getaffinity(0))} if hasattr(os, "sched_getaffinity") else {}
    info["env"] = {k: os.environ.get(k) for k in TIMING_ENV}
    return info | ({"loadavg_at_start": os.getloadavg()} if hasattr(os, "getloadavg") else {})


def machine_line(info: dict) -> str:
    """One line for a report: "CPU model, N CPUs, jax X", and the accelerators where jax had any
    ("cuda:0 (NVIDIA H200)")."""
    cpu = info.get("cpu_model") or info.get("processor") or info["uname"]["machine"]
    accelerators = "".join(f", {d}" for d in info.get("devices", []) if not d.startswith(("cpu", "TFRT_CPU")))
    return f"{cpu}, {info.get('cpu_count', '?')} CPUs, jax {info.get('jax', '?')}{accelerators}"


def idle_check(info: dict, seconds: float = 1.0) -> float | None:
    """Measure for `seconds` how many cores other processes use before the timings start;
    record it in `info` and warn when it is more than 0.1."""
    c0, w0 = cpu_busy_seconds(), time.perf_counter()
    time.sleep(seconds)
    other = other_cpu_load(c0, cpu_busy_seconds(), time.perf_counter() - w0)
    info["other_processes_cores_before_start"] = other
    if other is not None and other > 0.1:
        print(f"  WARNING: other processes use {other:.2f} cores before the start: timings will be noisy")
    return other


def command() -> str:
    """How this script was run, with the timing-relevant environment set now:
    "[OPENBLAS_THREAD_TIMEOUT=4 ...] python benchmarks/NAME.py ARGS"."""
    env = [f"{k}={os.environ[k]}" for k in ("OPENBLAS_NUM_THREADS", "OPENBLAS_THREAD_TIMEOUT") if k in os.environ]
    return " ".join([*env, "python", f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]])


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def commit(tree=".") -> str:
    """The git commit of `tree`, "+" where its wendyjax/ has uncommitted changes ("unknown" outside git)."""
    git = ["git", "-C", str(tree)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run([*git, "diff", "--quiet", "HEAD", "--", "wendyjax"], capture_output=True).returncode != 0
    return (head or "unknown") + ("+" if head and dirty else "")


def provenance(info: dict, extra: str = "") -> str:
    """The report's first line: the command, the date and the machine."""
    return f"Generated by `{command()}` on {utc_now()}; {machine_line(info)}; float64{extra}."


def bench(fn, *args, cfg):
    """`fn(*args)` once (trace + compile + run), then repeated timed calls: `(output, timing)`.

    `cfg` = (min_reps, min_time, max_time, floor_reps): repeats until at least `min_reps` calls and
    `min_time` seconds in total, stopping early once `max_time` seconds are spent and at least
    `floor_reps` calls are done. `timing`: median, min, max, repeats, the first call and its excess
    over the median ("compile_s"), and the cores other processes used meanwhile.
    """
    min_reps, min_time, max_time, floor_reps = cfg
    gc.collect()
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    times, cpu0, w0 = [], cpu_busy_seconds(), time.perf_counter()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        while not times or not (
            (len(times) >= min_reps and sum(times) >= min_time) or (sum(times) >= max_time and len(times) >= floor_reps)
        ):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times.append(time.perf_counter() - t0)
    finally:
        if gc_was_enabled:
            gc.enable()
    other = other_cpu_load(cpu0, cpu_busy_seconds(), time.perf_counter() - w0)
    med = statistics.median(times)
    timing = {"other_processes_cores": other, "median_s": med, "min_s": min(times), "max_s": max(times)}
    return out, timing | {"repeats": len(times), "first_call_s": first, "compile_s": max(first - med, 0.0)}


def markdown_table(header, rows: list[list]) -> list[str]:
    """The lines of a Markdown table; `header` a list or a string of columns separated by "|";
    floats as 3 significant digits, NaN as "—"."""

    def fmt(v):
        return ("—" if math.isnan(v) else f"{v:.3g}") if isinstance(v, float) else str(v)

    header = [h.strip() for h in header.split("|")] if isinstance(header, str) else header
    return [
        "| " + " | ".join(map(str, header)) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(fmt(v) for v in row) + " |" for row in rows),
    ]


def paragraphs(*blocks) -> list[str]:
    """Markdown lines from blocks (a string, or a list of lines such as a table) separated by blank lines."""
    return [line for i, b in enumerate(blocks) for line in [""] * (i > 0) + ([b] if isinstance(b, str) else b)]


def write_results(stem: str, data=None, markdown=None, *, indent: int = 1, default=None, echo=False) -> list[Path]:
    """Write `benchmarks/results/<stem>.json` (`data`, with `json.dumps(..., indent, default)`)
    and `<stem>.md` (`markdown`: a string or a list of lines; printed too with `echo`), either one
    optional; `stem` may name a subfolder ("gpu/x"). Returns the paths written."""
    texts = {}
    if data is not None:
        texts[".json"] = json.dumps(data, indent=indent, default=default) + "\n"
    if markdown is not None:
        text = markdown if isinstance(markdown, str) else "\n".join(markdown)
        texts[".md"] = text if text.endswith("\n") else text + "\n"
        if echo:
            print(text)
    for suffix, text in texts.items():
        (RESULTS / f"{stem}{suffix}").parent.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{stem}{suffix}").write_text(text)
    return [RESULTS / f"{stem}{suffix}" for suffix in texts]


def save_figure(fig, stem: str, dpi: int = 120) -> None:
    """`fig` (matplotlib) to `benchmarks/results/<stem>.png`, laid out tight (unless it has a layout), then closed."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(RESULTS / f"{stem}.png", dpi=dpi)
    pyplot().close(fig)


def summary(values) -> dict:
    """Mean, sd (ddof = 1; 0 for one value), median, min and max of `values`, as floats."""
    x = np.asarray(values, float)
    sd = x.std(ddof=1) if x.size > 1 else 0.0
    return {k: float(v) for k, v in dict(mean=x.mean(), sd=sd, median=np.median(x), min=x.min(), max=x.max()).items()}


def pyplot():
    """matplotlib.pyplot on the Agg backend (figures go to files)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def matches(ours: dict, paper: dict, n_runs: int) -> bool:
    """Rummel et al. 2025's medians matched (keys "mse", "cov"): our MSE ≤ the paper's × (1 + 3√(2/N)),
    3 sd of a χ²-type mean, and our 2√C coverage ≥ the paper's − 3 binomial sd of a 95 % coverage."""
    mse_ok = ours["mse"] <= paper["mse"] * (1 + 3.0 * math.sqrt(2.0 / n_runs))
    return mse_ok and ours["cov"] >= paper["cov"] - 3.0 * math.sqrt(0.95 * 0.05 / n_runs)


def timed_study(fn, **kwargs):
    """`fn(**kwargs)` and its wall time."""
    start = time.perf_counter()
    study = fn(**kwargs)
    return study, time.perf_counter() - start


def save_study(study, directory: Path, name: str) -> None:
    """The metric rows as CSV and the settings (incl. seed and timings) as JSON."""
    directory.mkdir(parents=True, exist_ok=True)
    study.to_csv(directory / f"{name}.csv")
    (directory / f"{name}.settings.json").write_text(json.dumps(study.settings, indent=1, default=float) + "\n")
