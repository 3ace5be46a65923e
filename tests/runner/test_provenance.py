"""git_state: the commit read from the checkout's own files, dirty for edits to tracked files and new modules."""

import shutil
import subprocess
from pathlib import Path

import pytest

from attnlab.runner.provenance import git_state

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True, capture_output=True
    )


@pytest.fixture
def repo(tmp_path) -> Path:
    _git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "code.py").write_text("x = 1\n")
    _git(tmp_path, "add", "code.py")
    _git(tmp_path, "commit", "-q", "-m", "first")
    return tmp_path


def test_the_commit_is_the_one_the_branch_ref_names(repo):
    # independent of `git rev-parse`: the loose ref file of a fresh repository holds the commit
    head = (repo / ".git" / "refs" / "heads" / "main").read_text().strip()
    assert git_state(repo / "code.py") == {"commit": head, "dirty": False}


def test_an_edit_to_a_tracked_file_is_dirty_an_untracked_file_is_not(repo):
    (repo / "notes.txt").write_text("scratch\n")
    assert git_state(repo / "code.py")["dirty"] is False
    (repo / "code.py").write_text("x = 2\n")
    assert git_state(repo / "code.py")["dirty"] is True


def test_a_new_module_beside_the_code_is_dirty(repo):
    (repo / "sub").mkdir()
    (repo / "sub" / "helper.py").write_text("y = 1\n")  # code that may run, tracked by nobody
    assert git_state(repo / "code.py")["dirty"] is True
    _git(repo, "add", "sub/helper.py")
    _git(repo, "commit", "-q", "-m", "helper")
    assert git_state(repo / "code.py")["dirty"] is False


def test_no_state_outside_a_checkout_or_for_an_untracked_file(repo, tmp_path_factory):
    assert git_state(tmp_path_factory.mktemp("plain") / "code.py") is None
    (repo / "venv").mkdir()
    (repo / "venv" / "installed.py").write_text("")  # like a wheel installed into a venv inside a clone
    assert git_state(repo / "venv" / "installed.py") is None


def test_attnlab_describes_its_own_checkout():
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        pytest.skip("the tests do not run from a git checkout")
    expected = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert git_state()["commit"] == expected.strip()
