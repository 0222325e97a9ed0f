"""MkDocs hooks: the repository's notebooks become pages under notebooks/, and MathJax comes
from the installed `django-static-mathjax` package (MathJax 3, no Django needed), copied under
javascripts/mathjax/, so formulas render offline.

With WENDYJAX_DOCS_EXECUTE=1 each notebook first runs top to bottom at toy sizes (SMALL =
True after its `parameters` cell, as tests/test_notebooks.py runs them), so that its page
shows outputs and figures; the executed copies are cached under docs/_build/ by a hash of
the notebook and the package's sources (tests/test_notebooks.py executes them through
`executed` too, so a docs build after the tests reuses their runs). Without it the pages
show the code only."""

import hashlib
import os
from pathlib import Path

import mkdocs.plugins
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CACHE = Path(__file__).resolve().parent / "_build" / "notebooks"


def _fingerprint(path: Path) -> str:
    h = hashlib.sha256(path.read_bytes() + Path(__file__).read_bytes())  # the notebook and how it is run
    for source in sorted((ROOT / "wendyjax").rglob("*.py")):
        h.update(source.read_bytes())
    return h.hexdigest()[:16]


def executed(path: Path) -> Path:
    """The notebook at `path` run top to bottom at toy sizes, as a cached copy."""
    import nbformat
    from nbclient import NotebookClient

    out = CACHE / _fingerprint(path) / "notebooks" / path.name
    if out.exists():
        return out
    nb = nbformat.read(path, as_version=4)
    (i,) = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell("SMALL = True  # toy sizes"))
    out.parent.mkdir(parents=True, exist_ok=True)
    backend = os.environ.pop("MPLBACKEND", None)  # the kernel inherits it: Agg (the tests') would draw no figures
    try:
        resources = {"metadata": {"path": str(out.parent)}}
        NotebookClient(nb, timeout=900, kernel_name="python3", resources=resources).execute()
    finally:
        if backend is not None:
            os.environ["MPLBACKEND"] = backend
    nbformat.write(nb, out)
    return out


def _mathjax_files(config) -> list[File]:
    import mathjax  # the django-static-mathjax package: MathJax's es5 build as static files

    es5 = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    # the component the site loads, its fonts, the TeX extensions it loads on demand, its menu
    paths = [es5 / "tex-mml-chtml.js"]
    for folder in ["output/chtml/fonts/woff-v2", "input/tex/extensions", "ui", "a11y"]:
        paths += sorted(p for p in (es5 / folder).rglob("*") if p.is_file())
    return [
        File.generated(config, f"javascripts/mathjax/{p.relative_to(es5).as_posix()}", abs_src_path=str(p))
        for p in paths
    ]


@mkdocs.plugins.event_priority(100)  # before mkdocs-jupyter turns notebook files into pages
def on_files(files, config):
    execute = os.environ.get("WENDYJAX_DOCS_EXECUTE") == "1"
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        source = executed(path) if execute else path  # .../notebooks/NAME.ipynb
        files.append(
            File(f"notebooks/{path.name}", str(source.parents[1]), config["site_dir"], config["use_directory_urls"])
        )
    for file in _mathjax_files(config):
        files.append(file)
    return files
