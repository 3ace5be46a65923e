"""The cone of a locally optimal selection: Lemmas 19, 20 and 21 on matrices sampled in it, over radii.

Spec: docs/theory/mirror-descent-lp.md §5 (l_p-AttSVM, support tokens, Definition 3), §8.2 (the cone ``dB_p(W^mm,
W) <= mu``, ``||W||_p >= R``; Lemma 20's correlation, Lemma 21's ratio), §3 (``dB_p``). No training: the lemmas
speak of every ``W`` in the cone, so the rows read them on samples ``W = R ||W^mm||_p W_bar``, ``W_bar`` the unit-l_p
direction of ``W^mm + s N`` (``N`` a random direction of unit Frobenius norm), for the optimal tokens (globally,
hence locally, optimal) of each data set. The cone's width ``mu`` (from (8)) and radius are data-dependent constants
the seed does not print; the rows take the inventory's widths and report the radius from which each lemma holds.

Lemma 19's three inequalities (12a-c) were lost in extraction; their proof bounds the normalised score gaps
``g_it = (x_i alpha_i - x_it)^T W z_i ||W^mm||_p / ||W||_p`` by Hoelder and Lemma 13: their distance to the SVM's
(1 on the support tokens) is at most a constant times ``||W_bar - W_bar^mm||_p``, which Lemma 13 bounds by
``dB_p^(1/p)`` (p >= 2) or ``dB_p^(1/2)`` (p < 2). The row reads that exponent ((12a) only: read at our width,
(12b-c) fails, docs/experiments/mirror-descent.md). Random directions lower the margin around any max-margin point,
so Lemma 21's row also reads adversarial samples toward the SVMs of the other exponents, which raise the
l_p-normalised margin around any reference but the l_p-AttSVM.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError
from attnlab.data import stack, unit_gaussian
from attnlab.experiments.mirror_descent.common import SOURCE, check_config, neighbours
from attnlab.experiments.mirror_descent.falsifiers import gradient_transposed
from attnlab.experiments.registry import register
from attnlab.metrics import directional_bregman, entrywise_norm, gradient_direction
from attnlab.models import functional
from attnlab.models.functional import attention_logits
from attnlab.plotting import house_figure, label_axes, label_ours, new_figure
from attnlab.svm import SelectionSVMs
from attnlab.verify import (
    Check,
    Claim,
    Experiment,
    ExperimentResult,
    Falsifier,
    Reading,
    Revision,
    RunContext,
    fit_slope,
)

__all__ = ["ConeConfig", "run_cone"]


@dataclass(frozen=True)
class ConeConfig:
    """Samples in the cone of the optimal tokens' l_p-AttSVM; all fields are ours (the paper has no experiment).

    Spec: mirror-descent-lp §8.2. The data are the official generator's (§6) at E1's sizes.

    Attributes
    ----------
    n, T, d : int
        Sequences, tokens per sequence (>= 2) and token dimension of each data set.
    ps : tuple of float
        Exponents p > 1.
    datasets : int
        Data sets, seeds ``first_seed, first_seed + 1, ...``.
    first_seed : int
        Seed of the first data set.
    samples : int
        Directions per data set and noise size.
    noises : tuple of float
        Sizes ``s`` of the perturbation ``s N`` of the SVM's unit direction, increasing (``dB_p`` grows like ``s^2``).
    radii : tuple of float
        ``||W||_p`` in units of ``||W^mm||_p`` (the optimal token's softmax gaps are about the radius), increasing.
    seed : int
        Seed of the directions ``N``.
    loss : str
        Loss of the risk (the official code's is logistic).
    """

    n: int = 6
    T: int = 8
    d: int = 10
    ps: tuple[float, ...] = (1.75, 2.0, 3.0)
    datasets: int = 6
    first_seed: int = 1
    samples: int = 32
    noises: tuple[float, ...] = (0.003, 0.01, 0.03, 0.1)
    radii: tuple[float, ...] = (2.0, 8.0, 32.0, 128.0)
    seed: int = 0
    loss: str = "logistic"

    def __post_init__(self) -> None:
        check_config(self, ("n", "T", "d", "datasets", "first_seed", "samples", "seed"), ())
        for name in ("noises", "radii"):
            values = getattr(self, name)
            if len(values) < 2 or values[0] <= 0 or any(b <= a for a, b in zip(values, values[1:])):
                raise ValidationError(f"{name} must be >= 2 positive, increasing values, got {values}")


_SIZES = ("n", "T", "d", "ps", "datasets", "first_seed", "samples", "noises", "radii", "seed", "loss")
_SAMPLES = (
    "every data set (its optimal tokens: globally, hence locally, optimal), every sample W = R ||W^mm||_p W_bar, "
    "W_bar the unit direction of W^mm + s N, with dB_p(W^mm, W) <= mu = 1e-2 (the inventory's wider width; every "
    "sample of our noises lies inside)"
)
_CORRELATION = "the normalised correlation <-grad L(W), W^mm / ||W^mm||_p> / ||grad L(W)||_F (gradient_direction)"
_GAPS = Falsifier(
    "logits-transposed",
    "the samples' attention logits are computed in the transposed convention z_i^T W x_it",
    "attnlab.experiments.mirror_descent.cone:attention_logits",
    lambda logits: lambda X, W, Z: logits(X, W.mT, Z),
    kind="mechanism",
)
_GRADIENT = Falsifier(
    "gradient-logits-transposed",
    "the gradient read in the cone is that of the transposed logit convention z_i^T W x_it",
    "attnlab.experiments.mirror_descent.cone:gradient_direction",
    gradient_transposed,
    kind="mechanism",
)
_NEXT = {1.75: 3.0, 2.0: 3.0, 3.0: 1.75}  # another exponent's SVM, far enough to change the margins (others: p + 1)
# not registered: it moves the cone the samples are filtered by (tests/experiments/test_mirror_descent_audit.py)
REFERENCE_OF_ANOTHER_P = Falsifier(
    "svm-of-another-p",
    "the cone's reference direction is the SVM of another exponent (1.75 -> 3, 2 -> 3, 3 -> 1.75) of the same "
    "optimal tokens, not the l_p-AttSVM: a direction whose l_p-normalised margin is not the largest",
    "attnlab.experiments.mirror_descent.cone:_reference",
    lambda reference: (
        lambda svms, select, p, solved: reference(svms, select, _NEXT.get(float(p), float(p) + 1.0), solved)
    ),
    kind="mechanism",
)
_TS = (0.125, 0.25, 0.5, 1.0)  # steps t along the segment from the reference to another exponent's SVM
_ADVERSARIAL = (
    "and the adversarial samples W_bar(t) = the unit-l_p direction of (1 - t) W_bar^mm + t W_bar^mm_q for q in ps and "
    "p +- 0.1 (the SVMs of the same tokens for other exponents: under any reference other than the l_p-AttSVM one of "
    "them raises the l_p-normalised margin) and t in 1/8, 1/4, 1/2, 1, those with dB_p(W^mm, W) <= mu"
)
_LEM19_STATISTIC = (
    "per noise size s, delta(s) = max over data sets, samples and support tokens (i, t) of |g_it - 1|, g_it = "
    "(x_i alpha_i - x_it)^T W z_i ||W^mm||_p / ||W||_p, and mu(s) = the largest dB_p(W^mm, W) of those samples; the "
    "least-squares slope of log delta on log mu"
)
_LEM19_SUBSET = (
    "every data set's support tokens (SVM margin within 1e-6 of 1; the samples do not move them), every sample"
)
_LEM19_TOLERANCE = (
    ">= 1 / max(p, 2) - 0.1: Lemma 13's power gives the deviation a factor dB_p^(1/max(p, 2)); 0.1 for the maximum "
    "over few samples. A deviation that does not vanish with the cone has slope 0"
)
LEM19 = Claim(
    "p={p:g}: in the cone the normalised score gaps of the support tokens approach the SVM's (1) as dB_p -> 0 "
    "at least as fast as Lemma 13 lets ||W_bar - W_bar^mm||_p shrink (Lemma 19's (12a) through Hoelder): log-log "
    "slope of the largest |g_it - 1| against the largest dB_p, over the noise sizes",
    "002:Lem19",
    f"{SOURCE} §5, §8.2",
    _GAPS.name,
    id="lem19-gaps",
    reading=Reading(
        statistic=_LEM19_STATISTIC,
        window="the noise sizes of the config (gaps are scale-free: the radius does not enter)",
        subset=_LEM19_SUBSET,
        tolerance=f"{_LEM19_TOLERANCE}. It reads (12a) only and holds around the SVM of another exponent too "
        "(slopes 0.49-0.51); (12b-c), the non-support tokens' margin, read at our cone width 1e-2 fails on the true "
        "samples (docs/experiments/mirror-descent.md)",
        params={"tol": 0.1},
        sizes=_SIZES,
    ),
    revisions=(
        Revision(
            reading=Reading(
                statistic=_LEM19_STATISTIC,
                window="the noise sizes of the config (gaps are scale-free: the radius does not enter)",
                subset=_LEM19_SUBSET,
                tolerance=_LEM19_TOLERANCE,
                params={"tol": 0.1},
                sizes=_SIZES,
            ),
            date="2026-11-29",
            why="the audit of 2026-11-29 (defect 5): the row passes around the SVM of another exponent (p = 1.75, 2 "
            "-> l_3, p = 3 -> l_1.75: slopes 0.49-0.51) and does not read (12b-c). A reading of (12b-c), declared "
            "before it ran (the smallest non-support g_it - 1 over the samples in the cone dB_p <= 1e-2 > 0), fails "
            "the true samples (quick -0.081 / -0.057 / -0.030): our width 1e-2 is wider than the lemma's (8), lost, "
            "so it was not registered. Numbers unchanged; the tolerance now says what the row cannot tell",
            quick="pass: slopes 0.504 / 0.503 / 0.488 (p = 1.75 / 2 / 3); the current row computes the same numbers",
            full="pass: slopes 0.524 / 0.505 / 0.501; the current row computes the same numbers",
        ),
    ),
)
LEM20 = Claim(
    "p={p:g}: in the cone of width 1e-2 at the largest radius, <-grad L(W), W^mm> > 0 on every sample (Lemma 20); "
    "the row reports the smallest radius of the grid from which it holds",
    "002:Lem20",
    f"{SOURCE} §8.2",
    _GRADIENT.name,
    id="lem20-cone",
    reading=Reading(
        statistic=f"the smallest over the samples of {_CORRELATION}",
        window="the largest radius of the grid (the lemma: beyond a data-dependent radius)",
        subset=_SAMPLES,
        tolerance="> 0 strictly (the lemma's sign; exact)",
        params={"bound": 0.0, "mu": 1e-2},
        sizes=_SIZES,
    ),
)
_LEM21_STATISTIC = (
    "the largest over the samples of (<-grad L, W/||W||_p> - (1 + eps) <-grad L, W^mm/||W^mm||_p>) / ||grad L||_F "
    "(the lemma's inequality as a slack, so a negative correlation cannot pass it by its sign)"
)
LEM21 = Claim(
    "p={p:g}: in the cone at the largest radius, <-grad L(W), W/||W||_p> <= (1 + eps) <-grad L(W), W^mm/||W^mm||_p> "
    "with eps = {eps:g} on every sample (Lemma 21); the row reports the smallest radius R_eps of the grid from which "
    "it holds",
    "002:Lem21",
    f"{SOURCE} §8.2",
    _GRADIENT.name,
    id="lem21-ratio",
    reading=Reading(
        statistic=_LEM21_STATISTIC,
        window="the largest radius of the grid (the lemma: beyond R_eps)",
        subset=f"{_SAMPLES}; {_ADVERSARIAL}",
        tolerance="<= 0 with eps = 0.01, the inventory's smaller eps (the adversarial samples declared 2026-11-29 "
        "before they ran)",
        params={"bound": 0.0, "eps": 0.01, "mu": 1e-2},
        sizes=_SIZES,
    ),
    revisions=(
        Revision(
            reading=Reading(
                statistic=_LEM21_STATISTIC,
                window="the largest radius of the grid (the lemma: beyond R_eps)",
                subset=_SAMPLES,
                tolerance="<= 0 with eps = 0.01, the inventory's smaller eps",
                params={"bound": 0.0, "eps": 0.01, "mu": 1e-2},
                sizes=_SIZES,
            ),
            date="2026-11-29",
            why="the audit of 2026-11-29 (defect 5): random samples around the SVM of another exponent (p = 1.75, 2 "
            "-> l_3, p = 3 -> l_1.75) passed the row (slack -0.0031 / -0.0044 / -0.0078 against the true -0.0038 / "
            "-0.0047 / -0.0084), since a random direction lowers the margin around any max-margin point; samples "
            "toward the other exponents' SVMs now probe the directions that raise the l_p-normalised margin: with "
            "them that reference fails the row (+0.0195 / +0.0150 / +0.0548 quick). It is not registered as a "
            "falsifier, since moving the reference moves the cone the samples are filtered by (148 -> 135 samples at "
            "p = 1.75), which tests/experiments/test_falsifiers.py refuses; tests/experiments/"
            "test_mirror_descent_audit.py runs it. The old reading's row is recomputed beside the new one",
            quick="pass: largest slack -0.0038 / -0.0047 / -0.0084 (p = 1.75 / 2 / 3); recomputed by every run",
            full="pass: -0.0036 / -0.0048 / -0.0082; recomputed by every full run",
        ),
    ),
)
CLAIMS = (LEM19, LEM20, LEM21)


def _gaps(logits: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """``(x_{i alpha_i} - x_it)^T W z_i`` from logits ``(..., n, T)`` and a selection ``(..., n)``."""
    return torch.gather(logits, -1, select[..., None].expand(*logits.shape[:-1], 1)) - logits


def _reference(svms: SelectionSVMs, select: torch.Tensor, p: float, solved: dict[float, torch.Tensor]) -> torch.Tensor:
    """The cone's reference direction, the l_p-AttSVM of ``select`` (spec §5), (D, d, d); a falsifier swaps it.

    ``solved`` holds the SVMs already solved, by exponent (:func:`_solved`).
    """
    return _solved(svms, select, p, solved)


def _solved(svms: SelectionSVMs, select: torch.Tensor, q: float, solved: dict[float, torch.Tensor]) -> torch.Tensor:
    """The l_q-AttSVM of ``select`` (spec §5), (D, d, d): taken from ``solved``, or solved once and kept there."""
    if q not in solved:
        solved[q] = svms.directions(select, q)
    return solved[q]


def _on_sphere(W_bar: torch.Tensor, p: float) -> torch.Tensor:
    """``W_bar`` scaled to the unit l_p sphere."""
    return W_bar / entrywise_norm(W_bar, p)[..., None, None]


def _adversarial(unit: torch.Tensor, targets: list[torch.Tensor], p: float) -> torch.Tensor:
    """Unit directions of ``(1 - t) unit + t target`` for every target (another exponent's SVM) and t of _TS."""
    ends = [_on_sphere(target, p) for target in targets]
    return torch.stack([_on_sphere((1 - t) * unit + t * end, p) for end in ends for t in _TS])  # (A, D, d, d)


def _sample_rows(config: ConeConfig, p: float, batch, W_bar: torch.Tensor, ref: dict, **labels) -> list[pd.DataFrame]:
    """Per (sample, data set, radius) of unit directions ``W_bar`` (S, D, d, d): dB_p, gaps, correlation, slack."""
    S, D = W_bar.shape[:2]
    big = [t.expand((S, *t.shape)) for t in (batch.X, batch.Z, batch.y, batch.v, ref["select"])]
    dB = directional_bregman(ref["unit"].expand_as(W_bar), W_bar, p)  # spec §3
    g = _gaps(attention_logits(big[0], W_bar * ref["norm"][:, None, None], big[1]), big[4])  # normalised gaps
    deviation = torch.where(ref["support"], (g - 1).abs(), 0.0).amax(dim=(-2, -1))  # (S, D): support tokens (12a)
    above = torch.where(ref["nonsupport"], g - 1, torch.inf).amin(dim=(-2, -1))  # (S, D): non-support (12b-c)
    rows = []
    for R in config.radii:
        W = R * ref["norm"][:, None, None] * W_bar
        direction, _, _ = gradient_direction(big[0], big[1], big[2], big[3], W, config.loss)  # -grad L / ||.||_F
        with_mm = (direction * ref["unit"]).sum((-2, -1))  # md §8.2 (Lemma 20)
        slack = (direction * W_bar).sum((-2, -1)) - (1 + LEM21.param("eps")) * with_mm  # md §8.2 (Lemma 21): <= 0
        frame = {
            "radius": R,
            "sample": np.repeat(np.arange(S), D),
            "dataset": np.tile(np.arange(D), S),
            "bregman": dB.flatten().numpy(),
            "deviation": deviation.flatten().numpy(),
            "nonsupport": above.flatten().numpy(),
            "correlation": with_mm.flatten().numpy(),
            "slack": slack.flatten().numpy(),
        }
        rows.append(pd.DataFrame({**labels, **frame}))
    return rows


def _samples(config: ConeConfig, p: float, batch, W_mm: torch.Tensor, targets, select, gen) -> pd.DataFrame:
    """Random samples per noise size and adversarial samples toward ``targets``, at every radius."""
    norm_mm = entrywise_norm(W_mm, p)  # (D,)
    gaps = _gaps(functional.attention_logits(batch.X, W_mm, batch.Z), select)
    ref = {
        "select": select,
        "norm": norm_mm,
        "unit": W_mm / norm_mm[:, None, None],
        "support": (gaps - 1).abs() <= 1e-6,  # spec §5: the support tokens T_i
        "nonsupport": gaps - 1 > 1e-6,  # the other tokens but the selected one (its gap is 0)
    }
    rows = []
    for noise in config.noises:
        N = torch.randn((config.samples, *W_mm.shape), generator=gen, dtype=torch.float64)
        W_bar = _on_sphere(ref["unit"] + noise * N / torch.linalg.matrix_norm(N)[..., None, None], p)
        rows += _sample_rows(config, p, batch, W_bar, ref, noise=noise, adversarial=False)
    rows += _sample_rows(config, p, batch, _adversarial(ref["unit"], targets, p), ref, noise=np.nan, adversarial=True)
    return pd.concat(rows, ignore_index=True).assign(p=p)


def _from_radius(rows: pd.DataFrame, holds) -> str:
    """The smallest radius of the grid from which ``holds(rows at radius)`` is true at it and every larger one."""
    radii = sorted(rows["radius"].unique())
    ok = [bool(holds(rows[rows["radius"] == R])) for R in radii]
    first = next((R for i, R in enumerate(radii) if all(ok[i:])), None)
    return "none of the grid" if first is None else f"{first:g} ||W^mm||_p"


def _lem19_row(config: ConeConfig, p: float, rows: pd.DataFrame) -> Check:
    """Lemma 19's (12a): the slope of the support tokens' largest gap deviation against dB_p (random samples)."""
    random = rows[~rows["adversarial"]]
    one = random[random["radius"] == config.radii[0]]  # gaps and dB_p do not depend on the radius
    per_noise = one.groupby("noise")[["deviation", "bregman"]].max()
    slope, _ = fit_slope(per_noise["bregman"], per_noise["deviation"])
    predicted = 1 / max(p, 2.0)
    low = predicted - LEM19.param("tol")
    return LEM19.format(p=p).holds(
        f">= {low:.3g} (1/max(p, 2) = {predicted:.3g})",
        f"slope {slope:.3g}; deviation {per_noise['deviation'].iloc[0]:.2g} to {per_noise['deviation'].iloc[-1]:.2g}"
        f" for dB_p {per_noise['bregman'].iloc[0]:.2g} to {per_noise['bregman'].iloc[-1]:.2g}",
        f"1/max(p, 2) - {LEM19.param('tol'):g} (Lemma 13's power through Hoelder)",
        slope >= low,
        margin=slope - low,
        support=len(one),
    )


def _checks(config: ConeConfig, p: float, rows: pd.DataFrame) -> list[Check]:
    checks = [_lem19_row(config, p, rows)]
    cone = rows[rows["bregman"] <= LEM20.param("mu")]
    random = cone[~cone["adversarial"]]
    last = random[random["radius"] == config.radii[-1]]
    smallest = float(last["correlation"].min())
    radius = _from_radius(random, lambda at: (at["correlation"] > 0).all())
    checks.append(
        LEM20.format(p=p).greater(
            smallest,
            LEM20.param("bound"),
            strict=True,
            spread=f"a sign: exact; holds from R = {radius}",
            support=len(last),
        )
    )
    eps = LEM21.param("eps")
    for claim, samples in ((LEM21, cone), (LEM21.revised(1), random)):
        at_last = samples[samples["radius"] == config.radii[-1]]
        largest = float(at_last["slack"].max())
        radius = _from_radius(samples, lambda at: (at["slack"] <= 0).all())
        adversarial = int(at_last["adversarial"].sum())
        spread = f"eps {eps:g}; R_eps = {radius}" + (f"; {adversarial} adversarial samples" if adversarial else "")
        checks.append(
            claim.format(p=p, eps=eps).less(largest, LEM21.param("bound"), spread=spread, support=len(at_last))
        )
    return checks


def run_cone(config: ConeConfig, ctx: RunContext) -> ExperimentResult:
    """Samples in the cone of each data set's optimal tokens, for each p; the rows of Lemmas 19-21."""
    datasets = [unit_gaussian(config.n, config.T, config.d, seed=config.first_seed + r) for r in range(config.datasets)]
    batch = stack(datasets)
    select = torch.stack([data.optimal_tokens() for data in datasets])  # (D, n)
    svms = SelectionSVMs(datasets)
    gen = torch.Generator().manual_seed(config.seed)
    frames, checks = [], []
    solved: dict[float, torch.Tensor] = {}  # the SVMs of every exponent, each solved once
    for p in config.ps:
        targets = [_solved(svms, select, q, solved) for q in (*config.ps, *neighbours(p, 0.1))]  # spec §5: l_q-AttSVMs
        rows = _samples(config, p, batch, _reference(svms, select, p, solved), targets, select, gen)  # l_p-AttSVM
        frames.append(rows)
        checks += _checks(config, p, rows)
    frame = pd.concat(frames, ignore_index=True)
    return ExperimentResult(frame=frame, checks=checks, figures={"cone": _figure(config, frame)})


@house_figure
def _figure(config: ConeConfig, frame: pd.DataFrame):
    fig, axes = new_figure(3, width=3.4)
    for p, rows in frame.groupby("p"):
        rows = rows[~rows["adversarial"]]  # the random samples (the adversarial ones enter Lemma 21's row only)
        one = rows[rows["radius"] == config.radii[0]].groupby("noise")[["bregman", "deviation"]].max()
        axes[0].loglog(one["bregman"], one["deviation"], marker="o", ms=3, label=f"$p = {p:g}$")
        by_radius = rows.groupby("radius")
        axes[1].semilogx(by_radius["correlation"].min(), marker="o", ms=3, label=f"$p = {p:g}$")
        axes[2].semilogx(by_radius["slack"].max(), marker="o", ms=3, label=f"$p = {p:g}$")
    label_axes(axes[0], r"largest $D_{\psi_p}(W^{mm}, W)$", r"largest $|g_{it} - 1|$ (support)", "Lemma 19")
    label_axes(axes[1], r"$R / \|W^{mm}\|_p$", r"smallest correlation with $W^{mm}$", "Lemma 20: $> 0$")
    label_axes(axes[2], r"$R / \|W^{mm}\|_p$", "largest slack of Lemma 21", r"Lemma 21: $\leq 0$")
    for ax in axes[1:]:
        ax.axhline(0.0, color="0.3", ls="--", lw=0.8, label="the lemma's bound")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.suptitle(f"The cone of the optimal tokens' $\\ell_p$-AttSVM: {config.datasets} data sets")
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="mirror-descent.cone",
        cost=1.0,
        config_type=ConeConfig,
        run=run_cone,
        quick={"datasets": 3, "samples": 8},
        claims=CLAIMS,
        falsifiers=(_GAPS, _GRADIENT),
    )
)
