"""Headless Chromium check of a built docs site: pages load without JavaScript errors,
search finds pages, notebook pages show their figures. Not part of CI (it needs a browser):

    apt-get install chromium && pip install playwright
    WENDYJAX_DOCS_EXECUTE=1 mkdocs build --strict -f docs/mkdocs.yml
    python -m http.server 8765 -d docs/_site &
    python docs/browser_check.py http://127.0.0.1:8765/
"""
import sys

from playwright.sync_api import sync_playwright

base = sys.argv[1]
errors = []
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
    page = browser.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    for path in ["", "guides/uncertainty/", "papers/rummel2025/", "api/estimators/", "changes/"]:
        r = page.goto(base + path)
        print(path or "/", r.status, page.title())
    page.goto(base)
    page.keyboard.press("s")  # material's search shortcut
    page.fill("input.md-search__input", "hybrid")
    page.wait_for_selector("li.md-search-result__item", timeout=30000)
    items = page.query_selector_all("li.md-search-result__item")
    print("search 'hybrid':", len(items), "results; meta:", page.inner_text(".md-search-result__meta"))
    print("  first:", items[0].inner_text().splitlines()[0] if items else None)
    for nb in ["01_quick_start", "03_coverage_study", "05_test_functions_explained"]:
        page.goto(base + f"notebooks/{nb}/")
        imgs = page.query_selector_all("img")
        shown = [i for i in imgs if i.evaluate("e => e.complete && e.naturalWidth > 0")]
        print(nb, "images:", len(imgs), "rendered:", len(shown))
    browser.close()
print("page errors:", errors[:5])
sys.exit(1 if errors else 0)
