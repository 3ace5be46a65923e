"""Checkpoints for long single runs: save the whole loop state every N steps, resume bit-identically.

A loop is resumable when everything its next step depends on is in the saved state: parameters, optimizer
state (``optimizer.state_dict()``), generator states (``generator.get_state()``), the step counter and the rows
recorded so far. The file is written atomically, so a crash while saving leaves the previous checkpoint.

Examples
--------
>>> import tempfile, torch
>>> ckpt = Checkpoint(tempfile.mkdtemp() + "/ckpt.pt", every=2)
>>> state = ckpt.load() or {"step": 0, "w": torch.zeros(2)}
>>> while state["step"] < 5:
...     state = {"step": state["step"] + 1, "w": state["w"] + 1}
...     _ = ckpt.maybe_save(state)
>>> ckpt.load()["step"]
4
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import zipfile
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch

from attnlab._io import atomic_write
from attnlab._validation import ValidationError, check_scalar

__all__ = ["Checkpoint", "cuda_rng_states", "fork_rngs", "read_checkpoint", "restore_cuda_rng_states"]


def cuda_rng_states() -> list[torch.Tensor] | None:
    """Every CUDA device's RNG state, for a checkpoint: dropout on a GPU draws from these, not from the CPU's.

    Returns
    -------
    list of torch.Tensor or None
        ``torch.cuda.get_rng_state_all()`` when CUDA is available and initialised, else None: nothing has drawn
        from a device RNG before CUDA starts, and a CPU run on a GPU machine is not made to start it.
    """
    return torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None


def fork_rngs() -> AbstractContextManager[None]:
    """A scope that puts back, on exit, the CPU RNG state and every CUDA device's when CUDA is initialised.

    ``torch.random.fork_rng(devices=[])`` restores only the CPU's, while ``torch.manual_seed`` inside it reseeds
    every GPU too: a run seeded that way on a GPU would leave its caller's CUDA RNG changed.

    Returns
    -------
    contextlib.AbstractContextManager
        ``torch.random.fork_rng`` over the CPU and every CUDA device when CUDA is available and initialised (named
        explicitly, so fork_rng warns of nothing), over the CPU alone before that: a CPU run on a GPU machine is
        not made to start CUDA, and no device RNG has been drawn from before it starts.

    Notes
    -----
    The GPU case is tested with a stand-in for torch.cuda's RNG (tests/nets/test_gpu_rng.py): no GPU was at hand.
    """
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    return torch.random.fork_rng(devices=list(range(torch.cuda.device_count())) if cuda else [], device_type="cuda")


def restore_cuda_rng_states(states: list[torch.Tensor] | None) -> None:
    """Put back what :func:`cuda_rng_states` saved, so that a resumed run draws the GPU dropout masks it would have.

    Parameters
    ----------
    states : list of torch.Tensor or None
        None (a checkpoint written without CUDA, or before these states were saved) or no CUDA here: nothing.
    """
    if states is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states)


def read_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The state saved in the checkpoint file ``path``, or ``None`` when there is none yet.

    Loaded with ``torch.load(weights_only=True)``: tensors, numbers, strings and containers of them, never
    arbitrary pickled code.

    Raises
    ------
    ValidationError
        If the file is truncated, corrupt, or holds objects a weights-only load refuses; the message names the
        file and says to delete it (the run then starts over from step 0).
    """
    path = Path(path)
    if not path.is_file():
        return None
    try:
        state = torch.load(path, weights_only=True)
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError, zipfile.BadZipFile) as err:
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ValidationError(
            f"checkpoint {str(path)!r} cannot be loaded ({type(err).__name__}: {reason}); it is truncated, corrupt or "
            "not a weights-only checkpoint: delete it to start the run over"
        ) from None
    if not isinstance(state, dict):
        raise ValidationError(
            f"checkpoint {str(path)!r} holds a {type(state).__name__}, not a state dict; delete it to start the run "
            "over"
        )
    return state


def tensor_digest(tensors: Sequence[torch.Tensor]) -> str:
    """SHA-256 of ``tensors``: each one's dtype, shape and bytes, in order (what identifies the data of a run).

    Parameters
    ----------
    tensors : sequence of torch.Tensor
        Any dtype and device (read on the CPU, left unchanged).

    Returns
    -------
    str
        64 hex digits; equal for two sequences exactly when their tensors are bitwise equal, of the same dtypes and
        shapes.
    """
    digest = hashlib.sha256()
    for tensor in tensors:
        flat = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{flat.dtype}{tuple(tensor.shape)}\0".encode())
        digest.update(flat.view(torch.uint8).numpy())
    return digest.hexdigest()


def check_identity(path: Path, state: Mapping[str, Any], kind: str, identity: Mapping[str, Any]) -> None:
    """Refuse a checkpoint that was not written by ``kind`` for the runs ``identity`` describes, before anything of
    it is used: one check for :func:`~attnlab.nets.fit_classifier` and :func:`~attnlab.nets.stacked.fit_stacked`.

    Parameters
    ----------
    path : pathlib.Path
        The checkpoint file, named in the messages.
    state : mapping
        What :func:`read_checkpoint` loaded from it.
    kind : str
        The front door and format that writes such checkpoints, e.g. ``"fit_classifier/2"``; saved under
        ``"kind"`` beside ``"identity"``.
    identity : mapping
        Everything the saved state depends on besides the model and optimizer (seeds, batch size, metric names,
        a digest of the data, dtypes): plain values that a weights-only load restores equal.

    Raises
    ------
    ValidationError
        If the checkpoint was written by another front door, by an older format or by something else (no
        ``"kind"``), or for other runs: the message names each setting that differs, its value in the checkpoint
        and in this call.
    """
    found, saved = state.get("kind"), state.get("identity")
    if found != kind or not isinstance(saved, Mapping):
        made = f"by {found}" if isinstance(found, str) else "by an older attnlab or by something else"
        raise ValidationError(
            f"checkpoint {path} was written {made}, not by {kind} (it holds {', '.join(sorted(map(str, state)))}); "
            "delete it to start the run over, or pass a new checkpoint path"
        )
    differ = [k for k in dict.fromkeys([*identity, *saved]) if saved.get(k) != identity.get(k)]
    if differ:
        old = ", ".join(f"{k}={saved.get(k)!r}" for k in differ)
        new = ", ".join(f"{k}={identity.get(k)!r}" for k in differ)
        raise ValidationError(
            f"checkpoint {path} was written for other runs: with {old}, but this call has {new}; pass the same "
            "values, or a new checkpoint path to start over"
        )


class Checkpoint:
    """Save a loop's state every ``every`` steps to ``path``; load it to resume.

    Parameters
    ----------
    path : path
        Checkpoint file (``torch.save`` format), usually ``<run dir>/checkpoint.pt``.
    every : int
        Save when the state's ``"step"`` is a multiple of ``every``.

    Notes
    -----
    The state is a dict with an integer ``"step"`` (steps completed) and tensors, Python numbers and strings,
    and lists or dicts of them: ``state_dict()``s, ``torch.Generator.get_state()``, recorded rows. It is loaded
    with ``weights_only=True`` (no arbitrary pickles). Loading restores tensors exactly (same bits, same
    dtype), which is what makes the resumed run bit-identical.
    """

    def __init__(self, path: str | os.PathLike[str], every: int) -> None:
        self.path = Path(path)
        self.every = check_scalar("every", every, kind=int, low=1)

    def save(self, state: dict[str, Any]) -> Path:
        """Write ``state`` now (atomically), whatever its step.

        Parameters
        ----------
        state : dict of str to Any
            The loop's state: an int ``"step"`` (steps completed) and tensors, Python numbers, strings, and lists
            or dicts of them (see the class notes).

        Returns
        -------
        pathlib.Path
            The checkpoint file.

        Raises
        ------
        ValidationError
            If ``state`` is not a dict with an int ``"step"``, or the file cannot be written.
        """
        step = state.get("step") if isinstance(state, dict) else None
        if isinstance(step, bool) or not isinstance(step, int):
            raise ValidationError(f"state must be a dict with an integer 'step' (steps completed), got step={step!r}")
        buffer = io.BytesIO()
        torch.save(state, buffer)
        data = buffer.getvalue()
        return atomic_write(self.path, lambda p: p.write_bytes(data))

    def maybe_save(self, state: dict[str, Any]) -> bool:
        """Save when ``state["step"]`` is a multiple of ``every``.

        Parameters
        ----------
        state : dict of str to Any
            The loop's state: an int ``"step"`` (steps completed) and tensors, Python numbers, strings, and lists
            or dicts of them (see the class notes).

        Returns
        -------
        bool
            Whether it saved.

        Raises
        ------
        ValidationError
            As :meth:`save`, when it saves.
        """
        if state["step"] % self.every:
            return False
        self.save(state)
        return True

    def load(self) -> dict[str, Any] | None:
        """The last saved state (see :func:`read_checkpoint`).

        Returns
        -------
        dict of str to Any or None
            The state as saved, tensors bit for bit; ``None`` when there is no checkpoint yet.

        Raises
        ------
        ValidationError
            If the file is truncated, corrupt or not a weights-only checkpoint.
        """
        return read_checkpoint(self.path)

    def clear(self) -> None:
        """Delete the checkpoint (call it once the run's outputs are written)."""
        self.path.unlink(missing_ok=True)
