"""Pieces every implicit-bias experiment shares: the source page, the configs' base and its checks, the small
initialisation, the least saturated sequence, the last value of a method. The paper's quantities (``L_*``, ``B``, ``Delta_max``, per-sequence margins) are
:mod:`attnlab.metrics`.

Spec: docs/theory/implicit-bias-ngd.md §8.4 (Lemma 1: ``log(1 - phi_opt)``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError, check_in, check_scalar
from attnlab.losses import LOSSES
from attnlab.metrics import Metric, log_one_minus_selected, selected_probabilities, sequence_margins

PAPER = "implicit-bias-ngd"
SOURCE = f"docs/theory/{PAPER}.md"  # what checks cite
NGD_RULE = "ngd"  # spec A2 (uncapped): the rule of the NGD path and of the NGD directions
GD_RULE = "gd"  # spec A1
# spec A3 uncapped, L_* the infimum: L - L_* from the margins, which float64's L loses below 2e-16 L (a stall)
POLYAK_RULE = "polyak:optimal_loss=infimum"
#: Figs. 2 and 5's NGD-mom in spec A4's alternative form, W - eta m / ||m|| (the buffer normalised), run beside the
#: default heavy ball: the paper's form of NGD-mom was lost, so its remark is read in both forms.
NORMED_MOM = "NGD-mom, m/||m||"


def validate_common(config) -> None:
    """Validate the fields every config of this paper shares (sizes, steps, seed, loss); ``T >= 2``: a sequence
    needs a token besides the optimal one (the data generators refuse fewer)."""
    lows = {"seed": 0, "T": 2}
    for name in ("n", "T", "d", "steps", "record_every", "seed"):
        if hasattr(config, name):
            check_scalar(name, getattr(config, name), kind=int, low=lows.get(name, 1))
    if hasattr(config, "loss"):
        check_in("loss", config.loss, LOSSES)


#: Beyond this many records a run holds plenty in every window its readings fit; :func:`check_windows` skips it.
MANY_RECORDS = 10_000


def recorded_steps(steps: int, every: int) -> np.ndarray:
    """The steps a run of ``steps`` steps recorded every ``every`` steps records: ``0, every, 2 every, ...`` and
    ``steps`` (the training loop's rule, :func:`attnlab.training.loop.run_loop`)."""
    return np.unique(np.r_[np.arange(0, steps + 1, every), steps])


def nearest_record(records: np.ndarray, t: float) -> int:
    """The record nearest ``t``, the earlier one on a tie (``argmin``, as the readings pick it)."""
    return int(records[int(np.abs(records - t).argmin())])


def check_windows(
    steps_name: str, steps: int, every_name: str, every: int, short: Callable[[np.ndarray, int], str | None]
) -> None:
    """Refuse a run too short for the windows its readings fit.

    ``short(records, steps)`` returns why the records (:func:`recorded_steps`) leave a reading's window too few
    points, or None when they suffice. A run of more than :data:`MANY_RECORDS` records is not checked.

    Raises
    ------
    ValidationError
        Naming ``steps_name``, its value, why, and the least step count that suffices at this ``every`` (ours).
    """
    if steps // every > MANY_RECORDS:
        return
    why = short(recorded_steps(steps, every), steps)
    if why is None:
        return
    candidates = (s for k in range(1, 1001) for s in (k * every, k * every + 1))  # a window's count peaks at these
    least = next((s for s in candidates if s > steps and short(recorded_steps(s, every), s) is None), None)
    fix = f"; the next that suffices at {every_name} == {every} is {steps_name} == {least}" if least else ""
    raise ValidationError(f"{steps_name} == {steps} with {every_name} == {every}: {why}{fix} (ours)")


@dataclass(frozen=True)
class ImplicitBiasConfig:
    """What every implicit-bias config has: ``n`` sequences and the checks of its fields.

    ``__post_init__`` runs :func:`validate_common` and checks the subclass's ``POSITIVE`` fields (floats > 0); a
    subclass with more to check extends it.

    Attributes
    ----------
    n : int
        Sequences.
    """

    n: int = 8

    POSITIVE: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        validate_common(self)
        for name in self.POSITIVE:
            check_scalar(name, getattr(self, name), low=0.0, low_inclusive=False)


@dataclass(frozen=True)
class Example1Config(ImplicitBiasConfig):
    """The Example 1 data set (spec §6.1) the fixed-decoder experiments train on; each adds its run's fields.

    Attributes
    ----------
    T : int
        Tokens per sequence (>= 2).
    d : int
        Token width (>= 2, as Example 1's generator needs).
    rho : float
        Signal: the optimal token's score ``gamma_opt``.
    sigma : float
        Noise scale of the tokens (variance ``sigma^2 / d`` per entry).
    """

    T: int = 6
    d: int = 64
    rho: float = 1.0
    sigma: float = 2.0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_scalar("d", self.d, kind=int, low=2)  # Example 1's generator needs a coordinate besides the head's


def small_init(d: int, scale: float, generator: torch.Generator) -> torch.Tensor:
    """``W_0`` with i.i.d. ``N(0, scale^2)`` entries, shape ``(d, d)``: the small initialisation of Lemma 4 (spec §7)."""
    return scale * torch.randn(d, d, generator=generator, dtype=torch.float64)


def violated_drops(data, W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Lemma 5's events along iterates ``W`` of shape ``(S, ..., d, d)`` (spec §8.5).

    Parameters
    ----------
    data : TokenSelectionData
        The sequences, their head and their optimal tokens (``select``).
    W : torch.Tensor, shape (S, ..., d, d)
        Iterates in order; any run axes between.

    Returns
    -------
    drops : torch.Tensor, shape (S - 1, ..., n)
        ``phi_opt,i(W_t) - phi_opt,i(W_t+1)`` where sample ``i`` violates the W-SVM at ``W_t`` (``min_t' <A_it',
        W_t> < 1``), ``-inf`` elsewhere.
    violated : torch.Tensor of bool, shape (S, ..., n)
        Whether sample ``i`` violates the W-SVM at ``W_t``.
    """
    phi = selected_probabilities(data.X, data.Z, W, data.select)
    violated = sequence_margins(data.X, data.Z, W, data.select) < 1  # spec §8.5: W-SVM constraints violated
    return torch.where(violated[:-1], phi[:-1] - phi[1:], -math.inf), violated  # a violated sample's fall


def worst_log_one_minus_opt() -> Metric:
    """``max_i log(1 - phi_{i,opt})``: the least saturated sequence (spec §8.4, Lemma 1)."""
    return Metric(
        "log_one_minus_opt",
        lambda state: log_one_minus_selected(state["X"], state["Z"], state["W"], state["select"]).amax(dim=-1),
    )


def last(frame: pd.DataFrame, method: str, column: str) -> float:
    """``column`` at the last recorded step of ``method``."""
    rows = frame[frame["method"] == method]
    return float(rows.sort_values("step")[column].iloc[-1])
