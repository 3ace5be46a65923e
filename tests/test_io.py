"""atomic_write: files respect the umask, land at the path given, and every file-system failure is one line naming
the path and a fix."""

import errno
import os
import stat

import numpy as np
import pytest

from attnlab._io import OutputError, atomic_write, make_dir, read_npy, read_npz, save_npy, save_npz
from attnlab._validation import ValidationError


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


@pytest.mark.parametrize("name", ["data", "sol.NPZ", "sol.npz", "run.v1"])
def test_save_npz_writes_at_the_path_whatever_its_suffix(name, tmp_path):
    # numpy.savez given a path appends .npz to a name without it: the data went to a stray hidden file and the
    # empty temp file was renamed onto the output
    path = save_npz(tmp_path / name, {"X": np.arange(6.0).reshape(2, 3)})
    assert [p.name for p in tmp_path.iterdir()] == [name] and path.stat().st_size > 0
    np.testing.assert_array_equal(read_npz(path)["X"], np.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize("name", ["v", "v.NPY", "v.npy"])
def test_save_npy_writes_at_the_path_whatever_its_suffix(name, tmp_path):
    path = save_npy(tmp_path / name, np.array([1.0, -2.0]))
    assert [p.name for p in tmp_path.iterdir()] == [name]
    np.testing.assert_array_equal(np.load(path, allow_pickle=False), [1.0, -2.0])


@pytest.mark.parametrize("name", ["x" * 255, "x" * 239 + ".npz", "é" * 125 + ".npz", "a." + "s" * 200])
def test_a_valid_long_name_gets_a_temp_name_within_the_limit(name, tmp_path):
    # a temp name of 14 bytes more than a valid name of 242 to 255 bytes was refused as too long
    assert len(os.fsencode(name)) <= 255
    seen = []

    def write(tmp):
        seen.append(tmp.name)
        tmp.write_text("x")

    path = atomic_write(tmp_path / name, write)
    assert path.read_text() == "x" and [p.name for p in tmp_path.iterdir()] == [name]
    assert len(os.fsencode(seen[0])) <= 255 and seen[0].startswith(".x" if name[0] == "x" else ".")


def _archive(path):
    with open(path, "wb") as f:
        np.savez(f, v=np.ones(2))


def _truncated(path):
    np.save(path, np.arange(10.0))
    path.write_bytes(path.read_bytes()[:-8])


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (
            lambda p: p.write_text("hello"),
            r"--v '.*h.npy' is not a .npy array \(it does not start with the .npy header",
        ),
        (lambda p: p.write_bytes(b""), r"is not a .npy array \(it is empty\)"),
        (_archive, r"is an .npz archive of named arrays, not a single .npy"),
        (_truncated, r"is not a readable .npy array of numbers \(ValueError"),
        (lambda p: np.save(p, np.array([None]), allow_pickle=True), r"holds Python objects \(dtype=object\)"),
        (lambda p: p.mkdir(), r"is a folder"),
        (lambda p: None, r"--v '.*h.npy': no such file"),
    ],
)
def test_read_npy_refuses_every_bad_file_in_one_line(make, match, tmp_path):
    make(tmp_path / "h.npy")
    with pytest.raises(ValidationError, match=match):
        read_npy(tmp_path / "h.npy", "--v")


def test_read_npy_reads_an_array(tmp_path):
    np.save(tmp_path / "v.npy", np.array([1.0, 2.0]))
    np.testing.assert_array_equal(read_npy(tmp_path / "v.npy"), [1.0, 2.0])
