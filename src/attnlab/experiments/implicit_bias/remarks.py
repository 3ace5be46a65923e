"""The paper's remarks about Figs. 2 and 5 as observations, judged by the paper's own criterion (time to a stated
level), and the detector of the step at which a capped method's cap binds for good (its curve then shows the cap).

Spec: docs/theory/implicit-bias-ngd.md §9 figs. 2, 5 ("Polyak converges faster than NGD across all metrics,
including the train loss"; "NGD with momentum results in a performance boost").
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from attnlab.experiments.implicit_bias.common import SOURCE
from attnlab.verify import Check, observation

__all__ = ["capped_from", "fixed_decoder_remarks"]


def capped_from(rows: pd.DataFrame, eta: float, cap: float | None) -> int | None:
    """First recorded step from which NGD's cap binds at every later recorded step, or None (no cap, or never).

    Spec: implicit-bias-ngd §4 A2/A4: the step size is ``min(eta / ||g||, cap)``, so once ``||grad L|| < eta / cap``
    the method is (heavy-ball) GD with step ``cap``, whose moves are ``cap ||grad L||``: ``e^{-||W||}`` small once the
    softmax saturates, so ``||W_t||`` stays flat. That is the cap's dynamics in exact arithmetic (the engine keeps
    the gradient and the momentum buffer in the log domain), not a float64 stall.
    """
    if cap is None or math.isinf(cap):
        return None
    rows = rows.sort_values("step")
    free = np.flatnonzero((rows["grad_norm"] >= eta / cap).to_numpy())  # recorded steps where the cap does not bind
    first = free[-1] + 1 if len(free) else 0  # every later recorded step binds
    return int(rows["step"].iloc[first]) if first < len(rows) else None


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
    capped = capped_from(rows["NGD-mom"], config.ngd_lr, config.mom_cap)
    stall_text = (
        f"; NGD-mom runs at its cap from step {capped} (||grad L|| < eta / cap = {config.ngd_lr / config.mom_cap:g}, "
        f"down to {float(rows['NGD-mom']['grad_norm'].min()):.1e}): heavy-ball GD with step {config.mom_cap:g} from "
        "there, whose moves shrink to cap ||grad L|| as the buffer decays, so ||W_t|| goes flat: the curve shows the "
        "cap, not momentum"
        if capped is not None
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
