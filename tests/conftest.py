"""Shared test settings: float64 everywhere, headless matplotlib, one intra-op thread.

The test tensors are tiny; with more than one intra-op thread PyTorch spends its time waking threads (10x slower
on a loaded 2-core machine), so tests -- and the CLI subprocesses they start, through the environment -- use one.
"""

import importlib.util
import os
import shutil
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import matplotlib  # noqa: E402
import pytest  # noqa: E402

matplotlib.use("Agg")

import torch  # noqa: E402

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)


ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def load_script():
    """Import a repository script that is no package module (``tools/``, ``benchmarks/``) from its path relative to
    the repository root: ``load_script("tools/timings.py")``, a fresh module each call."""

    def load(relative: str):
        path = ROOT / relative
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def headless_chrome(tmp_path):
    """Selenium driving Debian's chromium + chromedriver (a fresh profile); skips only outside CI when missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver")
    missing = [n for n, p in (("chromium", chromium), ("chromedriver", chromedriver)) if not p]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium")
    if missing:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must have the browser stack, missing {missing}: apt-get install chromium chromium-driver")
        pytest.skip(f"no headless browser here: missing {missing}")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'chrome-profile'}",
    ):
        options.add_argument(flag)
    # An explicit chromedriver path: Selenium Manager never runs, nothing is downloaded.
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    try:
        yield driver
    finally:
        driver.quit()
