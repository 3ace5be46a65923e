"""Pieces every implicit-bias experiment shares: the paper's constants, ``L_*``, ``B``, per-sequence margins.

Spec: docs/theory/implicit-bias-ngd.md §1 (``B``, ``Delta_i``), §3 (``L_*``), §5 (``A_it``), §8 (the predictions).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from attnlab._validation import check_in, check_scalar
from attnlab.losses import LOSSES, mean_loss
from attnlab.metrics import Metric, log_one_minus_selected
from attnlab.models.functional import attention_logits, attention_probabilities, loss_gradients

PAPER = "implicit-bias-ngd"
SOURCE = f"docs/theory/{PAPER}.md"  # what checks cite


def validate_common(config) -> None:
    """Validate the fields every config of this paper shares (sizes, steps, seed, loss)."""
    for name in ("n", "T", "d", "steps", "record_every", "seed"):
        if hasattr(config, name):
            check_scalar(name, getattr(config, name), kind=int, low=0 if name == "seed" else 1)
    if hasattr(config, "loss"):
        check_in("loss", config.loss, LOSSES)


def optimal_loss(data, loss: str) -> float:
    """``L_* = (1/n) sum_i l(gamma_{i,opt_i})``: all attention on the optimal tokens (spec §3)."""
    gamma = data.token_scores().gather(1, data.select[:, None]).squeeze(1)
    return float(mean_loss(gamma, loss))  # spec §3: L_* = (1/n) sum l(gamma_opt)


def token_bound(X: torch.Tensor) -> float:
    """``B = max_{i,t} ||x_{i,t}||`` (spec §1)."""
    return float(torch.linalg.vector_norm(X, dim=-1).max())


def largest_gap(data) -> float:
    """``Delta_max = max_i (gamma_{i,opt_i} - max_{t != opt_i} gamma_{i,t})`` (spec §1)."""
    gamma = data.token_scores()
    opt = gamma.gather(1, data.select[:, None]).squeeze(1)
    return float((opt - gamma.scatter(1, data.select[:, None], -math.inf).amax(1)).max())  # spec §1: Delta_i


def worst_log_one_minus_opt() -> Metric:
    """``max_i log(1 - phi_{i,opt})``: the least saturated sequence (spec §8.4, Lemma 1)."""
    return Metric(
        "log_one_minus_opt",
        lambda model, data: log_one_minus_selected(data.X, data.Z, model.W, data.select).amax(dim=-1),
    )


def grad_direction(data, W: torch.Tensor, loss: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``-grad L / ||grad L||`` (exact after saturation), ``log ||grad L||`` and ``log L`` for a stack of ``W``."""
    grad, _, log_risk = loss_gradients(data.X, data.Z, data.y, data.v, W, loss)
    norm = torch.linalg.matrix_norm(grad.mantissa)
    return -grad.mantissa / norm[..., None, None], torch.log(norm) + grad.log_scale, log_risk


def opt_probabilities(data, W: torch.Tensor) -> torch.Tensor:
    """``phi_{i,opt}(W)``, shape ``([S,] n)``."""
    probs = attention_probabilities(data.X, W, data.Z)
    return probs.gather(-1, data.select.expand(probs.shape[:-1])[..., None]).squeeze(-1)


def sample_margins(data, W: torch.Tensor) -> torch.Tensor:
    """``min_{t != opt_i} <A_it, W>`` per sequence, shape ``([S,] n)`` (spec §5: ``A_it = (x_opt - x_t) x_1^T``)."""
    logits = attention_logits(data.X, W, data.Z)
    idx = data.select.expand(logits.shape[:-1])[..., None]
    gaps = logits.gather(-1, idx) - logits  # spec §5: (x_opt - x_t)^T W x_1
    return gaps.scatter(-1, idx, math.inf).amin(-1)


def last(frame: pd.DataFrame, method: str, column: str) -> float:
    """``column`` at the last recorded step of ``method``."""
    rows = frame[frame["method"] == method]
    return float(rows.sort_values("step")[column].iloc[-1])


def geometric_steps(steps: int, first: int = 1, per_decade: int = 8) -> np.ndarray:
    """About ``per_decade`` distinct steps per decade from ``first`` to ``steps``: the points of a rate-shape fit.

    A fit on uniformly recorded steps spends nine tenths of its points on the last decade; rate shapes
    (``log t`` against ``t^a``) need every decade weighted alike.
    """
    decades = math.log10(steps / first)
    grid = np.logspace(math.log10(first), math.log10(steps), max(2, round(per_decade * decades) + 1))
    return np.unique(np.round(grid).astype(int))


def at_steps(rows: pd.DataFrame, steps: np.ndarray) -> pd.DataFrame:
    """The rows of ``rows`` (one run, a ``step`` column) recorded nearest to each of ``steps``, once each."""
    recorded = np.sort(rows["step"].unique())
    nearest = np.unique(recorded[np.abs(recorded[None, :] - np.asarray(steps)[:, None]).argmin(axis=1)])
    return rows[rows["step"].isin(nearest)].sort_values("step")
