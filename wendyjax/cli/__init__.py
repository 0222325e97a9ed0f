"""Command line: `python -m wendyjax {demo,fit,study,petab,bench}` (`--help` on each)."""

import argparse
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from ..estimators import ESTIMATORS
from ._io import load_data, load_model, zoo_names

_METHODS = tuple(ESTIMATORS)  # for ODEModels; LinearODEs: data2ld
_BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
#: `study --intervals` names: Wald intervals by covariance, the bootstrap's basic and normal ones, the profiles
_INTERVALS = ("sandwich", "hessian", "gauss_newton", "bootstrap", "bootstrap_normal", "profile", "bootstrap_or_profile")


def _floats(text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _number(low: float, strict: bool):
    """An argparse type: one finite number above `low` (or at least `low`)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not np.isfinite(value) or value < low or (strict and value == low):
            raise argparse.ArgumentTypeError(f"expected a number {'>' if strict else '>='} {low:g}, got {text!r}")
        return value

    return parse


def _positive_floats(text: str) -> list[float]:
    values = _floats(text)
    if not values or not all(np.isfinite(v) and v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers > 0, got {text!r}")
    return values


def _count(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _names(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def _ints(text: str) -> list[int]:
    values = _floats(text)
    if any(v != int(v) or v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return [int(v) for v in values]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m wendyjax", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="simulate a zoo model and fit it with WENDy-MLE (the README's main job)")
    demo.add_argument("--model", default="lorenz", choices=zoo_names())
    demo.add_argument("--noise", type=_number(0.0, strict=False), default=0.1, help="noise ratio (default 0.1)")
    demo.add_argument("--seed", type=int, default=0)

    fit = sub.add_parser(
        "fit",
        help="fit a model to time series from a CSV or NPZ file",
        description="Fit MODEL to DATA and print the parameter table. MODEL: a zoo name or a "
        "Python file defining `model = wendyjax.ODEModel(...)` or `rhs(u, p, t)` with "
        "lists `states` and `params` (optional `bounds`), or `model = "
        "wendyjax.linear.LinearODE(...)` with `basis = wendyjax.linear.BSplineBasis(...)` "
        "(fitted by Data2LD; one trajectory). DATA: CSV with a header "
        "(`t`, the states by name or in order, optional `trajectory`; empty or NaN "
        "cells are missing values) or NPZ (`t` and `u`).",
    )
    fit.add_argument("model")
    fit.add_argument("data")
    fit.add_argument(
        "--method", choices=(*_METHODS, "data2ld"), help="default: mle for an ODEModel, data2ld for a LinearODE"
    )
    fit.add_argument(
        "--p0",
        type=_floats,
        help="start, comma-separated (default: the centre of the model's box; "
        "not needed for WENDy on models linear in the parameters; "
        "Data2LD: 0.01 each)",
    )
    fit.add_argument(
        "--noise", choices=("gaussian", "lognormal"), help="noise model (default: the zoo model's, else gaussian)"
    )
    fit.add_argument(
        "--covariance",
        help="sandwich or hessian (WENDy), gauss_newton (output error), gauss_newton or implicit (Data2LD)",
    )
    fit.add_argument(
        "--radius",
        type=_number(0.0, strict=True),
        help="test-function radius in time units (WENDy; default: selected from the data, which needs a uniform grid)",
    )
    fit.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals")
    fit.add_argument("--json", action="store_true", help="print the result as JSON instead of the table")

    study = sub.add_parser("study", help="Monte Carlo study of an estimator on a zoo model")
    study.add_argument("model", choices=zoo_names())
    study.add_argument("--estimator", default="mle", choices=_METHODS)
    study.add_argument("--noise", type=_positive_floats, default=[0.05], help="noise ratios, comma-separated")
    study.add_argument("--subsample", type=_ints, default=[1], help="subsampling factors, comma-separated")
    study.add_argument("--runs", type=int, default=100, help="runs per setting")
    study.add_argument("--seed", type=int, default=0)
    study.add_argument("--batch-size", type=_count, default=64)
    study.add_argument("--covariance", help="sandwich or hessian (WENDy), gauss_newton (output error)")
    study.add_argument("--level", type=float, default=0.95)
    study.add_argument(
        "--intervals",
        type=_names,
        default=[],
        help=f"interval methods whose coverage and width to measure, comma-separated: {', '.join(_INTERVALS)}",
    )
    study.add_argument("--boot", type=int, default=200, help="bootstrap refits per run (--intervals bootstrap)")
    study.add_argument(
        "--profile-points", type=int, default=21, help="grid points per parameter of a profile (--intervals profile)"
    )
    study.add_argument("--csv", help="write the metric table here")
    study.add_argument("--json", help="write metrics, every run and the settings here")

    petab = sub.add_parser(
        "petab",
        help="load a PEtab problem, check its log-likelihood, fit it by batched multistart",
        description="Load the PEtab v1 problem PATH.yaml (needs `pip install wendyjax[petab]`), "
        "print its log-likelihood at the nominal parameters, then fit it from --starts "
        "starts in one batched call and print the best fit.",
    )
    petab.add_argument("path", help="the problem's PEtab YAML file")
    petab.add_argument("--starts", type=_count, default=100, help="multistart starts (default 100)")
    petab.add_argument("--max-steps", type=_count, default=200, help="trust-region steps per start (default 200)")
    petab.add_argument("--seed", type=int, default=0)
    petab.add_argument("--waterfall", help="save the waterfall plot of the final objectives to this image file")

    bench = sub.add_parser(
        "bench",
        help="run benchmark scripts (source checkout only)",
        description="Run benchmarks/NAME.py for each NAME; arguments after `--` go to every "
        "script. Results land in benchmarks/results/.",
    )
    bench.add_argument("names", nargs="*", help="benchmarks to run (see --list)")
    bench.add_argument("--list", action="store_true", help="list the benchmark scripts")
    return parser


def _default_p0(model, p0):
    if p0 is not None:
        return np.asarray(p0, float)
    if model.bounds is None:
        return None
    lo, hi = (np.asarray(b, float) for b in model.bounds)
    return (lo + hi) / 2 if np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) else None


def _run_fit(args) -> int:
    import diffrax

    from .. import estimators
    from ..model import ODEModel

    _check_before_work(args)
    model, bench, basis = load_model(args.model)
    if basis is not None:
        result = _fit_data2ld(args, model, basis, load_data(args.data, model))
        _print_result(args, result, model.param_names)
        return 0
    assert isinstance(model, ODEModel)  # a LinearODE comes with its basis
    data = load_data(args.data, model)
    if args.method == "data2ld":
        raise ValueError(f"--method data2ld fits a wendyjax.linear.LinearODE; model '{model.name}' is an ODEModel.")
    args.method = args.method or "mle"
    noise = args.noise  # None: the model's own (a zoo model's protocol)
    p0 = _default_p0(model, args.p0)
    kwargs = {} if args.covariance is None else {"covariance": args.covariance}
    if args.radius is not None:
        from ..weak import TestFunctionConfig

        kwargs["test_functions"] = TestFunctionConfig(radius=args.radius)
    est = estimators.get_estimator(args.method)
    if args.p0 is None and args.method not in ("output_error", "hybrid") and est.start_required(model) is None:
        p0 = None  # the method's own start (WENDy's WLS estimate for a model linear in its parameters)
    ode_solver = bench.solver if bench is not None else diffrax.Tsit5()
    if args.method in ("output_error", "hybrid"):
        if p0 is None:
            raise ValueError(f"--p0 is needed: model '{model.name}' has no finite box to start from.")
        oe = estimators.OutputError(ode_solver=ode_solver)
        est = oe if args.method == "output_error" else estimators.Hybrid(output_error=oe)
        if args.covariance not in (None, "gauss_newton"):
            raise ValueError(f"--covariance {args.covariance}: output error has only gauss_newton.")
    elif p0 is None and not model.linear_in_params:
        raise ValueError(
            f"--p0 is needed: model '{model.name}' is nonlinear in its parameters and has no finite box to start from."
        )
    if args.radius is not None and "test_functions" not in est.options():
        raise ValueError(f"--radius sets WENDy's test functions; {args.method.replace('_', ' ')} has none.")
    if args.noise is not None and "noise" not in est.options():
        raise ValueError(f"--noise: {args.method.replace('_', ' ')} fits no noise model.")
    if "test_functions" in est.options():
        _check_weak_data(args, data)
    kwargs = {k: v for k, v in {**kwargs, "noise": noise}.items() if k in (*est.options(), "covariance")}
    result = est.fit(model, data, p0, **kwargs)
    _print_result(args, result, model.param_names)
    return 0


def _check_weak_data(args, data) -> None:
    """The weak form needs every state at a sample time, and its automatic radius a uniform
    grid: say so for the data file, with the flags that help."""
    for i, tr in enumerate(data):
        where = args.data + (f" (trajectory {i})" if len(data) > 1 else "")
        t = np.asarray(tr.t)
        mask = np.ones(tr.u.shape, bool) if tr.mask is None else np.asarray(tr.mask)
        partial = mask.any(axis=1) & ~mask.all(axis=1)
        if partial.any():
            raise ValueError(
                f"{where}: {int(partial.sum())} rows (first at t={t[partial][0]:g}) have only some states "
                f"missing, and WENDy (--method {args.method}) needs every state at a sample time: fill "
                f"those cells, delete those rows (then pass --radius, since the grid is no longer "
                f"uniform), or use --method output_error, which fits partly observed states."
            )
        dropped = ~mask.any(axis=1)
        if dropped.any() and args.radius is None and not tr.observed_rows().is_uniform():
            raise ValueError(
                f"{where}: {int(dropped.sum())} rows with every state missing (first at "
                f"t={t[dropped][0]:g}) are left out, which makes the time grid non-uniform, and the "
                f"automatic test-function radius needs a uniform one: pass --radius R (in time units, "
                f"a few sample steps)."
            )


def _fit_data2ld(args, model, basis, data):
    """Data2LD (Carey & Ramsay 2021) on the one trajectory of the data file (times may repeat, NaN = missing),
    refusing the options it has no use for."""
    from ..linear import Data2LD

    if args.method not in (None, "data2ld"):
        raise ValueError(f"--method {args.method}: model '{model.name}' is a LinearODE, fitted by data2ld.")
    for option, value in (("--noise", args.noise), ("--radius", args.radius)):
        if value is not None:
            raise ValueError(f"{option} is a WENDy option; Data2LD (LinearODE models) has no use for it.")
    if len(data) != 1:
        raise ValueError(f"Data2LD fits one trajectory; {args.data!r} holds {len(data)}.")
    if args.covariance not in (None, *Data2LD.covariances):
        raise ValueError(f"--covariance {args.covariance}: Data2LD has {' or '.join(Data2LD.covariances)}.")
    return Data2LD(basis).fit(model, data, args.p0, covariance=args.covariance)


def _print_result(args, result, names) -> None:
    """The summary table, or with `--json` the result's dict with the `--level` intervals."""
    if args.json:
        out = result.to_dict()
        lo, hi = result.ci(args.level)
        out[f"ci{100 * args.level:g}"] = {n: (a, b) for n, a, b in zip(names, lo.tolist(), hi.tolist())}
        print(json.dumps(out, indent=1, default=lambda x: np.asarray(x).tolist()))
    else:
        result.summary(args.level)


def _check_before_work(args) -> None:
    """The flags that would otherwise fail only after the fit or the whole study, checked
    first and named as the command line spells them."""
    if not 0 < args.level < 1:
        raise ValueError(f"--level must lie strictly between 0 and 1 (e.g. 0.95), got {args.level:g}.")
    if getattr(args, "runs", 2) < 2:
        raise ValueError(f"--runs must be at least 2 runs per setting, got {args.runs}.")
    paths = {flag: getattr(args, flag, None) for flag in ("csv", "json")}
    paths = {flag: path for flag, path in paths.items() if isinstance(path, str)}  # `fit --json` is a switch
    if len(paths) == 2 and Path(paths["csv"]).resolve() == Path(paths["json"]).resolve():
        raise ValueError(
            f"--csv and --json name the same file {paths['csv']}: the JSON would overwrite the table; "
            f"give two paths. Nothing was run."
        )
    for flag, path in paths.items():
        target = Path(path)
        folder = target.parent if str(target.parent) else Path(".")
        if target.is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK):
            why = "a folder" if target.is_dir() else f"no writable folder {folder}"
            raise ValueError(f"--{flag} {path}: cannot write there ({why}); nothing was run.")
        existed = target.exists()
        try:  # the folder may say writable where the file cannot be made (e.g. under /proc)
            with open(target, "a"):
                pass
        except OSError as e:
            raise ValueError(f"--{flag} {path}: cannot write there ({e.strerror or e}); nothing was run.") from None
        if not existed:
            target.unlink()


def _interval_methods(names: list[str], n_boot: int, n_points: int, level: float) -> list:
    """`--intervals` as interval methods (checked before the study)."""
    from .. import studies

    unknown = [n for n in names if n not in _INTERVALS]
    if unknown:
        raise ValueError(f"--intervals: unknown method(s) {', '.join(unknown)}; choose from {', '.join(_INTERVALS)}.")
    if any(n.startswith("bootstrap") for n in names) and n_boot < 2:
        raise ValueError(f"--boot must be at least 2 bootstrap refits per run, got {n_boot}.")
    if "bootstrap" in names and n_boot < studies.min_refits(level):
        raise ValueError(
            f"--boot {n_boot} is too few for --intervals bootstrap (basic intervals, from quantiles) at "
            f"--level {level:g}: they need --boot >= {studies.min_refits(level)}; use bootstrap_normal or "
            f"more refits."
        )
    if any("profile" in n for n in names) and n_points < 3:
        raise ValueError(f"--profile-points must be at least 3 grid points per parameter, got {n_points}.")
    make = {
        "bootstrap": lambda: studies.BootstrapIntervals(n_boot),
        "bootstrap_normal": lambda: studies.BootstrapIntervals(n_boot, kind="normal"),
        "profile": lambda: studies.ProfileIntervals(n_points),
        "bootstrap_or_profile": lambda: studies.BootstrapOrProfile(
            studies.BootstrapIntervals(n_boot, kind="normal"), studies.ProfileIntervals(n_points)
        ),
    }
    return [make[n]() if n in make else studies.Wald(n) for n in names]


def _run_study(args) -> int:
    import jax

    from .. import models, studies

    _check_before_work(args)
    intervals = _interval_methods(args.intervals, args.boot, args.profile_points, args.level)
    study = studies.monte_carlo(
        getattr(models, args.model)(),
        args.estimator,
        noise_levels=args.noise,
        subsamples=args.subsample,
        n_runs=args.runs,
        key=jax.random.key(args.seed),
        covariance=args.covariance,
        level=args.level,
        batch_size=args.batch_size,
        intervals=intervals,
    )
    print(study)
    if args.csv:
        study.to_csv(args.csv)
    if args.json:
        study.to_json(args.json)
    return 0


def _run_petab(args) -> int:
    from .. import petab

    problem = petab.load(args.path)
    print(
        f"{problem.name}: {problem.n_parameters} estimated parameters, {len(problem.conditions)} conditions, "
        f"{len(problem.measurements)} measurements"
    )
    print(f"log-likelihood at the nominal parameters: {float(problem.log_likelihood()):.10g}")
    result = petab.multistart(problem, args.starts, key=args.seed, max_steps=args.max_steps)
    print(
        f"{args.starts} starts in {result.seconds:.1f} s: best objective {result.best_objective:.6g}, "
        f"{int(result.converged.sum())} converged, "
        f"{result.fraction_within(result.best_objective):.0%} within 0.1 of the best"
        + (f" ({result.n_rejected} draws replaced: no fit could start there)" if result.n_rejected else "")
    )
    for name, scale, value in zip(problem.parameter_names, problem.scales, np.asarray(result.best), strict=True):
        print(f"  {name:32s} {scale:6s} {value: .6g}")
    if args.waterfall:
        import matplotlib.pyplot as plt

        figure, ax = plt.subplots(figsize=(5, 3.5))  # waterfall's own size
        result.waterfall(ax)
        figure.savefig(args.waterfall, dpi=120, bbox_inches="tight")
    return 0


def _run_bench(args, extra: list[str]) -> int:
    if not _BENCHMARKS.is_dir():
        raise FileNotFoundError(
            "the benchmark scripts come with the source checkout (benchmarks/ next to the "
            "wendyjax package); install from a clone with `pip install -e .`."
        )
    scripts = {p.stem: p for p in sorted(_BENCHMARKS.glob("*.py")) if not p.stem.startswith("_")}
    if args.list or not args.names:
        for name, path in scripts.items():
            doc = (ast.get_docstring(ast.parse(path.read_text())) or "").splitlines()
            print(f"{name:28s} {doc[0] if doc else ''}")
        return 0
    unknown = [n for n in args.names if n not in scripts]
    if unknown:
        raise ValueError(f"unknown benchmark {unknown[0]!r}; one of: {', '.join(scripts)}.")
    for name in args.names:
        print(f"== benchmarks/{name}.py {' '.join(extra)}", flush=True)
        code = subprocess.call([sys.executable, str(scripts[name]), *extra], cwd=_BENCHMARKS.parent)
        if code:
            return code
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for bad input, with the reason on stderr)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = _parser()
    args = parser.parse_args(argv)
    import jax

    jax.config.update("jax_enable_x64", True)  # fits and studies in float64
    try:
        if args.command == "demo":
            from ._demo import demo

            demo(args.model, args.noise, args.seed)
            return 0
        if args.command == "fit":
            return _run_fit(args)
        if args.command == "study":
            return _run_study(args)
        if args.command == "petab":
            return _run_petab(args)
        return _run_bench(args, extra)
    except (ValueError, TypeError, FileNotFoundError) as e:
        parser.exit(2, f"{parser.prog} {args.command}: error: {e}\n")


__all__ = ["main"]
