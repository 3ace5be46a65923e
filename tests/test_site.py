"""The documentation site (mkdocs.yml): it builds offline with no warning, documents every public name, and shows
typeset math and no broken link in a headless browser."""

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

import attnlab

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = [name for name in attnlab.__all__ if name not in ("ValidationError", "__version__", "train")]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built as `make docs` builds it (--strict: a warning fails), into a folder of this test."""
    folder = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    # mkdocs' own warnings (a notebook's kernel logs lines of its own, "[IPKernelApp] WARNING | ...", about its transport)
    assert not re.search(r"^WARNING\s+-", done.stderr, flags=re.M), done.stderr[-4000:]
    return folder


def test_every_public_name_has_an_entry_in_the_api_reference(site):
    every_id = set()  # a public alias of a method (attnlab.experiments.get_experiment) is documented with its method
    for page in (site / "api").glob("*.html"):
        every_id |= set(re.findall(r'id="(attnlab\.[^"]+)"', page.read_text()))
    missing = []
    for package in SUBPACKAGES:
        ids = set(re.findall(r'id="(attnlab\.[^"]+)"', (site / "api" / f"{package}.html").read_text()))
        module = importlib.import_module(f"attnlab.{package}")
        for name in module.__all__:
            # a function named as its module (attnlab.svm.head_svm), and the lazily loaded names of
            # attnlab.experiments, are rendered under the module that defines them
            value = getattr(module, name)
            defined_in = getattr(value, "__module__", None)
            method = getattr(value, "__func__", None)
            of_method = method is not None and any(  # under its module or a package above it that re-exports it
                i.endswith(f".{method.__qualname__}") and method.__module__.startswith(i.rsplit(".", 2)[0])
                for i in every_id
            )
            if f"attnlab.{package}.{name}" not in ids and f"{defined_in}.{name}" not in ids and not of_method:
                missing.append(f"attnlab.{package}.{name}")
    assert not missing, f"public names without an entry in docs/api: {missing}"


def test_the_site_loads_nothing_from_the_network(site):
    remote = []
    for page in site.rglob("*.html"):
        remote += [
            f"{page.relative_to(site)}: {src}"
            for src in re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="(https?:[^"]+)"', page.read_text())
        ]
    assert not remote, remote[:10]


def test_math_is_left_for_katex_in_docstrings_and_theory(site):
    api = (site / "api" / "optim.html").read_text()
    source = r'<details class="mkdocstrings-source">.*?</details>'  # the folded source is shown verbatim
    rendered = re.sub(source, "", api, flags=re.S)
    assert ".. math::" not in rendered and ":math:" not in rendered
    assert api.count('class="arithmatex"') >= 10
    assert (site / "theory" / "implicit-bias-ngd.html").read_text().count('class="arithmatex"') >= 5


THEORY_PAGES = sorted(f"theory/{page.stem}.html" for page in (ROOT / "docs" / "theory").glob("*.md"))
# the experiment pages with formulas (real.md, on real models and data, states none)
EXPERIMENT_PAGES = sorted(
    f"experiments/{page.stem}.html" for page in (ROOT / "docs" / "experiments").glob("*.md") if "$" in page.read_text()
)


@pytest.mark.parametrize(
    "page, anchor",
    [("api/optim.html", "attnlab.optim.NormalizedGD")] + [(page, None) for page in THEORY_PAGES + EXPERIMENT_PAGES],
)
def test_page_in_headless_chromium_has_typeset_math_and_no_broken_links(site, headless_chrome, tmp_path, page, anchor):
    driver = headless_chrome
    driver.set_window_size(1400, 1000)
    driver.get((site / page).as_uri() + (f"#{anchor}" if anchor else ""))
    typeset = driver.execute_script("return document.querySelectorAll('.arithmatex .katex').length")
    pending = driver.execute_script("return document.querySelectorAll('.arithmatex').length")
    errors = driver.execute_script("return document.querySelectorAll('.katex-error').length")
    assert typeset >= 2 and typeset == pending and errors == 0, (typeset, pending, errors)
    if anchor:
        entry = driver.find_element("id", anchor).find_element("xpath", "..")
        assert entry.find_elements("css selector", ".katex-display"), "NormalizedGD's update rule is not typeset"
    broken = []
    for href in driver.execute_script("return [...document.querySelectorAll('a[href]')].map(a => a.href)"):
        url = urlparse(href)
        if url.scheme != "file":
            continue
        target = Path(unquote(url.path))
        if not target.exists():
            broken.append(href)
        elif url.fragment and target.suffix == ".html":
            if f'id="{unquote(url.fragment)}"' not in target.read_text():
                broken.append(href)
    assert not broken, broken[:10]
    images = driver.execute_script("return [...document.images].filter(i => !i.complete || !i.naturalWidth).length")
    assert images == 0
    shot = tmp_path / (page.replace("/", "-").removesuffix(".html") + ".png")
    driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    folder = os.environ.get("ATTNLAB_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / shot.name).write_bytes(shot.read_bytes())


def _hrefs(page: Path) -> list[str]:
    return re.findall(r'<a [^>]*href="([^"]+)"', page.read_text())


def test_theory_pages_link_the_functions_they_name_and_api_entries_link_their_theory_section(site):
    theory = (site / "theory" / "implicit-bias-ngd.html").read_text()
    assert (
        '<a href="../api/optim.html#attnlab.optim.NormalizedGD"><code>attnlab.optim.NormalizedGD</code></a>' in theory
    )
    api = site / "api" / "optim.html"
    assert "../theory/implicit-bias-ngd.html#4-algorithms" in _hrefs(api)  # "Spec: implicit-bias-ngd §4 A2"
    assert "mkdocstrings-source" in api.read_text()  # each entry's source, folded under it


def test_every_link_between_the_sites_pages_lands_on_a_page_and_anchor_that_exist(site):
    broken = []
    for page in site.rglob("*.html"):
        if page.name == "404.html":
            continue  # served by a web server at any depth, so its links are absolute
        for href in _hrefs(page):
            url = urlparse(href)
            if url.scheme or href.startswith(("#", "mailto:")) or not url.path:
                continue
            target = (page.parent / unquote(url.path)).resolve()
            if not target.exists():
                broken.append(f"{page.relative_to(site)} -> {href}")
            elif (
                url.fragment and target.suffix == ".html" and f'id="{unquote(url.fragment)}"' not in target.read_text()
            ):
                broken.append(f"{page.relative_to(site)} -> {href}")
    assert not broken, broken[:20]


ISSUE = re.compile(r"\bissues? #?\d+", re.IGNORECASE)


def test_no_page_of_the_site_cites_an_internal_issue_number(site):
    found = []
    for page in site.rglob("*.html"):
        text = re.sub(r"<[^>]+>", " ", page.read_text())  # the text a reader sees, not the markup
        found += [f"{page.relative_to(site)}: {m[0]}" for m in ISSUE.finditer(text)]
    assert not found, found[:20]


NOTEBOOK_PAGES = sorted(f"notebooks/{p.stem}.html" for p in (ROOT / "docs" / "notebooks").glob("*.py"))


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_notebook_page_is_executed_with_figures_and_printed_numbers(site, page):
    html = (site / page).read_text()
    assert 'src="data:image/png;base64,' in html, "no figure: the notebook was not executed"
    assert "jp-RenderedText" in html, "no printed output"
    assert "jupytext:" not in html and "kernelspec" not in html  # the YAML header is metadata, not text
    assert "tests/test_notebooks.py" in html.rsplit("jp-MarkdownCell", 1)[-1]  # the closing claim is shown


def test_implicit_bias_predictions_are_a_typeset_numbered_list_in_chromium(site, headless_chrome):
    driver = headless_chrome
    driver.get((site / "theory" / "implicit-bias-ngd.html").as_uri())
    items = driver.execute_script(
        "const h = document.getElementById('8-predictions');"
        "let e = h.nextElementSibling; while (e && e.tagName !== 'OL') e = e.nextElementSibling;"
        "return e ? [...e.children].map(li => [li.tagName, li.querySelectorAll('.katex').length]) : null"
    )
    assert items is not None, "§8's predictions are not an <ol>"
    assert len(items) == 13 and all(tag == "LI" for tag, _ in items), items
    assert sum(typeset > 0 for _, typeset in items) >= 11, items  # nearly every prediction carries a formula
    errors = driver.execute_script("return document.querySelectorAll('.katex-error').length")
    assert errors == 0


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_notebook_page_shows_its_output_and_typeset_math_in_chromium(site, headless_chrome, page):
    driver = headless_chrome
    driver.set_window_size(1400, 1000)
    driver.get((site / page).as_uri())
    shown = driver.execute_script(
        "return [...document.querySelectorAll('.jp-OutputArea img')].filter(i => i.complete && i.naturalWidth > 200)"
        ".length"
    )
    text = driver.execute_script(
        "return [...document.querySelectorAll('.jp-RenderedText')].map(e => e.innerText).join(' ')"
    )
    assert shown >= 1 and re.search(r"\d\.\d", text), (shown, text[:200])
    typeset = driver.execute_script("return document.querySelectorAll('.jp-MarkdownCell .katex').length")
    errors = driver.execute_script("return document.querySelectorAll('.katex-error').length")
    assert typeset >= 2 and errors == 0, (typeset, errors)


def test_search_works_on_the_site_opened_from_disk_in_chromium(site, headless_chrome):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = headless_chrome
    driver.set_window_size(1400, 1000)
    driver.get((site / "index.html").as_uri())  # file://, as `make docs` says to open it
    box = driver.find_element(By.CSS_SELECTOR, "input.md-search__input")
    box.click()
    box.send_keys("Polyak")
    WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".md-search-result__item"))
    results = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".md-search-result__item")]
    assert any("Polyak" in text or "polyak" in text for text in results), results[:5]
