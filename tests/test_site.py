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
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
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
    assert ".. math::" not in api and ":math:" not in api
    assert api.count('class="arithmatex"') >= 10
    assert (site / "theory" / "implicit-bias-ngd.html").read_text().count('class="arithmatex"') >= 5


THEORY_PAGES = sorted(f"theory/{page.stem}.html" for page in (ROOT / "docs" / "theory").glob("*.md"))


@pytest.mark.parametrize(
    "page, anchor", [("api/optim.html", "attnlab.optim.NormalizedGD")] + [(page, None) for page in THEORY_PAGES]
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
