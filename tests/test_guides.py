"""The guides' code runs and prints what the guides show: each ```python block is run in
order in one namespace, and a ```text block right after it must be exactly what it printed."""

import contextlib
import io
import re
from pathlib import Path

import matplotlib
import pytest

GUIDES = Path(__file__).resolve().parents[1] / "docs" / "pages" / "guides"
CHECKED = ["real-data.md", "petab.md"]  # guides whose every printed number is checked here


def _blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"```(python|text)\n(.*?)```", text, flags=re.S)


@pytest.mark.slow
@pytest.mark.parametrize("guide", CHECKED)
def test_the_guide_prints_what_it_shows(guide):
    matplotlib.use("Agg")
    blocks = _blocks((GUIDES / guide).read_text())
    namespace: dict = {}
    printed = None
    checked = 0
    for kind, body in blocks:
        if kind == "python":
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(body, f"{guide}", "exec"), namespace)  # noqa: S102 - the guide's own code
            printed = out.getvalue()
        else:
            assert printed == body, f"{guide}: the block printed\n{printed}\nbut the guide shows\n{body}"
            checked += 1
    assert checked >= 4
