import subprocess
import sys

import numpy as np
import pytest

from wendyjax.cli._demo import demo


@pytest.mark.slow
def test_demo_fits_and_prints_table(capsys):
    fit = demo("logistic", noise_ratio=0.05, seed=1)
    out = capsys.readouterr().out
    assert "WENDy-MLE fit of 'logistic': converged" in out and "95% lower" in out and "truth" in out
    assert fit.successful
    assert np.linalg.norm(fit.params - np.array([1.0, -1.0])) / np.sqrt(2) < 0.05


def test_cli_rejects_unknown_model():
    proc = subprocess.run([sys.executable, "-m", "wendyjax", "demo", "--model", "nope"], capture_output=True, text=True)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr
