"""Atomic file writes and safe ``.npz`` reads, the lowest layer so that data sets and run outputs share them.

Files are created with mode ``0o666`` minus the umask (``0644`` under the usual ``022``), like any file a
program writes, so collaborators can read results. A file-system failure (no permission, a file in the way, a
full disk, a name too long) becomes an :class:`OutputError` whose one line names the path, the reason and a fix.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import zipfile
import zlib
from collections.abc import Callable, Mapping
from numbers import Integral
from pathlib import Path
from typing import Any

from attnlab._errors import FileSystemError
from attnlab._validation import ValidationError

__all__ = [
    "OutputError",
    "atomic_write",
    "config_hash",
    "json_default",
    "make_dir",
    "read_npy",
    "read_npz",
    "save_npy",
    "save_npz",
]

# The longest file name most file systems take (NAME_MAX, in bytes): a temp name is kept within it.
_NAME_MAX = 255
# A temp name keeps the destination's suffix only up to this length (a suffix tells writers the format).
_SUFFIX_MAX = 16

_FIXES = {
    errno.EACCES: "check the folder's permissions or choose another path",
    errno.EPERM: "check the folder's permissions or choose another path",
    errno.EROFS: "the file system is read-only; choose another path",
    errno.ENOSPC: "the disk is full; free some space and run again (finished work is kept)",
    errno.EDQUOT: "the disk quota is exceeded; free some space and run again (finished work is kept)",
    errno.ENAMETOOLONG: "a name in the path is too long; choose a shorter path",
    errno.EEXIST: "a file is in the way where a folder is needed; remove it or choose another path",
    errno.ENOTDIR: "a file is in the way where a folder is needed; remove it or choose another path",
    errno.EISDIR: "a folder is in the way where a file is needed; remove it or choose another path",
}


class OutputError(ValidationError):
    """An output could not be written: the message names the path, what the file system said, and a fix."""


class _WriteRefusedError(OutputError, FileSystemError):
    """An output the file system refused (not a folder refused as another run's): exit status 1 on the CLI."""


def _output_error(path: Path, err: OSError) -> OutputError:
    reason = err.strerror or type(err).__name__
    where = f" ({err.filename})" if err.filename and str(err.filename) != str(path) else ""
    fix = _FIXES.get(err.errno or 0, "check the path")
    return _WriteRefusedError(f"cannot write {str(path)!r}: {reason}{where}; {fix}")


def make_dir(path: str | os.PathLike[str]) -> Path:
    """Create the folder ``path`` and its parents (fine when it exists); returns it.

    Raises
    ------
    OutputError
        If the folder cannot be made (a file in the way, no permission, an impossible path).
    """
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _output_error(path, err) from None
    return path


def _temp_parts(name: str) -> tuple[str, str]:
    """The prefix and suffix of the temp name of the file ``name``: ``.<name>.`` and ``.tmp<suffix>``.

    A valid name of up to 255 bytes would give a temp name of up to 14 bytes more, which the file system refuses
    (ENAMETOOLONG): the name part is cut (never inside a character) so that the whole stays within 255 bytes.
    """
    suffix = Path(name).suffix
    suffix = ".tmp" + (suffix if len(os.fsencode(suffix)) <= _SUFFIX_MAX else "")
    room = _NAME_MAX - len(os.fsencode(suffix)) - 8 - 2  # 8 hex digits, the two dots around the name
    stem = name
    while len(os.fsencode(stem)) > room:
        stem = stem[:-1]
    return f".{stem}.", suffix


def _new_file(folder: Path, prefix: str, suffix: str) -> Path:
    # tempfile.mkstemp would make the file 0600 whatever the umask; O_EXCL with 0o666 lets the umask decide.
    while True:
        path = folder / f"{prefix}{secrets.token_hex(4)}{suffix}"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return path


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_path)`` then rename ``tmp_path`` onto ``path`` atomically.

    ``write`` receives a path in the destination folder (same file system, so the rename is atomic). A crash
    while writing leaves the old file (or none), never a truncated one.

    Parameters
    ----------
    path : path
        The destination file; its folder is created when missing.
    write : callable
        ``write(tmp_path)`` writes the whole file at ``tmp_path`` (a :class:`pathlib.Path` in ``path``'s folder,
        ending in ``.tmp`` and ``path``'s suffix when it has a short one); its return value is ignored. It must
        write exactly that file: a writer that adds its own suffix (``numpy.savez`` and ``numpy.save`` given a
        path) writes elsewhere; give them an open file instead (:func:`save_npz`, :func:`save_npy`).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    OutputError
        If the file system refuses (see the module docstring); the temp file is removed.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        prefix, suffix = _temp_parts(path.name)
        tmp_path = _new_file(path.parent, prefix=prefix, suffix=suffix)
    except OSError as err:
        raise _output_error(path, err) from None
    try:
        write(tmp_path)
        os.replace(tmp_path, path)
    except OSError as err:
        raise _output_error(path, err) from None
    finally:
        if tmp_path.exists():
            tmp_path.unlink()
    return path


def save_npz(path: str | os.PathLike[str], arrays: Mapping[str, Any]) -> Path:
    """Write ``arrays`` as an ``.npz`` archive at ``path`` exactly (whatever its suffix), atomically.

    ``numpy.savez`` given a path appends ``.npz`` to a name without it; here it writes to an open file, so the
    archive lands at ``path`` itself (``data``, ``sol.NPZ`` and ``sol.npz`` alike).

    Parameters
    ----------
    path : path
        The destination file; its folder is created when missing.
    arrays : mapping of str to array-like
        The archive's arrays by key (no Python objects: they would need pickle to be read back).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    OutputError
        If the file system refuses (see the module docstring).
    """
    import numpy as np

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)

    return atomic_write(path, write)


def save_npy(path: str | os.PathLike[str], array: Any) -> Path:
    """Write ``array`` as a ``.npy`` file at ``path`` exactly (whatever its suffix), atomically.

    Parameters
    ----------
    path : path
        The destination file; its folder is created when missing.
    array : array-like
        Numbers (no Python objects).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    OutputError
        If the file system refuses (see the module docstring).
    """
    import numpy as np

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.save(f, array, allow_pickle=False)

    return atomic_write(path, write)


def read_npz(path: str | os.PathLike[str], what: str = "data file") -> dict[str, Any]:
    """Every array of the ``.npz`` archive at ``path``, read without unpickling anything.

    Parameters
    ----------
    path : path
        An archive written by ``numpy.savez`` (or :meth:`attnlab.data.TokenSelectionData.save`).
    what : str, default="data file"
        How messages name the file.

    Returns
    -------
    dict of str to numpy.ndarray

    Raises
    ------
    ValidationError
        One line naming the file and what is wrong with it: missing, a folder, not an ``.npz`` archive (text, a
        pickle, a single ``.npy`` array), empty, truncated or corrupt, or holding Python objects (``dtype=object``,
        which would need pickle, a way to run arbitrary code).
    """
    import numpy as np

    path = Path(path)
    name = f"{what} {str(path)!r}"
    if not path.exists():
        raise ValidationError(f"{name} does not exist; check the path")
    if path.is_dir():
        raise ValidationError(f"{name} is a folder; pass an .npz file")
    if path.stat().st_size == 0:
        raise ValidationError(f"{name} is empty; write it again with numpy.savez")
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError as err:
        raise ValidationError(f"{name} cannot be read: {err.strerror}") from None
    if head.startswith(b"\x93NUMPY"):
        raise ValidationError(
            f"{name} is a single .npy array, not an .npz archive of named arrays; save with numpy.savez"
        )
    if not head.startswith(b"PK"):
        raise ValidationError(f"{name} is not an .npz archive (a zip of .npy arrays); save the arrays with numpy.savez")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {key: archive[key] for key in archive.files}
    except ValueError as err:
        if "allow_pickle" in str(err) or "Object arrays" in str(err):
            raise ValidationError(
                f"{name} holds Python objects (dtype=object), which attnlab does not unpickle; store numeric arrays"
            ) from None
        raise ValidationError(f"{name} is corrupt ({err}); write it again") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, KeyError) as err:
        raise ValidationError(f"{name} is truncated or corrupt ({type(err).__name__}: {err}); write it again") from None


def read_npy(path: str | os.PathLike[str], what: str = "array file") -> Any:
    """The array of the ``.npy`` file at ``path``, read without unpickling anything; no file is left open.

    Parameters
    ----------
    path : path
        A file written by ``numpy.save``.
    what : str, default="array file"
        How messages name the file (an option such as ``"--v"``, or ``"v"`` of a sweep file).

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    ValidationError
        One line naming ``what`` and the file: missing, a folder, an ``.npz`` archive (``numpy.load`` would return
        an open archive, not an array), not a readable ``.npy`` array of numbers (text, truncated, corrupt), or
        holding Python objects (``dtype=object``, which would need pickle).
    """
    import numpy as np

    path = Path(path)
    name = f"{what} {str(path)!r}"
    if not path.exists():
        raise ValidationError(f"{name}: no such file; check the path")
    if path.is_dir():
        raise ValidationError(f"{name} is a folder; pass a .npy file written by numpy.save")
    try:
        with open(path, "rb") as f:
            head = f.read(6)
            if head.startswith(b"PK"):
                raise ValidationError(
                    f"{name} is an .npz archive of named arrays, not a single .npy array; save the array with "
                    "numpy.save, or pass the key of the array in the data file"
                )
            if head != b"\x93NUMPY":  # text, a pickle, an empty file: numpy.load would call it pickled data
                reason = "it is empty" if not head else "it does not start with the .npy header"
                raise ValidationError(f"{name} is not a .npy array ({reason}); write it with numpy.save(path, array)")
            f.seek(0)
            array = np.load(f, allow_pickle=False)  # from an open file: closed here whatever it holds
    except ValidationError:
        raise
    except (OSError, ValueError, EOFError) as err:
        if "allow_pickle" in str(err) or "Object arrays" in str(err):
            reason = "it holds Python objects (dtype=object), which attnlab does not unpickle"
        else:
            reason = f"{type(err).__name__}: {err}"
        raise ValidationError(
            f"{name} is not a readable .npy array of numbers ({reason}); write it with numpy.save(path, array)"
        ) from None
    return array


def read_array(what: str, source: str, data_path: str | os.PathLike[str] | None) -> Any:
    """The array ``what`` names: a ``.npy`` file, or the key ``source`` of the ``.npz`` data file at ``data_path``.

    Parameters
    ----------
    what : str
        How messages name the array (an option such as ``"--v"``, or ``"v"`` of a sweep file).
    source : str
        A path ending in ``.npy``, or a key of the data file (e.g. a head stored beside ``X`` under ``v_true``).
    data_path : path or None
        The data file (``.npz``); ``None`` when the data are generated (no file holds keys).

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    ValidationError
        When the ``.npy`` file is missing, unreadable, an ``.npz`` archive or holds Python objects (see
        :func:`read_npy`), or ``source`` is neither such a file nor a key of the data file; the message lists the
        file's keys.
    """
    if str(source).endswith(".npy"):
        return read_npy(source, what)
    if data_path is None:
        raise ValidationError(
            f"{what} {source!r} is neither a .npy file nor a key of a data file (the data are generated)"
        )
    arrays = read_npz(data_path)
    if source not in arrays:
        raise ValidationError(
            f"{what} {source!r} is neither a .npy file nor a key of {data_path} (its keys: {', '.join(arrays)}); "
            "pass FILE.npy or one of those keys"
        )
    return arrays[source]


def json_default(obj: Any) -> Any:
    """JSON form of what ``json`` cannot write: arrays and tensors (``tolist``), paths, sets (sorted)."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"cannot write {type(obj).__name__} to JSON")


def config_hash(payload: Mapping[str, Any], length: int = 12) -> str:
    """A short, stable hash of a JSON-serialisable config (keys sorted), used to name run directories.

    Parameters
    ----------
    payload : mapping
        JSON-serialisable values (arrays, paths and sets as :func:`write_json` converts them); key order does
        not matter.
    length : int, default=12
        Number of hex digits kept, from 1 to 64.

    Returns
    -------
    str
        The first ``length`` hex digits of the SHA-256 of the sorted JSON text.

    Raises
    ------
    ValidationError
        If ``length`` is not an int in 1..64.
    TypeError
        If a value cannot be written as JSON.
    """
    if isinstance(length, bool) or not isinstance(length, Integral) or not 1 <= length <= 64:
        raise ValidationError(
            f"length == {length!r}, must be an int from 1 to 64 (the hex digits of a SHA-256 kept); the default is 12"
        )
    text = json.dumps(payload, sort_keys=True, default=json_default)
    return hashlib.sha256(text.encode()).hexdigest()[: int(length)]
