"""atomic_write: files respect the umask, and every file-system failure is one line naming the path and a fix."""

import errno
import os
import stat

import pytest

from attnlab._io import OutputError, atomic_write, make_dir


@pytest.fixture
def umask():
    """Set the process umask for one test, then restore it."""
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_written_files_respect_the_umask(umask, mask, mode, tmp_path):
    umask(mask)
    path = atomic_write(tmp_path / "a.txt", lambda p: p.write_text("x"))
    assert stat.S_IMODE(path.stat().st_mode) == mode  # mkstemp would give 0o600 whatever the umask
    assert path.read_text() == "x"


def test_a_file_in_the_way_of_the_folder_is_one_clear_line(tmp_path):
    (tmp_path / "blocker").write_text("")
    with pytest.raises(OutputError, match=r"cannot write '.*blocker/out.npz': .*a file is in the way"):
        atomic_write(tmp_path / "blocker" / "out.npz", lambda p: p.write_text("x"))
    with pytest.raises(OutputError, match="a file is in the way"):
        make_dir(tmp_path / "blocker" / "sub")


def test_a_folder_in_the_way_of_the_file_is_one_clear_line(tmp_path):
    (tmp_path / "out.npz").mkdir()
    with pytest.raises(OutputError, match="a folder is in the way where a file is needed"):
        atomic_write(tmp_path / "out.npz", lambda p: p.write_text("x"))
    assert [p.name for p in tmp_path.iterdir()] == ["out.npz"]  # no temp file left behind


def test_a_name_too_long_is_one_clear_line(tmp_path):
    with pytest.raises(OutputError, match="a name in the path is too long"):
        atomic_write(tmp_path / ("x" * 300) / "a.txt", lambda p: p.write_text("x"))


def test_a_full_disk_keeps_the_old_file_and_leaves_no_temp_file(tmp_path):
    path = atomic_write(tmp_path / "a.txt", lambda p: p.write_text("old"))

    def full(p):
        p.write_text("partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(OutputError, match=r"No space left on device; the disk is full"):
        atomic_write(path, full)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_an_unwritable_folder_is_one_clear_line(tmp_path, monkeypatch):
    # the file system refuses the temporary file as it does in a read-only folder (simulated: CI runs as root, whom
    # a mode-0500 folder does not stop)
    import attnlab._io

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(tmp_path / "ro"))

    monkeypatch.setattr(attnlab._io, "_new_file", refuse)
    with pytest.raises(
        OutputError, match=r"cannot write .*a\.txt': Permission denied .*; check the folder's permissions"
    ):
        atomic_write(tmp_path / "ro" / "a.txt", lambda p: p.write_text("x"))
