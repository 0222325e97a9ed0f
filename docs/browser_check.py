"""A built docs site served on 127.0.0.1 and opened in headless Chromium with every other
address cut off: each page's formulas are typeset by the bundled MathJax, its figures are
drawn, nothing is fetched from outside, no script fails, and the search finds a page.
Needs Debian's chromium and the `playwright` package (in the test extras);
tests/test_docs.py runs it on the plain build, .ci/run on the build with the executed
notebooks, where every notebook page must show a figure:

    python docs/browser_check.py docs/_site --figures notebooks/
"""

import argparse
import functools
import http.server
import sys
import threading
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
# chromium's own background connections, which a closed network would refuse
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
COUNT = """() => {
    const figures = [...document.querySelectorAll('article img, .jupyter-wrapper img')];
    return {
        formulas: document.querySelectorAll('.arithmatex').length,
        typeset: [...document.querySelectorAll('.arithmatex')].filter(e => e.querySelector('mjx-container')).length,
        untypeset: [...document.querySelectorAll('.jp-RenderedMarkdown')]
            .filter(e => /\\$[^$\\s][^$]*\\$/.test(e.innerText)).length,
        merrors: document.querySelectorAll('mjx-merror').length,
        figures: figures.length,
        drawn: figures.filter(i => i.complete && i.naturalWidth > 0).length,
    };
}"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):  # the browser dropped a connection: not news
            super().handle_error(request, client_address)


def check(site: Path, pages: list[str], query: str | None = "hybrid") -> tuple[dict[str, dict], int]:
    """Per page: formulas on it and typeset, notebook cells with `$...$` left as text, MathJax
    errors, figures and those drawn, requests that left the site (blocked), script errors;
    and the number of search results for `query` (0 when `query` is None: no search)."""
    from playwright.sync_api import sync_playwright

    server = _Server(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/"
    report = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for name in pages:
            page = browser.new_page()
            outside, errors = [], []
            page.route(
                lambda url: not url.startswith(base),
                lambda route, outside=outside: (outside.append(route.request.url), route.abort()),
            )
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            page.goto(base + name)
            page.evaluate("async () => { if (window.MathJax && MathJax.startup) await MathJax.startup.promise; }")
            report[name] = page.evaluate(COUNT) | {"outside": outside, "errors": errors}
            page.close()
        hits = 0 if query is None else _search(browser.new_page(), base, query)
        browser.close()
    server.shutdown()
    return report, hits


def _search(page, base: str, query: str) -> int:
    """The number of results material's search shows for `query` on the site's home page."""
    page.goto(base)
    page.keyboard.press("s")  # material's search shortcut
    page.fill("input.md-search__input", query)
    # the search index is built in a web worker: over a minute on 2 cores busy with the tests
    page.wait_for_selector("li.md-search-result__item", timeout=120_000)
    return len(page.query_selector_all("li.md-search-result__item"))


def problems(report: dict[str, dict], figures: tuple[str, ...] = ()) -> list[str]:
    """What is wrong with the pages of `report`; pages under a prefix in `figures` must show one."""
    out = []
    for name, r in report.items():
        if r["typeset"] < r["formulas"] or r["merrors"] or r["untypeset"]:
            out.append(
                f"{name}: {r['typeset']} of {r['formulas']} formulas typeset, {r['merrors']} MathJax errors,"
                f" {r['untypeset']} notebook cells with $...$ left as text"
            )
        if r["drawn"] < r["figures"] or (name.startswith(figures) and not r["figures"]):
            out.append(f"{name}: {r['drawn']} of {r['figures']} figures drawn")
        if r["outside"] or r["errors"]:
            out.append(f"{name}: fetched from outside {r['outside'][:3]}, script errors {r['errors'][:3]}")
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path)
    parser.add_argument("--figures", nargs="*", default=[], help="page prefixes whose pages must show a figure")
    parser.add_argument("--verbose", action="store_true", help="a line per page")
    a = parser.parse_args()
    pages = sorted(p.relative_to(a.site).as_posix() for p in a.site.rglob("*.html") if p.name != "404.html")
    report, hits = check(a.site, pages)
    for name, r in report.items() if a.verbose else ():
        print(f"{name}: {r['typeset']}/{r['formulas']} formulas, {r['drawn']}/{r['figures']} figures")
    found = problems(report, tuple(a.figures)) + ([] if hits else ["the search for 'hybrid' found nothing"])
    print(
        "\n".join(found)
        or f"{len(pages)} pages: formulas typeset, figures drawn, nothing fetched from outside;"
        f" the search for 'hybrid' found {hits} results"
    )
    sys.exit(1 if found else 0)
