"""PEtab import: the log-likelihood against AMICI's published values and petab's own
`calculate_llh`, a small problem written here against its closed-form solution, the batched
multistart, and the errors for bad input."""

import math
import re
import shutil
from pathlib import Path

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
import sympy as sp
from _typecheck import unchecked

libsbml = pytest.importorskip("libsbml")
petab_v1 = pytest.importorskip("petab.v1")
import wendyjax as wj  # noqa: E402
import wendyjax.petab as wp  # noqa: E402

DATA = Path(__file__).parent / "data" / "petab"
# AMICI's test suite (tests/benchmark_models/benchmark_models.yaml of AMICI-dev/AMICI)
AMICI = {
    "Boehm_JProteomeRes2014": -138.22199693517703,
    "Fujita_SciSignal2010": 53.08377736998929,
    "Elowitz_Nature2000": 63.20279991419332,
    "Bruno_JExpBot2016": 46.688176988431806,
}


def _yaml(name: str) -> Path:
    return wj.datasets.boehm_petab() if name == "Boehm_JProteomeRes2014" else DATA / name / f"{name}.yaml"


@pytest.fixture(scope="module")
def boehm():
    return wp.load(_yaml("Boehm_JProteomeRes2014"))


def test_boehm_at_its_nominal_parameters_has_amicis_log_likelihood(boehm):
    assert boehm.n_parameters == 9 and boehm.scales == ("log10",) * 9
    value = float(boehm.log_likelihood())
    assert value == pytest.approx(AMICI["Boehm_JProteomeRes2014"], rel=1e-6)


@pytest.mark.parametrize("name", ["Fujita_SciSignal2010", "Elowitz_Nature2000", "Bruno_JExpBot2016"])
def test_log_likelihood_equals_amicis_and_petabs_own_on_our_simulations(name):
    # Fujita: 16 conditions, a piecewise input, condition overrides; Elowitz: log10
    # observables (with the transform's Jacobian), initial assignments; Bruno: six conditions
    # of a linear model, solved by its matrix exponential. atol 1e-14: Fujita's species are
    # small (converged values at atol 1e-14 and 1e-16 agree to 1e-9).
    problem = wp.load(_yaml(name), rtol=1e-10, atol=1e-14)
    assert isinstance(problem.solver, wp.MatrixExponential) == (name == "Bruno_JExpBot2016")
    value = float(problem.log_likelihood())
    assert value == pytest.approx(AMICI[name], rel=1e-6)
    # the formula checked independently: petab's calculate_llh on our simulations
    reference = petab_v1.Problem.from_yaml(_yaml(name))
    simulation = reference.measurement_df.rename(columns={"measurement": "simulation"})
    simulation["simulation"] = problem.simulate()["simulation"].to_numpy()
    assert petab_v1.calculate_llh(
        reference.measurement_df, simulation, reference.observable_df, reference.parameter_df
    ) == pytest.approx(value, rel=1e-12)


def test_a_term_that_saturates_through_an_overflow_has_tangent_0_not_nan():
    """Elowitz & Leibler 2000's Hill terms 1/(1 + (X/K_M)^n_Hill) overflow at large n_Hill:
    the field stays finite but its tangent is inf/inf = NaN, which stopped the implicit
    step's derivative (a linear solve) of every start. The field of forward-mode solves
    gives 0 there, its limit, and the same field and tangent everywhere else."""
    problem = wp.load(_yaml("Elowitz_Nature2000"))
    rng = np.random.default_rng(0)
    lo, hi = np.asarray(problem.lower), np.asarray(problem.upper)
    xs = jnp.asarray(rng.uniform(lo, hi, size=(200, lo.size)))
    us = jnp.asarray(rng.uniform(0.0, 50.0, size=(200, len(problem.states))))

    def both(x, u):
        p = problem._parameters(x)[1][0]
        tangent = lambda field: jax.jvp(lambda u: field(0.0, u, p), (u,), (jnp.ones_like(u),))  # noqa: E731
        return tangent(problem._field), tangent(problem._field_forward)

    (f, plain), (g, forward) = (tuple(map(np.asarray, pair)) for pair in jax.jit(jax.vmap(both))(xs, us))
    nan = ~np.isfinite(plain)
    assert nan.any(axis=1).sum() >= 5 and np.all(np.isfinite(f[nan]))  # finite fields, NaN tangents
    np.testing.assert_array_equal(g, f)
    np.testing.assert_array_equal(forward[~nan], plain[~nan])
    assert np.all(forward[nan] == 0.0)


def test_a_solve_that_stops_advancing_fails_at_once_and_the_others_are_unchanged():
    """y' = y² blows up at t = 1: the steps shrink to the resolution of t and from there every
    step is rejected until `max_steps` run out (the multistart of Crauste et al. 2017 meets
    such trial points: ending them early more than halves its time). With the load's rejection limit
    the solve fails after that many rejections in a row; a solve that keeps advancing takes
    the same steps and values."""
    from wendyjax.petab._stepsize import RejectionLimit

    def solve(sign, solver, limit):
        pid = diffrax.PIDController(rtol=1e-8, atol=1e-12)
        return diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, args: sign * y * y),
            solver,
            0.0,
            5.0,
            None,
            jnp.array([1.0]),
            saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 5.0, 11)),
            stepsize_controller=pid if limit is None else RejectionLimit(pid, limit),
            max_steps=10_000,
            throw=False,
        )

    for solver in (diffrax.Kvaerno5(root_finder=diffrax.VeryChord(rtol=1e-4, atol=1e-7)), diffrax.Tsit5()):
        stuck, ended = solve(1.0, solver, None), solve(1.0, solver, 100)
        assert stuck.result == diffrax.RESULTS.max_steps_reached and int(stuck.stats["num_steps"]) == 10_000
        assert ended.result == diffrax.RESULTS.dt_min_reached
        assert int(ended.stats["num_accepted_steps"]) == int(stuck.stats["num_accepted_steps"])
        assert int(ended.stats["num_steps"]) < 1_000  # 100 rejections after the last accepted step
        plain, limited = solve(-1.0, solver, None), solve(-1.0, solver, 3)
        assert plain.result == limited.result == diffrax.RESULTS.successful
        np.testing.assert_array_equal(np.asarray(limited.ys), np.asarray(plain.ys))
        assert int(limited.stats["num_steps"]) == int(plain.stats["num_steps"])


def _chain(t, x, p):
    """A stiff linear chain with an input: x0 -> x1 -> x2 -> at rates 1e4 p0, p1 and 0.01, x0
    produced at rate p2."""
    a = jnp.array([[-1e4 * p[0], 0.0, 0.0], [1e4 * p[0], -p[1], 0.0], [0.0, p[1], -0.01]])
    return a @ x + jnp.array([p[2], 0.0, 0.0])


def test_the_matrix_exponential_is_the_exact_solution_of_a_linear_model():
    from scipy.linalg import expm

    from wendyjax.petab._exponential import linear_autonomous

    p = jnp.array([[1.0, 1.0, 2.0], [0.5, 3.0, 0.0]])  # two conditions
    x0 = jnp.array([[1.0, 0.0, 0.0], [0.0, 2.0, 1.0]])
    ts = jnp.array([[0.0, 1e-4, 1.0, 300.0], [0.0, 0.5, 10.0, 10.0]])
    solve = jax.jit(lambda p, solver: solver.solve(_chain, p, x0, ts), static_argnums=1)
    states, ok = solve(p, wp.MatrixExponential())
    assert bool(ok)
    zero = jnp.zeros(3)
    for c in range(2):
        m = np.zeros((4, 4))
        m[:3, :3], m[:3, 3] = jax.jacfwd(_chain, argnums=1)(0.0, zero, p[c]), _chain(0.0, zero, p[c])
        for k, t in enumerate(np.asarray(ts[c])):
            reference = (expm(m * t) @ np.append(x0[c], 1.0))[:3]  # scipy's own scaling and squaring
            # each carries rounding of about 2^s ε, s = 21 squarings at t = 300 (4.7e-10)
            np.testing.assert_allclose(states[c, k], reference, rtol=1e-9, atol=1e-14)
    # x0 by hand: s/k + (x0(0) - s/k) exp(-k t), k = 1e4, s = 2
    np.testing.assert_allclose(states[0, :, 0], 2e-4 + (1 - 2e-4) * np.exp(-1e4 * ts[0]), rtol=1e-12)
    # derivatives in the parameters: forward and reverse mode and central differences agree
    weights = jnp.arange(1.0, 25.0).reshape(2, 4, 3)
    loss = lambda p: jnp.sum(weights * solve(p, wp.MatrixExponential())[0])  # noqa: E731
    forward, reverse = jax.jacfwd(loss)(p), jax.grad(loss)(p)
    np.testing.assert_allclose(forward, reverse, rtol=1e-10)
    h = 1e-4  # the loss (2.6e3) is rounded at ~2^20 ε relative: differences agree to ~1e-7
    for c, i in np.ndindex(2, 3):
        e = jnp.zeros_like(p).at[c, i].set(h)
        assert float(forward[c, i]) == pytest.approx(float((loss(p + e) - loss(p - e)) / (2 * h)), rel=1e-5, abs=1e-8)
    # |A t|_1 = 6e6 needs 21 squarings: with fewer, the solve fails
    states, ok = solve(p, wp.MatrixExponential(max_squarings=8))
    assert not bool(ok) and np.isnan(states[0, 3]).all()
    x, y, k, t = sp.symbols("x y k t")
    assert linear_autonomous([k * x + 2, -k * x / 3 + y], [x, y], t)
    # a switch on a state is not linear, though the derivative of a piecewise drops its condition
    switch = k * sp.Piecewise((1, x > 1), (0, True))
    assert linear_autonomous([x * sp.Piecewise((k, k > 1), (0, True)), y], [x, y], t)  # one on a parameter is
    for expr in (k * x * y, k * x + t, sp.exp(x), x * sp.Piecewise((k, x < 1), (0, True)), switch, sp.Abs(x)):
        assert not linear_autonomous([expr, y], [x, y], t), expr


def test_simulations_match_the_collections_simulated_data(boehm):
    ours = boehm.simulate()
    theirs = pd.read_csv(_yaml("Boehm_JProteomeRes2014").parent / "simulatedData_Boehm_JProteomeRes2014.tsv", sep="\t")
    np.testing.assert_allclose(ours["simulation"], theirs["simulation"], rtol=1e-6, atol=1e-6)


# A problem written here: A -> B at rate k*A (amount per time) in a compartment of size 2,
# so d[A]/dt = -k[A]/2 and [A] = A0 exp(-k t / 2), [B] = A0 - [A]. Two conditions (A0 a
# number, and a parameter of the table), an observable scale per measurement, a log10
# observable with normal noise and a lin one with Laplace noise whose scale is estimated.
_TRUTH = {"k": 0.7, "A0_high": 3.0, "scale_a": 2.0, "sigma_b": 0.1}


def _write_problem(
    folder: Path,
    *,
    event: bool = False,
    preequilibration: bool = False,
    prior: bool = False,
    laplace: bool = True,
    direct: bool = False,
    rate: str = "k * A",
) -> Path:
    """The problem above; `laplace=False`: normal noise on obs_b; `direct`: A and B themselves
    observed (normal noise, 0.05) on a grid of 41 times, A0 = 3 in condition high, k alone estimated;
    `rate`: the reaction's kinetic law (the data stay those of `k * A`)."""
    doc = libsbml.SBMLDocument(3, 2)
    model = doc.createModel()
    comp = model.createCompartment()
    comp.setId("cell")
    comp.setSize(2.0)
    comp.setConstant(True)
    for sid, value in (("A", 1.0), ("B", 0.0)):
        s = model.createSpecies()
        s.setId(sid)
        s.setCompartment("cell")
        s.setInitialConcentration(value)
        s.setHasOnlySubstanceUnits(False)
        s.setBoundaryCondition(False)
        s.setConstant(False)
    k = model.createParameter()
    k.setId("k")
    k.setValue(1.0)
    k.setConstant(True)
    reaction = model.createReaction()
    reaction.setId("decay")
    reaction.setReversible(False)
    ref = reaction.createReactant()
    ref.setSpecies("A")
    ref.setStoichiometry(1.0)
    ref.setConstant(True)
    ref = reaction.createProduct()
    ref.setSpecies("B")
    ref.setStoichiometry(1.0)
    ref.setConstant(True)
    reaction.createKineticLaw().setMath(libsbml.parseL3Formula(rate))
    if event:
        e = model.createEvent()
        e.setId("kick")
        e.setUseValuesFromTriggerTime(True)
        trigger = e.createTrigger()
        trigger.setMath(libsbml.parseL3Formula("time > 1"))
        trigger.setPersistent(True)
        trigger.setInitialValue(False)
        a = e.createEventAssignment()
        a.setVariable("A")
        a.setMath(libsbml.parseL3Formula("1"))
    folder.mkdir(parents=True, exist_ok=True)
    libsbml.writeSBMLToFile(doc, str(folder / "model.xml"))
    pd.DataFrame({"conditionId": ["low", "high"], "A": ["1.0", "3.0" if direct else "A0_high"]}).to_csv(
        folder / "conditions.tsv", sep="\t", index=False
    )
    pd.DataFrame(
        {
            "observableId": ["obs_a", "obs_b"],
            "observableFormula": ["A" if direct else "observableParameter1_obs_a * A", "B"],
            "noiseFormula": ["0.05", "0.05" if direct else "noiseParameter1_obs_b"],
            "observableTransformation": ["lin" if direct else "log10", "lin"],
            "noiseDistribution": ["normal", "laplace" if laplace and not direct else "normal"],
        }
    ).to_csv(folder / "observables.tsv", sep="\t", index=False)
    rng = np.random.default_rng(0)
    rows = []
    for cond, a0 in (("low", 1.0), ("high", _TRUTH["A0_high"])):
        for t in np.linspace(0.0, 8.0, 41) if direct else (0.5, 1.0, 2.0, 4.0):
            a = a0 * math.exp(-_TRUTH["k"] * t / 2)
            if direct:
                rows.append(["obs_a", cond, a + 0.05 * rng.standard_normal(), t, "", ""])
                rows.append(["obs_b", cond, a0 - a + 0.05 * rng.standard_normal(), t, "", ""])
                continue
            rows.append(["obs_a", cond, _TRUTH["scale_a"] * a * 10 ** (0.05 * rng.standard_normal()), t, "scale_a", ""])
            noise = rng.laplace(0, _TRUTH["sigma_b"]) if laplace else _TRUTH["sigma_b"] * rng.standard_normal()
            rows.append(["obs_b", cond, a0 - a + noise, t, "", "sigma_b"])
    measurements = pd.DataFrame(
        rows,
        columns=[
            "observableId",
            "simulationConditionId",
            "measurement",
            "time",
            "observableParameters",
            "noiseParameters",
        ],
    )
    if preequilibration:
        measurements.insert(1, "preequilibrationConditionId", "low")
    measurements.to_csv(folder / "measurements.tsv", sep="\t", index=False)
    parameters = pd.DataFrame(
        {
            "parameterId": ["k", "A0_high", "scale_a", "sigma_b"],
            "parameterScale": ["log10", "lin", "log", "log10"],
            "lowerBound": [1e-3, 0.1, 0.01, 1e-3],
            "upperBound": [1e2, 10.0, 100.0, 10.0],
            "nominalValue": [_TRUTH[n] for n in ("k", "A0_high", "scale_a", "sigma_b")],
            "estimate": [1, 0, 0, 0] if direct else [1, 1, 1, 1],
        }
    )
    if prior:
        parameters["objectivePriorType"] = ["logNormal", "", "", ""]
        parameters["objectivePriorParameters"] = ["-0.5;0.3", "", "", ""]
    parameters.to_csv(folder / "parameters.tsv", sep="\t", index=False)
    (folder / "problem.yaml").write_text(
        "format_version: 1\nparameter_file: parameters.tsv\nproblems:\n- condition_files: [conditions.tsv]\n"
        "  measurement_files: [measurements.tsv]\n  observable_files: [observables.tsv]\n  sbml_files: [model.xml]\n"
    )
    return folder / "problem.yaml"


def _closed_form_log_likelihood(frame: pd.DataFrame, k, a0_high, scale_a, sigma_b) -> float:
    total = 0.0
    for _, row in frame.iterrows():
        a0 = 1.0 if row.simulationConditionId == "low" else a0_high
        a = a0 * math.exp(-k * row.time / 2)
        if row.observableId == "obs_a":
            total += petab_v1.calculate_single_llh(row.measurement, scale_a * a, "log10", "normal", 0.05)
        else:
            total += petab_v1.calculate_single_llh(row.measurement, a0 - a, "lin", "laplace", sigma_b)
    return total


@pytest.mark.parametrize("solver", [None, diffrax.Kvaerno5()], ids=["default", "Kvaerno5"])
def test_a_problem_written_here_has_its_closed_form_log_likelihood(tmp_path, solver):
    problem = wp.load(_write_problem(tmp_path / "p"), rtol=1e-12, atol=1e-14, solver=solver)
    # k A is linear: by default its exact solution
    assert isinstance(problem.solver, wp.MatrixExponential if solver is None else diffrax.Kvaerno5)
    assert problem.parameter_names == ("k", "A0_high", "scale_a", "sigma_b")
    assert problem.scales == ("log10", "lin", "log", "log10")
    np.testing.assert_allclose(problem.nominal, [math.log10(0.7), 3.0, math.log(2.0), math.log10(0.1)], rtol=1e-15)
    frame = pd.read_csv(tmp_path / "p" / "measurements.tsv", sep="\t")
    for theta in ([0.7, 3.0, 2.0, 0.1], [0.3, 1.5, 4.0, 0.5]):
        x = [math.log10(theta[0]), theta[1], math.log(theta[2]), math.log10(theta[3])]
        assert float(problem.log_likelihood(x)) == pytest.approx(_closed_form_log_likelihood(frame, *theta), rel=1e-9)
    assert float(problem.log_prior()) == 0.0


def test_priors_enter_the_objective_not_the_log_likelihood(tmp_path):
    problem = wp.load(_write_problem(tmp_path / "p", prior=True), rtol=1e-12, atol=1e-14)
    k = 0.7
    expected = -math.log(k * 0.3 * math.sqrt(2 * math.pi)) - (math.log(k) + 0.5) ** 2 / (2 * 0.3**2)
    assert float(problem.log_prior()) == pytest.approx(expected, rel=1e-12)
    objective, ok = eqx.filter_jit(problem.objective)(problem.nominal)
    assert bool(ok)
    assert float(objective) == pytest.approx(-float(problem.log_likelihood()) - expected, rel=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("solver", [None, diffrax.Kvaerno5()], ids=["matrix-exponential", "Kvaerno5"])
def test_the_fisher_path_gradient_matches_reverse_mode_and_finite_differences(tmp_path, solver):
    from wendyjax.petab._multistart import _value_gradient_fisher

    problem = wp.load(_write_problem(tmp_path / "p", prior=True), rtol=1e-12, atol=1e-14, solver=solver)
    x = problem.nominal + jnp.array([0.1, -0.2, 0.1, 0.05])
    value, grad, fisher = eqx.filter_jit(_value_gradient_fisher)(x, problem)
    objective = eqx.filter_jit(lambda x: problem.objective(x)[0])
    assert float(value) == pytest.approx(float(objective(x)), rel=1e-12)
    reverse = eqx.filter_jit(jax.grad(lambda x: problem.objective(x)[0]))(x)
    np.testing.assert_allclose(grad, reverse, rtol=1e-8, atol=1e-10)
    h = 1e-6
    for i in range(problem.n_parameters):
        e = jnp.zeros(problem.n_parameters).at[i].set(h)
        fd = (objective(x + e) - objective(x - e)) / (2 * h)
        assert float(grad[i]) == pytest.approx(float(fd), rel=1e-5, abs=1e-6)
    assert np.all(np.linalg.eigvalsh(np.asarray(fisher)) > 0)
    # the ODE solves carry tangents of k and A0_high only (scale_a observes, sigma_b is noise): the
    # Fisher information equals the one from reverse-mode Jacobians of every output in every parameter
    assert problem._in_ode == (True, True, False, False)
    j_sim, j_log_sigma = eqx.filter_jit(jax.jacrev(lambda x: problem._outputs(x)[:2]))(x)
    _, log_sigma, _ = problem._outputs(x)
    information = np.where(np.asarray(problem._laplace), 1.0, 2.0)  # of log sigma: Laplace 1, normal 2
    expected = (
        (j_sim * np.exp(-2 * log_sigma)[:, None]).T @ j_sim
        + (j_log_sigma * information[:, None]).T @ j_log_sigma
        - jax.hessian(problem.log_prior)(x)
    )
    np.testing.assert_allclose(fisher, expected, rtol=1e-8, atol=1e-10)


def test_the_conditions_one_after_another_or_side_by_side_agree(tmp_path):
    """`vectorize=False` (the conditions' solves one after another: CPU's default) and `True`
    (vmapped) solve the same ODEs: objective, gradient and Fisher information agree."""
    from wendyjax.petab._multistart import _value_gradient_fisher

    path = _write_problem(tmp_path / "p")
    assert wp.load(path).vectorize == (jax.default_backend() != "cpu")
    mapped, vmapped = (wp.load(path, vectorize=v, solver=diffrax.Kvaerno5()) for v in (False, True))
    assert not mapped.vectorize and vmapped.vectorize and mapped.conditions == ("low", "high")
    x = mapped.nominal + jnp.array([0.1, -0.2, 0.1, 0.05])
    one_by_one = eqx.filter_jit(_value_gradient_fisher)(x, mapped)
    side_by_side = eqx.filter_jit(_value_gradient_fisher)(x, vmapped)
    for a, b in zip(one_by_one, side_by_side, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_multistart_reaches_the_optimum_of_the_problem_written_here(tmp_path):
    from scipy.optimize import minimize

    problem = wp.load(_write_problem(tmp_path / "p"), rtol=1e-10, atol=1e-12)
    result = wp.multistart(problem, 6, key=1, max_steps=100)
    assert result.params.shape == (6, 4) and result.starts.shape == (6, 4)
    assert np.all(
        (np.asarray(result.starts) >= np.asarray(problem.lower))
        & (np.asarray(result.starts) <= np.asarray(problem.upper))
    )
    # an independent optimiser (L-BFGS-B from the truth, with jax gradients) as reference
    fn = jax.jit(jax.value_and_grad(lambda x: problem.objective(x)[0]))
    reference = minimize(
        lambda x: tuple(np.asarray(v, dtype=float) for v in fn(jnp.asarray(x))),
        problem.nominal,
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(problem.lower, problem.upper, strict=True)),
    )
    assert result.best_objective <= reference.fun + 1e-6
    assert result.converged.sum() >= 3
    assert result.fraction_within(reference.fun) >= 0.5
    ax = result.waterfall()
    assert len(ax.collections) == 2
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("event", "has events (kick)"),
        ("preequilibration", "uses preequilibration (measurements.tsv, row 2, column preequilibrationConditionId)"),
    ],
)
def test_features_it_cannot_represent_are_refused_by_name(tmp_path, kind, message):
    path = _write_problem(tmp_path / "p", event=kind == "event", preequilibration=kind == "preequilibration")
    with pytest.raises(wp.PetabError, match=re.escape(message)):
        wp.load(path)


def _edit(path: Path, table: str, edit) -> Path:
    file = path.parent / table
    frame = pd.read_csv(file, sep="\t", dtype=str, keep_default_na=False)
    edit(frame)
    frame.to_csv(file, sep="\t", index=False)
    return path


def test_bad_tables_are_refused_with_file_row_and_column(tmp_path):
    cases = [
        (
            "measurements.tsv",
            lambda f: f.pop("time"),
            "measurements.tsv: the measurement table has no column time",
        ),
        (
            "measurements.tsv",
            lambda f: f.__setitem__("observableId", ["obs_c"] + list(f.observableId[1:])),
            "measurements.tsv, row 2, column observableId: observable 'obs_c' is not in the observable table",
        ),
        (
            "measurements.tsv",
            lambda f: f.__setitem__("measurement", ["high"] + list(f.measurement[1:])),
            "measurements.tsv, row 2, column measurement: 'high' is not a number",
        ),
        (
            "observables.tsv",
            lambda f: f.__setitem__("observableFormula", ["foo * A", "B"]),
            "observables.tsv, row 2, column observableFormula: unknown symbol 'foo'",
        ),
        (
            "observables.tsv",
            lambda f: f.__setitem__("noiseDistribution", ["normal", "cauchy"]),
            "observables.tsv, row 3, column noiseDistribution: 'cauchy' is not supported",
        ),
        (
            "parameters.tsv",
            lambda f: f.__setitem__("parameterScale", ["ln", "lin", "log", "log10"]),
            "parameters.tsv, row 2, column parameterScale: 'ln' is not one of lin, log, log10",
        ),
        (
            "conditions.tsv",
            lambda f: f.__setitem__("A", ["1.0", "A0_missing"]),
            "conditions.tsv, row 3, column A: 'A0_missing' is neither a number nor a parameter",
        ),
        (
            "measurements.tsv",
            lambda f: f.__setitem__("observableParameters", ["scale_a;2"] + list(f.observableParameters[1:])),
            "measurements.tsv, row 2, column observableParameters: 2 values for the 1 placeholders of observable obs_a",
        ),
        (
            "parameters.tsv",
            lambda f: f.__setitem__("estimate", ["yes", "1", "1", "1"]),
            "parameters.tsv, row 2, column estimate: expected 0 or 1, got 'yes'",
        ),
        (
            "parameters.tsv",
            lambda f: f.__setitem__("lowerBound", ["-1", "0.1", "0.01", "0.001"]),
            "parameters.tsv, row 2, column lowerBound: bounds [-1.0, 100.0] are not an interval on the log10 scale",
        ),
        (
            "parameters.tsv",
            lambda f: f.__setitem__("objectivePriorType", ["cauchy", "", "", ""]),
            "parameters.tsv, row 2, column objectivePriorType: prior 'cauchy' is not supported",
        ),
        (
            "conditions.tsv",
            lambda f: f.__setitem__("C", ["1", "2"]),
            "conditions.tsv, column C: not a parameter, compartment or species of the model",
        ),
        (
            "measurements.tsv",
            lambda f: f.__setitem__("time", ["-1"] + list(f.time[1:])),
            "has negative times (measurements.tsv, row 2, column time)",
        ),
        (
            "measurements.tsv",
            lambda f: f.__setitem__("measurement", ["-2"] + list(f.measurement[1:])),
            "measurements.tsv, row 2, column measurement: -2.0 is not positive, but observable obs_a is on the log10",
        ),
        (
            "observables.tsv",
            lambda f: f.__setitem__("noiseFormula", ["", "noiseParameter1_obs_b"]),
            "observables.tsv, row 2, column noiseFormula: empty noise formula",
        ),
    ]
    for i, (table, edit, message) in enumerate(cases):
        path = _edit(_write_problem(tmp_path / f"case{i}"), table, edit)
        with pytest.raises(wp.PetabError, match=re.escape(message)):
            wp.load(path)
    (tmp_path / "notpetab.yaml").write_text("format_version: 2\nparameter_file: p.tsv\nproblems: []\n")
    with pytest.raises(wp.PetabError, match="PEtab format_version 2 is not supported"):
        wp.load(tmp_path / "notpetab.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(wp.PetabError, match="list.yaml: not a PEtab problem file"):
        wp.load(tmp_path / "list.yaml")
    (tmp_path / "broken").mkdir()
    shutil.copy(_write_problem(tmp_path / "ok"), tmp_path / "broken" / "problem.yaml")
    with pytest.raises(wp.PetabError, match="The condition table .* does not exist"):
        wp.load(tmp_path / "broken" / "problem.yaml")
    with pytest.raises(wp.PetabError, match="path: no PEtab YAML file"):
        wp.load(tmp_path / "nowhere.yaml")


@unchecked()  # the functions' own messages for wrong types (rtol="tight", a path for a problem)
def test_bad_arguments_are_refused_before_any_work(boehm):
    path = _yaml("Boehm_JProteomeRes2014")
    with pytest.raises(ValueError, match="rtol must be a number"):
        wp.load(path, rtol="tight")  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(ValueError, match="atol must be a finite number > 0"):
        wp.load(path, atol=0.0)
    with pytest.raises(TypeError, match="solver must be a diffrax solver"):
        wp.load(path, solver="kvaerno5")  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(TypeError, match="solver: KenCarp4 solves equations of several terms"):
        wp.load(path, solver=diffrax.KenCarp4())
    with pytest.raises(wp.PetabError, match=r"solver=MatrixExponential\(\) needs a linear autonomous model"):
        wp.load(path, solver=wp.MatrixExponential())
    with pytest.raises(ValueError, match="max_squarings must be a positive integer"):
        wp.MatrixExponential(max_squarings=0)
    with pytest.raises(ValueError, match=r"params must be a vector of the 9 estimated parameters"):
        boehm.log_likelihood(np.zeros(3))
    with pytest.raises(ValueError, match="n_starts must be an integer >= 1"):
        wp.multistart(boehm, 0)
    with pytest.raises(TypeError, match="problem must be a PetabProblem"):
        wp.multistart("Boehm.yaml", 10)  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(TypeError, match="solver must be a wendyjax.TrustRegion"):
        wp.multistart(boehm, 10, solver="fides")  # pyright: ignore[reportArgumentType, reportUnusedExpression]  # the wrong input under test
    with pytest.raises(ValueError, match="max_steps must be an integer >= 1"):
        wp.multistart(boehm, 10, max_steps=0)
    with pytest.raises(ValueError, match="max_steps must be an integer >= 1"):
        wp.load(path, max_steps=0)
    with pytest.raises(ValueError, match="max_rejections must be an integer >= 1"):
        wp.load(path, max_rejections=0)
    with pytest.raises(ValueError, match="n_points must be an integer >= 3"):
        wp.profile(boehm, boehm.nominal, "k_phos", n_points=2)
    with pytest.raises(ValueError, match="passes must be an integer >= 1"):
        wp.profile(boehm, boehm.nominal, "k_phos", passes=0)
    with pytest.raises(ValueError, match="n_boot must be an integer >= 2"):
        wp.bootstrap(boehm, boehm.nominal, 1)
    with pytest.raises(ValueError, match="vectorize must be 'auto', True or False"):
        wp.multistart(boehm, 2, vectorize="yes")
    with pytest.raises(ValueError, match="vectorize must be 'auto', True or False"):
        wp.load(path, vectorize="yes")
    with pytest.raises(TypeError, match="resample_infeasible must be True or False"), unchecked():
        wp.multistart(boehm, 2, resample_infeasible=1)  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(ValueError, match=r"params must be a vector of the 9 estimated parameters"):
        wp.experiments(boehm, np.zeros(3))
    with pytest.raises(TypeError, match="estimator must be a wendyjax estimator"):
        wp.experiments(boehm).fit("output_error")


@pytest.mark.slow
def test_the_command_line_loads_checks_and_fits_a_problem(tmp_path, capsys):
    from wendyjax.cli import main

    path = _write_problem(tmp_path / "p")
    assert main(["petab", str(path), "--starts", "3", "--max-steps", "50", "--waterfall", str(tmp_path / "w.png")]) == 0
    out = capsys.readouterr().out
    assert "problem: 4 estimated parameters, 2 conditions, 16 measurements" in out
    assert "log-likelihood at the nominal parameters:" in out and "3 starts in" in out
    assert (tmp_path / "w.png").stat().st_size > 0
    with pytest.raises(SystemExit) as exit_:
        main(["petab", str(tmp_path / "nowhere.yaml")])
    assert exit_.value.code == 2
    assert "path: no PEtab YAML file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["petab", str(path), "--starts", "0"])
    assert "argument --starts: expected an integer >= 1, got '0'" in capsys.readouterr().err


@pytest.mark.slow
def test_profile_and_bootstrap_of_the_best_fit_cover_the_truth(tmp_path):
    # The problem written here, fitted from 4 starts; then the profile of k (grid points
    # re-fitted together) and a parametric bootstrap (refits together). The truth lies in
    # both 95 % intervals (a fixed seed; one data set, so a check of plumbing and scale, not
    # of coverage), the profile is 0 at the best fit and rises on both sides, and the
    # bootstrap's percentile interval is of the same size as the profile's.
    problem = wp.load(_write_problem(tmp_path / "p"), rtol=1e-10, atol=1e-12)
    best = wp.multistart(problem, 4, key=0, max_steps=100).best
    prof = wp.profile(problem, best, "k", n_points=11)
    excess = np.asarray(prof.objectives) - prof.best_objective
    assert prof.values.shape == (11,) and excess.min() >= -1e-6 and excess[0] > 1.92 and excess[-1] > 1.92
    truth = math.log10(_TRUTH["k"])
    assert prof.lower < truth < prof.upper and prof.lower < float(best[0]) < prof.upper
    np.testing.assert_allclose(np.asarray(prof.params)[:, 0], np.asarray(prof.values))  # k held at each point
    import matplotlib.pyplot as plt

    ax = prof.plot()  # the profile's points above the best, and the 95 % threshold χ²₁(0.95)/2
    np.testing.assert_allclose(np.asarray(ax.lines[0].get_ydata()), excess)
    assert float(np.asarray(ax.lines[1].get_ydata())[0]) == pytest.approx(1.920729, abs=1e-6)
    assert ax.get_xlabel() == "k"
    plt.close("all")
    boot = wp.bootstrap(problem, best, 40, key=0)
    assert boot.usable.sum() >= 36
    assert boot.lower[0] < truth < boot.upper[0]
    assert 0.5 < (boot.upper[0] - boot.lower[0]) / (prof.upper - prof.lower) < 2.0
    with pytest.raises(ValueError, match="name must be an estimated parameter of problem"):
        wp.profile(problem, best, "kk")
    with pytest.raises(ValueError, match="level must lie strictly between 0 and 1"), unchecked():  # 95: an int
        wp.bootstrap(problem, best, 10, level=95)


@pytest.mark.slow
def test_multistart_replaces_the_starts_where_the_solve_fails(tmp_path):
    """A' = k A² / 2 (a rate over the compartment's volume 2) blows up at t = 2 / (k A0): with
    A0 = 3 and data until t = 8 the solves fail for every k above 1/12, three fifths of the box
    10^[-3, 2]."""
    problem = wp.load(
        _write_problem(tmp_path / "p", direct=True, rate="-k * A * A"), solver=diffrax.Tsit5(), max_steps=400
    )

    def draws(round_, n):  # the multistart's rounds of draws: the key, then the key folded with the round
        key = jax.random.key(0) if round_ == 0 else jax.random.fold_in(jax.random.key(0), round_)
        return np.asarray(jax.random.uniform(key, (n, 1), minval=problem.lower, maxval=problem.upper))[:, 0]

    plain = wp.multistart(problem, 6, key=0, max_steps=30, resample_infeasible=False)
    assert plain.n_rejected == 0
    np.testing.assert_array_equal(plain.starts[:, 0], draws(0, 6))
    solvable = 10 ** draws(0, 6) < 1 / 12
    assert 2 <= (~solvable).sum() and (~np.isfinite(np.asarray(plain.objectives))).sum() == (~solvable).sum()
    result = wp.multistart(problem, 6, key=0, max_steps=30)
    # the draws in order, round after round, up to the sixth solvable one
    seen = np.concatenate([draws(r, 6) for r in range(10)])
    seen = seen[: np.flatnonzero(np.cumsum(10**seen < 1 / 12) == 6)[0] + 1]
    np.testing.assert_array_equal(result.starts[:, 0], seen[10**seen < 1 / 12])
    assert result.n_rejected == (10**seen >= 1 / 12).sum() > (~solvable).sum()  # beyond round 0
    assert np.all(np.isfinite(np.asarray(result.objectives))) and result.converged.all()
    narrow = eqx.tree_at(lambda p: p.lower, problem, jnp.array([math.log10(0.05)]))  # solvable: 1/15 of the box
    with pytest.warns(RuntimeWarning, match=r"a fit can start at only \d of the 40 starts drawn"):
        few = wp.multistart(narrow, 4, key=0, max_steps=30)
    found = int(np.sum(10 ** np.asarray(few.starts[:, 0]) < 1 / 12))
    assert 0 < found < 4 and np.isfinite(np.asarray(few.objectives)).sum() == found
    assert np.all(10 ** np.asarray(few.starts[:found, 0]) < 1 / 12)  # the finite ones first
    assert few.n_rejected == 40 - 4  # the infeasible draws used as starts are not counted
    with pytest.raises(RuntimeError, match="no fit can start at any of the 20 starts drawn"):
        wp.multistart(eqx.tree_at(lambda p: p.lower, problem, jnp.array([0.0])), 2, key=0)  # no k in [1, 100]


@pytest.mark.slow
def test_multistart_shards_its_starts_over_devices(tmp_path):
    # Two XLA CPU devices in a fresh process: the starts are split between them, and the
    # fits equal the single-device ones. An explicit solver and the draws kept as drawn: the
    # sharding of the fits is what this test is about, not the stiff solver's compilation or
    # the draws' check (both tested elsewhere; they made this test twice as long).
    import subprocess
    import sys

    path = _write_problem(tmp_path / "p")
    script = (
        "import jax, sys, numpy as np\n"
        "jax.config.update('jax_enable_x64', True)\n"
        "import diffrax, wendyjax.petab as wp\n"
        "p = wp.load(sys.argv[1], solver=diffrax.Tsit5(), rtol=1e-10, atol=1e-12)\n"
        "assert jax.device_count() == 2\n"
        "two = wp.multistart(p, 3, key=0, max_steps=60, resample_infeasible=False)\n"
        "one = wp.multistart(p, 3, key=0, max_steps=60, devices=jax.devices()[:1], resample_infeasible=False)\n"
        "np.testing.assert_allclose(two.objectives, one.objectives, rtol=1e-9)\n"
        "print('ok', len(two.params.sharding.device_set) if hasattr(two.params, 'sharding') else 0)\n"
    )
    env = dict(__import__("os").environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    run = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, env=env, timeout=600
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["ok", "2"]


def test_sbml_features_against_their_closed_form(tmp_path):
    # Amount and concentration species in a compartment of size 2, a local parameter, a
    # function definition, a chain of assignment rules, a rate rule on a parameter and a
    # piecewise in time, checked against the solution by hand:
    #   X (amount, 4 at t = 0) -> at rate kf X, kf = 0.5 local:       X = 4 exp(-t / 2)
    #   -> Y (concentration, amount 6: [Y]0 = 3) at rate cell * twice(k2): [Y] = 3 + 2 k2 t
    #   Z' = g, g = 2 h, h = k2 (rules), Z(0) = 1:                      Z = 1 + 2 k2 t
    #   total = X + Y + Z (a rule); stim = 1 before t = 1, else 2.
    doc = libsbml.SBMLDocument(3, 2)
    model = doc.createModel()
    comp = model.createCompartment()
    comp.setId("cell")
    comp.setSize(2.0)
    comp.setConstant(True)
    for sid, amounts, amount in (("X", True, 4.0), ("Y", False, 6.0)):
        s = model.createSpecies()
        s.setId(sid)
        s.setCompartment("cell")
        s.setInitialAmount(amount)
        s.setHasOnlySubstanceUnits(amounts)
        s.setBoundaryCondition(False)
        s.setConstant(False)
    for pid, value, constant in (
        ("k2", 0.25, True),
        ("Z", 1.0, False),
        ("g", 0.0, False),
        ("h", 0.0, False),
        ("total", 0.0, False),
        ("stim", 0.0, False),
    ):
        q = model.createParameter()
        q.setId(pid)
        q.setValue(value)
        q.setConstant(constant)
    fn = model.createFunctionDefinition()
    fn.setId("twice")
    fn.setMath(libsbml.parseL3Formula("lambda(a, 2 * a)"))
    for kind, target, formula in (
        ("assignment", "g", "2 * h"),
        ("assignment", "h", "k2"),
        ("rate", "Z", "g"),
        ("assignment", "total", "X + Y + Z"),
        ("assignment", "stim", "piecewise(1, time < 1, 2)"),
    ):
        rule = model.createAssignmentRule() if kind == "assignment" else model.createRateRule()
        rule.setVariable(target)
        rule.setMath(libsbml.parseL3Formula(formula))
    r1 = model.createReaction()
    r1.setId("r1")
    r1.setReversible(False)
    ref = r1.createReactant()
    ref.setSpecies("X")
    ref.setStoichiometry(1.0)
    ref.setConstant(True)
    law = r1.createKineticLaw()
    local = law.createLocalParameter()
    local.setId("kf")
    local.setValue(0.5)
    law.setMath(libsbml.parseL3Formula("kf * X"))
    r2 = model.createReaction()
    r2.setId("r2")
    r2.setReversible(False)
    ref = r2.createProduct()
    ref.setSpecies("Y")
    ref.setStoichiometry(1.0)
    ref.setConstant(True)
    r2.createKineticLaw().setMath(libsbml.parseL3Formula("cell * twice(k2)"))
    folder = tmp_path / "features"
    folder.mkdir()
    libsbml.writeSBMLToFile(doc, str(folder / "model.xml"))
    pd.DataFrame({"conditionId": ["c0"]}).to_csv(folder / "conditions.tsv", sep="\t", index=False)
    pd.DataFrame(
        {
            "observableId": ["obs_total", "obs_stim"],
            "observableFormula": ["total", "stim"],
            "noiseFormula": ["0.1", "0.1"],
        }
    ).to_csv(folder / "observables.tsv", sep="\t", index=False)
    times = [0.0, 0.5, 1.5, 3.0]
    pd.DataFrame(
        {
            "observableId": ["obs_total"] * 4 + ["obs_stim"] * 4,
            "simulationConditionId": "c0",
            "measurement": 1.0,
            "time": times * 2,
        }
    ).to_csv(folder / "measurements.tsv", sep="\t", index=False)
    pd.DataFrame(
        {
            "parameterId": ["k2"],
            "parameterScale": ["lin"],
            "lowerBound": [0.0],
            "upperBound": [1.0],
            "nominalValue": [0.25],
            "estimate": [1],
        }
    ).to_csv(folder / "parameters.tsv", sep="\t", index=False)
    (folder / "problem.yaml").write_text(
        "format_version: 1\nparameter_file: parameters.tsv\nproblems:\n- condition_files: [conditions.tsv]\n"
        "  measurement_files: [measurements.tsv]\n  observable_files: [observables.tsv]\n  sbml_files: [model.xml]\n"
    )
    problem = wp.load(folder / "problem.yaml", rtol=1e-12, atol=1e-14)
    assert problem.states == ("X", "Y", "Z")
    for k2 in (0.25, 0.6):
        sim = problem.simulate([k2])["simulation"].to_numpy()
        t = np.array(times)
        np.testing.assert_allclose(sim[:4], 4 * np.exp(-t / 2) + (3 + 2 * k2 * t) + (1 + 2 * k2 * t), rtol=1e-9)
        np.testing.assert_allclose(sim[4:], np.where(t < 1, 1.0, 2.0))


def test_a_species_without_an_initial_value_is_refused(tmp_path):
    path = _write_problem(tmp_path / "p")
    doc = libsbml.readSBMLFromFile(str(path.parent / "model.xml"))
    doc.getModel().getSpecies("B").unsetInitialConcentration()
    libsbml.writeSBMLToFile(doc, str(path.parent / "model.xml"))
    with pytest.raises(
        wp.PetabError,
        match="B has no initial value in the SBML model, and the condition table does not set one for condition low",
    ):
        wp.load(path)


@pytest.mark.slow
def test_output_error_through_the_observables_is_petabs_maximum_likelihood(tmp_path):
    from scipy.optimize import minimize

    def replicate(frame):  # a second measurement of obs_b in condition high at t = 2
        frame.loc[len(frame)] = frame.iloc[13].to_dict() | {"measurement": "1.6"}

    problem = wp.load(
        _edit(_write_problem(tmp_path / "p", laplace=False), "measurements.tsv", replicate), rtol=1e-12, atol=1e-14
    )
    inputs = wp.experiments(problem)
    # sigma_b enters only the noise formula: held at its nominal value; the others are fitted on their scales
    assert inputs.model.param_names == ("log10(k)", "A0_high", "log(scale_a)")
    assert inputs.held == {"log10(sigma_b)": pytest.approx(-1.0)}
    assert inputs.model.state_names == ("A[low]", "B[low]", "A[high]", "B[high]")
    # t = 0 and four times, a column per condition and observable; the replicate in a second trajectory
    assert inputs.data[0].u.shape == (5, 4) and len(inputs.data) == 2
    assert np.count_nonzero(np.isfinite(inputs.data[1].u)) == 1 and inputs.data[1].u[3, 3] == 1.6
    assert inputs.options["noise"] == ["lognormal", "gaussian", "lognormal", "gaussian"]
    np.testing.assert_allclose(inputs.options["sigma"], [0.05 * math.log(10), 0.1] * 2, rtol=1e-12)
    estimator = wj.OutputError(ode_rtol=1e-12, ode_atol=1e-14)  # PEtab's solves have these tolerances
    setup = estimator.problem(inputs.model, inputs.data, **inputs.options)
    # output error's objective is PEtab's negative log-likelihood less a constant
    gaps = [
        float(estimator.objective(setup, jnp.asarray(q))) + float(problem.log_likelihood(inputs.params(q)))
        for q in (inputs.p0, inputs.p0 + jnp.array([0.1, -0.5, 0.2]))
    ]
    assert gaps[0] == pytest.approx(gaps[1], rel=1e-9)
    fit = inputs.fit(estimator)
    assert fit.successful
    # the same maximum as an independent optimiser of PEtab's objective over the same parameters
    free = jax.jit(jax.value_and_grad(lambda q: problem.objective(inputs.params(q))[0]))
    reference = minimize(
        lambda q: tuple(np.asarray(v, dtype=float) for v in free(jnp.asarray(q))),
        inputs.p0,
        jac=True,
        method="L-BFGS-B",
        options={"ftol": 1e-14, "gtol": 1e-10},
    )
    np.testing.assert_allclose(fit.params, reference.x, rtol=1e-4, atol=1e-6)
    assert float(problem.objective(inputs.params(fit.params))[0]) <= reference.fun + 1e-8
    # the package's profile and bootstrap take the fit as it is: the observables, the noise
    # formulas' levels (the bootstrap draws with them) and the initial states of the conditions
    prof = wj.studies.profile(estimator, fit, inputs.data, ["log10(k)"], n_points=5)["log10(k)"]
    assert prof.interval[0] < float(fit.params[0]) < prof.interval[1] and prof.verdict == "identifiable"
    boot = wj.studies.bootstrap(estimator, fit, inputs.data, 3, key=0, progress=False)
    assert boot.n_failed == 0
    np.testing.assert_allclose(boot.sigma, inputs.options["sigma"], rtol=1e-12)
    with pytest.raises(ValueError, match=r"params: a vector of the model's 3 parameters"):
        inputs.params(np.zeros(4))


@pytest.mark.slow
def test_the_weak_form_and_the_hybrid_fit_a_problem_whose_states_are_observed(tmp_path):
    problem = wp.load(_write_problem(tmp_path / "p", direct=True), rtol=1e-12, atol=1e-14)
    inputs = wp.experiments(problem)
    assert "observe" not in inputs.options and inputs.options["noise"] == "gaussian"
    assert inputs.data[0].u.shape == (41, 4)
    estimates = {}
    for estimator in (wj.MLE(), wj.Hybrid(), wj.OutputError(ode_rtol=1e-10, ode_atol=1e-12)):
        fit = inputs.fit(estimator)
        assert fit.successful
        estimates[type(estimator).__name__] = float(fit.params[0])
    # k = 0.7 from 164 values with noise 0.05: its standard error on the log10 scale is about 0.004
    for name, value in estimates.items():
        assert abs(10**value - 0.7) < 0.03, name
    assert estimates["Hybrid"] == pytest.approx(estimates["OutputError"], abs=1e-6)


@pytest.mark.parametrize(
    "edit, message",
    [
        (None, "Laplace noise \\(observable obs_b\\)"),
        ("state_noise", "depends on the states or time \\(observable obs_a\\)"),
        ("prior", "objective priors \\(parameter k\\)"),
    ],
)
def test_what_the_estimators_cannot_represent_is_refused(tmp_path, edit, message):
    path = _write_problem(tmp_path / "p", laplace=edit is None, prior=edit == "prior")
    if edit == "state_noise":
        noise = ["0.05 * A", "noiseParameter1_obs_b"]
        path = _edit(path, "observables.tsv", lambda f: f.__setitem__("noiseFormula", noise))
    with pytest.raises(wp.PetabError, match=message):
        wp.experiments(wp.load(path))
    with pytest.raises(TypeError, match="problem must be a PetabProblem"), unchecked():  # its own message
        wp.experiments(str(path))  # pyright: ignore[reportArgumentType]  # the wrong input under test


def test_a_noise_level_that_is_not_positive_is_refused(tmp_path):
    path = _edit(
        _write_problem(tmp_path / "p", laplace=False),
        "parameters.tsv",
        lambda f: f.__setitem__("parameterScale", ["log10", "lin", "log", "lin"]),
    )
    problem = wp.load(path)
    with pytest.raises(wp.PetabError, match="a noise level must be positive"):
        wp.experiments(problem, problem.nominal.at[3].set(-0.1))


def _raising_at_the_third_row(real, bad: list):
    """`real(problem, rows, *rest)`, except that the third row of the first call's `rows` (kept in
    `bad`) raises what optimistix raises where differentiating a failed implicit step, in every
    call that holds it (the batch, and that row alone)."""

    def flaky(problem, rows, *rest):
        rows_ = np.asarray(rows).reshape(-1, np.shape(rows)[-1])
        if not bad:
            bad.append(rows_[2])
        if np.any(np.all(rows_ == bad[0], axis=1)):
            raise eqx.EquinoxRuntimeError("A linear solver received non-finite (NaN or inf) input.")
        return real(problem, rows, *rest)

    return flaky


@pytest.mark.slow
@pytest.mark.parametrize("call", ["multistart", "profile", "bootstrap"])
def test_a_fit_whose_derivative_raises_is_reported_and_the_others_are_done(tmp_path, monkeypatch, call):
    """One fit's trial point makes differentiating the ODE solve raise (as some starts of
    Elowitz_Nature2000's multistart do): the batched call stops, the fits are run again one call
    each, and only that one fails."""
    from wendyjax.petab import _multistart, _uncertainty

    problem = wp.load(_write_problem(tmp_path / "p"))
    module, name, what, run = {
        "multistart": (_multistart, "_fit_all", "starts", lambda: wp.multistart(problem, 4, key=0, max_steps=50)),
        "profile": (
            _uncertainty,
            "_pinned_fits",
            "points",
            lambda: wp.profile(problem, problem.nominal, problem.parameter_names[0], n_points=4, passes=1),
        ),
        "bootstrap": (_uncertainty, "_refits", "refits", lambda: wp.bootstrap(problem, problem.nominal, 4, key=0)),
    }[call]
    reference = run()
    monkeypatch.setattr(module, name, _raising_at_the_third_row(getattr(module, name), []))
    with pytest.warns(RuntimeWarning, match=f"of 1 of 4 {what}, which stopped the batched call"):
        result = run()
    failed = np.asarray(result.result._value) == np.asarray(wj.RESULTS.derivative_failed._value)
    np.testing.assert_array_equal(failed, [False, False, True, False])
    assert np.isinf(result.objectives[2])
    good = ~failed
    np.testing.assert_array_equal(np.asarray(result.result._value)[good], np.asarray(reference.result._value)[good])
    np.testing.assert_allclose(np.asarray(result.params)[good], np.asarray(reference.params)[good], rtol=1e-8)
    np.testing.assert_allclose(np.asarray(result.objectives)[good], np.asarray(reference.objectives)[good], rtol=1e-10)
    if call == "profile":  # the interval steps over the failed point (it used to read NaN from it)
        assert not np.isnan(result.lower) and not np.isnan(result.upper)


@pytest.mark.slow
def test_a_draw_where_the_first_derivative_raises_is_replaced(tmp_path, monkeypatch):
    """Checking a drawn start differentiates the ODE solve as the fit's first evaluation does; where
    that raises inside the compiled check, the draws are checked one call each and the raising one
    is replaced by the next draw."""
    from wendyjax.petab import _multistart

    problem = wp.load(_write_problem(tmp_path / "p"))
    reference = wp.multistart(problem, 4, key=0, max_steps=1)  # every draw of this box can be fitted
    assert reference.n_rejected == 0
    bad = []
    monkeypatch.setattr(_multistart, "_fittable", _raising_at_the_third_row(_multistart._fittable, bad))
    result = wp.multistart(problem, 4, key=0, max_steps=1)
    assert result.n_rejected == 1
    np.testing.assert_array_equal(result.starts[:3], reference.starts[np.array([0, 1, 3])])  # order kept
    assert not np.any(np.all(np.asarray(result.starts) == bad[0], axis=1))


@pytest.mark.parametrize(
    "message",
    [
        "A linear solver returned non-finite (NaN or inf) output.",
        # lineax 0.1.1's wording when the tangents are non-finite (Elowitz_Nature2000's multistart, key 0)
        "A linear solver received non-finite (NaN or inf) input and cannot determine a solution.",
    ],
)
def test_a_failed_implicit_step_inside_the_fits_is_explained(tmp_path, monkeypatch, message):
    import equinox as eqx

    from wendyjax.petab import _multistart

    def failing(*args):  # what optimistix's tangent solve raises at a trial point whose implicit step failed
        raise eqx.EquinoxRuntimeError(message)

    monkeypatch.setattr(_multistart, "_fit_all", failing)
    with pytest.raises(RuntimeError, match="EQX_ON_ERROR=nan set before Python starts"):
        wp.multistart(wp.load(_write_problem(tmp_path / "p")), 2)
