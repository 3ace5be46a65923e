"""Fig. 2's remark "NGD is much faster than GD" and the note on Assumption 1, shared by the flagship and the
implicit-bias figures. It lives outside the ``implicit_bias`` package, whose import registers its experiments, so
that importing the flagship registers the flagship only.

Spec: docs/theory/implicit-bias-ngd.md §9 fig. 2 (the paper's remark), §7 (Assumption 1, kappa n T <= 1 / C).
"""

from __future__ import annotations

import math

import pandas as pd

from attnlab.data import TokenSelectionData, near_orthogonal
from attnlab.verify import Check, observation

__all__ = ["ALIGNED", "LEVELS", "LOSS_LEVEL", "MUCH", "assumption1_note", "first_step", "much_faster_than_gd"]

ALIGNED = 0.99  # ours (the paper states no level): the remarks' level of alignment, corr(W_t, W_mm) >= 0.99
LOSS_LEVEL = 1e-6  # ours (the paper states no level): the remarks' level of the loss, L - L_* <= 1e-6 L_*
MUCH = 10.0  # ours: "much faster" read as an order of magnitude (steps to the level, or the last 1 - corr)
LEVELS = f"levels ours (the paper states none): corr >= {ALIGNED:g}, L - L_* <= {LOSS_LEVEL:g} L_*"


def first_step(rows: pd.DataFrame, reached: pd.Series) -> float:
    """The first recorded step of ``rows`` where ``reached`` holds, ``inf`` when it never does.

    Parameters
    ----------
    rows : pandas.DataFrame
        One run's records, with ``step``.
    reached : pandas.Series of bool
        Whether each record has reached the level.

    Returns
    -------
    float
        The step, or ``math.inf``.
    """
    hits = rows.loc[reached, "step"]
    return float(hits.min()) if len(hits) else math.inf


def much_faster_than_gd(
    ngd: pd.DataFrame,
    gd: pd.DataFrame,
    fig: str,
    source: str,
    record_every: int,
    result: str,
    uncapped: pd.DataFrame | None = None,
) -> Check:
    """Fig. 2's remark "NGD is much faster than GD" as an observation, by time to the level of alignment.

    Spec: implicit-bias-ngd §9 fig. 2 (the paper's remark; Theorem 6 gives GD no rate, so the ordering is the
    figure's, not a theorem's). Agrees when NGD reaches ``corr >= ALIGNED`` in at most ``1 / MUCH`` of GD's steps, or,
    when neither reaches it within the run, when NGD's last ``1 - corr`` is at least ``MUCH`` times below GD's.

    Parameters
    ----------
    ngd, gd : pandas.DataFrame
        One run each, with ``step`` and ``alignment``.
    fig : str
        ``"fig. 2"`` or ``"fig. 5"``: the figure the remark is about.
    source : str
        Our theory page and section.
    record_every : int
        Steps between recorded rows (the resolution of the time to the level).
    result : str
        The figure's id, ``"001:Fig2"`` or ``"001:Fig5"``.
    uncapped : pandas.DataFrame, optional
        Uncapped NGD's run when ``ngd`` is the figure's capped NGD: reported in the measured text, not judged.

    Returns
    -------
    Check
        The observation.
    """
    ngd, gd = ngd.sort_values("step"), gd.sort_values("step")
    aside = ""
    if uncapped is not None:
        rows = uncapped.sort_values("step")
        aside = f"; uncapped NGD {first_step(rows, rows['alignment'] >= ALIGNED):g} (not judged)"
    t_ngd, t_gd = (first_step(r, r["alignment"] >= ALIGNED) for r in (ngd, gd))
    gap_ngd, gap_gd = (1 - float(r["alignment"].iloc[-1]) for r in (ngd, gd))
    if math.isfinite(t_ngd):
        agrees = t_ngd * MUCH <= t_gd  # inf (GD never) counts as slower by any factor
    else:
        agrees = not math.isfinite(t_gd) and gap_ngd * MUCH <= gap_gd
    return observation(
        f"{fig}: NGD is much faster than GD (steps to corr(W_t, W_mm) >= {ALIGNED:g}; neither: the last 1 - corr)",
        "NGD much faster",
        f"NGD {t_ngd:g}, GD {t_gd:g} (last 1 - corr {gap_ngd:.3g}, {gap_gd:.3g}){aside}",
        agrees,
        source,
        tolerance=f"ours: 'much' = {MUCH:g}x: NGD's steps to corr {ALIGNED:g} at most 1/{MUCH:g} of GD's (first "
        f"recorded step, every {record_every}; inf = never within the run, counted as slower by any factor), or, if "
        f"neither gets there, NGD's last 1 - corr "
        f"{MUCH:g}x below GD's; {LEVELS}",
        result=result,
    )


def assumption1_note(data: TokenSelectionData, antipodal: bool = False) -> str:
    """The run's note on Assumption 1: ``kappa n T`` against its bound 1 (spec §7 A1; ``C = 1`` is ours).

    Parameters
    ----------
    data : TokenSelectionData
        The run's data set.
    antipodal : bool, default=False
        Also report ``kappa' n T`` (pairs of two optimal tokens left out): antipodal optimal tokens ``y_i rho u``
        have ``|<x_i,opt, x_j,opt>| = rho^2``, so ``kappa n T >= n T rho^2 / min ||x_it||^2``: A1 fails by
        construction (``>= n T`` when the optimal tokens are the shortest).

    Returns
    -------
    str
        ``kappa n T`` and whether the run is inside or outside A1.
    """
    a1 = near_orthogonal(data)  # spec §7: kappa n T <= 1 / C, C = 1
    text = f"Assumption 1 (kappa n T <= 1, C = 1 ours): kappa n T = {a1.measured:.3g}"
    if antipodal:
        text += f", kappa' n T (optimal-token pairs left out) = {near_orthogonal(data, exclude_opt_pairs=True).measured:.3g}"
    where = "inside A1" if a1.holds else "outside A1: the theorems' hypothesis is not met by this data set"
    return f"{text}: {where}"
