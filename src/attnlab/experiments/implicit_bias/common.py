"""Pieces every implicit-bias experiment shares: the source page, the configs' base and its checks, the small
initialisation, the least saturated sequence, the last value of a method. The paper's quantities (``L_*``, ``B``, ``Delta_max``, per-sequence margins) are
:mod:`attnlab.metrics`.

Spec: docs/theory/implicit-bias-ngd.md §8.4 (Lemma 1: ``log(1 - phi_opt)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pandas as pd
import torch

from attnlab._validation import check_in, check_scalar
from attnlab.losses import LOSSES
from attnlab.metrics import Metric, log_one_minus_selected

PAPER = "implicit-bias-ngd"
SOURCE = f"docs/theory/{PAPER}.md"  # what checks cite


def validate_common(config) -> None:
    """Validate the fields every config of this paper shares (sizes, steps, seed, loss)."""
    for name in ("n", "T", "d", "steps", "record_every", "seed"):
        if hasattr(config, name):
            check_scalar(name, getattr(config, name), kind=int, low=0 if name == "seed" else 1)
    if hasattr(config, "loss"):
        check_in("loss", config.loss, LOSSES)


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
        Tokens per sequence.
    d : int
        Token width.
    rho : float
        Signal: the optimal token's score ``gamma_opt``.
    sigma : float
        Noise scale of the tokens (variance ``sigma^2 / d`` per entry).
    """

    T: int = 6
    d: int = 64
    rho: float = 1.0
    sigma: float = 2.0


def small_init(d: int, scale: float, generator: torch.Generator) -> torch.Tensor:
    """``W_0`` with i.i.d. ``N(0, scale^2)`` entries, shape ``(d, d)``: the small initialisation of Lemma 4 (spec §7)."""
    return scale * torch.randn(d, d, generator=generator, dtype=torch.float64)


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
