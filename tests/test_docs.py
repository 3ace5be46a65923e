"""The repository stands alone: no tracked file cites a folder outside it, and the theory pages (docs/theory)
that checks and docstrings cite exist and name files that exist."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = "sha" + "red"  # spelled in two pieces so that this file does not cite the folder it forbids
OUTSIDE = re.compile(rf"\.\./{SHARED}|/work/{SHARED}")  # the specs' folder beside a checkout; a clone has none


def _tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_no_tracked_file_cites_the_shared_folder():
    hits = []
    for path in _tracked_files():
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary
        hits += [f"{path.relative_to(ROOT)}:{i}" for i, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]
    assert not hits, f"cite docs/theory instead of the shared folder: {hits}"


def test_every_cited_theory_page_exists():
    cited = set()
    for path in (ROOT / "src").rglob("*.py"):
        cited |= set(re.findall(r"docs/theory/[\w.-]+\.md", path.read_text(encoding="utf-8")))
    assert cited  # pages cited by path; the registry test below covers every paper
    missing = [page for page in cited if not (ROOT / page).is_file()]
    assert not missing, missing


@pytest.mark.parametrize("page", sorted((ROOT / "docs" / "theory").glob("*.md")), ids=lambda p: p.name)
def test_theory_page_maps_formulas_to_files_that_exist(page):
    text = page.read_text(encoding="utf-8")
    assert "## Formula → function → test → check" in text
    paths = re.findall(r"`((?:tests|docs|src)/[\w/.-]+)`", text)
    assert paths, "the table names no test file"
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, missing


def test_every_experiment_names_a_paper_with_a_theory_page():
    """``paper`` is the spec stem (``--paper`` selects by it); its theory page must exist."""
    from attnlab.experiments import list_experiments

    papers = {e.paper for e in list_experiments()}
    assert papers == {
        "implicit-bias-ngd",
        "kq-nuclear-norm",
        "mirror-descent-lp",
        "multi-token",
        "preconditioned-regression",
        "softmax-ntk-diffusion",
    }
    assert all((ROOT / "docs" / "theory" / f"{paper}.md").is_file() for paper in papers)
