"""The built wheel carries the license, py.typed and the version written once, in attnlab.__version__."""

import email
import importlib.metadata
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import attnlab

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """A wheel built from a copy of the project (the build writes egg-info next to the sources).

    No build isolation: the venv's setuptools builds it (torch itself requires setuptools >= 77, as pyproject does).
    """
    tree = tmp_path_factory.mktemp("project")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", "dist", "."],
        cwd=tree,
        check=True,
        capture_output=True,
    )
    (path,) = (tree / "dist").glob("attnlab-*.whl")
    return zipfile.ZipFile(path)


def _metadata(wheel: zipfile.ZipFile) -> email.message.Message:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return email.message_from_bytes(wheel.read(name))


def test_the_version_is_written_once():
    pyproject = (ROOT / "pyproject.toml").read_text()
    project = pyproject.split("\n[project]\n")[1].split("\n[")[0]  # the [project] table's own lines
    assert re.search(r'^dynamic = \["version"\]', project, re.M) and not re.search(r"^version *=", project, re.M)
    assert 'version = { attr = "attnlab.__version__" }' in pyproject
    assert importlib.metadata.version("attnlab") == attnlab.__version__


def test_the_wheel_has_the_version_license_and_py_typed(wheel):
    names = wheel.namelist()
    meta = _metadata(wheel)
    assert meta["Version"] == attnlab.__version__
    assert meta["License-Expression"] == "MIT"
    assert "attnlab/py.typed" in names
    (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    assert wheel.read(license_file).decode().startswith("MIT License")
    assert "attnlab/__main__.py" in names and "attnlab/trackers.py" in names


def test_the_extras_are_declared(wheel):
    extras = _metadata(wheel).get_all("Provides-Extra")
    assert {"test", "ray", "tensorboard"} <= set(extras)
