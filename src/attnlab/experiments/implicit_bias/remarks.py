"""The paper's remarks about Figs. 2 and 5 as observations, judged by the paper's own criterion (time to a stated
level), and the detector of a numerical stall that makes a curve say nothing.

Spec: docs/theory/implicit-bias-ngd.md §9 figs. 2, 5 ("Polyak converges faster than NGD across all metrics,
including the train loss"; "NGD with momentum results in a performance boost").
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from attnlab.experiments.implicit_bias.common import SOURCE
from attnlab.verify import Check, observation

__all__ = ["fixed_decoder_remarks", "stalled_from"]


def stalled_from(rows: pd.DataFrame, L_star: float, eta: float) -> int | None:
    """First recorded step from which a method is stalled by float64, or None.

    Stalled: ``|L - L_*|`` is within 4 rounding units of ``L_*`` from that step on, and ``||W_t||`` grows by less
    than 1% of the ``eta (t_end - t)`` that NGD's steps of length ``eta`` add over the same steps (a method that still
    moves, as NGD does with its direction carried in the log domain, is not stalled).
    """
    rows = rows.sort_values("step")
    at_floor = ((rows["loss"] - L_star).abs() <= 4 * np.finfo(np.float64).eps * L_star).to_numpy()
    steps, norms = rows["step"].to_numpy(), rows["norm"].to_numpy()
    for k in np.flatnonzero(at_floor):
        moved = norms[k:].max() - norms[k:].min()
        if at_floor[k:].all() and steps[-1] > steps[k] and moved <= 0.01 * eta * (steps[-1] - steps[k]):
            return int(steps[k])
    return None


def _first_step(rows: pd.DataFrame, reached: pd.Series) -> float:
    hits = rows.loc[reached, "step"]
    return float(hits.min()) if len(hits) else math.inf


def fixed_decoder_remarks(config, frame: pd.DataFrame, L_star: float) -> list[Check]:
    """The paper's three remarks about the figure, each judged by time to a stated level (first recorded step)."""
    fig = "fig. 5" if config.antipodal else "fig. 2"
    source = f"{SOURCE} §9 {fig} (the paper's remark)"
    rows = {m: g.sort_values("step") for m, g in frame.groupby("method")}
    to_align = {m: _first_step(g, g["alignment"] >= 0.99) for m, g in rows.items()}
    to_loss = {m: _first_step(g, g["loss"] - L_star <= 1e-6 * L_star) for m, g in rows.items()}
    final = {m: float(g["alignment"].iloc[-1]) for m, g in rows.items()}
    stall = stalled_from(rows["NGD-mom"], L_star, config.ngd_lr)
    stall_text = (
        f"; NGD-mom is stalled by float64 from step {stall} (loss at L_* to rounding, ||W_t|| flat): its curve "
        "after that step says nothing about momentum"
        if stall is not None
        else ""
    )
    every = f"first recorded step (every {config.record_every})"
    return [
        observation(
            f"{fig}: Polyak converges faster than NGD in direction (steps to corr(W_t, W_mm) >= 0.99)",
            "Polyak faster",
            f"Polyak {to_align['Polyak']:g}, NGD {to_align['NGD']:g} (last corr {final['Polyak']:.6g}, "
            f"{final['NGD']:.6g})",
            to_align["Polyak"] < to_align["NGD"],
            source,
            tolerance=f"time to corr 0.99, {every}; inf = never",
        ),
        observation(
            f"{fig}: Polyak converges faster than NGD in the train loss (steps to L - L_* <= 1e-6 L_*)",
            "Polyak faster",
            f"Polyak {to_loss['Polyak']:g}, NGD {to_loss['NGD']:g}",
            to_loss["Polyak"] < to_loss["NGD"],
            source,
            tolerance=f"time to L - L_* <= 1e-6 L_*, {every}; inf = never",
        ),
        observation(
            f"{fig}: NGD with momentum gives a boost over NGD (steps to corr >= 0.99, then corr at the last step)",
            "NGD-mom faster",
            f"NGD-mom {to_align['NGD-mom']:g} (last {final['NGD-mom']:.6g}), NGD {to_align['NGD']:g} "
            f"(last {final['NGD']:.6g}){stall_text}",
            (to_align["NGD-mom"], -final["NGD-mom"]) < (to_align["NGD"], -final["NGD"]),
            source,
            tolerance=f"time to corr 0.99, {every}, ties broken by the last corr; inf = never",
        ),
    ]
