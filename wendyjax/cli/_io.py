"""Reading what the command line is given: a model (zoo name or Python file) and time
series (CSV or NPZ), with errors that name the file and the problem."""

import csv
import runpy
import zipfile
from pathlib import Path

import numpy as np

from .. import models
from ..data import Trajectory
from ..linear import BSplineBasis, LinearODE
from ..model import ODEModel


def zoo_names() -> list[str]:
    """The names of the model zoo's ODE benchmarks (`wj.models.<name>()`; not the PDE
    reference solutions, which have no protocol to fit)."""
    return sorted(
        n
        for n, f in vars(models).items()
        if callable(f)
        and getattr(f, "__module__", None) == models.Benchmark.__module__
        and not n.startswith("_")
        and n != "Benchmark"
    )


def load_model(spec: str) -> "tuple[ODEModel | LinearODE, models.Benchmark | None, BSplineBasis | None]":
    """A zoo name (returns its benchmark too) or a Python file defining either `model`
    (an `ODEModel`, or a `linear.LinearODE` with a `basis = linear.BSplineBasis(...)` for
    Data2LD) or `rhs(u, p, t)` with lists `states` and `params` (optional `bounds` as
    (lower, upper) and `name`). Returns the model, the zoo benchmark and the basis."""
    if spec in zoo_names():
        bench = getattr(models, spec)()
        return bench.model, bench, None
    path = Path(spec)
    if path.suffix != ".py":
        raise ValueError(
            f"unknown model {spec!r}: give a zoo name ({', '.join(zoo_names())}) "
            f"or a Python file (.py) defining the model."
        )
    if not path.is_file():
        raise FileNotFoundError(f"model file {spec!r} does not exist.")
    try:
        scope = runpy.run_path(str(path))
    except Exception as e:  # noqa: BLE001 - re-raised with the file named
        raise ValueError(f"running model file {spec!r} failed: {type(e).__name__}: {e}") from e
    if isinstance(scope.get("model"), ODEModel):
        return scope["model"], None, None
    if isinstance(scope.get("model"), LinearODE):
        if not isinstance(scope.get("basis"), BSplineBasis):
            raise ValueError(
                f"model file {spec!r} defines a LinearODE but no `basis = "
                f"wendyjax.linear.BSplineBasis(breaks, order)` for its Data2LD fit."
            )
        return scope["model"], None, scope["basis"]
    if callable(scope.get("rhs")) and "states" in scope and "params" in scope:
        return (
            ODEModel(
                scope["rhs"],
                scope["states"],
                scope["params"],
                bounds=scope.get("bounds"),
                name=scope.get("name", path.stem),
            ),
            None,
            None,
        )
    raise ValueError(
        f"model file {spec!r} must define `model = wendyjax.ODEModel(...)` (or a "
        f"`wendyjax.linear.LinearODE` with a `basis`) or a function `rhs(u, p, t)` with lists "
        f"`states` and `params`."
    )


def _observed_names(model: "ODEModel | LinearODE") -> list[str]:
    """The columns a data file holds for `model`: its states, or a LinearODE's variables."""
    return list(model.variables if isinstance(model, LinearODE) else model.state_names)


def _split(t: np.ndarray, u: np.ndarray, groups: np.ndarray | None) -> list[tuple[str | None, np.ndarray, np.ndarray]]:
    """Rows split by trajectory id (order of first appearance): `(id, t, u)` per trajectory."""
    ids = [None] if groups is None else list(dict.fromkeys(groups.tolist()))
    return [(g, t, u) if g is None else (g, t[groups == g], u[groups == g]) for g in ids]


def _trajectories(series, where: str, names: list[str]) -> list[Trajectory]:
    """A `Trajectory` per series, missing values (NaN) masked; errors name the file."""
    out = []
    for g, t, u in series:
        label = "" if g is None else f" (trajectory {g})"
        empty = [n for n, col in zip(names, np.asarray(u, float).T) if np.isnan(col).all()]
        if empty:
            raise ValueError(
                f"{where}{label}: column{'s' if len(empty) > 1 else ''} {', '.join(empty)} "
                f"{'have' if len(empty) > 1 else 'has'} no observed value (every cell is empty or "
                f"NaN)."
            )
        try:
            out.append(Trajectory(t, u))  # NaN = missing; inf is refused
        except ValueError as e:
            raise ValueError(f"{where}{label}: {e}") from e
    return out


def _columns(header: list[str], model: "ODEModel | LinearODE", where: str) -> list[int]:
    """Indices of the state columns (all columns but `t` and `trajectory`, one per state):
    by state name when the header has them all, else in order."""
    names = _observed_names(model)
    rest = [i for i, h in enumerate(header) if h not in ("t", "trajectory")]
    if len(rest) != len(names):
        raise ValueError(
            f"{where}: model '{model.name}' has {len(names)} states ({', '.join(names)}) but the "
            f"file has {len(rest)} state columns ({', '.join(header[i] for i in rest)})."
        )
    if all(n in header for n in names):
        return [header.index(n) for n in names]
    return rest


def _read_csv(path: Path, model: "ODEModel | LinearODE"):
    with path.open(newline="") as fh:
        lines = [line for line in fh if line.strip() and not line.startswith("#")]
    try:  # comma, semicolon (with decimal commas, as spreadsheets write it in many locales) or tab
        delimiter = csv.Sniffer().sniff(lines[0], delimiters=",;\t").delimiter if lines else ","
    except csv.Error:
        delimiter = ","
    rows = [row for row in csv.reader(lines, delimiter=delimiter) if row]
    if not rows:
        raise ValueError(f"{path}: the file is empty.")
    header = [h.strip() for h in rows[0]]
    if "t" not in header:
        raise ValueError(f"{path}: the header row must name a time column 't' (got {', '.join(header)}).")
    body = rows[1:]
    bad = [i + 2 for i, r in enumerate(body) if len(r) != len(header)]
    if bad:
        raise ValueError(f"{path}: line {bad[0]} has a different number of columns than the header ({len(header)}).")
    cols = _columns(header, model, str(path))

    def number(text: str, line: int) -> float:
        text = text.strip()
        if delimiter == ";":
            text = text.replace(",", ".")
        if text in ("", "nan", "NaN", "NA"):
            return np.nan
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"{path}: line {line} has a value that is not a number: {text!r}.") from None

    table = np.array([[number(r[c], i + 2) for c in [header.index("t"), *cols]] for i, r in enumerate(body)])
    if table.size == 0:
        raise ValueError(f"{path}: no data rows.")
    groups = np.array([r[header.index("trajectory")].strip() for r in body]) if "trajectory" in header else None
    return _split(table[:, 0], table[:, 1:], groups)


def _read_npz(path: Path, model: "ODEModel | LinearODE"):
    try:
        with np.load(path) as npz:
            arrays = dict(npz)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path}: not a readable NPZ archive ({e}).") from e
    if "t" not in arrays:
        raise ValueError(f"{path}: the archive must hold an array 't' (has {', '.join(arrays) or 'nothing'}).")
    t = np.asarray(arrays["t"], float)
    names = _observed_names(model)
    if "u" in arrays:
        u = np.asarray(arrays["u"], float)
        u = u[:, None] if u.ndim == 1 else u
    elif all(n in arrays for n in names):
        u = np.stack([np.asarray(arrays[n], float) for n in names], axis=1)
    else:
        raise ValueError(
            f"{path}: the archive must hold 'u' (samples × states) or one array per state ({', '.join(names)})."
        )
    if u.ndim != 2 or u.shape[1] != len(names):
        raise ValueError(f"{path}: model '{model.name}' has {len(names)} states but 'u' has shape {u.shape}.")
    if len(t) != len(u):
        raise ValueError(f"{path}: 't' has {len(t)} times but 'u' has {len(u)} rows.")
    groups = np.asarray(arrays["trajectory"]) if "trajectory" in arrays else None
    return _split(t, u, groups)


def load_series(spec: str, model: "ODEModel | LinearODE") -> list[tuple[str | None, np.ndarray, np.ndarray]]:
    """Time series for `model` as `(trajectory id, t, u)` with NaN at missing values, from a
    CSV (header with `t`, the states by name or in order, optionally `trajectory`; empty or
    NaN cells are missing values) or an NPZ (`t` and `u`, or `t` and one array per state
    name; optionally `trajectory`). A `LinearODE`'s columns are its variables."""
    path = Path(spec)
    if not path.is_file():
        raise FileNotFoundError(f"data file {spec!r} does not exist.")
    readers = {".csv": _read_csv, ".npz": _read_npz}
    if path.suffix.lower() not in readers:
        raise ValueError(f"data file {spec!r}: expected a .csv or .npz file.")
    try:
        return readers[path.suffix.lower()](path, model)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise ValueError(f"data file {spec!r} could not be read: {e}") from e


def load_data(spec: str, model: "ODEModel | LinearODE") -> list[Trajectory]:
    """[`load_series`][] as `Trajectory`s (sorted times, missing values masked)."""
    return _trajectories(load_series(spec, model), str(spec), _observed_names(model))
