"""The ``batched-train`` sweep task: token-selection training runs, many per call of :func:`attnlab.training.batched.train`.

A run's parameters (all plain values, so a sweep file can grid over any of them)::

    data: example1          # a generator of attnlab.data.GENERATORS, or your data: a .npz file (X, y and
                            #   optionally Z, v) or a folder of them (one run per file)
    v: null                 # the head: a .npy file or a key of the data file (default the data's v)
    n: 8                    # n, T, d (when given) and data_args go to the generator
    T: 6
    d: 64
    data_args: {rho: 1.0}
    data_seed: 0            # seed of the data set
    param: W                # "W", "KQ" (with d_e) or "diag"
    d_e: 64
    init_scale: 0.0         # initial entries ~ N(0, init_scale^2 / d) from seed; 0 gives W0 = 0 (W, diag: 0 is
    seed: 0                 #   only allowed for "W": K = Q = 0 is a stationary point)
    optimizer: ngd          # an optimizer string of the registry: "ngd", "ngd:momentum=0.9", "sign:schedule=inv_sqrt"
    lr: 0.1                 # default 0.1; Polyak takes none (its step is (L - L*)/||g||^2)
    loss: exp
    steps: 1000
    record_every: 100       # rows of trajectory.parquet (default: first and last step)
    options: {train_head: true}   # any further keyword of attnlab.training.batched.train (v trained, from 0 when
                            #   the data have no head); optimizer options go in the string ("ngd:momentum=0.9")
    alignment: [fro]        # alignment_<norm> columns: corr(W_t, the <norm> SVM of the run's final attended
                            #   selection), for norms fro, nuc or a number p (column l<p>); [] for none

Runs that differ only in ``seed``, ``data_seed`` and ``lr`` share a batch key, so the in-process executor
trains them as one batched tensor program; every run writes ``trajectory.parquet``, ``W.npy`` (its final
combined matrix, float64, shape (d, d_q)) and ``record.json`` (its summary names each run's attended selection and
the status of its SVMs). A run whose loss turns non-finite stops alone: its
files hold its last finite iterate and its summary says ``status: diverged`` with the step; the other runs of its
batch are unaffected.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import math
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import torch

from attnlab._io import read_array, save_npy
from attnlab._validation import ValidationError, check_in, check_scalar, check_seed
from attnlab.runner.store import versions, write_json, write_parquet
from attnlab.runner.task import Task

__all__ = ["BatchedTrain", "DEFAULTS"]

#: Defaults of a ``batched-train`` run (Example 1 with NGD, the flagship workload of implicit-bias-ngd §9).
DEFAULTS: dict[str, Any] = {
    "data": "example1",
    "data_args": {},
    "data_seed": 0,
    "param": "W",
    "d_e": None,
    "init_scale": 0.0,
    "seed": 0,
    "optimizer": "ngd",
    "lr": None,
    "loss": "exp",
    "steps": 1000,
    "record_every": None,
    "options": {},
    "v": None,
    "alignment": ["fro"],
}
_SIZES = ("n", "T", "d")
_PER_RUN = ("seed", "data_seed", "lr")  # free to differ inside one batch


def _full(params: dict[str, Any]) -> dict[str, Any]:
    return {**DEFAULTS, **params}


def _data(p: dict[str, Any]) -> Any:
    """The run's data set: the generator's (built once per process; the generator checks its arguments as it builds
    it), or the data file's; the head ``v`` from the ``v`` parameter, else the data's, else ``0`` when the head is
    trained (``options: {train_head: true}``)."""
    from attnlab.data import TokenSelectionData, is_data_path

    path = p["data"] if is_data_path(p["data"]) else None  # None: generated data, no file to take a key from
    if path is not None:
        data = TokenSelectionData.load(path)
    else:
        data = _built(
            json.dumps({k: p[k] for k in ("data", "data_args", "data_seed", *_SIZES) if k in p}, sort_keys=True)
        )
    if p["v"] is not None:
        data = data.with_(v=read_array("v", p["v"], path))
    if data.v is None and p["options"].get("train_head"):
        data = data.with_(v=torch.zeros(data.d, dtype=torch.float64))  # implicit-bias-ngd §8.11: v trained from 0
    if data.v is None:
        raise ValidationError(
            f"data {p['data']!r} has no head v: add v to the file, name one with v: FILE.npy (or a key of the "
            "file), or train one from 0 with options: {train_head: true}"
        )
    return data


@functools.lru_cache(maxsize=256)
def _built(key: str) -> Any:
    from attnlab.data import GENERATORS

    p = json.loads(key)
    sizes = {k: p[k] for k in _SIZES if k in p}
    data = GENERATORS[p["data"]](**sizes, **p["data_args"], seed=p["data_seed"])
    return getattr(data, "data", data)  # aligned_pairs returns an AlignedPairs holding the data set


def _initial(p: dict[str, Any], d: int, d_q: int) -> dict[str, torch.Tensor]:
    """Initial parameters of one run, ``init_scale * N(0, 1/d)`` entries drawn from ``seed``."""
    gen = torch.Generator().manual_seed(int(p["seed"]))
    scale = p["init_scale"] / math.sqrt(d)
    if p["param"] == "W":
        return {"W0": scale * torch.randn(d, d_q, generator=gen, dtype=torch.float64)}  # (d, d_q)
    if p["param"] == "KQ":
        d_e = d if p["d_e"] is None else p["d_e"]
        return {
            "K0": scale * torch.randn(d, d_e, generator=gen, dtype=torch.float64),  # (d, d_e)
            "Q0": scale * torch.randn(d_q, d_e, generator=gen, dtype=torch.float64),  # (d_q, d_e)
        }
    return {
        "xi_k0": scale * torch.randn(d, generator=gen, dtype=torch.float64),  # (d,)
        "xi_q0": scale * torch.randn(d, generator=gen, dtype=torch.float64),  # (d,)
    }


def _alignment_norms(values: Any) -> list[tuple[str, Any]]:
    """``(column, norm)`` of each ``alignment`` entry: ``fro``, ``nuc`` or a number ``p`` (column ``alignment_l<p>``)."""
    from attnlab.svm.norms import as_norm

    if not isinstance(values, list):
        raise ValidationError(f"alignment must be a list of norms such as [fro, nuc, 1.5] (or []), got {values!r}")
    norms = []
    for value in values:
        norm = None if isinstance(value, bool) else as_norm(value)  # parsed once: the programs take the Norm
        if norm is None or norm.diagonal is not None:
            raise ValidationError(f"alignment entries are fro, nuc or a number p >= 1, got {value!r}")
        norms.append((f"alignment_{norm.name}", norm))
    return norms


def _svm_alignments(frame: Any, data: Any, result: Any, r: int, norms: list[tuple[str, Any]]) -> dict[str, Any]:
    """Add to run ``r``'s ``frame`` the column ``corr(W_t, W_svm)`` per norm, ``W_svm`` the SVM of the selection
    the run attends to at its last iterate (implicit-bias-ngd §2, §5); return the attended selection and the
    programs' statuses (an infeasible one leaves NaN in its column and says why)."""
    from attnlab.data import Selection
    from attnlab.metrics import cosine
    from attnlab.models.functional import attention_logits
    from attnlab.svm import InfeasibleProgramError, attended_svm

    if not norms:
        return {}
    path = result.iterates["W"][:, r]  # (S, d, d_q) at the recorded steps
    rows = frame["step"].map({int(s): k for k, s in enumerate(result.iterates["step"].tolist())}).to_numpy()
    statuses = {}
    for column, norm in norms:
        try:
            svm = attended_svm(data, result.W[r], norm)
        except InfeasibleProgramError as err:
            frame[column] = math.nan
            statuses[column] = f"infeasible: {str(err).split(';')[0]}"
            continue
        frame[column] = cosine(path, svm.W).numpy()[rows]  # spec ngd §5: corr(W_t, W_svm)
        statuses[column] = svm.status
    attended = Selection.attended(attention_logits(data.X, result.W[r], data.Z)).tokens  # implicit-bias-ngd §2
    return {"attended": attended.tolist(), "svm_status": statuses}


def _lrs(full: list[dict[str, Any]]) -> torch.Tensor:
    """Each run's step size (the engine's default where a run gives none), shape (R,)."""
    from attnlab.optim.spec import DEFAULT_LR

    return torch.tensor([DEFAULT_LR if p["lr"] is None else p["lr"] for p in full], dtype=torch.float64)


def _shared(params: dict[str, Any]) -> str:
    """The parameters that runs of one batch share, as JSON (sorted keys)."""
    return json.dumps({k: v for k, v in _full(params).items() if k not in _PER_RUN}, sort_keys=True)


def _check_generator_arguments(p: dict[str, Any], given: dict[str, Any]) -> None:
    """Refuse sizes and ``data_args`` that the generator does not take (``aligned_pairs`` takes no ``T``), and any
    of them with a data file."""
    from attnlab.data import GENERATORS, is_data_path

    if is_data_path(p["data"]):
        fixed = [k for k in (*_SIZES, "data_args", "data_seed") if k in given]
        if fixed:
            raise ValidationError(
                f"data {p['data']!r} is a data file, which fixes its sizes and draws nothing: drop {fixed}"
            )
        return
    accepted = [name for name in inspect.signature(GENERATORS[p["data"]]).parameters if name != "seed"]
    given = [k for k in _SIZES if k in p] + list(p["data_args"])
    unknown = [name for name in given if name not in accepted]
    if unknown:
        raise ValidationError(
            f"data generator {p['data']!r} takes no argument {', '.join(map(repr, unknown))}; its arguments are "
            f"{', '.join(accepted)} (sizes n, T, d at the top level, the others under data_args)"
        )


_OPTIONS: dict[str, Any] = {}  # the parsed options of each batch (by its shared parameters), in this process


def _options(p: dict[str, Any], data: Any, spec: Any = None) -> Any:
    """The batch's options, checked once per batch and process by :func:`attnlab.training.batched.parse_options`
    against the sizes of one of its data sets (those of a batch share them); ``spec``: the optimizer string parsed
    already (by the sweep's check), else it is parsed here."""
    from attnlab.training.batched import parse_options

    shared = _shared(p)
    if shared not in _OPTIONS:
        n, T, d = data.X.shape[-3:]
        d_q = data.Z.shape[-1]
        init = {k[:-1]: t[None] for k, t in _initial({**p, "seed": 0}, int(d), int(d_q)).items()}  # runs axis of 1
        sizes = {"n": n, "T": T, "d": d, "q": d_q, "columns": d_q}
        optimizer = p["optimizer"] if spec is None else spec
        options = parse_options(p["options"], optimizer, sizes=sizes, params=init, head=data.v)
        if len(_OPTIONS) >= 256:  # a bounded cache, as the data sets' (a long session runs many sweeps)
            _OPTIONS.clear()
        _OPTIONS[shared] = options
    return _OPTIONS[shared]


class BatchedTrain(Task):
    """Sweep task ``batched-train``: token-selection training through :func:`attnlab.training.batched.train`.

    Parameters of a run are listed in the module docstring; missing ones take :data:`DEFAULTS`.
    """

    name = "batched-train"

    def expand(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """One run per data file when ``data`` is a folder (by file name); else the run itself.

        Parameters
        ----------
        params : dict of str to Any
            One point of the sweep.

        Returns
        -------
        list of dict of str to Any
            ``params`` with ``data`` set to each ``.npz`` of the folder (``folder/name``), or ``[params]``.

        Raises
        ------
        ValidationError
            When ``data`` is a folder without ``.npz`` files.
        """
        from attnlab.data import data_files

        data = params.get("data", DEFAULTS["data"])
        if not isinstance(data, str) or not Path(data).is_dir():
            return [params]
        return [{**params, "data": str(path)} for path in data_files(data)]

    def canonical(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` as a run reads them: ``lr`` and ``init_scale`` as floats (``1`` and ``1.0`` are one value),
        ``optimizer`` by its parsed spec (``NGD``, ``ngd:`` and the alias ``sngd`` are all ``ngd``).

        Parameters
        ----------
        params : dict of str to Any
            One run's parameters.

        Returns
        -------
        dict of str to Any
            The same keys; a value :meth:`check` refuses is left as written.
        """
        from attnlab.optim import parse_optimizer

        read = dict(params)
        for key in ("lr", "init_scale"):
            if isinstance(read.get(key), (int, float)) and not isinstance(read[key], bool):
                with contextlib.suppress(OverflowError):  # an int past float64: left as written
                    read[key] = float(read[key])
        if "optimizer" in read:
            with contextlib.suppress(ValidationError):  # check names it
                read["optimizer"] = str(parse_optimizer(read["optimizer"]))
        return read

    def check(self, params: dict[str, Any]) -> None:
        """Refuse unknown keys and bad values before the sweep starts (the message names the key).

        Beyond the keys' own checks, the data generator builds the data set and
        :func:`attnlab.training.batched.parse_options` parses the options, once per batch, so that the values only
        they check are refused here too (and are not checked again when the batch runs).

        Parameters
        ----------
        params : dict of str to Any
            One run's parameters (the keys of :data:`DEFAULTS`, plus ``n``, ``T``, ``d``).

        Raises
        ------
        ValidationError
            On an unknown key, an unknown data generator, parametrisation, optimizer or loss, a value out of
            range, ``lr`` given to Polyak or given twice, ``init_scale == 0`` with ``"KQ"`` or ``"diag"``, or a
            value the generator or the trainer refuses.
        """
        from attnlab.data import GENERATORS, data_files, is_data_path
        from attnlab.losses import LOSSES
        from attnlab.optim import parse_optimizer
        from attnlab.training.batched import PARAMETRIZATIONS

        unknown = sorted(set(params) - set(DEFAULTS) - set(_SIZES))
        if unknown:
            raise ValidationError(
                f"unknown batched-train parameters {unknown}; known: {sorted(set(DEFAULTS) | set(_SIZES))} "
                "(optimizer keywords go under options)"
            )
        p = _full(params)
        if is_data_path(p["data"]):
            data_files(p["data"])  # refuses a missing file
        else:
            check_in("data", p["data"], sorted(GENERATORS))
        check_in("param", p["param"], PARAMETRIZATIONS)
        spec = parse_optimizer(p["optimizer"])
        check_in("loss", p["loss"], LOSSES)
        if p["lr"] is not None:
            if not spec.entry.takes_lr:
                raise ValidationError(
                    f"lr is set for optimizer {spec.name}, which takes none ({spec.entry.refusals.get('lr', '')}): "
                    "drop lr"
                )
            if spec.get("lr") is not None:
                raise ValidationError(
                    f"lr is set twice, as lr: {p['lr']} and in optimizer: {p['optimizer']!r}; keep one (lr may differ "
                    "per run inside a batch, the optimizer string may not)"
                )
            check_scalar("lr", p["lr"], low=0.0, low_inclusive=False)
        check_scalar("steps", p["steps"], kind=int, low=0)
        check_scalar("init_scale", p["init_scale"], low=0.0)
        check_seed("seed", p["seed"])
        if p["record_every"] is not None:
            check_scalar("record_every", p["record_every"], kind=int, low=1)
        if p["param"] != "W" and p["init_scale"] == 0:
            raise ValidationError(
                f"init_scale == 0 with param == {p['param']!r} starts at a stationary point; pass init_scale > 0"
            )
        for key in ("data_args", "options"):
            if not isinstance(p[key], dict):
                raise ValidationError(f"{key} must be a mapping of keyword arguments, got {p[key]!r}")
        if p["d_e"] is not None:
            check_scalar("d_e", p["d_e"], kind=int, low=1)
        _alignment_norms(p["alignment"])
        if p["v"] is not None and not isinstance(p["v"], str):
            raise ValidationError(f"v must name a .npy file or a key of the data file, got {p['v']!r}")
        _check_generator_arguments(p, params)  # a data file refuses a data_seed first: it draws nothing
        check_seed("data_seed", p["data_seed"])  # under its own name: the generator would call it seed
        # Everything else is checked once by the code that will run: the generator checks the sizes and data_args
        # as it builds the data set (kept for the run), and attnlab.training.batched.parse_options the
        # options (the optimizer's name among them), once per batch; run_batch trains these typed values.
        _options(p, _data(p), spec)

    def inputs(self, params: dict[str, Any]) -> list[Path]:
        """The files a run reads: its data file (each ``.npz`` of a ``data`` folder) and its head's ``.npy`` file.

        Their contents are part of the run's fingerprint, so a data file written again with other data makes the
        next sweep compute the run again instead of serving the loss of the old data.

        Parameters
        ----------
        params : dict of str to Any
            One run's parameters.

        Returns
        -------
        list of pathlib.Path
            Empty for a generated data set with the data's own head (``v`` unset or a key of the data file).
        """
        p = _full(params)
        files = []
        data = p["data"]
        if isinstance(data, str) and data.endswith(".npz"):
            files.append(Path(data))
        elif isinstance(data, str) and Path(data).is_dir():  # expand makes one run per file; a Job may name a folder
            files += sorted(Path(data).glob("*.npz"))
        if isinstance(p["v"], str) and p["v"].endswith(".npy"):  # else a key of the data file, or none
            files.append(Path(p["v"]))
        return files

    def label(self, params: dict[str, Any]) -> str:
        p = _full(params)
        return f"{p['data']}-{p['param']}-{p['optimizer']}"

    def batch_key(self, params: dict[str, Any]) -> Hashable:
        return _shared(params)

    def run(self, params: dict[str, Any], run_dir: Path) -> dict[str, Any]:
        """One run: the batch of one (:meth:`run_batch`).

        Parameters
        ----------
        params : dict of str to Any
            The run's parameters; missing ones take :data:`DEFAULTS`.
        run_dir : pathlib.Path
            Gets ``trajectory.parquet``, ``W.npy`` and ``record.json`` (last).

        Returns
        -------
        dict of str to Any
            ``final_loss``, ``final_norm``, ``status`` (``"completed"`` or ``"diverged"``) and ``last_step``.
        """
        return self.run_batch([params], [run_dir])[0]

    def run_batch(self, params: Sequence[dict[str, Any]], run_dirs: Sequence[Path]) -> list[dict[str, Any]]:
        """Train the runs as one batch (:func:`attnlab.training.batched.train_parsed`: the values :meth:`check`
        checked are not checked again), then write each run's files.

        Parameters
        ----------
        params : sequence of dict of str to Any
            The runs' parameters, all with one :meth:`batch_key` (they differ at most in ``seed``, ``data_seed``
            and ``lr``).
        run_dirs : sequence of pathlib.Path
            Each run's directory, in the order of ``params``; each gets ``trajectory.parquet``, ``W.npy`` (the
            final combined matrix, float64, shape (d, d_q)) and ``record.json`` (last).

        Returns
        -------
        list of dict of str to Any
            One summary per run, as :meth:`run` returns.
        """
        import dataclasses
        import time

        from attnlab.data import stack
        from attnlab.training.batched import train_parsed
        from attnlab.training.spaces import Problem

        full = [_full(p) for p in params]
        first = full[0]
        start = time.perf_counter()
        runs = [_data(p) for p in full]
        data = stack(runs)  # X (R, n, T, d)
        d, d_q = runs[0].d, runs[0].d_q
        inits = [_initial(p, d, d_q) for p in full]
        init = {k[:-1]: torch.stack([i[k] for i in inits]) for k in inits[0]}  # each (R, ...), named as the tensors
        steps = first["steps"]
        options = _options(first, runs[0])
        options = dataclasses.replace(
            options,
            record_every=first["record_every"] or max(steps, 1),
            keep_iterates=options.keep_iterates or bool(first["alignment"]),  # the recorded W_t, for the alignments
        )
        result = train_parsed(
            Problem(data.X, data.Z, data.y, data.v, first["loss"]),
            init,
            options,
            param=first["param"],
            lr=None if not options.spec.entry.takes_lr or options.spec.get("lr") is not None else _lrs(full),  # (R,)
            steps=steps,
        )
        seconds = (time.perf_counter() - start) / len(full)
        summaries = []
        for r, (p, raw, run_dir) in enumerate(zip(full, params, run_dirs)):
            frame = result.frame[result.frame["run"] == r].drop(columns="run").reset_index(drop=True)
            frame.insert(0, "seed", p["seed"])
            if p["options"].get("train_head") and not bool(runs[r].v.any()):
                # a head trained from 0 has no optimal tokens at the start: these columns would follow token 0
                frame = frame.drop(columns=["opt_softmax", "margin"], errors="ignore")
            svms = _svm_alignments(frame, runs[r], result, r, _alignment_norms(p["alignment"]))
            write_parquet(run_dir / "trajectory.parquet", frame)
            W = result.W[r].detach().numpy()  # (d, d_q)
            save_npy(run_dir / "W.npy", W)
            last = frame.iloc[-1]
            summary = {
                "final_loss": float(last["loss"]),
                "final_norm": float(last["norm"]),
                "status": result.status[r],
                "last_step": result.last_step[r],
                **svms,
            }
            record = {
                "task": self.name,
                "params": raw,
                "resolved": p,
                "seed": p["seed"],
                "batch_runs": len(full),
                "versions": versions(),
                "timings": {"run_seconds": seconds},
                "final": summary,
            }
            write_json(run_dir / "record.json", record)
            summaries.append(summary)
        return summaries
