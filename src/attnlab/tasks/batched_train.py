"""The ``batched-train`` sweep task: token-selection training runs, many per call of :func:`attnlab.training.batched.train`.

A run's parameters (all plain values, so a sweep file can grid over any of them)::

    data: example1          # a generator of attnlab.data.GENERATORS
    n: 8                    # n, T, d (when given) and data_args go to the generator
    T: 6
    d: 64
    data_args: {rho: 1.0}
    data_seed: 0            # seed of the data set
    param: W                # "W", "KQ" (with d_e) or "diag"
    d_e: 64
    init_scale: 0.0         # initial entries ~ N(0, init_scale^2 / d) from seed; 0 gives W0 = 0 (W, diag: 0 is
    seed: 0                 #   only allowed for "W": K = Q = 0 is a stationary point)
    optimizer: ngd          # an optimizer string (attnlab.optim.spec): "ngd", "ngd:momentum=0.9", "md:1.5", ...
    lr: 0.1                 # default 0.1; Polyak takes none (its step is (L - L*)/||g||^2)
    loss: exp
    steps: 1000
    record_every: 100       # rows of trajectory.parquet (default: first and last step)
    options: {momentum: 0.9}   # any further keyword of attnlab.training.batched.train

Runs that differ only in ``seed``, ``data_seed`` and ``lr`` share a batch key, so the in-process executor
trains them as one batched tensor program; every run writes ``trajectory.parquet``, ``W.npy`` (its final
combined matrix, float64, shape (d, d)) and ``record.json``. A run whose loss turns non-finite stops alone: its
files hold its last finite iterate and its summary says ``status: diverged`` with the step; the other runs of its
batch are unaffected.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnlab._validation import ValidationError, check_in, check_scalar
from attnlab.runner.store import atomic_write, versions, write_json, write_parquet
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
}
_SIZES = ("n", "T", "d")
_PER_RUN = ("seed", "data_seed", "lr")  # free to differ inside one batch


def _full(params: dict[str, Any]) -> dict[str, Any]:
    return {**DEFAULTS, **params}


def _data(p: dict[str, Any]) -> Any:
    """The run's data set; built once per process (the generator checks its arguments as it builds it)."""
    return _built(json.dumps({k: p[k] for k in ("data", "data_args", "data_seed", *_SIZES) if k in p}, sort_keys=True))


@functools.lru_cache(maxsize=256)
def _built(key: str) -> Any:
    from attnlab.data import GENERATORS

    p = json.loads(key)
    sizes = {k: p[k] for k in _SIZES if k in p}
    data = GENERATORS[p["data"]](**sizes, **p["data_args"], seed=p["data_seed"])
    return getattr(data, "data", data)  # aligned_pairs returns an AlignedPairs holding the data set


def _initial(p: dict[str, Any], d: int) -> dict[str, torch.Tensor]:
    """Initial parameters of one run, ``init_scale * N(0, 1/d)`` entries drawn from ``seed``."""
    gen = torch.Generator().manual_seed(int(p["seed"]))
    scale = p["init_scale"] / math.sqrt(d)
    if p["param"] == "W":
        return {"W0": scale * torch.randn(d, d, generator=gen, dtype=torch.float64)}  # (d, d)
    if p["param"] == "KQ":
        d_e = d if p["d_e"] is None else p["d_e"]
        return {
            "K0": scale * torch.randn(d, d_e, generator=gen, dtype=torch.float64),  # (d, d_e)
            "Q0": scale * torch.randn(d, d_e, generator=gen, dtype=torch.float64),  # (d, d_e)
        }
    return {
        "xi_k0": scale * torch.randn(d, generator=gen, dtype=torch.float64),  # (d,)
        "xi_q0": scale * torch.randn(d, generator=gen, dtype=torch.float64),  # (d,)
    }


def _lrs(full: list[dict[str, Any]]) -> torch.Tensor:
    """Each run's step size (the engine's default where a run gives none), shape (R,)."""
    from attnlab.optim.spec import DEFAULT_LR

    return torch.tensor([DEFAULT_LR if p["lr"] is None else p["lr"] for p in full], dtype=torch.float64)


def _shared(params: dict[str, Any]) -> str:
    """The parameters that runs of one batch share, as JSON (sorted keys)."""
    return json.dumps({k: v for k, v in _full(params).items() if k not in _PER_RUN}, sort_keys=True)


def _check_generator_arguments(p: dict[str, Any]) -> None:
    """Refuse sizes and ``data_args`` that the generator does not take (``aligned_pairs`` takes no ``T``)."""
    from attnlab.data import GENERATORS

    accepted = [name for name in inspect.signature(GENERATORS[p["data"]]).parameters if name != "seed"]
    given = [k for k in _SIZES if k in p] + list(p["data_args"])
    unknown = [name for name in given if name not in accepted]
    if unknown:
        raise ValidationError(
            f"data generator {p['data']!r} takes no argument {', '.join(map(repr, unknown))}; its arguments are "
            f"{', '.join(accepted)} (sizes n, T, d at the top level, the others under data_args)"
        )


_OPTIONS: dict[str, Any] = {}  # the parsed options of each batch (by its shared parameters), in this process


def _options(p: dict[str, Any], data: Any) -> Any:
    """The batch's options, checked once per batch and process by :func:`attnlab.training.batched.parse_options`
    against the sizes of one of its data sets (those of a batch share them)."""
    from attnlab.training.batched import parse_options

    shared = _shared(p)
    if shared not in _OPTIONS:
        n, T, d = data.X.shape[-3:]
        init = {k[:-1]: t[None] for k, t in _initial({**p, "seed": 0}, int(d)).items()}  # names, runs axis of 1
        sizes = {"n": n, "T": T, "d": d, "q": data.Z.shape[-1], "columns": data.Z.shape[-1]}
        options = parse_options(p["options"], p["optimizer"], sizes=sizes, params=init, head=data.v)
        if len(_OPTIONS) >= 256:  # a bounded cache, as the data sets' (a long session runs many sweeps)
            _OPTIONS.clear()
        _OPTIONS[shared] = options
    return _OPTIONS[shared]


class BatchedTrain(Task):
    """Sweep task ``batched-train``: token-selection training through :func:`attnlab.training.batched.train`.

    Parameters of a run are listed in the module docstring; missing ones take :data:`DEFAULTS`.
    """

    name = "batched-train"

    def check(self, params: dict[str, Any]) -> None:
        """Refuse unknown keys and bad values before the sweep starts (the message names the key).

        Beyond the keys' own checks, the data generator and :func:`attnlab.training.batched.train` are called once per batch
        for 0 steps, so that the values only they check are refused here too.

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
        from attnlab.data import GENERATORS
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
        check_in("data", p["data"], sorted(GENERATORS))
        check_in("param", p["param"], PARAMETRIZATIONS)
        spec = parse_optimizer(p["optimizer"])
        check_in("loss", p["loss"], LOSSES)
        if p["lr"] is not None:
            if spec.name == "polyak":
                raise ValidationError(
                    "lr is set for optimizer polyak, whose step is (L - L*) / ||g||^2: drop lr (cap the step with "
                    "options: {max_step: ...})"
                )
            if spec.get("lr") is not None:
                raise ValidationError(
                    f"lr is set twice, as lr: {p['lr']} and in optimizer: {p['optimizer']!r}; keep one (lr may differ "
                    "per run inside a batch, the optimizer string may not)"
                )
            check_scalar("lr", p["lr"], low=0.0, low_inclusive=False)
        check_scalar("steps", p["steps"], kind=int, low=0)
        check_scalar("init_scale", p["init_scale"], low=0.0)
        check_scalar("seed", p["seed"], kind=int, low=0)  # data_seed: the generator checks it, as its seed
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
        _check_generator_arguments(p)
        # Everything else is checked once by the code that will run: the generator checks the sizes, data_args and
        # data_seed as it builds the data set (kept for the run), and attnlab.training.batched.parse_options the
        # options (the optimizer's name among them), once per batch; run_batch trains these typed values.
        _options(p, _data(p))

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
            final combined matrix, float64, shape (d, d)) and ``record.json`` (last).

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
        data = stack([_data(p) for p in full])  # X (R, n, T, d)
        d = int(data.X.shape[-1])
        inits = [_initial(p, d) for p in full]
        init = {k[:-1]: torch.stack([i[k] for i in inits]) for k in inits[0]}  # each (R, ...), named as the tensors
        steps = first["steps"]
        options = _options(first, _data(first))
        options = dataclasses.replace(options, record_every=first["record_every"] or max(steps, 1))
        result = train_parsed(
            Problem(data.X, data.Z, data.y, data.v, first["loss"]),
            init,
            options,
            param=first["param"],
            lr=None if options.spec.name == "polyak" or options.spec.get("lr") is not None else _lrs(full),  # (R,)
            steps=steps,
        )
        seconds = (time.perf_counter() - start) / len(full)
        summaries = []
        for r, (p, raw, run_dir) in enumerate(zip(full, params, run_dirs)):
            frame = result.frame[result.frame["run"] == r].drop(columns="run").reset_index(drop=True)
            frame.insert(0, "seed", p["seed"])
            write_parquet(run_dir / "trajectory.parquet", frame)
            W = result.W[r].detach().numpy()  # (d, d)
            atomic_write(run_dir / "W.npy", lambda path, W=W: np.save(path, W))
            last = frame.iloc[-1]
            summary = {
                "final_loss": float(last["loss"]),
                "final_norm": float(last["norm"]),
                "status": result.status[r],
                "last_step": result.last_step[r],
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
