"""A training callback that follows chosen heads of a real model: norm, SVM alignment, softmax mass.

Spec: implicit-bias-ngd §5 (``corr(W_t, W_mm)``, the alignment with the attention SVM) and §9 fig. 2 (softmax
probability of the selected tokens), measured on a trained head's own tokens.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pandas as pd
import torch
from torch import nn

from attnlab._validation import ValidationError, check_scalar
from attnlab.data.dataset import TokenSelectionData
from attnlab.metrics import cosine, selected_probability
from attnlab.probe.adapters import adapter_for
from attnlab.probe.capture import _attended_tokens, capture_from_tokens, head_mask, module_calls
from attnlab.probe.head import head_W, resolve_homogeneous, weight_part
from attnlab.svm import InfeasibleProgramError, attention_svm
from attnlab.training.callbacks import Callback, Record

__all__ = ["HeadProbe"]


def _head_list(heads: object) -> tuple[int, ...]:
    """``heads`` as a non-empty tuple of Python ints (the range is checked per module by ``head_W``)."""
    try:
        chosen = None if isinstance(heads, (str, bytes, Mapping)) else tuple(heads)
    except TypeError:  # an int, a 0-d tensor
        chosen = None
    if not chosen:
        raise ValidationError(
            f"heads == {heads!r}, must be a non-empty sequence of head indices, e.g. heads=(0, 1); for one head h "
            "pass heads=(h,)"
        )
    return tuple(check_scalar("heads", head, kind=int) for head in chosen)


def _frobenius_svm(data):
    """The Frobenius attention SVM by its exact NNLS dual (about 40x faster than cvxpy on a 32-image probe), or by
    the primal program when the constraints are linearly dependent (e.g. one query shared by every sequence)."""
    try:
        return attention_svm(data, "fro", method="dual")
    except ValidationError as err:
        if "linearly independent" not in str(err):
            raise
    return attention_svm(data, "fro")


class HeadProbe(Callback):
    """Record, for chosen heads, ``||W||``, the alignment of ``W`` with its SVM and the mass on selected tokens.

    Spec: implicit-bias-ngd §5 (alignment ``corr(W, W_mm)``), §9 fig. 2 (softmax on the selected tokens).

    Works with any loop that calls the shared callbacks (:func:`attnlab.nets.fit_classifier` records
    once per epoch) and with a hand-written loop that calls :meth:`on_step` after each optimizer step, whatever
    the optimizer. At each probe it runs ``model`` once on the fixed ``inputs`` (in eval mode, restored after),
    takes each head's tokens and ``W`` (:func:`~attnlab.probe.head_W`), selects the token each query attends to
    most (or the fixed ``select``), solves the Frobenius attention SVM of that selection on those tokens, and
    records one row per head.

    Parameters
    ----------
    model : nn.Module
    modules : mapping of str to nn.Module
        Named attention modules inside ``model`` (e.g. ``{"block0": model.encoder.blocks[0].attn}``).
    inputs : tensor, tuple or mapping
        The fixed probe batch ``model`` is called with.
    heads : sequence of int, default=(0,)
        Heads probed in every module, each in ``[0, heads - 1]`` of every module (a non-empty sequence: one head
        ``h`` is ``(h,)``).
    query : int, default=0
        Position of the query token (0: the class token), among the tokens entering the modules.
    keys : slice or sequence of int, optional
        Key positions (default all; see :func:`~attnlab.probe.capture`).
    select : "attended" or array-like of int, shape (n,), default="attended"
        The selection whose SVM ``W`` is compared with: the head's most-attended token at each probe, or fixed
        positions among ``keys``, one per sequence of ``inputs``.
    every : int, optional
        Also probe every ``every`` optimizer steps (through :meth:`on_step`); default: only at records.

    Attributes
    ----------
    rows : list of dict
        One per probed head and step: ``step``, ``module``, ``head``, ``norm`` (``||W||_F``), ``alignment``
        (cosine of ``W``'s weight part with the SVM solution; NaN when the selection is not separable),
        ``selected_mass`` (mean softmax probability of the selected tokens), ``svm_status``.
    frame : pandas.DataFrame
        ``rows`` as a tidy table.

    Raises
    ------
    ValidationError
        At construction, not mid-run: on bad ``modules``, ``heads`` (not a non-empty sequence of ints, or a head
        out of range), ``select`` or ``every``; and, from one run of ``model`` on ``inputs`` (as a probe runs it:
        eval mode, no random draws), on a ``query`` or ``keys`` out of range of the tokens entering the modules, a
        ``select`` without one position per sequence or out of range, or a mask the probe cannot read. Build the
        probe once ``model`` and ``inputs`` are ready to run together (same device and dtype).
    TypeError
        When a module's type has no adapter.
    """

    def __init__(
        self,
        model: nn.Module,
        modules: Mapping[str, nn.Module],
        inputs: Any,
        *,
        heads: Sequence[int] = (0,),
        query: int = 0,
        keys: slice | Sequence[int] | None = None,
        select: object = "attended",
        every: int | None = None,
    ) -> None:
        if not isinstance(modules, Mapping) or not modules:
            raise ValidationError(
                f"modules must be a non-empty mapping name -> attention module, got {type(modules).__name__}; "
                f"e.g. {{'block0': model.encoder.blocks[0].attn}}"
            )
        if every is not None:
            check_scalar("every", every, kind=int, low=1)
        if isinstance(select, str) and select != "attended":
            raise ValidationError(f'select == {select!r}, must be "attended" or an array of n token positions')
        self.model, self.modules, self.inputs = model, dict(modules), inputs
        self.heads, self.query, self.keys, self.select, self.every = _head_list(heads), query, keys, select, every
        self.homogeneous = {name: resolve_homogeneous(m, None) for name, m in self.modules.items()}
        for module in self.modules.values():
            for head in self.heads:
                head_W(module, head)  # refuses an unknown module type or a head out of range now, not mid-run
        for _, _, _, data in self._problems():  # query, keys, select and masks against the probe batch's tokens
            if not isinstance(select, str):
                data.with_(select=select)
        self.rows: list[dict[str, Any]] = []

    @property
    def frame(self) -> pd.DataFrame:
        """The recorded rows as a DataFrame (columns as in :attr:`rows`)."""
        columns = ["step", "module", "head", "norm", "alignment", "selected_mass", "svm_status"]
        return pd.DataFrame(self.rows, columns=columns)

    def on_record(self, record: Record) -> None:
        self.probe(record.step)

    def on_step(self, step: int) -> None:
        if self.every is not None and step % self.every == 0:
            self.probe(step)

    def probe(self, step: int) -> list[dict[str, Any]]:
        """Probe every chosen head now and record its rows under ``step`` (once per step).

        Parameters
        ----------
        step : int
            The training step (epoch) the rows are recorded under.

        Returns
        -------
        list of dict
            The new rows, one per (module, head): alignments to the SVMs and the attended selection; empty when
            ``step`` was probed already.
        """
        if self.rows and self.rows[-1]["step"] == step:
            return []
        rows = []
        for name, module, head, data in self._problems():
            homogeneous = self.homogeneous[name]
            W = head_W(module, head, homogeneous=homogeneous)
            select = _attended_tokens(data.X, data.Z, W) if isinstance(self.select, str) else self.select
            rows.append(
                {"step": step, "module": name, "head": head, **self._measure(data.with_(select=select), W, homogeneous)}
            )
        self.rows += rows
        return rows

    def _problems(self) -> Iterator[tuple[str, nn.Module, int, TokenSelectionData]]:
        """Per probed (module, head): name, module, head and its tokens (no selection), from one run of ``model`` on
        the probe batch in eval mode (the mode restored after)."""
        was_training = self.model.training
        self.model.eval()
        try:
            calls = module_calls(self.model, list(self.modules.values()), self.inputs)
        finally:
            self.model.train(was_training)
        for (name, module), ((queries, keys), mask) in zip(self.modules.items(), calls):
            heads = adapter_for(module).heads(module)
            for head in self.heads:
                data = capture_from_tokens(
                    queries,
                    keys,
                    query=self.query,
                    keys=self.keys,
                    homogeneous=self.homogeneous[name],
                    mask=head_mask(mask, head, heads),  # the keys this head lets the query see
                )
                yield name, module, head, data

    @staticmethod
    def _measure(data, W: torch.Tensor, homogeneous: bool) -> dict[str, Any]:
        mass = float(selected_probability(data.X, data.Z, W, data.select))  # spec ngd §9 fig. 2
        try:
            solution = _frobenius_svm(data)
        except InfeasibleProgramError:
            return {"norm": float(W.norm()), "alignment": math.nan, "selected_mass": mass, "svm_status": "infeasible"}
        alignment = float(cosine(weight_part(W, homogeneous), solution.W))  # spec ngd §5: corr(W, W_mm)
        return {"norm": float(W.norm()), "alignment": alignment, "selected_mass": mass, "svm_status": solution.status}
