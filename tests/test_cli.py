"""`python -m wendyjax fit / study / bench`: results, JSON, and clear errors for bad input."""

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from _zoo import zoo

from wendyjax import datasets
from wendyjax.cli import main


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    bench = zoo("logistic")
    data = bench.simulate(jax.random.key(0), 0.05, subsample=4)
    u = np.array(data.u)
    u[3, 0] = np.nan  # a missing value
    np.savetxt(tmp / "logistic.csv", np.c_[data.t, u], delimiter=",", header="t,u", comments="")
    lv = zoo("lotka_volterra")
    d = lv.simulate(jax.random.key(1), 0.02, subsample=4)
    np.savez(tmp / "lv.npz", t=d.t, u=d.u)
    # columns by name, in another order than the model's states, two trajectories
    d2 = lv.simulate(jax.random.key(2), 0.02, subsample=4)
    rows = [f"{k},{t},{y},{x}" for k, traj in enumerate([d, d2]) for t, (x, y) in zip(traj.t, traj.u)]
    (tmp / "lv2.csv").write_text("trajectory,t,y,x\n" + "\n".join(rows) + "\n")
    (tmp / "lv_model.py").write_text(
        "states = ['x', 'y']\nparams = ['a', 'b', 'c', 'd']\n"
        "def rhs(u, p, t):\n    import jax.numpy as jnp\n"
        "    return jnp.stack([p[0] * u[0] - p[1] * u[0] * u[1], -p[2] * u[1] + p[3] * u[0] * u[1]])\n"
    )
    (tmp / "empty_model.py").write_text("x = 1\n")
    (tmp / "mm_model.py").write_text(
        "states = ['u']\nparams = ['v', 'k']\ndef rhs(u, p, t):\n    return -p[0] * u / (p[1] + u)\n"
    )
    (tmp / "bad_columns.csv").write_text("t,u,v\n0,1,2\n1,2,3\n")
    (tmp / "not_a_number.csv").write_text("t,u\n0,1\n1,abc\n")
    (tmp / "no_time.csv").write_text("time,u\n0,1\n1,2\n")
    (tmp / "garbage.npz").write_text("not an archive")
    (tmp / "empty.csv").write_text("")
    (tmp / "ragged.csv").write_text("t,u\n0,1\n1,2,3\n")
    (tmp / "raises.py").write_text("raise RuntimeError('boom')\n")
    np.savez(tmp / "no_t.npz", u=np.ones((5, 1)))
    np.savez(tmp / "wide.npz", t=np.arange(5.0), u=np.ones((5, 3)))
    np.savez(tmp / "short_t.npz", t=np.arange(4.0), u=np.ones((5, 1)))
    # Data2LD: the head-impact data (Carey & Ramsay 2021 §4) and its LinearODE with the basis of §4
    head = datasets.head_impact()
    t, y = np.asarray(head.t), np.asarray(head.u)[:, 0].copy()
    y[40] = np.nan  # a missing value
    np.savetxt(tmp / "head.csv", np.c_[t, y], delimiter=",", header="t,x", comments="")
    linear_model = (
        "from wendyjax import datasets\nmodel = datasets.head_impact_model()\nbasis = datasets.head_impact_basis()\n"
    )
    (tmp / "head_model.py").write_text(linear_model)
    (tmp / "head_model_no_basis.py").write_text(linear_model.replace("basis =", "knots ="))
    return tmp, bench, lv


def _fails(argv, capsys, match):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert match in err, err


def test_fit_csv_with_a_missing_value_prints_the_table(files, capsys):
    tmp, bench, _ = files
    assert main(["fit", "logistic", str(tmp / "logistic.csv"), "--radius", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "WENDy-MLE fit of 'logistic': converged" in out
    rows = {
        line.split()[0]: [float(v) for v in line.split()[1:]]
        for line in out.splitlines()
        if line.startswith(("p1 ", "p2 "))
    }
    est = np.array([rows["p1"][0], rows["p2"][0]])
    assert np.allclose(est, bench.p_true, rtol=0.1)
    # the same data as a spreadsheet writes them in many locales: semicolons, decimal commas
    text = (tmp / "logistic.csv").read_text().replace(",", ";").replace(".", ",")
    (tmp / "logistic_semicolon.csv").write_text(text)
    assert main(["fit", "logistic", str(tmp / "logistic_semicolon.csv"), "--radius", "0.5"]) == 0
    again = capsys.readouterr().out
    assert [ln for ln in again.splitlines() if ln.startswith(("p1 ", "p2 "))] == [
        ln for ln in out.splitlines() if ln.startswith(("p1 ", "p2 "))
    ]


@pytest.mark.slow
def test_fit_json_from_npz_and_from_a_model_file(files, capsys):
    tmp, _, lv = files
    assert main(["fit", "lotka_volterra", str(tmp / "lv.npz"), "--method", "wls", "--json", "--level", "0.9"]) == 0
    out = json.loads(capsys.readouterr().out)
    est = np.array(list(out["params"].values()))
    assert out["method"] == "wls" and out["status"] == "successful"
    assert np.allclose(est, lv.p_true, rtol=0.05)
    lo, hi = np.array(list(out["ci90"].values())).T
    assert (
        np.all(lo < est)
        and np.all(est < hi)
        and np.all(hi - lo < np.array(list(out["ci95"].values()))[:, 1] - np.array(list(out["ci95"].values()))[:, 0])
    )
    # the same model from a file, data by column name with two trajectories
    assert main(["fit", str(tmp / "lv_model.py"), str(tmp / "lv2.csv"), "--method", "wls", "--json"]) == 0
    out2 = json.loads(capsys.readouterr().out)
    assert list(out2["params"]) == ["a", "b", "c", "d"]
    assert np.allclose(list(out2["params"].values()), lv.p_true, rtol=0.05)


def test_fit_bad_input_is_named(files, capsys):
    tmp, _, _ = files
    _fails(["fit", "nope", str(tmp / "logistic.csv")], capsys, "unknown model 'nope'")
    _fails(["fit", "logistic", str(tmp / "missing.csv")], capsys, "does not exist")
    _fails(["fit", "logistic", str(tmp / "bad_columns.csv")], capsys, "has 1 states (u) but the file has 2 state")
    _fails(["fit", "logistic", str(tmp / "not_a_number.csv")], capsys, "line 3 has a value that is not a number")
    _fails(["fit", "logistic", str(tmp / "no_time.csv")], capsys, "time column 't'")
    _fails(["fit", "logistic", str(tmp / "garbage.npz")], capsys, "not a readable NPZ archive")
    _fails(["fit", str(tmp / "empty_model.py"), str(tmp / "lv.npz")], capsys, "must define `model")
    _fails(["fit", str(tmp / "mm_model.py"), str(tmp / "logistic.csv"), "--radius", "0.5"], capsys, "--p0 is needed")
    _fails(["fit", "logistic", str(tmp / "logistic.csv"), "--p0", "1,2,3", "--radius", "0.5"], capsys, "p0")
    _fails(
        ["fit", "logistic", str(tmp / "logistic.csv"), "--method", "output_error", "--covariance", "hessian"],
        capsys,
        "only gauss_newton",
    )
    _fails(["fit", "logistic", str(tmp / "empty.csv")], capsys, "the file is empty")
    _fails(["fit", "logistic", str(tmp / "ragged.csv")], capsys, "line 3 has a different number of columns")
    _fails(["fit", "logistic", str(tmp / "data.txt")], capsys, "does not exist")
    (tmp / "data.txt").write_text("t,u\n")
    _fails(["fit", "logistic", str(tmp / "data.txt")], capsys, "expected a .csv or .npz file")
    _fails(["fit", str(tmp / "raises.py"), str(tmp / "lv.npz")], capsys, "running model file")
    _fails(["fit", str(tmp / "absent.py"), str(tmp / "lv.npz")], capsys, "model file")
    _fails(["fit", "logistic", str(tmp / "no_t.npz")], capsys, "must hold an array 't'")
    _fails(["fit", "logistic", str(tmp / "wide.npz")], capsys, "has 1 states but 'u' has shape (5, 3)")
    _fails(["fit", "logistic", str(tmp / "short_t.npz")], capsys, "'t' has 4 times but 'u' has 5 rows")
    _fails(
        ["fit", "logistic", str(tmp / "logistic.csv"), "--method", "output_error", "--radius", "0.5"],
        capsys,
        "output error has none",
    )
    _fails(
        ["fit", "logistic", str(tmp / "logistic.csv"), "--method", "integral_matching", "--noise", "lognormal"],
        capsys,
        "integral matching fits no noise model",
    )
    with pytest.raises(SystemExit):
        main(["fit", "logistic", str(tmp / "logistic.csv"), "--p0", "a,b"])
    assert "comma-separated numbers" in capsys.readouterr().err


def test_fit_a_linear_ode_by_data2ld(files, capsys):
    tmp, _, lv = files
    assert main(["fit", str(tmp / "head_model.py"), str(tmp / "head.csv"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # Carey & Ramsay 2021, §4: θ̂ ≈ (−0.057, −0.15, 0.40), half-widths (0.005, 0.03, 0.06)
    # (one of 133 samples missing here)
    assert out["method"] == "data2ld" and out["status"] == "successful"
    est = np.array(list(out["params"].values()))
    assert np.all(np.abs(est - [-0.057, -0.15, 0.40]) <= [0.003, 0.01, 0.01]), est
    assert main(["fit", str(tmp / "head_model.py"), str(tmp / "head.csv"), "--covariance", "implicit"]) == 0
    assert "Data2LD fit of 'head_impact': converged" in capsys.readouterr().out
    head = [str(tmp / "head_model.py"), str(tmp / "head.csv")]
    _fails(["fit", *head, "--method", "mle"], capsys, "is a LinearODE, fitted by data2ld")
    _fails(["fit", *head, "--radius", "1"], capsys, "--radius is a WENDy option")
    _fails(["fit", *head, "--covariance", "sandwich"], capsys, "gauss_newton or implicit")
    _fails(["fit", str(tmp / "head_model.py"), str(tmp / "lv2.csv")], capsys, "has 1 states (x) but the file has 2")
    _fails(["fit", "lotka_volterra", str(tmp / "lv.npz"), "--method", "data2ld"], capsys, "is an ODEModel")
    _fails(["fit", str(tmp / "head_model_no_basis.py"), str(tmp / "head.csv")], capsys, "no `basis")
    one = np.loadtxt(tmp / "head.csv", delimiter=",", skiprows=1)
    np.savetxt(
        tmp / "head2.csv",
        np.c_[np.r_[np.zeros(133), np.ones(133)], np.tile(one, (2, 1))],
        delimiter=",",
        header="trajectory,t,x",
        comments="",
    )
    _fails(["fit", str(tmp / "head_model.py"), str(tmp / "head2.csv")], capsys, "Data2LD fits one trajectory")


@pytest.mark.slow
def test_study_writes_its_table(files, capsys):
    tmp, _, _ = files
    argv = [
        "study",
        "logistic",
        "--estimator",
        "wls",
        "--noise",
        "0.05",
        "--subsample",
        "8",
        "--runs",
        "3",
        "--csv",
        str(tmp / "study.csv"),
        "--json",
        str(tmp / "study.json"),
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Monte Carlo study of 'logistic'" in out
    lines = (tmp / "study.csv").read_text().splitlines()
    assert len(lines) == 1 + 2 and lines[0].startswith("cell,u0_u,noise_ratio")  # header + one row per parameter
    assert json.loads((tmp / "study.json").read_text())["settings"]["n_runs"] == 3
    with pytest.raises(SystemExit):
        main(["study", "logistic", "--subsample", "0"])
    assert "positive integers" in capsys.readouterr().err


@pytest.mark.slow
def test_study_measures_the_interval_methods_asked_for(capsys):
    argv = [
        "study",
        "logistic",
        "--noise",
        "0.05",
        "--subsample",
        "16",
        "--runs",
        "3",
        "--covariance",
        "hessian",
        "--intervals",
        "sandwich,bootstrap,bootstrap_normal,profile,bootstrap_or_profile",
        "--boot",
        "40",
        "--profile-points",
        "7",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    head = out.split("0.95 intervals: coverage (median width / ideal width)")[1].splitlines()[1].split()
    assert head == [
        "noise",
        "M",
        "param",
        "sandwich",
        "bootstrap_basic",
        "bootstrap_normal",
        "profile",
        "bootstrap_or_profile",
    ]


def test_outputs_and_level_are_checked_before_any_work(files, capsys, monkeypatch):
    """An unwritable --json used to fail after the whole study (leaving the CSV behind), and
    --level 2 after the fit; now both are refused first, and nothing runs."""
    tmp, _, _ = files
    import wendyjax.studies as studies

    monkeypatch.setattr(studies, "monte_carlo", lambda *a, **k: pytest.fail("the study ran"))
    base = ["study", "logistic", "--estimator", "wls", "--runs", "2"]
    _fails(
        [*base, "--csv", str(tmp / "early.csv"), "--json", str(tmp / "no" / "such" / "dir.json")],
        capsys,
        "dir.json: cannot write there (no writable folder",
    )
    assert not (tmp / "early.csv").exists()
    _fails([*base, "--csv", str(tmp)], capsys, f"--csv {tmp}: cannot write there (a folder); nothing was run")
    _fails([*base, "--level", "2"], capsys, "--level must lie strictly between 0 and 1")
    _fails(
        [*base, "--csv", str(tmp / "same.out"), "--json", str(tmp / "same.out")],
        capsys,
        "--csv and --json name the same file",
    )
    _fails([*base, "--csv", "/proc/wendyjax.csv"], capsys, "--csv /proc/wendyjax.csv: cannot write there")
    _fails(["study", "logistic", "--estimator", "wls", "--runs", "0"], capsys, "--runs must be at least 2 runs")
    _fails(
        [*base, "--intervals", "bootstrap", "--boot", "10"],
        capsys,
        "--boot 10 is too few for --intervals bootstrap (basic intervals, from quantiles) at --level 0.95: they "
        "need --boot >= 40",
    )
    _fails([*base, "--intervals", "hessian,jackknife"], capsys, "--intervals: unknown method(s) jackknife; choose")
    _fails([*base, "--intervals", "bootstrap", "--boot", "1"], capsys, "--boot must be at least 2")
    _fails(
        [*base, "--intervals", "bootstrap_or_profile", "--profile-points", "2"],
        capsys,
        "--profile-points must be at least 3",
    )
    _fails(
        ["fit", "lotka_volterra", str(tmp / "lv.npz"), "--level", "95"],
        capsys,
        "--level must lie strictly between 0 and 1 (e.g. 0.95), got 95",
    )


@pytest.mark.parametrize(
    "argv, match",
    [
        (["fit", "logistic", "x.csv", "--radius", "-1"], "argument --radius: expected a number > 0, got '-1'"),
        (["study", "logistic", "--batch-size", "0"], "argument --batch-size: expected an integer >= 1, got '0'"),
        (["study", "logistic", "--noise", "0.05,nan"], "argument --noise: expected comma-separated numbers > 0"),
        (["study", "logistic", "--noise", "-0.1"], "argument --noise: expected comma-separated numbers > 0"),
        (["demo", "--noise", "nan"], "argument --noise: expected a number >= 0, got 'nan'"),
    ],
)
def test_numeric_flags_are_refused_by_their_own_names(argv, match, capsys):
    """They used to be refused by the library's argument names (radius, batch_size,
    noise_levels, noise_ratio), which the command line does not have."""
    _fails(argv, capsys, match)


def test_demo_refuses_what_it_cannot_run(capsys):
    # the PDE reference solutions have no protocol to fit: not offered
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--model", "kuramoto_sivashinsky"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err
    _fails(["demo", "--noise", "-0.1"], capsys, "argument --noise: expected a number >= 0, got '-0.1'")


@pytest.mark.slow
def test_bench_lists_runs_and_rejects_unknown(capsys, monkeypatch):
    assert main(["bench", "--list"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert "likelihood" in names and "spiral_neural" in names and "_common" not in names  # helpers hidden
    _fails(["bench", "nope"], capsys, "unknown benchmark 'nope'")
    assert main(["bench", "likelihood", "--", "--help"]) == 0
    import wendyjax.cli

    monkeypatch.setattr(wendyjax.cli, "_BENCHMARKS", Path("/nonexistent/benchmarks"))
    _fails(["bench", "--list"], capsys, "source checkout")


def test_missing_cells_get_the_flags_that_help(files, capsys, tmp_path):
    """NaN cells used to end in a hint about TestFunctionConfig(radius=...) (not a flag) that
    did not say the dropped rows had made the grid non-uniform; an all-NaN column in "a
    trajectory needs at least 2 samples, got 0", naming neither file nor column."""
    _, _, lv = files
    d = lv.simulate(jax.random.key(3), 0.02, subsample=8)
    u = np.array(d.u)

    def write(name, values):
        np.savetxt(tmp_path / name, np.c_[d.t, values], delimiter=",", header="t,x,y", comments="")
        return str(tmp_path / name)

    partial = u.copy()
    partial[[20, 30], 1] = np.nan
    _fails(
        ["fit", "lotka_volterra", write("partial.csv", partial)],
        capsys,
        "partial.csv: 2 rows (first at t=0.78125) have only some states missing, and WENDy (--method mle) needs "
        "every state at a sample time: fill those cells, delete those rows (then pass --radius",
    )
    rows = u.copy()
    rows[[20, 21]] = np.nan
    _fails(
        ["fit", "lotka_volterra", write("rows.csv", rows)],
        capsys,
        "rows.csv: 2 rows with every state missing (first at t=0.78125) are left out, which makes the time grid "
        "non-uniform, and the automatic test-function radius needs a uniform one: pass --radius R",
    )
    column = u.copy()
    column[:, 1] = np.nan
    _fails(
        ["fit", "lotka_volterra", write("column.csv", column)],
        capsys,
        "column.csv: column y has no observed value (every cell is empty or NaN)",
    )
