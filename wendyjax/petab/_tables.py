"""The PEtab (v1) tables of a problem, read with pandas and checked with the file, row and
column named in every error."""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from ._sbml import PetabError

_REQUIRED = {
    "condition": ("conditionId",),
    "observable": ("observableId", "observableFormula", "noiseFormula"),
    "measurement": ("observableId", "simulationConditionId", "measurement", "time"),
    "parameter": ("parameterId", "parameterScale", "lowerBound", "upperBound", "nominalValue", "estimate"),
}
SCALES = ("lin", "log", "log10")
DISTRIBUTIONS = ("normal", "laplace")
PRIORS = (
    "uniform",
    "normal",
    "laplace",
    "logNormal",
    "logLaplace",
    "parameterScaleUniform",
    "parameterScaleNormal",
    "parameterScaleLaplace",
)


@dataclasses.dataclass(frozen=True)
class Table:
    """One PEtab table: its rows, and where each came from (file name, line number)."""

    kind: str
    frame: pd.DataFrame

    def where(self, i: int, column: str | None = None) -> str:
        row = self.frame.iloc[i]
        text = f"{row['_file']}, row {row['_line']}"
        return text + (f", column {column}" if column else "")


@dataclasses.dataclass(frozen=True)
class Tables:
    name: str
    model: Path
    condition: Table
    observable: Table
    measurement: Table
    parameter: Table


def _read(kind: str, paths: list[Path]) -> Table:
    frames = []
    for path in paths:
        if not path.is_file():
            raise PetabError(f"The {kind} table {path} does not exist.")
        try:
            frame = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False, na_values=[""])
        except (pd.errors.ParserError, UnicodeDecodeError) as error:
            raise PetabError(f"{path.name}: not a tab-separated {kind} table ({error}).") from None
        frame.columns = [str(c).strip() for c in frame.columns]
        missing = [c for c in _REQUIRED[kind] if c not in frame.columns]
        if missing:
            raise PetabError(
                f"{path.name}: the {kind} table has no column {missing[0]} (PEtab v1 requires "
                f"{', '.join(_REQUIRED[kind])})."
            )
        frame = frame.assign(_file=path.name, _line=np.arange(2, len(frame) + 2))
        frames.append(frame)
    table = Table(kind, pd.concat(frames, ignore_index=True))
    key = _REQUIRED[kind][0]
    for i, value in enumerate(table.frame[key]):
        if kind != "measurement" and not isinstance(value, str):
            raise PetabError(f"{table.where(i, key)}: empty {key}.")
    if kind in ("condition", "observable", "parameter"):
        repeated = table.frame.loc[table.frame[key].duplicated(), key]
        if len(repeated):
            i = int(repeated.index[0])
            raise PetabError(f"{table.where(i, key)}: {repeated.iloc[0]} appears twice in the {kind} table.")
    return table


def number(table: Table, i: int, column: str, *, allow_missing: bool = False) -> float:
    """The entry of row `i` and `column` as a float (NaN when empty and `allow_missing`)."""
    value = table.frame[column].iloc[i] if column in table.frame else None
    if value is None or (isinstance(value, float) and math.isnan(value)):
        if allow_missing:
            return math.nan
        raise PetabError(f"{table.where(i, column)}: empty, expected a number.")
    try:
        return float(value)
    except ValueError:
        raise PetabError(f"{table.where(i, column)}: {value!r} is not a number.") from None


def read_tables(path: str | Path) -> Tables:
    """Read the PEtab v1 problem described by the YAML file at `path`."""
    path = Path(path)
    if not path.is_file():
        raise PetabError(f"path: no PEtab YAML file at {path}.")
    try:
        spec = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise PetabError(f"{path.name}: not a YAML file ({error}).") from None
    if not isinstance(spec, dict) or "problems" not in spec or "parameter_file" not in spec:
        raise PetabError(
            f"{path.name}: not a PEtab problem file (it needs format_version, parameter_file and problems)."
        )
    if str(spec.get("format_version", "1")).split(".")[0] != "1":
        raise PetabError(f"{path.name}: PEtab format_version {spec['format_version']} is not supported (PEtab v1 is).")
    if len(spec["problems"]) != 1:
        raise PetabError(f"{path.name}: {len(spec['problems'])} problems in one file; wendyjax reads one.")
    problem = spec["problems"][0]
    base = path.parent
    models = problem.get("sbml_files") or [m["location"] for m in (problem.get("model_files") or {}).values()]
    if len(models) != 1:
        raise PetabError(f"{path.name}: expected one SBML model file, found {len(models)}.")
    files = {
        kind: [base / f for f in problem.get(f"{kind}_files", [])]
        for kind in ("condition", "observable", "measurement")
    }
    parameter_files = spec["parameter_file"]
    parameter_files = [parameter_files] if isinstance(parameter_files, str) else parameter_files
    files["parameter"] = [base / f for f in parameter_files]
    for kind, paths in files.items():
        if not paths:
            raise PetabError(f"{path.name}: names no {kind} file.")
    tables = {kind: _read(kind, paths) for kind, paths in files.items()}
    return Tables(name=path.stem, model=base / models[0], **tables)
