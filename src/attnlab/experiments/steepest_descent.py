"""Steepest descent in l_p aligns with the l_p attention SVM: sign descent (l_inf), l_p for p in {1.5, 2, 3}.

Spec: mirror-descent-lp §4 (the dual exponent q = p/(p-1); the unit-l_p steepest direction), §5 (l_p-AttSVM, at
p = inf a linear program); implicit-bias-ngd §6.1 (Example 1), §8.3 (NGD, p = 2, converges to W_mm).

An extension, not one of the papers' numbered results: the prediction that steepest descent in a norm converges
in direction to that norm's max-margin solution is known for linear models (steepest descent on separable data) and
stated for attention in the literature that follows "Transformers as Support Vector Machines"; here it is the claim
``001:Ext-SD``, checked on Example 1 over seeds. Adam without epsilon is measured beside them as an observation:
no theorem is claimed for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch

from attnlab._validation import check_scalar
from attnlab.data import example1
from attnlab.experiments.registry import register
from attnlab.optim.transforms import Rule, adam, scale_by_lr, steepest
from attnlab.plotting import CORR_GAP, STEP, house_figure, label_ours, log_gap_axis, new_figure
from attnlab.svm import attention_svm
from attnlab.training import batched
from attnlab.verify import (
    Claim,
    Experiment,
    ExperimentResult,
    Falsifier,
    Reading,
    Revision,
    RunContext,
    observation,
    old_sizes,
    spread_tolerance,
)

__all__ = ["SteepestDescentConfig"]

#: The norms p of the rules trained and of the SVMs compared (inf: sign descent and the l_inf SVM, an LP).
NORMS = (1.5, 2.0, 3.0, math.inf)


@dataclass(frozen=True)
class SteepestDescentConfig:
    """Settings of ``steepest-descent.norms`` (all ours: no paper fixes them).

    Attributes
    ----------
    n, T, d : int
        Example 1's sequences, tokens per sequence and width.
    seeds : int
        Data sets (Example 1 seeds 0, 1, ...), trained as one batch of runs per rule.
    lr : float
        Step size of every rule (the step has l_p norm ``lr``; sign descent moves each entry by ``lr``).
    steps : int
        Steps of every rule from ``W_0 = 0``.
    record_every : int
        Steps between recorded iterates.
    beta1, beta2 : float
        Adam's moment decays (epsilon is 0).
    """

    n: int = 4
    T: int = 3
    d: int = 8
    seeds: int = 3
    lr: float = 0.01
    steps: int = 3000
    record_every: int = 100
    beta1: float = 0.9
    beta2: float = 0.999

    OURS = ("n", "T", "d", "seeds", "lr", "steps", "beta1", "beta2")

    def __post_init__(self) -> None:
        for name, low in (("n", 1), ("T", 2), ("d", 2), ("seeds", 2), ("steps", 1), ("record_every", 1)):
            check_scalar(name, getattr(self, name), kind=int, low=low)  # seeds >= 2: the tolerance is a spread
        check_scalar("lr", self.lr, low=0.0, low_inclusive=False)
        check_scalar("beta1", self.beta1, low=0.0, high=1.0, high_inclusive=False)
        check_scalar("beta2", self.beta2, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)


_SOURCE = "docs/theory/steepest-descent.md §2, §5"
_SIZES = ("n", "T", "d", "seeds", "lr", "steps")
_GRID_ONLY = Reading(
    statistic="per rule and seed, (1 - cos to the nearest other norm's SVM) - (1 - cos to its own norm's SVM); "
    "the row reads the mean over the seeds of the rule with the smallest mean",
    window="the last recorded step",
    subset="the rules sd:1.5, sd:2, sd:3 and sign (l_inf), each on the Example-1 data sets of seeds 0..seeds-1",
    tolerance=">= k standard errors of that rule's margins over the seeds (spread_tolerance)",
    params={"k": 3.0},
    sizes=_SIZES,
)
OWN_NORM = Claim(
    "steepest descent in l_p ends closer (1 - cos) to the l_p SVM than to the SVMs of the other norms and of the "
    "norms whose dual exponent is off by delta (every rule and seed)",
    "001:Ext-SD",
    _SOURCE,
    falsifier=("dual-exponent-off", "dual-exponent-off-0.1"),
    id="own-norm",
    reading=Reading(
        statistic="per rule and seed, (1 - cos to the nearest comparison SVM) - (1 - cos to its own norm's SVM); the "
        "comparison SVMs are the other three norms' and, for 1 < p < inf, the two of dual exponent q +- delta "
        "(q = p/(p-1)); the row reads the minimum over rules and seeds",
        window="the last recorded step",
        subset="the rules sd:1.5, sd:2, sd:3 and sign (l_inf), each on the Example-1 data sets of seeds 0..seeds-1; "
        "sign descent is compared with the other three norms only: its LP (the l_inf SVM) is nearly degenerate "
        "here, with directions far from the solution within 1e-4 of its margin, so sign descent's margin converges "
        "long before its direction does (docs/experiments/implicit-bias.md)",
        tolerance="> 0: every run nearer its own norm's SVM than any comparison SVM (the prediction holds per data "
        "set; no spread is involved). delta = 0.1 is ours: the reading resolves a dual exponent off by delta",
        params={"delta": 0.1},
        sizes=_SIZES,
    ),
    revisions=(
        Revision(
            reading=_GRID_ONLY,
            date="2026-11-28",
            why="too weak to fail: compared only with the other three norms' SVMs, 0.1 or more away in 1 - cos, it "
            "passed with the steepest direction's dual exponent off by 0.1 either way (0.0302 and 0.0371 at both "
            "sizes, against the true run's 0.0555; 3 standard errors are 0.01-0.02) and by 0.05 (0.0427, 0.0467); "
            "off by 0.3 (the falsifier then) it failed. The SVMs of dual exponent q +- 0.1 are 1e-3 to 1e-2 away "
            "from the own SVM in 1 - cos, so each run is now compared with them too, run by run: true 1.5e-4 "
            "(sd:1.5, seed 2), q + 0.1 -4.3e-3 (now the falsifier 'dual-exponent-off-0.1'), q - 0.1 -4.3e-3, "
            "q +- 0.05 -3.3e-4 and -3.7e-4. At the old quick size (1000 steps of lr 0.01) sd:1.5 was not yet "
            "nearer its own SVM than l_1.526's (-2.3e-4 on average over the seeds); quick steps are now of lr 0.03, "
            "the full size's path length lr x steps = 30 (each step has norm lr, so the path length, not the step "
            "count, sets how far the direction has converged)",
            quick="pass: 0.0542 >= 0.0198 (sd:3: 3 standard errors over 3 seeds, SE 0.00661) (bd4b787)",
            full="pass: 0.0555 >= 0.0213 (sd:3: 3 standard errors over 3 seeds, SE 0.00711) (bd4b787)",
            claim="steepest descent in l_p ends closer (1 - cos) to the l_p SVM than to the other norms' SVMs (worst "
            "rule)",
            sizes=old_sizes({"n": 4, "T": 3, "d": 8, "seeds": 3, "lr": 0.01}, steps=(3000, 1000)),
        ),
    ),
)


def _dual(p: float) -> float:
    """The dual exponent ``q = p/(p-1)`` (``1`` for ``p = inf``), mirror-descent-lp §4."""
    return 1.0 if p == math.inf else p / (p - 1.0)


def _exponent(q: float) -> float:
    """The norm ``p = q/(q-1)`` of dual exponent ``q`` (``inf`` for ``q = 1``), mirror-descent-lp §4."""
    return math.inf if q == 1.0 else q / (q - 1.0)


def _off_dual_exponent(offset: float):
    """The steepest direction with the dual exponent ``q = p/(p-1)`` off by ``offset`` (``q + offset``)."""

    def patch(original):
        def wrong(p: float):
            return original(_exponent(_dual(p) + offset))

        return wrong

    return patch


FALSIFIERS = tuple(
    Falsifier(
        f"dual-exponent-off{suffix}",
        f"the steepest-descent direction computed with the dual exponent q off by {offset:g}",
        "attnlab.experiments.steepest_descent:steepest",
        _off_dual_exponent(offset),
        kind="mechanism",
    )
    for suffix, offset in (("", 0.3), ("-0.1", 0.1))
)


def _name(p: float) -> str:
    """The rule's name in the optimizer grammar: ``"sign"`` or ``"sd:<p>"``."""
    return "sign" if p == math.inf else f"sd:{p:g}"


def _svm_name(p: float) -> str:
    """The SVM's name in the tables: ``"l<p>"`` to 4 digits (``"l1.5"``, ``"l1.526"``), ``"linf"``."""
    return f"l{p:.4g}"


def _svm_label(name: str) -> str:
    """Mathtext legend label of an SVM named by :func:`_svm_name`."""
    p = r"\infty" if name == "linf" else name[1:]
    return rf"$\ell_{{{p}}}$ SVM"


def _neighbours(p: float, delta: float) -> list[float]:
    """The norms of dual exponent ``q +- delta`` around a finite ``p > 1``; none for ``inf``, whose nearly degenerate
    LP leaves sign descent's direction far from the l_inf SVM long after its margin is close (:data:`OWN_NORM`)."""
    return [] if p == math.inf else [_exponent(_dual(p) + step) for step in (-delta, delta)]


def _gaps(path: torch.Tensor, svm: torch.Tensor) -> torch.Tensor:
    """``1 - cos(W_t, W_svm)`` per recorded step and run: ``path (S, R, d, d)``, ``svm (R, d, d)`` -> ``(S, R)``."""
    inner = (path * svm).sum((-2, -1))
    return 1.0 - inner / (path.norm(dim=(-2, -1)) * svm.norm(dim=(-2, -1))).clamp(min=1e-300)


def _gap_frame(name: str, steps: torch.Tensor, path: torch.Tensor, svms: dict[float, torch.Tensor]) -> pd.DataFrame:
    """One rule's ``1 - cos`` to every SVM at every recorded step ``t > 0`` and run, in long form."""
    S, R = path.shape[:2]
    return pd.concat(
        pd.DataFrame(
            {
                "rule": name,
                "svm": _svm_name(p),
                "run": torch.arange(R).repeat(S).numpy(),
                "step": steps.repeat_interleave(R).numpy(),
                "one_minus_cos": _gaps(path, svm).reshape(-1).numpy(),
            }
        )
        for p, svm in svms.items()
    )


def _own_norm_margins(last: pd.DataFrame, compared: dict[float, list[float]]) -> dict[str, list[float]]:
    """Per rule, each seed's (1 - cos to the nearest compared SVM) - (1 - cos to its own norm's SVM)."""
    margins = {}
    for p, others in compared.items():
        table = last.loc[_name(p)]
        nearest = table[[_svm_name(o) for o in others]].min(axis=1)
        margins[_name(p)] = (nearest - table[_svm_name(p)]).tolist()
    return margins


def _own_norm_rows(last: pd.DataFrame) -> list:
    """The own-norm row (every rule and seed against the grid and the dual-exponent neighbours) and its revision's."""
    delta = OWN_NORM.param("delta")
    grid = {p: [o for o in NORMS if o != p] for p in NORMS}
    near = _own_norm_margins(last, {p: grid[p] + _neighbours(p, delta) for p in NORMS})
    rule, seed = min(((r, s) for r in near for s in range(len(near[r]))), key=lambda rs: near[rs[0]][rs[1]])
    current = OWN_NORM.greater(
        near[rule][seed],
        0.0,
        strict=True,
        spread=f"worst: {rule} on seed {seed}; the smallest margin of each rule "
        + ", ".join(f"{r} {min(m):.3g}" for r, m in near.items()),
    )
    old = OWN_NORM.revised(1)
    coarse = _own_norm_margins(last, grid)  # the revised reading: the other norms only, mean of the worst rule
    worst = min(coarse, key=lambda r: sum(coarse[r]) / len(coarse[r]))
    tol, why = spread_tolerance(coarse[worst], old.param("k"))
    return [current, old.greater(sum(coarse[worst]) / len(coarse[worst]), tol, spread=f"{worst}: {why}")]


def run(config: SteepestDescentConfig, ctx: RunContext) -> ExperimentResult:
    """Train each rule on ``seeds`` Example 1 data sets at once; compare the last directions with every SVM."""
    data = [example1(n=config.n, T=config.T, d=config.d, seed=s) for s in range(config.seeds)]
    norms = [*NORMS, *(o for p in NORMS for o in _neighbours(p, OWN_NORM.param("delta")))]
    svms = {p: torch.stack([attention_svm(D, p).W for D in data]) for p in norms}  # (R, d, d) per norm
    X, Z, y, v = (torch.stack([getattr(D, k) for D in data]) for k in ("X", "Z", "y", "v"))
    rules = {_name(p): Rule((steepest(p), scale_by_lr(config.lr))) for p in NORMS}
    rules["adam-noeps"] = Rule((adam(config.beta1, config.beta2), scale_by_lr(config.lr)))
    frames = []
    for name in ctx.bar(list(rules), desc="rules"):
        out = batched.train(
            X, Z, y, v, optimizer=rules[name], steps=config.steps, record_every=config.record_every, keep_iterates=True
        )
        frames.append(_gap_frame(name, out.iterates["step"][1:], out.iterates["W"][1:], svms))  # W_0 has no direction
    frame = pd.concat(frames, ignore_index=True)
    last = frame[frame["step"] == frame["step"].max()].pivot_table(index=["rule", "run"], columns="svm")[
        "one_minus_cos"
    ]
    checks = _own_norm_rows(last)
    adam_mean = last.loc["adam-noeps", [_svm_name(p) for p in NORMS]].mean(axis=0)
    checks.append(
        observation(
            "Adam without epsilon: the nearest l_p SVM at the last step (remark: no theorem is claimed)",
            "no prediction; Adam is often likened to sign descent (l_inf)",
            f"nearest {adam_mean.idxmin()} (mean 1 - cos "
            + ", ".join(f"{k} {x:.2g}" for k, x in adam_mean.items())
            + ")",
            adam_mean.idxmin() == "linf",
            _SOURCE,
            tolerance="agrees when the l_inf SVM is the nearest of the four",
            ours=True,  # no paper remarks which SVM Adam ends nearest: a remark of ours, counted apart
        )
    )
    return ExperimentResult(frame=frame, checks=checks, figures={"norms": _figure(config, frame)})


@house_figure
def _figure(config: SteepestDescentConfig, frame: pd.DataFrame):
    rules = list(dict.fromkeys(frame["rule"]))
    fig, axes = new_figure(len(rules))
    grid = frame[frame["svm"].isin([_svm_name(p) for p in NORMS])]  # the dual-exponent neighbours are in the tables
    mean = grid.groupby(["rule", "svm", "step"], sort=False)["one_minus_cos"].mean().reset_index()
    for ax, rule in zip(axes, rules):
        for svm, part in mean[mean["rule"] == rule].groupby("svm", sort=False):
            ax.plot(part["step"], part["one_minus_cos"], label=_svm_label(svm))
        log_gap_axis(ax, CORR_GAP)
        ax.set_xlabel(STEP)
        ax.set_title(rule)
        ax.legend()
    fig.suptitle(f"Example 1 ($n={config.n}$, $T={config.T}$, $d={config.d}$): steepest descent and the $\\ell_p$ SVMs")
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="steepest-descent.norms",
        cost=9.0,
        config_type=SteepestDescentConfig,
        run=run,
        quick={"steps": 1000, "record_every": 50, "lr": 0.03},
        claims=(OWN_NORM,),
        falsifiers=FALSIFIERS,
    )
)
