"""Bounds that hold for every W: the Bregman divergence's power on the unit l_p sphere (Lemma 13), the risk between
its two data-dependent constants (Lemma 16) and a gradient bounded uniformly in W (Lemma 18).

Spec: docs/theory/mirror-descent-lp.md §3 (the Bregman divergence of ``psi = ||.||_p^p / p``), §2 (model, loss and
gradient; Lemma 16's and 18's constants come from ``W`` moving only the softmax weights). No training: the rows read
the formulas on samples, so each costs well under a second.

Lemma 13's powers and constants were lost in extraction; its proof minimises the divergence's per-entry term with
one case for ``p >= 2`` (item L1) and one for ``1 < p < 2`` (item L2). The natural candidates, which its proof's cases
produce, are the power ``p`` for ``p >= 2`` (attained along a direction that moves a zero entry: ``D = |a|^p / p``)
and the power 2 for ``p < 2`` (the potential's curvature is unbounded near zero only). Lemma 18's constant is
assembled from the ingredients its proof names: ``|l'| <= 1`` (logistic), every entry of the softmax Jacobian
bounded, the tokens, queries and head bounded; with ``X^T (diag(s) - s s^T) X v = sum_t s_t (a_t - abar) x_t``,
``a_t = x_t^T v``, and a mean absolute deviation at most half the range,
``||grad L(W)||_F <= max |l'| max_it ||x_it|| max_i (max_t a_it - min_t a_it) / 2 max_i ||z_i||`` for every W.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError
from attnlab.data import stack, unit_gaussian
from attnlab.experiments.mirror_descent.common import SOURCE, check_config
from attnlab.experiments.mirror_descent.falsifiers import DENOMINATOR_DROPPED, MIRROR_SIGN_DROPPED
from attnlab.experiments.registry import register
from attnlab.losses import mean_loss
from attnlab.metrics import bregman_divergence, entrywise_norm
from attnlab.models.functional import attention_probabilities, token_scores
from attnlab.plotting import house_figure, label_axes, label_ours, new_figure
from attnlab.verify import Check, Claim, Experiment, ExperimentResult, Reading, RunContext

__all__ = ["BoundsConfig", "run_bounds"]


@dataclass(frozen=True)
class BoundsConfig:
    """Samples of pairs on the unit l_p sphere and of matrices ``W`` over many scales; all fields are ours.

    Spec: mirror-descent-lp §2-3. The data are the official generator's (§6) at E1's sizes.

    Attributes
    ----------
    n, T, d : int
        Sequences, tokens per sequence and token dimension of each data set.
    ps : tuple of float
        Exponents p > 1 of Lemma 13's rows: those >= 2 enter item L1, the others item L2.
    pairs : int
        Pairs (A, B) per exponent and distance: half with a dense ``B`` and a dense direction, half with a ``B``
        whose entries are half zero and a direction on those zeros.
    distances : tuple of float
        Sizes of the perturbation of ``B`` (in l_p norm) before ``A`` is put back on the sphere; increasing.
    datasets : int
        Data sets of Lemmas 16 and 18, seeds ``first_seed, first_seed + 1, ...``.
    first_seed : int
        Seed of the first data set.
    directions : int
        Random unit-Frobenius directions of ``W`` per data set.
    scales : tuple of float
        ``||W||_F`` of the sweep (at most 100, so that exp of every logit stays finite in float64).
    seed : int
        Seed of the pairs and directions.
    loss : str
        Loss of the risk (the official code's is logistic; Lemma 18's constant uses ``|l'| <= 1``).
    """

    n: int = 6
    T: int = 8
    d: int = 10
    ps: tuple[float, ...] = (1.25, 1.5, 1.75, 2.0, 3.0, 4.0)
    pairs: int = 64
    distances: tuple[float, ...] = (1e-3, 1e-2, 1e-1)
    datasets: int = 6
    first_seed: int = 1
    directions: int = 32
    scales: tuple[float, ...] = (1e-2, 1e-1, 1.0, 10.0, 100.0)
    seed: int = 0
    loss: str = "logistic"

    def __post_init__(self) -> None:
        check_config(self, ("n", "T", "d", "pairs", "datasets", "first_seed", "directions", "seed"), ())
        if self.loss != "logistic":
            raise ValidationError(f"loss == {self.loss!r}: Lemma 18's constant here uses the logistic |l'| <= 1")
        if len(self.distances) < 2 or any(b <= a for a, b in zip(self.distances, self.distances[1:])):
            raise ValidationError(f"distances must be >= 2 increasing sizes, got {self.distances}")
        if not self.scales or any(s <= 0 or s > 100 for s in self.scales):
            raise ValidationError(f"scales must be norms in (0, 100] (exp of a logit stays finite), got {self.scales}")


_W_SWEEP = ("n", "T", "d", "datasets", "first_seed", "directions", "scales", "seed", "loss")
_EVERY_W = "every data set, every random direction of W (unit Frobenius norm) at every scale of the sweep"
LEM13 = Claim(
    "item {item} (p = {ps}): D_psi(A, B) >= c ||A - B||_p^k on the unit l_p sphere with k = {k}: the smallest "
    "D_psi / ||A - B||_p^k over the pairs stays away from 0 as the distance falls (Lemma 13)",
    "002:Lem13",
    f"{SOURCE} §3",
    MIRROR_SIGN_DROPPED.name,
    id="lem13-bregman-power",
    reading=Reading(
        statistic="per p and distance, c = min over the pairs of D_psi(A, B) / ||A - B||_p^k (k = p for p >= 2, 2 "
        "for p < 2); the row reads, over the item's exponents, the smallest c(smallest distance) / "
        "|c(largest distance)| (margin: the smaller of that minus the bound, and min c / |c(largest)|)",
        window="the distances of the config, two decades",
        subset="pairs on the unit l_p sphere: dense B with dense directions, and B with half its entries zero moved "
        "along those zeros (where the power p is attained for p >= 2)",
        tolerance="every c > 0 and c(smallest) >= 0.5 c(largest): a power one too low makes c fall by 10 per decade "
        "(100x over the two), the right one keeps it flat (the lemma's constant)",
        params={"bound": 0.5},
        sizes=("d", "ps", "pairs", "distances", "seed"),
    ),
)
LEM16 = Claim(
    "the risk lies between its data-dependent constants (Lemma 16): (1/n) sum_i l(max_t gamma_it) <= L(W) <= "
    "(1/n) sum_i l(min_t gamma_it) for every W of the sweep; largest violation relative to the interval's width",
    "002:Lem16",
    f"{SOURCE} §2",
    DENOMINATOR_DROPPED.name,
    id="lem16-risk-bounds",
    reading=Reading(
        statistic="the largest over the sweep of max(L(W) - upper, lower - L(W)) / (upper - lower), per data set",
        window="||W||_F in the config's scales, 1e-2 to 1e2",
        subset=_EVERY_W,
        tolerance="<= 1e-12: float64 rounding of L (exact inequality; the softmax weights are a convex combination)",
        params={"bound": 1e-12},
        sizes=_W_SWEEP,
    ),
)
LEM18 = Claim(
    "the gradient is bounded uniformly in W (Lemma 18): largest ||grad L(W)||_F over the sweep, over the constant "
    "max|l'| max||x_it|| max_i range_t(x_it^T v) / 2 max||z_i|| assembled from the proof's ingredients",
    "002:Lem18",
    f"{SOURCE} §2",
    DENOMINATOR_DROPPED.name,
    id="lem18-gradient-bound",
    reading=Reading(
        statistic="the largest over the sweep of ||grad L(W)||_F (autograd of the model's risk) / C, C the constant "
        "of the claim per data set",
        window="||W||_F in the config's scales, 1e-2 to 1e2",
        subset=_EVERY_W,
        tolerance="<= 1: the bound holds for every W (mean absolute deviation of a_t under the softmax <= half its "
        "range); a gradient that grew with ||W|| would leave it at the large scales",
        params={"bound": 1.0},
        sizes=_W_SWEEP,
    ),
)
CLAIMS = (LEM13, LEM16, LEM18)


def _unit(W: torch.Tensor, p: float) -> torch.Tensor:
    """``W / ||W||_p`` per matrix."""
    return W / entrywise_norm(W, p)[..., None, None]


def _pairs(config: BoundsConfig, p: float, gen: torch.Generator) -> pd.DataFrame:
    """``D_psi(A, B) / ||A - B||_p^k`` for each pair and distance (spec §3), with the pair's kind."""
    half, shape = config.pairs // 2, (config.d, config.d)
    B = torch.randn((config.pairs, *shape), generator=gen, dtype=torch.float64)
    zeros = torch.rand((half, *shape), generator=gen) < 0.5
    B[half:] = torch.where(zeros[: config.pairs - half], 0.0, B[half:])  # half of these entries are zero
    direction = torch.randn((config.pairs, *shape), generator=gen, dtype=torch.float64)
    direction[half:] = torch.where(zeros[: config.pairs - half], direction[half:], 0.0)  # moves only those zeros
    B, direction = _unit(B, p), _unit(direction, p)
    k = p if p >= 2 else 2.0
    rows = []
    for t in config.distances:
        A = _unit(B + t * direction, p)
        r = entrywise_norm(A - B, p)
        ratio = bregman_divergence(A, B, p) / r**k  # spec §3 (Lemma 13): D_psi >= c ||A - B||_p^k
        kind = ["dense"] * half + ["sparse"] * (config.pairs - half)
        rows.append(pd.DataFrame({"p": p, "k": k, "distance": t, "r": r.numpy(), "ratio": ratio.numpy(), "kind": kind}))
    return pd.concat(rows, ignore_index=True)


def _lem13_rows(config: BoundsConfig, pairs: pd.DataFrame) -> list[Check]:
    checks = []
    low, high = config.distances[0], config.distances[-1]
    for item, mine in (("L1", pairs[pairs["p"] >= 2]), ("L2", pairs[pairs["p"] < 2])):
        if mine.empty:
            continue
        c = mine.groupby(["p", "distance"])["ratio"].min().unstack("distance")  # rows p, columns distance
        scale = c[high].abs()
        kept = c[low] / scale  # c(smallest distance) / |c(largest distance)|
        margin = float(min((kept - LEM13.param("bound")).min(), (c.min(axis=1) / scale).min()))
        ps = ", ".join(f"{p:g}" for p in c.index)
        claim = LEM13.format(item=item, ps=ps, k="p" if item == "L1" else "2")
        measured = "; ".join(
            f"p={p:g}: c {c.loc[p, low]:.3g} at {low:g}, {c.loc[p, high]:.3g} at {high:g}" for p in c.index
        )
        tolerance = f"every c > 0 and c({low:g}) >= {LEM13.param('bound'):g} |c({high:g})| (two decades of distance)"
        checks.append(
            claim.holds(
                f">= {LEM13.param('bound'):g}", measured, tolerance, margin >= 0, margin=margin, support=len(mine)
            )
        )
    return checks


def _risk_and_gradient(batch, W: torch.Tensor, loss: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The risk (1/n) sum_i l(y_i f_i) per matrix and its gradient in W by autograd (spec §2)."""
    W = W.detach().requires_grad_(True)
    probabilities = attention_probabilities(batch.X, W, batch.Z)  # (..., n, T): the softmax weights
    scores = torch.einsum("...ntd,...d->...nt", batch.X, batch.v)  # x_it^T v
    risk = mean_loss(batch.y * (probabilities * scores).sum(-1), loss)  # spec §2: (1/n) sum l(Y f)
    (grad,) = torch.autograd.grad(risk.sum(), W)
    return risk.detach(), grad


def _sweep(config: BoundsConfig, gen: torch.Generator) -> pd.DataFrame:
    """Risk, its Lemma 16 interval and ``||grad L||_F / C`` (Lemma 18) for each data set, direction and scale."""
    datasets = [unit_gaussian(config.n, config.T, config.d, seed=config.first_seed + r) for r in range(config.datasets)]
    batch = stack(datasets)
    gamma = token_scores(batch.X, batch.y, batch.v)  # (D, n, T): gamma_it = y_i v^T x_it
    lower = mean_loss(gamma.amax(dim=-1), config.loss)  # spec §2 (Lemma 16): l decreasing, Y f in [min, max] gamma
    upper = mean_loss(gamma.amin(dim=-1), config.loss)
    a = torch.einsum("...ntd,...d->...nt", batch.X, batch.v)  # (D, n, T): a_it = x_it^T v
    spread = (a.amax(dim=-1) - a.amin(dim=-1)).amax(dim=-1) / 2  # max_i range_t a_it / 2
    constant = batch.X.norm(dim=-1).flatten(1).amax(-1) * spread * batch.Z.norm(dim=-1).amax(-1)  # |l'| <= 1
    U = torch.randn((config.directions, config.datasets, config.d, config.d), generator=gen, dtype=torch.float64)
    U = U / torch.linalg.matrix_norm(U)[..., None, None]
    rows = []
    for scale in config.scales:
        risk, grad = _risk_and_gradient(batch, scale * U, config.loss)  # (S, D), (S, D, d, d)
        width = upper - lower
        violation = torch.maximum(risk - upper, lower - risk) / width  # spec §2 (Lemma 16)
        ratio = torch.linalg.matrix_norm(grad) / constant  # spec §2 (Lemma 18)
        rows.append(
            pd.DataFrame(
                {
                    "scale": scale,
                    "dataset": np.tile(np.arange(config.datasets), config.directions),
                    "violation": violation.flatten().numpy(),
                    "gradient_ratio": ratio.flatten().numpy(),
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


def _largest(claim: Claim, sweep: pd.DataFrame, column: str, why: str) -> Check:
    """The row ``max over the sweep of column <= bound``, saying at which ``||W||_F`` the largest value sits."""
    top = sweep.loc[sweep[column].idxmax()]
    spread = f"{why}; largest at ||W||_F = {top['scale']:g}"
    return claim.less(float(top[column]), claim.param("bound"), spread=spread, support=len(sweep))


def run_bounds(config: BoundsConfig, ctx: RunContext) -> ExperimentResult:
    """Lemma 13 on pairs of the unit l_p sphere; Lemmas 16 and 18 on a sweep of W over four decades of norm."""
    gen = torch.Generator().manual_seed(config.seed)
    pairs = pd.concat([_pairs(config, p, gen) for p in config.ps], ignore_index=True)
    sweep = _sweep(config, gen)
    checks = _lem13_rows(config, pairs)
    checks.append(_largest(LEM16, sweep, "violation", "float64 rounding of L"))
    checks.append(_largest(LEM18, sweep, "gradient_ratio", "the proof's constant"))
    return ExperimentResult(
        frame=sweep, checks=checks, figures={"bounds": _figure(config, pairs, sweep)}, tables={"pairs": pairs}
    )


@house_figure
def _figure(config: BoundsConfig, pairs: pd.DataFrame, sweep: pd.DataFrame):
    fig, axes = new_figure(2, width=3.6)
    c = pairs.groupby(["p", "distance"])["ratio"].min().reset_index()
    for p, one in c.groupby("p"):
        axes[0].semilogx(one["distance"], one["ratio"], marker="o", ms=3, label=f"$p = {p:g}$")
    label_axes(axes[0], "distance $t$", r"$\min D_\psi(A, B) / \|A - B\|_p^k$", "Lemma 13: flat as $t \\to 0$")
    axes[0].legend(fontsize=7)
    top = sweep.groupby("scale")["gradient_ratio"].max()
    axes[1].loglog(top.index, top, marker="o", ms=3, label="largest over the samples")
    axes[1].axhline(1.0, color="0.3", ls="--", lw=0.8, label="the proof's constant")
    label_axes(axes[1], r"$\|W\|_F$", r"$\|\nabla L(W)\|_F / C$", "Lemma 18: bounded in $W$")
    axes[1].legend(fontsize=7)
    fig.suptitle("Bounds for every $W$: the Bregman power (Lemma 13) and the gradient (Lemma 18)")
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="mirror-descent.bounds",
        cost=0.1,
        config_type=BoundsConfig,
        run=run_bounds,
        quick={"pairs": 16, "datasets": 3, "directions": 8},
        claims=CLAIMS,
        falsifiers=(MIRROR_SIGN_DROPPED, DENOMINATOR_DROPPED),
    )
)
