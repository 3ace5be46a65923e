"""What the engine records on the runs axis, and the one tidy frame builder of the library.

Spec: implicit-bias-ngd §5 (alignment ``corr(W_t, W_ref)``), §9 fig. 2 (softmax on the selected tokens),
kq-nuclear-norm §4 (margin ``mu(W)``), mirror-descent-lp §3 (directional Bregman divergence).

Every recorded step gives one row per active run: ``run, step, loss, log_loss, grad_norm, norm`` and, when asked,
``opt_softmax`` and ``margin`` of the selected tokens, the alignment with any number of reference directions per
run (``alignment`` for one unnamed reference, ``alignment_<name>`` for named ones), their directional Bregman
divergences, and any metric given as a plain function of the state. Columns are gathered as arrays and turned into
one frame at the end (:func:`tidy_frame`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np
import pandas as pd
import torch

from attnlab.metrics import attention_margin, cosine, directional_bregman, matrix_norm, selected_probability
from attnlab.training.callbacks import tidy_frame

__all__ = ["Metric", "Recorder"]


class Metric(Protocol):
    """A metric of the engine: ``metric(state) -> torch.Tensor of shape (R,)``, one extra column of the frame.

    Any function of one positional argument is one (a ``lambda state: ...`` included); :class:`Recorder` calls it
    at every recorded step with the current ``state``:

    - ``"W"``: torch.Tensor, shape (R, d, d), the attention weights of every run;
    - the parametrisation's own tensors by name (shapes (R, ...)), e.g. ``"K"`` and ``"Q"``, or ``"v"`` when the
      head trains;
    - the data :class:`~attnlab.training.spaces.Problem`: ``"X"`` (R, n, T, d), ``"Z"`` (R, n, d), ``"y"`` (R, n)
      and ``"v"``, the head (the fixed one, else the trained one).

    It returns one value per run (shape (R,)), or one value for all runs, which the recorder repeats; the recorder
    writes the values of the runs still active.
    """

    def __call__(self, state: Mapping[str, torch.Tensor], /) -> torch.Tensor:
        """The metric's value per run at this step.

        Parameters
        ----------
        state : mapping of str to torch.Tensor
            The runs' current tensors and data (see the class docstring).

        Returns
        -------
        torch.Tensor, shape (R,) or ()
            One value per run, or one for all of them.
        """
        ...


class Recorder:
    """What to record, and the rows recorded so far.

    Parameters
    ----------
    refs : mapping of str to torch.Tensor of shape (R, d, d), optional
        Reference directions per run; the key ``""`` names the column ``alignment``, others ``alignment_<key>``.
    select : torch.Tensor, shape (R, n), int64, optional
        Selected tokens: adds ``opt_softmax`` and ``margin``.
    bregman_p : float, optional
        Adds the directional Bregman divergence to each reference (``bregman`` / ``bregman_<key>``).
    metrics : mapping of str to Metric, optional
        Extra columns by name: each ``fn(state)`` gives one value per run (see :class:`Metric`).
    keep_iterates : bool, default=False
        Keep ``W`` and the tensors at every recorded step.
    columns : mapping of str to sequence, optional
        Constant per-run columns added to every row (e.g. ``seed``), each of length R.
    """

    def __init__(
        self,
        refs: Mapping[str, torch.Tensor] | None = None,
        select: torch.Tensor | None = None,
        bregman_p: float | None = None,
        metrics: Mapping[str, Metric] | None = None,
        keep_iterates: bool = False,
        columns: Mapping[str, Any] | None = None,
    ) -> None:
        self.refs = dict(refs or {})
        # every reference in one (K, R, d, d) stack (a reference without the runs axis serves every run): one cosine
        # call per record, whatever the number of references
        runs_first = [r.reshape((-1,) + tuple(r.shape[-2:])) for r in self.refs.values()]
        self.stacked = torch.stack(torch.broadcast_tensors(*runs_first)) if self.refs else None
        self.select, self.bregman_p = select, bregman_p
        self.metrics = dict(metrics or {})
        self.keep = keep_iterates
        self.columns = {k: np.asarray(v) for k, v in (columns or {}).items()}
        self.parts: list[dict[str, np.ndarray]] = []
        self.path: dict[str, list[torch.Tensor]] = {}

    def record(
        self, step: int, space: Any, gradient: Any, active: torch.Tensor, current: Mapping[str, torch.Tensor]
    ) -> Callable[[], pd.DataFrame]:
        """Record the active runs at ``step``.

        Parameters
        ----------
        step : int
            The step number written in the ``step`` column.
        space : ParamSpace or KernelSpace
            Where the runs' parameters live (:mod:`attnlab.training.spaces`); gives ``W``, the data and the norms.
        gradient : Gradient
            The gradient at this step; gives ``loss``, ``log_loss`` and ``grad_norm``.
        active : torch.Tensor, shape (R,), bool
            The runs that get a row.
        current : mapping of str to torch.Tensor
            The parametrisation's current tensors (shapes (R, ...)); its ``"W"``, when present, saves a recombination.

        Returns
        -------
        callable
            Takes no argument and builds this step's rows as a tidy :class:`pandas.DataFrame` (one row per active
            run), for callbacks that read the step's values.
        """
        W = current["W"] if "W" in current else space.W()
        X, Z, y, v, _ = space.problem
        log_norm = torch.log(space.norms(gradient.mantissas, None, 2.0)[0]) + gradient.log_scale
        cols: dict[str, torch.Tensor] = {
            "loss": gradient.log_risk.exp(),
            "log_loss": gradient.log_risk,
            "grad_norm": log_norm.exp(),
            "norm": matrix_norm(W, "fro"),
        }
        if self.select is not None:
            cols["opt_softmax"] = selected_probability(X, Z, W, self.select)  # spec ngd §9 fig. 2
            cols["margin"] = attention_margin(X, Z, W, self.select)  # spec kq §4: mu(W)
        alignments = cosine(W, self.stacked) if self.refs else None  # spec ngd §5: corr(W_t, W_ref), (K, R)
        for k, (name, ref) in enumerate(self.refs.items()):
            suffix = f"_{name}" if name else ""
            cols["alignment" + suffix] = alignments[k]
            if self.bregman_p is not None:
                cols["bregman" + suffix] = directional_bregman(ref, W, float(self.bregman_p))  # spec md §3
        if self.metrics:
            state = {"W": W, **current, "X": X, "Z": Z, "y": y, "v": v if v is not None else current.get("v")}
            for name, fn in self.metrics.items():
                cols[name] = torch.as_tensor(fn(state)).reshape(-1).expand(W.shape[0])
        keep = active.cpu().numpy()
        runs = np.arange(W.shape[0])[keep]
        part = {"run": runs, "step": np.full(len(runs), step)}
        part.update({k: v[keep] for k, v in self.columns.items()})
        part.update({k: t.detach().cpu().numpy()[keep] for k, t in cols.items()})
        self.parts.append(part)
        if self.keep:
            for k, t in {"W": W, **current}.items():
                self.path.setdefault(k, []).append(t.detach().clone())
            self.path.setdefault("step", []).append(torch.tensor(step))
        return lambda: tidy_frame(part)

    def frame(self) -> pd.DataFrame | None:
        """Every row recorded so far, as one frame.

        Returns
        -------
        pandas.DataFrame or None
            One row per (recorded step, active run), in recording order; None when nothing was recorded.
        """
        if not self.parts:
            return None
        return tidy_frame({k: np.concatenate([p[k] for p in self.parts]) for k in self.parts[0]})

    def iterates(self) -> dict[str, torch.Tensor] | None:
        """The iterates at every recorded step, when ``keep_iterates`` was set.

        Returns
        -------
        dict of str to torch.Tensor or None
            ``{"step": (S,), "W": (S, R, d, d), name: (S, R, ...)}`` for the S recorded steps and each tensor of the
            parametrisation; None when iterates were not kept or nothing was recorded.
        """
        return {k: torch.stack(v) for k, v in self.path.items()} if self.keep and self.path else None
