"""`fit.identifiability()`: what the local curvature says about which parameters the data
determine."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _zoo import zoo

import wendyjax as wj

BENCH = zoo("logistic")


@pytest.fixture(scope="module")
def data():
    return BENCH.simulate(jax.random.key(0), 0.05, subsample=4)


def test_parameters_entering_only_as_a_product_are_undetermined(data):
    """u' = a·b·u + c·u²: only a·b is determined, so a and b get no standard error and are
    reported as undetermined (structurally non-identifiable); c is fine."""
    model = wj.ODEModel(lambda u, p, t: p[0] * p[1] * u + p[2] * u**2, ["u"], ["a", "b", "c"], name="product")
    with pytest.warns(RuntimeWarning, match="standard errors of a, b are NaN"):
        fit = wj.MLE().fit(model, data, [1.0, 1.0, -1.0], bounds=None)
    report = fit.identifiability()
    assert report.undetermined == ("a", "b") and not report.ok
    assert np.isnan(report.correlation[0]).all() and report.correlation[2, 2] == pytest.approx(1.0)
    assert "undetermined (no standard error): a, b" in str(report)


def test_a_long_list_of_undetermined_parameters_is_cut_short_in_the_warning(data):
    """A neural field's hundreds of parameters are not listed one by one: the first few and how many more."""
    model = wj.ODEModel(
        lambda u, p, t: jnp.prod(p[:10]) * u + p[10] * u**2, ["u"], [f"p{i}" for i in range(1, 12)], name="long product"
    )
    with pytest.warns(RuntimeWarning, match=r"standard errors of p1, p2, p3, p4, p5, p6 and 4 more are NaN"):
        fit = wj.MLE().fit(model, data, [1.0] * 10 + [-1.0], bounds=None)
    assert len(fit.identifiability().undetermined) == 10


def test_a_well_posed_fit_reports_nothing_and_a_bound_is_named(data):
    fit = wj.MLE().fit(BENCH.model, data)
    report = fit.identifiability()
    assert report.ok and report.undetermined == () and report.weak == ()
    assert abs(report.correlation[0, 1]) < 1 and np.allclose(np.diag(report.correlation), 1.0)
    assert BENCH.model.bounds is not None
    lo, hi = (np.asarray(b, float) for b in BENCH.model.bounds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        held = wj.MLE().fit(BENCH.model, data, [0.9, -1.0], bounds=(lo, np.r_[0.9, hi[1]]))
    assert held.identifiability().at_bound == ("p1",)


def test_the_summary_shows_the_report_only_when_something_is_wrong(capsys, data):
    model = wj.ODEModel(lambda u, p, t: p[0] * p[1] * u + p[2] * u**2, ["u"], ["a", "b", "c"], name="product")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bad = wj.MLE().fit(model, data, [1.0, 1.0, -1.0], bounds=None)
    bad.summary()
    text = capsys.readouterr().out
    assert "identifiability (fit.identifiability()):" in text and "undetermined (no standard error): a, b" in text
    assert "correlation of the estimates:" in text
    wj.MLE().fit(BENCH.model, data).summary()
    assert "identifiability" not in capsys.readouterr().out
