"""The Hudson's Bay lynx–hare data (`wj.datasets.hudson_bay`) and Lotka–Volterra fits of
them beside the published estimates."""

import warnings

import numpy as np
import pytest

import wendyjax as wj

P0 = [0.5, 0.03, 0.8, 0.03]


def test_the_data_as_published():
    data = wj.datasets.hudson_bay()
    assert data.n_samples == 21 and data.mask is None
    assert np.array_equal(np.asarray(data.t), np.arange(21.0))
    assert np.asarray(data.u)[0].tolist() == [30.0, 4.0] and np.asarray(data.u)[-1].tolist() == [24.7, 8.6]


@pytest.mark.slow
@pytest.mark.parametrize("estimator", [wj.MLE(), wj.OutputError()], ids=["wendy_mle", "output_error"])
def test_log_normal_lotka_volterra_lands_in_the_published_intervals(estimator):
    """WENDy-MLE and output error with log-normal noise, from one start: every estimate
    inside the Stan case study's 80 % posterior interval (Carpenter 2018)."""
    data = wj.datasets.hudson_bay()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no bound, no weak direction, no undetermined parameter
        fit = estimator.fit(wj.models.lotka_volterra().model, data, P0, noise="lognormal", bounds=None)
    lo, hi = np.array(wj.datasets.HUDSON_BAY_PUBLISHED["stan_80"]).T
    assert fit.successful and np.all((lo < fit.params) & (fit.params < hi)), fit.params
