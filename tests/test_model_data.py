import jax.numpy as jnp
import numpy as np
import pytest
from _typecheck import unchecked

import wendyjax as wj


def lorenz_rhs(u, p, t):
    x, y, z = u
    return jnp.stack([p[0] * (y - x), x * (p[1] - z) - y, x * y - p[2] * z])


def test_model_names_and_linearity_detection():
    m = wj.ODEModel(lorenz_rhs, ["x", "y", "z"], 3)
    assert m.state_names == ("x", "y", "z")
    assert m.param_names == ("p1", "p2", "p3")
    assert m.linear_in_params  # affine in p: detected
    hill = wj.ODEModel(lambda u, p, t: p[0] / (1 + u ** p[1]), 1, 2)
    assert not hill.linear_in_params
    # the rational FitzHugh–Nagumo-like term p1/(p2 + u) is nonlinear in p
    assert not wj.ODEModel(lambda u, p, t: p[0] / (p[1] + u), 1, 2).linear_in_params
    # a declaration overrides detection
    assert not wj.ODEModel(lorenz_rhs, 3, 3, linear_in_params=False).linear_in_params
    # a model is called as its right-hand side
    u, p = jnp.array([1.0, -2.0, 3.0]), jnp.array([10.0, 28.0, 8 / 3])
    np.testing.assert_array_equal(m(u, p, 0.0), lorenz_rhs(u, p, 0.0))


def test_zoo_linearity_matches_paper_table3():
    # Rummel et al. 2025 Table 3: Logistic, Hindmarsh–Rose, Lorenz linear; Goodwin 2-D/3-D not
    assert wj.models.logistic().model.linear_in_params
    assert wj.models.hindmarsh_rose().model.linear_in_params
    assert wj.models.lorenz().model.linear_in_params
    assert not wj.models.goodwin_2d().model.linear_in_params
    assert not wj.models.goodwin_3d().model.linear_in_params


ZOO = [
    "logistic",
    "lotka_volterra",
    "lorenz",
    "fitzhugh_nagumo",
    "goodwin_2d",
    "goodwin_3d",
    "hindmarsh_rose",
    "sir_tdi",
    "ptb",
    "rossler",
    "duffing",
    "lorenz96",
    "spiral",
    "van_der_pol",
]


@pytest.mark.slow
@pytest.mark.parametrize("name", ZOO)
def test_zoo_protocol_is_consistent(name):
    b = getattr(wj.models, name)()
    m = b.model
    assert b.p_true.shape == (m.n_params,) and b.u0.shape == (m.n_states,)
    assert np.all(np.diff(np.asarray(b.t, float)) > 0)
    if m.bounds is not None:  # the truth lies inside the paper's box
        assert np.all((np.asarray(m.bounds[0]) <= b.p_true) & (b.p_true <= np.asarray(m.bounds[1])))
    clean = wj.solve(m, b.p_true, b.u0, b.t, solver=b.solver)
    assert np.all(np.isfinite(clean)) and clean.shape == (len(b.t), m.n_states)
    assert np.allclose(clean[0], b.u0)
    nonlinear = {"goodwin_2d", "goodwin_3d", "sir_tdi"}
    assert m.linear_in_params == (name not in nonlinear)


def test_lorenz96_any_size_and_forcing():
    b = wj.models.lorenz96(n=10, forcing=16.0)
    assert b.model.n_states == 10 and float(b.p_true[0]) == 16.0
    u = jnp.arange(10.0)
    f = b.model.rhs(u, b.p_true, 0.0)
    i = 3  # x_i' = (x_{i+1} - x_{i-2}) x_{i-1} - x_i + F
    assert np.isclose(f[i], (u[i + 1] - u[i - 2]) * u[i - 1] - u[i] + 16.0)
    assert np.isclose(f[0], (u[1] - u[-2]) * u[-1] - u[0] + 16.0)  # cyclic
    with pytest.raises(ValueError, match="n >= 4"):
        wj.models.lorenz96(n=3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(rhs=lambda u, p, t: u[:2], state_names=3, param_names=1), r"shape \(3,\)"),
        (dict(rhs=lambda u, p, t: u @ jnp.ones((4, 4)), state_names=3, param_names=2), "failed"),
        (dict(rhs=lorenz_rhs, state_names=["x", "x", "z"], param_names=3), "duplicate"),
        (dict(rhs=lorenz_rhs, state_names=3, param_names=3, bounds=([0, 0], [1, 1])), "bounds"),
        (dict(rhs=lorenz_rhs, state_names=3, param_names=3, bounds=([2, 0, 0], [1, 1, 1])), "lower"),
        (dict(rhs="not callable", state_names=3, param_names=3), "callable"),
        # out-of-range indices, which JAX clamps (p[1] would read p[0]): a parameter or a state missing
        (
            dict(rhs=lambda u, p, t: p[0] * u * (1 - u / p[1]), state_names=["N"], param_names=["r"]),
            r"p of shape \(1,\) indexes past the end of an array: out-of-bounds indexing .* index 1 is out of "
            r"bounds for axis 0 with size 1",
        ),
        (
            dict(rhs=lambda u, p, t: jnp.stack([u[1], -p[0] * u[2]]), state_names=2, param_names=1),
            r"index 2 is out of bounds for axis 0 with size 2",
        ),
    ],
)
def test_model_bad_input(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        wj.ODEModel(**kwargs)


def test_intended_out_of_range_indexing_can_be_allowed():
    # a line of cells with zero boundary values read by out-of-range indices filled with 0
    def heat(u, p, t):
        left = jnp.concatenate([jnp.zeros(1), u[:-1]])
        right = u.at[jnp.arange(3) + 1].get(mode="fill", fill_value=0.0)  # index 3 reads the boundary's 0
        return p[0] * (left - 2 * u + right)

    with pytest.raises(ValueError, match="check_indexing=False"):
        wj.ODEModel(heat, 3, 1)
    model = wj.ODEModel(heat, 3, 1, check_indexing=False)
    np.testing.assert_allclose(model.rhs(jnp.ones(3), jnp.ones(1), 0.0), [-1.0, 0.0, -1.0])


def test_check_params():
    m = wj.models.lorenz().model
    with pytest.raises(ValueError, match=r"shape \(3,\).*sigma, rho, beta"):
        m.check_params([1.0, 2.0])
    with pytest.raises(ValueError, match="NaN"):
        m.check_params([1.0, np.nan, 2.0])


def test_trajectory_validation():
    t = np.linspace(0, 1, 11)
    u = np.ones((11, 2))
    with pytest.raises(ValueError, match="rows but t has"):
        wj.Trajectory(t, u[:10])
    with pytest.raises(ValueError, match=r"t must be sorted .* t\[1\] = 0.9 < t\[0\] = 1"):
        wj.Trajectory(t[::-1], u)
    with pytest.raises(ValueError, match="1-D"):
        wj.Trajectory(t[:, None], u)
    bad = u.copy()
    bad[3, 1] = np.nan  # NaN without a mask: missing
    assert np.asarray(wj.Trajectory(t, bad).mask).sum() == bad.size - 1
    with pytest.raises(ValueError, match="NaN at 1 observed entries.*row 3, column 1"):
        wj.Trajectory(t, bad, mask=np.ones(bad.shape, bool))  # ... unless the mask says observed
    bad[4, 0] = np.inf
    with pytest.raises(ValueError, match=r"inf at 1 observed entries \(first at row 4, column 0\).*inf is never"):
        wj.Trajectory(t, bad)
    # NaN allowed where the mask says missing
    tr = wj.Trajectory(t, bad, mask=np.isfinite(bad))
    assert tr.mask is not None and int(np.sum(~np.asarray(tr.mask))) == 2
    with pytest.raises(ValueError, match="mask must have the shape"):
        wj.Trajectory(t, u, mask=np.ones((11, 3), bool))
    one = wj.Trajectory(t, np.sin(t))
    assert one.u.shape == (11, 1)


def test_observed_rows_drops_fully_missing_rows_and_refuses_partial():
    t = np.linspace(0, 1, 11)
    u = np.stack([t, t**2], axis=1)
    mask = np.ones_like(u, bool)
    mask[4] = False
    tr = wj.Trajectory(t, u, mask=mask).observed_rows()
    assert tr.n_samples == 10 and not tr.is_uniform()
    mask[6, 0] = False
    with pytest.raises(ValueError, match="only some states missing"):
        wj.Trajectory(t, u, mask=mask).observed_rows()


def test_trapezoid_weights_nonuniform(rng):
    t = np.sort(np.concatenate([[0.0, 2.0], rng.uniform(0, 2, 40)]))
    w = np.asarray(wj.trapezoid_weights(jnp.asarray(t)))
    assert np.isclose(w.sum(), 2.0)
    # exact for linear functions
    assert np.isclose(w @ (3 * t + 1), 3 * 2.0 + 2.0)
    tr = wj.Trajectory(t, t)
    with pytest.raises(ValueError, match="requires a uniform time grid"):
        tr.require_uniform("the FFT radius selection")
    assert np.isclose(wj.Trajectory(np.linspace(0, 1, 5), np.ones(5)).require_uniform("x"), 0.25)


def test_dataset_validation():
    a = wj.Trajectory(np.linspace(0, 1, 20), np.ones((20, 2)))
    b = wj.Trajectory(np.linspace(0, 1, 30), np.ones((30, 3)))
    with pytest.raises(ValueError, match="trajectory 1 has 3 states"):
        wj.Dataset([a, b])
    with pytest.raises(ValueError, match="at least one"):
        wj.Dataset([])
    with pytest.raises(TypeError, match="not a Trajectory"), unchecked():
        wj.Dataset([a, np.ones(3)])  # pyright: ignore[reportArgumentType]  # the wrong input under test
