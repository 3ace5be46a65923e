"""The head options of ``attnlab svm`` and ``attnlab explain``: an array from a ``.npy`` file or from the data file.

Spec: implicit-bias-ngd §1 (the linear head ``v``, its optimal tokens), §8.11 (the head trained with ``W``),
multi-token §1 (the ReLU head ``h(u) = v^T ReLU(V u)``).
"""

from __future__ import annotations

from typing import Any

from attnlab._errors import ValidationError  # not attnlab._validation, which loads torch

__all__ = ["read_array"]


def read_array(option: str, source: str, data_path: str) -> Any:
    """The array that ``option`` names: a ``.npy`` file, or the key ``source`` of the data file at ``data_path``.

    Parameters
    ----------
    option : str
        The option's name, for messages (``"--v"``).
    source : str
        A path ending in ``.npy``, or a key of the data file (e.g. a head stored beside ``X`` under ``v_true``).
    data_path : str
        The data file (``.npz``).

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    ValidationError
        When the ``.npy`` file is missing, unreadable, an ``.npz`` archive or holds Python objects (see
        :func:`attnlab._io.read_npy`), or ``source`` is neither such a file nor a key of the data file; the message
        lists the file's keys.
    """
    from attnlab._io import read_npy, read_npz

    if source.endswith(".npy"):
        return read_npy(source, option)
    arrays = read_npz(data_path)
    if source not in arrays:
        raise ValidationError(
            f"{option} {source!r} is neither a .npy file nor a key of {data_path} (its keys: {', '.join(arrays)}); "
            "pass FILE.npy or one of those keys"
        )
    return arrays[source]
