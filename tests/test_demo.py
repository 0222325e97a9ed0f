import subprocess
import sys

from wendyjax._demo import demo


def test_demo_prints_likelihood_table(capsys):
    values = demo("logistic", noise_ratio=0.05, seed=1)
    out = capsys.readouterr().out
    assert "weak negative log-likelihood" in out and "p1" in out and "K = " in out
    # the likelihood is lower at the truth than 10 % away from it
    assert values["p*"] < values["1.1·p*"]


def test_cli_rejects_unknown_model():
    proc = subprocess.run([sys.executable, "-m", "wendyjax", "demo", "--model", "nope"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr
