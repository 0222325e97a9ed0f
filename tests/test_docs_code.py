"""Every code block of the docs' pages and the README runs, in a fresh folder, in the order
the page shows them:

- a ```python block runs in the page's one namespace; one whose first line names a file
  (`# mymodel.py ...`) is written to that file instead, for the blocks after it;
- a ```bash block runs in bash (with this interpreter's `python` first on the PATH), except
  one whose every command is `python -m wendyjax ARGS [> FILE]`: those run in this process
  through `wendyjax.cli.main` (the same code without a new interpreter and its compilations;
  tests/test_demo.py runs the module as a subprocess);
- on the pages in CHECKED, a ```text block right after a python block must be exactly what
  that block printed.

A block the tests cannot run (it installs packages, serves a site, or shows a synopsis with
placeholders) is preceded by `<!-- not run: REASON -->`, naming where what it does is tested
if anywhere.

A page's figures (`![...](img/NAME.png)`) are what its code saves as NAME.png: with
WENDYJAX_DOCS_FIGURES=1 the test copies them into the page's img/ folder, e.g.
`WENDYJAX_DOCS_FIGURES=1 pytest tests/test_docs_code.py -k uncertainty` redraws the
Uncertainty guide's."""

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import matplotlib
import pytest
from jax.experimental.compilation_cache import compilation_cache

from wendyjax.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs" / "pages").rglob("*.md")])
PAGES = [p for p in PAGES if "```" in p.read_text()]
CHECKED = {"guides/real-data.md", "guides/petab.md"}  # pages whose every printed number is checked
FENCE = re.compile(r"^(?:<!-- (not run: .*?) -->\n)?```(\w+)\n(.*?)^```", flags=re.S | re.M)
FILE = re.compile(r"# ([\w-]+\.py)\b")
CLI = re.compile(r"python -m wendyjax (.+?)(?: > (\S+))?")


def _name(page: Path) -> str:
    return page.relative_to(ROOT / "docs" / "pages").as_posix() if "docs" in page.parts else page.name


def blocks(page: Path) -> list[tuple[str, str, str]]:
    """(`not run` reason or "", language, body) of each fenced block of `page`."""
    return FENCE.findall(page.read_text())


def _commands(body: str) -> list[str]:
    """The lines of a bash block, continuation lines joined."""
    return [line.strip() for line in body.replace("\\\n", " ").splitlines() if line.strip()]


def test_every_block_is_found_and_every_skip_gives_a_reason():
    for page in PAGES:
        text = page.read_text()
        found = blocks(page)
        assert len(found) == len(re.findall(r"^```\w+$", text, flags=re.M)), _name(page)
        for reason, _, _ in found:
            assert not reason or len(reason) > len("not run: ") + 10, (_name(page), reason)


@pytest.fixture
def no_persistent_cache():
    """A page that turns on JAX's persistent compilation cache (Troubleshooting does) turns it
    off again: left on, the worker's later compilations read and wrote that folder, and with
    jaxlib 0.10 on CPU two of the thirteen worker deaths in eight CI runs of 2026-12-04/05
    happened there (deserialising and serialising an executable; the other eleven inside XLA's
    compiler)."""
    yield
    if jax.config.jax_compilation_cache_dir is not None:  # pyright: ignore[reportAttributeAccessIssue]  # a flag jax reads as an attribute
        jax.config.update("jax_compilation_cache_dir", None)
        compilation_cache.reset_cache()


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_the_page_runs_as_shown(page, tmp_path, monkeypatch, no_persistent_cache):
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
    }
    namespace: dict = {"__name__": "__main__"}
    printed = None
    checked = 0
    for reason, language, body in blocks(page):
        if reason:
            continue
        if language == "python" and (file := FILE.match(body)):
            (tmp_path / file.group(1)).write_text(body)
        elif language == "python":
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(body, _name(page), "exec"), namespace)  # noqa: S102 - the page's own code
            printed = out.getvalue()
        elif language == "bash" and all(cli := [CLI.fullmatch(line) for line in _commands(body)]):
            for args, target in (match.groups() for match in cli if match):
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    assert cli_main(shlex.split(args)) == 0, f"{_name(page)}: {args}"
                if target:
                    Path(target).write_text(out.getvalue())
        elif language == "bash":
            run = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", body + "\nwait"],
                capture_output=True,
                text=True,
                env=env,
                timeout=600,
            )
            assert run.returncode == 0, f"{_name(page)}:\n{body}\n{run.stdout}\n{run.stderr}"
        elif language == "text" and _name(page) in CHECKED and printed is not None:
            assert printed == body, f"{_name(page)}: the block printed\n{printed}\nbut the page shows\n{body}"
            checked += 1
    assert _name(page) not in CHECKED or checked >= 4
    for figure in re.findall(r"\]\(img/([\w-]+\.png)\)", page.read_text()):
        drawn = tmp_path / figure
        if drawn.exists() and os.environ.get("WENDYJAX_DOCS_FIGURES") == "1":
            shutil.copyfile(drawn, page.parent / "img" / figure)
        assert (page.parent / "img" / figure).is_file(), f"{_name(page)}: img/{figure} is neither drawn nor kept"
