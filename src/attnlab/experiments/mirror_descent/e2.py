"""E2: normalised l_p-AttGD from W_0 = 0 on one data set; the path of two entries against the l_p-AttSVM ray.

Spec: docs/theory/mirror-descent-lp.md §9 E2 (seed 1, ``--std 0``, ``ps``, ``epochs``, ``lr`` and the arrow
iterations, four per p in the order of ``ps``), §8.2-8.3 (local directional convergence; no rate is known).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError
from attnlab.data import stack, unit_gaussian
from attnlab.experiments.mirror_descent.common import (
    NORMALISED,
    RELABELLED,
    RESIZED,
    SOURCE,
    check_config,
    hypothesis_share,
    md_path,
    neighbours,
    selected,
    still_decreasing,
    tidy,
)
from attnlab.experiments.mirror_descent.falsifiers import EXPONENT_OFF, EXPONENT_SHIFT
from attnlab.experiments.registry import register
from attnlab.metrics import directional_bregman, entrywise_norm
from attnlab.plotting import house_figure, label_axes, label_ours, new_figure, theory_line
from attnlab.svm import SelectionSVMs
from attnlab.verify import Claim, Experiment, ExperimentResult, Reading, Revision, RunContext, old_sizes, pinned

__all__ = ["E2Config", "run_e2"]

ENTRIES = ((1, 2), (3, 4))  # spec §9 E2: the plotted entries W_{1,2}, W_{3,4} (0-based)


@dataclass(frozen=True)
class E2Config:
    """E2: normalised l_p-AttGD from ``W_0 = 0`` on one data set; the path of ``(W_{1,2}, W_{3,4})`` and the SVM ray.

    Spec: mirror-descent-lp §9 E2. Ours: ``record_every``. ``bregman_tol`` is kept for old command lines and no
    longer used: the check is that dB_p still decreases (no rate is known, so no absolute level is predicted).

    Attributes
    ----------
    n : int
        Sequences of the data set.
    T : int
        Tokens per sequence (>= 2).
    d : int
        Token dimension (>= 5, to hold the plotted entries).
    ps : tuple of float
        Mirror-map exponents p > 1.
    epochs : tuple of int
        Steps per p; the official scripts' are 1500, 2000, 20000 (ours: 80000 for p = 3, a path lr x steps of
        8000, where the path is nearer the l_3-AttSVM than the l_2.9 and l_3.1 ones; at 20000 it is not).
    lr : float
        Step size of normalised l_p-AttGD.
    arrows : tuple of int
        Iterations marked with an arrow in the figure, four per p in the order of ``ps``: the four of a p distinct,
        each from 0 to that p's ``epochs``.
    record_every : int
        Steps between recorded iterates (ours).
    bregman_tol : float
        Unused; kept so that old command lines still parse (ours).
    loss : str
        Loss of the risk; the official code's is logistic.
    seed : int
        Seed of the data set.
    """

    n: int = 6
    T: int = 8
    d: int = 10
    ps: tuple[float, ...] = (1.75, 2.0, 3.0)
    epochs: tuple[int, ...] = (1500, 2000, 80000)
    lr: float = 0.1
    arrows: tuple[int, ...] = (140, 225, 310, 425, 300, 500, 700, 900, 1500, 4000, 8000, 13000)
    record_every: int = 5
    bregman_tol: float = 0.05
    loss: str = "logistic"
    seed: int = 1

    OURS = ("record_every", "bregman_tol")

    def __post_init__(self) -> None:
        check_config(self, ("n", "T", "d", "record_every", "seed"), ("lr", "bregman_tol"))
        if self.d < 5:
            raise ValidationError(f"d == {self.d}, must be >= 5 to hold the plotted entries W[1, 2] and W[3, 4]")
        per_p = [self.arrows[4 * k : 4 * k + 4] for k in range(len(self.ps))]
        if len(self.arrows) != 4 * len(self.ps) or any(max(a) > e for a, e in zip(per_p, self.epochs)):
            raise ValidationError(
                f"arrows must hold 4 iterations per p, each <= its epochs {self.epochs}, got {self.arrows}"
            )
        for p, marks in zip(self.ps, per_p):
            if min(marks) < 0 or len(set(marks)) < len(marks):
                raise ValidationError(
                    f"arrows == {self.arrows}: the iterations of p = {p:g}, {marks}, must be >= 0 and distinct (4 "
                    "different steps per p, in the order of ps)"
                )


_SIZES = ("n", "T", "d", "ps", "epochs", "lr", "record_every", "loss", "seed")
# every config field's full and quick value before 2026-11-28, when p = 3 grew from 20000 steps of lr 0.1 (quick 400
# of lr 1) to 80000 (quick 10000), so that closest-own-svm's comparison with the SVMs of p +- 0.1 resolves at p = 3
_OLD = old_sizes(
    {"n": 6, "T": 8, "d": 10, "ps": (1.75, 2.0, 3.0), "record_every": 5, "bregman_tol": 0.05, "loss": "logistic",
     "seed": 1},
    epochs=((1500, 2000, 20000), (200, 200, 400)), lr=(0.1, 1.0),
    arrows=((140, 225, 310, 425, 300, 500, 700, 900, 1500, 4000, 8000, 13000),
            (20, 40, 60, 80, 20, 40, 60, 80, 50, 100, 200, 300)),
)  # fmt: skip
HYPOTHESIS = Claim(
    "p={p:g}: the directional convergence's hypothesis holds on the data set (its final selection is locally "
    "optimal, Def. 3), so the path row tests the theorem",
    "002:Def3",  # the hypothesis (Definition 3) of the directional convergence, not a check of Lemma 28
    f"{SOURCE} §5 Def. 3, §8.2",
    kind="property",
    id="hypothesis-def3",
).resized(
    _OLD,
    RESIZED,
    "the p = 3 path grew from 20000 steps of lr 0.1 (quick 400 of lr 1) to 80000 (quick 10000), so that "
    "closest-own-svm's comparison with the SVMs of p +- 0.1 (its revision 2) resolves at p = 3; this property is "
    "unchanged",
    "pass: locally optimal for p = 1.75 / 2 / 3 (9393c7d)",
    "pass: locally optimal for p = 1.75 / 2 / 3 (9393c7d)",
    reading=Reading(
        "whether the final selection of the one data set is locally optimal (Def. 3) for p, and its path finite",
        "the last recorded step K",
        "the one data set of the config's seed",
        "locally optimal and not diverged (exact)",
        sizes=_SIZES,
    ),
)
_CLOSEST_READING = dict(
    statistic="dB_p(W^mm_q, W_K) for every q of ps, W^mm_q the l_q-AttSVM of the final selection; the row's margin "
    "is the smallest dB_p to another q's SVM minus dB_p to p's own",
    window="the last recorded step K of normalised l_p-AttGD from W_0 = 0",
    tolerance="q = p strictly smallest (one data set, deterministic: no spread)",
    sizes=_SIZES,
)
_ONE = (
    "the one data set of the config's seed; whether its final selection is locally optimal (Def. 3, the theorem's "
    "hypothesis) is the property row above, not a filter of this row"
)
_OLD_CLOSEST = (
    "p={p:g}: at the last step the path is closer in dB_p to the l_p-AttSVM of its final selection than to the "
    "l_q-AttSVM of every other q of ps ({share})"
)
_CLOSEST_NOW = Reading(
    statistic="dB_p(W^mm_q, W_K) for every comparison exponent q, W^mm_q the l_q-AttSVM of the final "
    "selection: every q != p of ps and q = p +- delta (SVM exponents, in the parametrisation of the grid of ps "
    "and of the mirror map's p); the row's margin is the smallest dB_p to a comparison SVM minus dB_p to p's own",
    window="the last recorded step K of normalised l_p-AttGD from W_0 = 0",
    subset=_ONE,
    tolerance="> 0 strictly: p's own SVM the nearest (one data set, deterministic: no spread). delta = 0.1 is "
    "ours: the reading resolves a mirror exponent off by delta. At p = 3 the path turns slowly: it is nearer "
    "l_3's SVM than l_3.1's only once its path length lr x steps passes 2000 to 4000 (-3.3e-5 at 20000 steps of lr "
    "0.1, +3.7e-5 at 40000, +5.9e-5 at 80000), hence p = 3's 80000 steps (quick 10000 of lr 1)",
    params={"delta": 0.1},
    sizes=_SIZES,
)
_OLD_CLOSEST_3 = (
    "p={p:g}: at the last step the path is closer in dB_p to the l_p-AttSVM of its final selection than to the "
    "l_q-AttSVM of every other q of ps and of q = p +- delta ({share})"
)
CLOSEST = Claim(
    _OLD_CLOSEST_3 + NORMALISED,
    "002:Ext-DirConv",  # the main text's directional convergence (its E2 figure): not a numbered result of the seed
    f"{SOURCE} §8.2, §9 E2",
    (EXPONENT_SHIFT.name, EXPONENT_OFF.name),
    id="closest-own-svm",
    reading=_CLOSEST_NOW,
    revisions=pinned(
        (
            Revision(
                reading=Reading(
                    subset="the one data set of the config's seed, when its final selection is locally optimal "
                    "(Def. 3); otherwise the row fails as untestable",
                    **_CLOSEST_READING,
                ),
                claim="p={p:g}: at the last step the path is closer in dB_p to the l_p-AttSVM than to the l_q-AttSVM "
                "of every other q of ps ({share})",
                date="2026-11-28",
                why="the hypothesis filter read the run's own final selection, so a wrong mechanism of the algorithm "
                "could fail the row by moving the selection (untestable) instead of by its numbers; the hypothesis "
                "is its own property row. The claim's result moved from 002:Lem28 (cone invariance in the seed's "
                "numbering) to the main text's directional convergence, so the lock keeps the old claim as "
                "mirror-descent.e2/closest, retired",
                quick="pass: q = p smallest for p = 1.75 / 2 / 3 (0.00484, 0.0031, 0.0238); recomputed by every run",
                full="pass: q = p smallest for p = 1.75 / 2 / 3 (0.00473, 0.00306, 0.00520); recomputed by every "
                "full run",
            ),
            Revision(
                reading=Reading(subset=_ONE, **_CLOSEST_READING),
                claim=_OLD_CLOSEST,
                date="2026-11-28",
                why="too weak to fail: compared only with the grid's SVMs (q 0.25 or more away from p), it passed "
                "with the mirror map's exponent off by 0.1 while the SVMs kept p, for every p at both sizes (margins "
                "0.0013 / 0.015 / 0.061 for p + 0.1 and 0.018 / 0.0023 / 0.048 for p - 0.1 at the full size, "
                "against the true 0.0089 / 0.0090 / 0.055). The SVMs of p +- 0.1 lie 3e-5 to 2e-3 from p's in dB_p "
                "and separate them, so each row now compares with them too (p + 0.1 is now the falsifier "
                "'mirror-exponent-off-0.1'); at p = 3 only once the path is long enough, so p = 3 grew from 20000 "
                "steps of lr 0.1 to 80000 (quick: 400 of lr 1 to 10000), where the old sizes left the path nearer "
                "l_3.1's SVM (by 3.3e-5 full, 3.0e-4 quick)",
                quick="pass: margins 0.0090 / 0.0090 / 0.055 (p = 1.75 / 2 / 3) (9393c7d); recomputed by every run",
                full="pass: margins 0.0089 / 0.0090 / 0.055 (9393c7d); recomputed by every full run",
            ),
        ),
        _OLD,
    )
    + (
        Revision(
            reading=_CLOSEST_NOW,
            claim=_OLD_CLOSEST_3,
            date="2026-11-29",
            why=RELABELLED,
            quick="pass: margins 1.3e-3 / 9.7e-4 / 6.1e-5 (p = 1.75 / 2 / 3); the current row computes the same numbers",
            full="pass: margins 1.4e-3 / 9.6e-4 / 5.9e-5; the current row computes the same numbers",
        ),
    ),
)


def run_e2(config: E2Config, ctx: RunContext) -> ExperimentResult:
    """E2: one path per p, the l_p-AttSVM of the final selection, and the directional divergence along the path."""
    data = unit_gaussian(config.n, config.T, config.d, seed=config.seed)
    batch = stack([data])
    W0 = torch.zeros(1, config.d, config.d, dtype=torch.float64)  # spec §9 E2: --std 0
    frames, rays, checks, programs = [], {}, [], {}
    for p, epochs in zip(config.ps, config.epochs):
        steps, path, diverged = md_path(batch, W0, p, config.lr, True, epochs, config.record_every, config.loss, ctx)
        select = selected(batch, path[-1])
        # the SVMs of one final selection are solved once over the p's; another selection gets its own programs
        key = tuple(select.flatten().tolist())
        if key not in programs:
            programs[key] = SelectionSVMs([data])
        svms = programs[key]
        local = svms.locally_optimal(select, p)  # spec §5 Def. 3: the hypothesis of §8.2
        W_mm = svms.directions(select, p)  # (1, d, d)
        dB = directional_bregman(W_mm, path[1:], p)  # spec §3; W_0 = 0 has no direction
        columns = {f"w_{i}{j}": path[:, :, i, j] for i, j in ENTRIES}
        columns["bregman"] = torch.cat([torch.full((1, 1), math.nan, dtype=torch.float64), dB])
        columns["norm_p"] = entrywise_norm(path, p)
        frames.append(tidy(columns, steps, p=p))
        rays[p] = (W_mm[0] / entrywise_norm(W_mm[0], p)).numpy()  # unit l_p direction of W^mm_p
        share = hypothesis_share(local) + (" and diverged" if diverged else "")
        checks.append(HYPOTHESIS.format(p=p).holds("locally optimal", share, "Def. 3", bool(local[0]) and not diverged))
        qs = (*config.ps, *neighbours(p, CLOSEST.param("delta")))
        gaps = {
            f"q={q:g}": float(directional_bregman(svms.directions(select, q), path[-1], p)[0]) for q in qs
        }  # spec §3, §5: dB_p(W^mm_q, W_K) for every q of the grid and p +- delta
        checks.extend(_closest_rows(p, share, gaps, bool(local[0]), len(config.ps)))
        checks.append(
            still_decreasing(
                f"p={p:g}: the path turns toward the l_p-AttSVM ray, dB_p(W^mm_p, W_k) still decreasing at K/4, K/2, K "
                "(the paper's E2 fig.)",
                steps[1:],
                dB[:, 0].numpy(),
                f"{SOURCE} §9 E2",
                result="002:Fig-E2",
            )
        )
    frame = pd.concat(frames, ignore_index=True)
    ray_table = pd.DataFrame(
        [{"p": p, **{f"w_{i}{j}": float(ray[i, j]) for i, j in ENTRIES}} for p, ray in rays.items()]
    )
    return ExperimentResult(
        frame=frame, checks=checks, figures={"e2": _e2_figure(config, frame, ray_table)}, tables={"svm_rays": ray_table}
    )


def _closest_rows(p: float, share: str, gaps: dict[str, float], local: bool, grid: int) -> list:
    """closest-own-svm (against the grid and the neighbours p +- delta) and its revisions 1 and 2 (the grid only,
    the first ``grid`` entries of ``gaps``; revision 1 only where the hypothesis holds)."""
    own, rows = gaps[f"q={p:g}"], []
    for claim, names in ((CLOSEST, list(gaps)), (CLOSEST.revised(2), list(gaps)[:grid])):
        others = {k: gaps[k] for k in names if k != f"q={p:g}"}
        margin = min(others.values(), default=float("inf")) - own
        measured = f"q={p:g} {own:.4g}, " + ", ".join(f"{k} {v:.4g} ({v - own:+.2g})" for k, v in others.items())
        strict = "strict: one data set, deterministic"
        rows.append(
            claim.format(p=p, share=share).holds(f"q={p:g} smallest", measured, strict, margin > 0, margin=margin)
        )
        if claim is not CLOSEST:  # revision 1: the grid only where the hypothesis holds
            reason = strict if local else "untestable: the hypothesis fails here"
            filtered = CLOSEST.revised(1).format(p=p, share=share)
            rows.append(filtered.holds(f"q={p:g} smallest", measured, reason, local and margin > 0))
    return rows


@house_figure
def _e2_figure(config: E2Config, frame: pd.DataFrame, rays: pd.DataFrame):
    (a, b), (c, e) = ENTRIES
    x, y = f"w_{a}{b}", f"w_{c}{e}"
    fig, axes = new_figure(len(config.ps), width=3.4, height=3.2)
    for k, (ax, p) in enumerate(zip(axes, config.ps)):
        rows = frame[frame["p"] == p].set_index("step")
        ax.plot(rows[x], rows[y], lw=1.2, label=f"$\\ell_{{{p:g}}}$-AttGD path")
        ray = rays[rays["p"] == p].iloc[0]
        scale = float(rows["norm_p"].iloc[-1])  # rescaled to the final ||W_K||_p
        theory_line(ax, [0, scale * ray[x]], [0, scale * ray[y]], f"$\\ell_{{{p:g}}}$-AttSVM ray")
        for it in config.arrows[4 * k : 4 * k + 4]:
            at = rows.index[np.abs(rows.index - it).argmin()]
            nxt = rows.index[min(rows.index.get_loc(at) + 1, len(rows) - 1)]
            ax.annotate(
                "",
                xy=(rows.at[nxt, x], rows.at[nxt, y]),
                xytext=(rows.at[at, x], rows.at[at, y]),
                arrowprops={"arrowstyle": "->", "color": "C3"},
            )
        label_axes(
            ax,
            f"$W_{{{a}{b}}}$",
            f"$W_{{{c}{e}}}$",
            f"$p = {p:g}$ (arrows at {', '.join(map(str, config.arrows[4 * k : 4 * k + 4]))})",
        )
        ax.legend()
    fig.suptitle(f"E2: one data set (seed {config.seed}), $W_0 = 0$")
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="mirror-descent.e2",
        cost=39.0,
        config_type=E2Config,
        run=run_e2,
        quick={"epochs": (200, 200, 10000), "lr": 1.0, "arrows": (20, 40, 60, 80, 20, 40, 60, 80, 50, 100, 200, 300)},
        claims=(HYPOTHESIS, CLOSEST),
        falsifiers=(EXPONENT_SHIFT, EXPONENT_OFF),
    )
)
