"""What the token-selection engine records on the runs axis.

Spec: implicit-bias-ngd §5 (alignment ``corr(W_t, W_ref)``), §9 fig. 2 (softmax on the selected tokens),
kq-nuclear-norm §4 (margin ``mu(W)``), mirror-descent-lp §3 (directional Bregman divergence).

Every recorded step gives one row per active run: ``run, step, loss, log_loss, grad_norm, norm`` and, when asked,
``opt_softmax`` and ``margin`` of the selected tokens, the alignment with any number of reference directions per
run (``alignment`` for one unnamed reference, ``alignment_<name>`` for named ones), their directional Bregman
divergences, and any metric (:class:`attnlab.metrics.Metric`, the one metric protocol: a function of the state).
Columns are gathered as arrays; the one loop turns them into one frame at the end. A metric may not fill a column
the recorder writes (or another metric's): refused when the recorder is built, or, for the columns of a metric that
returns a mapping, at its first record. The recorder computes its columns with the diagnostics' unchecked versions
(its tensors are typed where they entered) and checks what a metric returns: one value per run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from attnlab._validation import ValidationError
from attnlab.geometry import _directional_bregman, _matrix_norm
from attnlab.metrics import Metric, metric_columns
from attnlab.metrics.diagnostics import _attention_margin, _cosine, _selected_probability
from attnlab.metrics.protocol import refuse_taken

__all__ = ["Recorder"]


class Recorder:
    """What the engine records, and the iterates kept so far.

    Parameters
    ----------
    refs : mapping of str to torch.Tensor of shape (R, d, d), optional
        Reference directions per run; the key ``""`` names the column ``alignment``, others ``alignment_<key>``.
    select : torch.Tensor, shape (R, n), int64, optional
        Selected tokens: adds ``opt_softmax`` and ``margin``.
    bregman_p : float, optional
        Adds the directional Bregman divergence to each reference (``bregman`` / ``bregman_<key>``).
    metrics : mapping of str to Metric, optional
        Extra columns by name: each ``metric(state)`` gives one value per run (:class:`attnlab.metrics.Metric`).
    context : mapping of str to object, optional
        Constant entries of the metrics' state (e.g. ``"select"``, the tokens a metric reads by default).
    view : callable, optional
        ``view(state) -> state``: the front door's view of the engine's state for its metrics (``al.train``: the
        model's own shapes and the caller's data).
    keep_iterates : bool, default=False
        Keep ``W`` and the tensors at every recorded step.
    columns : mapping of str to sequence, optional
        Constant per-run columns added to every row (e.g. ``seed``), each of length R.

    Raises
    ------
    ValidationError
        When a metric is named as a column the recorder writes (``loss``, ``norm``, ``alignment``, ...).
    """

    def __init__(
        self,
        refs: Mapping[str, torch.Tensor] | None = None,
        select: torch.Tensor | None = None,
        bregman_p: float | None = None,
        metrics: Mapping[str, Metric] | None = None,
        keep_iterates: bool = False,
        columns: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        view: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.refs = dict(refs or {})
        # every reference in one (K, R, d, d) stack (a reference without the runs axis serves every run): one cosine
        # call per record, whatever the number of references
        runs_first = [r.reshape((-1,) + tuple(r.shape[-2:])) for r in self.refs.values()]
        self.stacked = torch.stack(torch.broadcast_tensors(*runs_first)) if self.refs else None
        self.select, self.bregman_p = select, bregman_p
        self.metrics = dict(metrics or {})
        self.context, self.view = {"select": select, **(context or {})}, view
        self.keep = keep_iterates
        self.columns = {k: np.asarray(v) for k, v in (columns or {}).items()}
        self.path: dict[str, list[torch.Tensor]] = {}
        self.own = self._own_columns()
        refuse_taken(self.metrics, self.own)
        self.filled: set[str] | None = None  # the metrics' columns, known at the first record

    def _own_columns(self) -> set[str]:
        """The columns the recorder itself writes."""
        own = {"run", "step", *self.columns, "loss", "log_loss", "grad_norm", "norm"}
        if self.select is not None:
            own.update(("opt_softmax", "margin"))
        for name in self.refs:
            suffix = f"_{name}" if name else ""
            own.update(["alignment" + suffix] + (["bregman" + suffix] if self.bregman_p is not None else []))
        return own

    def record(
        self,
        step: int,
        space: Any,
        gradient: Any,
        active: torch.Tensor,
        current: Mapping[str, torch.Tensor],
        rule_state: Any = None,
    ) -> dict[str, np.ndarray]:
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
        rule_state : object, optional
            The rule's state, for the metrics' state (``"rule_state"``).

        Returns
        -------
        dict of str to numpy.ndarray
            This step's columns, one entry per active run: ``run``, ``step``, the constant columns, the recorded ones.
        """
        W = current["W"] if "W" in current else space.W()
        X, Z, y, v, _ = space.problem
        log_norm = torch.log(space.norms(gradient.mantissas, None, 2.0)[0]) + gradient.log_scale
        cols: dict[str, torch.Tensor] = {
            "loss": gradient.log_risk.exp(),
            "log_loss": gradient.log_risk,
            "grad_norm": log_norm.exp(),
            "norm": _matrix_norm(W, "fro"),
        }
        if self.select is not None:
            cols["opt_softmax"] = _selected_probability(X, Z, W, self.select)  # spec ngd §9 fig. 2
            cols["margin"] = _attention_margin(X, Z, W, self.select)  # spec kq §4: mu(W)
        alignments = _cosine(W, self.stacked) if self.refs else None  # spec ngd §5: corr(W_t, W_ref), (K, R)
        for k, (name, ref) in enumerate(self.refs.items()):
            suffix = f"_{name}" if name else ""
            cols["alignment" + suffix] = alignments[k]
            if self.bregman_p is not None:
                cols["bregman" + suffix] = _directional_bregman(ref, W, float(self.bregman_p))  # spec md §3
        if self.metrics:
            head = v if v is not None else current.get("v")
            state = {**self.context, "W": W, **current, "X": X, "Z": Z, "y": y, "v": head, "rule_state": rule_state}
            values = metric_columns(self.metrics, state if self.view is None else self.view(state), self.own)
            if self.filled is None:  # the first record: a mapping's columns are known now
                self.filled = set(values)
            elif values.keys() != self.filled:
                raise ValidationError(
                    f"the metrics filled the columns {sorted(self.filled)} at the first record but {sorted(values)} "
                    f"at step {step}; a metric that returns a mapping must return the same keys at every record"
                )
            cols.update({name: _per_run(name, value, W.shape[0]) for name, value in values.items()})
        keep = active.cpu().numpy()
        runs = np.arange(W.shape[0])[keep]
        part = {"run": runs, "step": np.full(len(runs), step)}
        part.update({k: v[keep] for k, v in self.columns.items()})
        part.update({k: t.detach().cpu().numpy()[keep] for k, t in cols.items()})
        if self.keep:
            for k, t in {"W": W, **current}.items():
                self.path.setdefault(k, []).append(t.detach().clone())
            self.path.setdefault("step", []).append(torch.tensor(step))
        return part

    def iterates(self) -> dict[str, torch.Tensor] | None:
        """The iterates at every recorded step, when ``keep_iterates`` was set.

        Returns
        -------
        dict of str to torch.Tensor or None
            ``{"step": (S,), "W": (S, R, d, d), name: (S, R, ...)}`` for the S recorded steps and each tensor of the
            parametrisation; None when iterates were not kept or nothing was recorded.
        """
        return {k: torch.stack(v) for k, v in self.path.items()} if self.keep and self.path else None


def _per_run(name: str, value: Any, runs: int) -> torch.Tensor:
    """A metric's value as one value per run, shape (R,): a number (or a tensor of one entry) serves every run."""
    try:
        tensor = torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValidationError(
            f"metric column {name!r} returned a {type(value).__name__}, not numbers; a metric must return one value "
            f"per run (a number or a tensor of shape () or (R,) = ({runs},)), or a mapping of column names to such"
        ) from err
    if tensor.numel() == 1 or (tensor.numel() == runs and runs in tensor.shape):
        return tensor.reshape(-1).expand(runs)
    raise ValidationError(
        f"metric column {name!r} returned shape {tuple(tensor.shape)}; a metric must return one value per run "
        f"(shape () or (R,) = ({runs},)), not one per sequence or token: reduce it (e.g. .mean(dim=-1)), or return "
        "a mapping of column names to such values"
    )
