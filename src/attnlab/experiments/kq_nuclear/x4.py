"""X4: alignment preserved along the flow (Lemma 5.1) and the limit of Theorem 5.1 on Assumption-4 data.

Spec: kq-nuclear-norm §9 X4, §3.2 (Lemma 5.1), §7.3 (Theorem 5.1), §4 program (9). On Assumption-4 data the
W*-SVM and the Frobenius SVM have one solution (§7.3), so X4 cannot tell a nuclear-norm bias from a Frobenius one;
X3 does, beyond Assumption 4.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError
from attnlab.data import TokenSelectionData, aligned_pairs
from attnlab.data.assumptions import assumption4_geometry, small_initial_loss
from attnlab.experiments.kq_nuclear.common import (
    SOURCE,
    KQConfig,
    gradient_preconditioned,
    revised_size,
    transpose_misplaced,
)
from attnlab.experiments.registry import register
from attnlab.metrics import attention_margin, cosine, margin_normalized
from attnlab.models import Factored
from attnlab.plotting import EPS, STEP, house_figure, label_axes, label_ours, log_gap_axis, new_figure
from attnlab.svm import aligned_l1_svm, attention_svm
from attnlab.training.flow import gradient_flow
from attnlab.verify import Claim, Experiment, ExperimentResult, Falsifier, Reading, Revision, RunContext, old_sizes

__all__ = ["X4Config", "run_x4"]


@dataclass(frozen=True)
class X4Config(KQConfig):
    """X4: Assumption-4 data, aligned initialisation; off-diagonal mass over time and the final spectrum vs (9).

    Spec: kq-nuclear-norm §9 X4, §3.2, §7.3, §4 program (9). All values are ours.

    The NGD step matters: the discrete map leaves the aligned set (off-diagonal mass jumps from 1e-15 to 1e-5) at a
    ``mu`` that doubles as the step halves, near ``1e4`` at ``step=0.05`` and ``1.9e4`` at ``0.025`` (seed 3); at
    ``0.0125`` it stays at 1e-15 to the end of the full run, ``mu = 2.4e4``, at seeds 0-4.

    Attributes
    ----------
    n : int
        Sequences, one aligned direction ``pi(i)`` each.
    m_pairs : int
        Pairs of non-optimal tokens per sequence (Assumption 4 (iii)).
    d : int
        Token width and key/query width ``d_e`` (>= 2).
    radii : tuple of float
        Norm of each sequence's optimal token, one per sequence.
    c : float
        Offset of the paired tokens along the optimal direction (``aligned_pairs``).
    score : float
        Score of the optimal token (``aligned_pairs``).
    init_scale : float
        ``omega_0`` of initialisation (5) in the aligned frame: ``Lambda_K(0) = sqrt(2) init_scale I``,
        ``Lambda_Q(0) = 0`` (until 2026-11-29 ``Lambda_K = init_scale (1 + j / d)``, ``Lambda_Q = init_scale``:
        not (5)).
    step : float
        Arc length of each normalised-GD step.
    steps : int
        Normalised-GD steps.
    record_every : int
        Steps between records.
    seed : int
        Seed of the data and of the shared right frame ``V``.
    """

    m_pairs: int = 2
    d: int = 8
    radii: tuple[float, ...] = (1.0, 2.0, 3.0)
    c: float = 0.0
    score: float = 8.0
    init_scale: float = 0.1
    step: float = 0.0125
    steps: int = 24_000
    record_every: int = 200
    seed: int = 0

    OURS = ("n", "m_pairs", "d", "radii", "c", "score", "init_scale", "step", "steps", "record_every", "seed")

    INTS = ("n", "m_pairs", "d", "steps", "record_every", "seed")
    POSITIVE = ("score", "init_scale", "step")

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.radii) != self.n:
            raise ValidationError(
                f"radii has {len(self.radii)} entries for n == {self.n}; pass one radius per sequence"
            )


def _pairing_broken(aligned_pairs):
    """``aligned_pairs`` whose non-optimal tokens get a 5% random tilt: Assumption 4 (iii)'s pairing broken."""

    def broken(*args, **kwargs):
        ap = aligned_pairs(*args, **kwargs)
        gen = torch.Generator().manual_seed(7)
        X = ap.data.X.clone()
        X[:, 1:] += (
            0.05 * X[:, 1:].norm(dim=-1, keepdim=True) * torch.randn(X[:, 1:].shape, generator=gen, dtype=X.dtype)
        )
        data = TokenSelectionData(X, ap.data.Z, ap.data.y, ap.data.v, ap.data.select)
        return dataclasses.replace(ap, data=data)

    return broken


PAIRING = Falsifier(
    "a4-pairing-broken",
    "the data's non-optimal tokens tilted by 5% at random, so Assumption 4 (iii)'s pairs no longer cancel",
    "attnlab.experiments.kq_nuclear.x4:aligned_pairs",
    _pairing_broken,
    kind="mechanism",
)
TRANSPOSE = transpose_misplaced("x4")
K_PRECONDITIONED = gradient_preconditioned("x4", "Factored", 0.99, 1.01, "-0.99-1.01")
FALSIFIERS = (TRANSPOSE, PAIRING, K_PRECONDITIONED)
_RUN = (
    "the one aligned run on aligned_pairs data (Assumption 4) of the config's seed: K(0) = U_K Lambda_K V^T, "
    "Q(0) = U_Q Lambda_Q V^T"
)
_RUN5 = (
    "the one aligned run on aligned_pairs data (Assumption 4) of the config's seed from initialisation (5) in the "
    "aligned frame: K(0) = U_K Lambda_K V^T, Lambda_K = sqrt(2) init_scale I, Q(0) = U_Q Lambda_Q V^T, Lambda_Q = 0 "
    "(xi_k(0) xi_q(0) = 0, xi_k^2 + xi_q^2 = 2 init_scale^2)"
)
_NOT_5 = (
    "the run broke the theorem's initialisation (5) without saying so: Lambda_K(0) = 0.1 (1 + j / d), Lambda_Q(0) = "
    "0.1 gave xi_k(0) xi_q(0) = 0.010-0.019 != 0 (audit, 2026-11-29). The start is now (5) in the aligned frame, "
    "Lambda_Q(0) = 0, Lambda_K(0) = sqrt(2) init_scale (the audit's run of it: 1 - corr with W_(9) 1.5e-7 quick and "
    "4.4e-11 full, sigma_4 ... sigma_8 <= 1.4e-12)"
)
_A4_TEXT = (
    "; under A4 the W*-SVM and the Frobenius SVM have one solution, so the row tests the form of the limit, not the "
    "implicit nuclear-norm bias (X3 does)"
)
_FLOW = ("n", "m_pairs", "d", "radii", "c", "score", "init_scale", "step", "steps", "seed")
_EVERY = "every recorded step 0, record_every, ..., steps"
# the sizes of the first commit (2026-11-22): NGD step 0.05 for 20 000 steps (full), 1500 steps quick
_FIRST = {
    "n": 3, "m_pairs": 2, "d": 8, "radii": [1.0, 2.0, 3.0], "c": 0.0, "score": 8.0, "init_scale": 0.1, "seed": 0,
}  # fmt: skip


def _sizes(full: dict, quick: dict) -> dict:
    """``{field: {"full", "quick"}}`` of the first commit's X4 with ``full`` and ``quick`` values of the run fields."""
    return old_sizes(_FIRST, **{k: (full[k], quick[k]) for k in full})


def _of(reading: Reading, sizes: dict) -> dict:
    """The part of ``sizes`` that ``reading`` depends on."""
    return {k: sizes[k] for k in reading.sizes}


_STEP_005 = _sizes(
    {"step": 0.05, "steps": 20000, "record_every": 200, "spectrum_rtol": 0.05},
    {"step": 0.05, "steps": 1500, "record_every": 50, "spectrum_rtol": 0.1},
)
_STEP_0025 = _sizes(
    {"step": 0.025, "steps": 12000, "record_every": 200, "spectrum_rtol": 0.05},
    {"step": 0.05, "steps": 1000, "record_every": 50, "spectrum_rtol": 0.1},
)
# the 0.025 sizes with the spectrum tolerance of 2026-11-25, until spectrum_rtol left the config (2026-11-28)
_STEP_0025_RTOL_005 = {**_STEP_0025, "spectrum_rtol": {"full": 0.005, "quick": 0.01}}
_STEP_CHANGED = (
    "re-read after failing at full size: with NGD steps of 0.05 the iterates leave the aligned set near mu ~ 1e4 "
    "(off-diagonal mass 1e-15 -> 7.9e-5), so the full run's step went to 0.025 for 12 000 steps (12fefa3, the "
    "flow's path followed more closely; the quick size went to 1000 steps for the CI budget)"
)
_STEP_HALVED = (
    "re-sized after failing at full size at seed 3 (2026-11-30): at NGD steps of 0.025 the iterates left the aligned "
    "set near mu = 1.9e4 (off-diagonal mass 3e-15 at step 11 200, 1.3e-8 at 11 400, 5.4e-5 at 11 600), as steps of "
    "0.05 had near mu = 1e4: the discrete map, not the flow, leaves the invariant set, at a mu that doubles as the "
    "step halves. The full run takes steps of 0.0125 for 24 000 steps (the same arc length, 300); at seeds 0-4 the "
    "mass stays <= 6.0e-15 to mu = 2.4e4. The quick size is unchanged"
)
_BOUND_ROUNDING = (
    "in the falsifier audit (02eeba0) the literal bound became the float64 rounding it stands for, tighter at the "
    "quick size and looser at full size than the literal"
)
_ALIGNED_READING = Reading(
    "max over records of the off-diagonal mass ||offdiag(M)||_F / ||M||_F of M = U_K^T K V and M = U_Q^T Q V",
    _EVERY,
    _RUN,
    "<= steps x d x eps (float64 rounding accumulated over the steps; the lemma's value is 0)",
    sizes=(*_FLOW, "record_every"),
)
_ALIGNED_OLD = dataclasses.replace(_ALIGNED_READING, tolerance="<= 1e-10 (ours)", params={"bound": 1e-10})
_ALIGNED_5 = dataclasses.replace(
    _ALIGNED_READING,
    statistic=f"{_ALIGNED_READING.statistic} (0 where M = 0: Q(0) = 0 under (5))",
    subset=_RUN5,
)
ALIGNED = Claim(
    "alignment preserved (Lemma 5.1): max_t off-diagonal mass of U_K^T K V and U_Q^T Q V",
    "003:Lem5.1",
    f"{SOURCE} §3.2, §9 X4",
    (TRANSPOSE.name, PAIRING.name, K_PRECONDITIONED.name),
    id="aligned",
    reading=_ALIGNED_5,
    revisions=(
        Revision(
            _ALIGNED_OLD,
            "2026-11-22",
            _STEP_CHANGED,
            "pass: 1.2e-15 (<= 1e-10; recomputed at the old sizes with the current code)",
            "fail: 7.9e-5 (<= 1e-10; recomputed at the old sizes with the current code)",
            sizes=_of(_ALIGNED_READING, _STEP_005),
        ),
        Revision(
            _ALIGNED_OLD,
            "2026-11-25",
            _BOUND_ROUNDING,
            "pass: 1.0e-15 (<= 1e-10)",
            "pass: 3.6e-15 (<= 1e-10)",
            sizes=_of(_ALIGNED_READING, _STEP_0025),
        ),
        Revision(
            _ALIGNED_READING,
            "2026-11-29",
            _NOT_5,
            "pass: 1.1e-15 (<= 1.8e-12) (8a9b237)",
            "pass: 3.2e-15 (<= 2.1e-11) (8a9b237)",
            sizes=_of(_ALIGNED_READING, _STEP_0025),
        ),
        Revision(
            _ALIGNED_5,
            "2026-11-30",
            _STEP_HALVED,
            "pass: 1.1e-15 (<= 1.8e-12) (56985d1)",
            "pass: 2.9e-15 (<= 2.1e-11) (56985d1); at seed 3 fail: 5.4e-5 (00a0aea)",
            sizes=_of(_ALIGNED_READING, _STEP_0025),
        ),
    ),
)
_OUTSIDE_READING = Reading(
    "max over the directions j outside pi(i) of |(U_K^T W_T U_Q)_jj| / sigma_1(W_T) at the last step (their "
    "initial value is 0 under (5))",
    "the last step",
    _RUN5,
    "<= steps x d x eps: float64 rounding accumulated over the steps, relative to the largest singular value "
    "(the theorem's value is 0)",
    sizes=_FLOW,
)
OUTSIDE = Claim(
    "singular values outside the pi(i) directions stay at their initial value 0 under (5), so W/mu has rank n (max "
    "entry / sigma_1; Thm 5.1's rank claim, here a property of the construction: with Q(0) = 0 the query side of W "
    "stays in span{z_i}, the pi(i) directions, for any gradient built from grad_W L)",
    "003:Thm5.1",
    f"{SOURCE} §7.3",
    kind="property",
    id="outside-zero",
    reading=_OUTSIDE_READING,
    revisions=(
        Revision(
            _OUTSIDE_READING,
            "2026-11-30",
            _STEP_HALVED,
            "pass: 4.0e-17 (<= 1.8e-12) (56985d1)",
            "pass: 4.2e-17 (<= 2.1e-11) (56985d1)",
            sizes=_of(_OUTSIDE_READING, _STEP_0025),
        ),
    ),
)
_PROGRAM9_READING = Reading(
    "the nuclear-norm SVM's optimum (SDP, attention_svm(norm='nuc')) against the value of program (9) (LP in the "
    "aligned frame, aligned_l1_svm)",
    "no run: the two solvers on the data set",
    "the aligned_pairs data set of the config's seed",
    "relative difference <= 1e-4: the SDP solver's relative accuracy (SCS/Clarabel stop at ~1e-6 to 1e-8)",
    {"rtol": 1e-4},
    ("n", "m_pairs", "d", "radii", "c", "score", "seed"),
)
PROGRAM9 = Claim(
    "the W*-SVM optimum (SDP) equals the value of program (9) (LP in the aligned frame), as Theorem 5.1 uses",
    "003:Thm5.1",
    f"{SOURCE} §4, §7.3",
    kind="property",
    id="program9-value",
    reading=_PROGRAM9_READING,
    revisions=(
        Revision(
            _PROGRAM9_READING,
            "2026-11-25",
            "was a theory row under this text until the falsifier audit (02eeba0) made it a property: it compares "
            "one solver with another (our code), not a run with the theorem; its rule never changed",
            "pass: 1.833333 = 1.833333",
            "pass: 1.833333 = 1.833333",
            claim="W*-SVM optimum equals the value of program (9) (Theorem 5.1: (9) solves W*-SVM under A4)",
        ),
    ),
)
_SPECTRUM_RTOL_READING = Reading(
    "max over i <= n of |sigma_i(W_T / mu) - |beta|_(i)| / |beta|_(i): the top-n singular values of the last "
    "direction against the sorted |beta| of program (9)",
    "the last step",
    _RUN,
    "<= config.spectrum_rtol: 0.005 full, 0.01 quick (ours: 6-25x the measured gap after a finite arc length, 2e-4 "
    "full and 1.6e-3 quick; no rate is proved, §10)",
    sizes=(*_FLOW, "spectrum_rtol"),
)
_SPECTRUM_OLD_READING = dataclasses.replace(
    _SPECTRUM_RTOL_READING, tolerance="<= config.spectrum_rtol: 0.05 full, 0.1 quick (ours)"
)
_OLD_SPECTRUM = "top-n singular values of W/mu -> |beta| of program (9) (worst relative error)"
_SPECTRUM_BLIND = (
    "too weak to fail: singular values see the limit's spectrum, not its singular vectors. K's gradient times "
    "diag(linspace(0.99, 1.01)) over its rows (a fixed per-coordinate preconditioner) leaves the aligned set and ends "
    "at a rotated limit, 1 - corr 4.3e-4 quick / 7.6e-4 full from U_K diag(beta) U_Q^T, whose top singular values "
    "stay within 9.5e-4 / 3.2e-3 of |beta| (passed 0.01 / 0.005). Theorem 5.1 states the limit itself, a "
    "direction, so it is read as 1 - corr with it, as X3's limit rows (§9); that mechanism is now the falsifier "
    "'k-gradient-preconditioned-0.99-1.01'. spectrum_rtol left the config. The run recomputes this reading beside "
    "the current row"
)
_SPECTRUM_READING = Reading(
    "1 - corr(W_T / mu, W_(9)): corr the cosine of the two matrices, W_(9) = U_K diag(beta) U_Q^T the solution "
    "of program (9) in the aligned frame (aligned_l1_svm)",
    "the last step",
    _RUN,
    "<= bound, bound = 1e-4 (ours, as X3's limit rows: an angle of 0.8 degrees; the true run reaches 1.5e-7 "
    "quick and 1.8e-9 full, and the gap falls with mu; no rate is proved, §10)",
    {"bound": 1e-4},
    _FLOW,
)
_OLD_SPECTRUM_5 = (
    "the limit direction W/mu -> U_K diag(beta) U_Q^T of program (9), whose top-n singular values are |beta| "
    "(1 - corr; Thm 5.1)"
)
_SPECTRUM_5 = dataclasses.replace(
    _SPECTRUM_READING,
    statistic="1 - corr(W_T, W_(9)): corr the cosine of the two matrices (that of W_T / mu where the margin mu "
    "> 0, and defined where it is not), W_(9) = U_K diag(beta) U_Q^T the solution of program (9) in the aligned "
    "frame (aligned_l1_svm)",
    subset=_RUN5,
    tolerance="<= bound, bound = 1e-4 (ours, as X3's limit rows: an angle of 0.8 degrees; the gap falls with "
    "mu; no rate is proved, §10)",
)
SPECTRUM = Claim(
    f"{_OLD_SPECTRUM_5[:-1]}{_A4_TEXT})",
    "003:Thm5.1",
    f"{SOURCE} §7.3, §9 X4",
    (TRANSPOSE.name, PAIRING.name, K_PRECONDITIONED.name),
    id="top-spectrum",
    reading=_SPECTRUM_5,
    revisions=(
        Revision(
            _SPECTRUM_OLD_READING,
            "2026-11-22",
            _STEP_CHANGED,
            "pass: 7.2e-4 (<= 0.1; recomputed at the old sizes with the current code)",
            "pass: 1.7e-4 (<= 0.05; recomputed at the old sizes with the current code)",
            claim=_OLD_SPECTRUM,
            sizes=_of(_SPECTRUM_RTOL_READING, _STEP_005),
        ),
        Revision(
            _SPECTRUM_OLD_READING,
            "2026-11-25",
            "in the falsifier audit (02eeba0) the tolerance came down from 0.05 full / 0.1 quick to 0.005 / 0.01, "
            "6-25x the measured gap, so that a wrong limit fails it",
            "pass: 1.6e-3 (<= 0.1)",
            "pass: 1.7e-4 (<= 0.05)",
            claim=_OLD_SPECTRUM,
            sizes=_of(_SPECTRUM_RTOL_READING, _STEP_0025),
        ),
        Revision(
            _SPECTRUM_RTOL_READING,
            "2026-11-28",
            _SPECTRUM_BLIND,
            "pass: 1.6e-3 (<= 0.01) (1e039b5)",
            "pass: 1.7e-4 (<= 0.005) (1e039b5)",
            claim="top-n singular values of W/mu -> |beta| of program (9) (worst relative error; Thm 5.1)",
            sizes=_of(_SPECTRUM_RTOL_READING, _STEP_0025_RTOL_005),
        ),
        Revision(
            _SPECTRUM_READING,
            "2026-11-29",
            f"{_NOT_5}. 'k-not-trained' (K frozen) left the row's falsifiers: it failed it only by speed (its limit "
            "is the same), so it tested no mechanism",
            "pass: 1.5e-7 (<= 1e-4) (8a9b237)",
            "pass: 3.9e-10 (<= 1e-4) (8a9b237)",
            claim=_OLD_SPECTRUM_5,
            sizes=_of(_SPECTRUM_READING, _STEP_0025),
        ),
        Revision(
            _SPECTRUM_5,
            "2026-11-30",
            _STEP_HALVED,
            "pass: 1.5e-7 (<= 1e-4) (56985d1)",
            "pass: 1.6e-10 (<= 1e-4) (56985d1)",
            sizes=_of(_SPECTRUM_READING, _STEP_0025),
        ),
    ),
)


_DATA = ("n", "m_pairs", "d", "radii", "c", "score", "seed")
A4_HOLDS = Claim(
    "hypothesis of Lemma 5.1 and Theorem 5.1: the data satisfy Assumption 4 (largest violation)",
    "003:Thm5.1",
    f"{SOURCE} §5",
    kind="property",
    id="a4-holds",
    reading=Reading(
        "the largest violation of Assumption 4 (i)-(iii) (data.assumptions.assumption4_geometry: |cos| between "
        "optimal tokens and between queries, 1 - |cos(x_opt, z)|, the pairing residual; scale-free)",
        "no run: the data set",
        "the aligned_pairs data set of the config's seed",
        "<= 1e-8 (the predicate's default tolerance; the generator builds A4 exactly, up to rounding)",
        {"bound": 1e-8},
        _DATA,
    ),
)
A3_HOLDS = Claim(
    "hypothesis of Theorem 5.1: Assumption 3 at the initialisation, L(W(0)) <= the smallest one-mistake loss",
    "003:Thm5.1",
    f"{SOURCE} §5",
    kind="property",
    id="a3-holds",
    reading=Reading(
        "L(W(0)) of W(0) = K(0) Q(0)^T against the smallest one-mistake loss (data.assumptions.small_initial_loss)",
        "initialisation (no run)",
        _RUN5,
        "L(W(0)) <= that threshold (A3, spec §5)",
        sizes=(*_DATA, "init_scale"),
    ),
)


def _off_diagonal_mass(M: torch.Tensor) -> torch.Tensor:
    """``||offdiag(M)||_F / ||M||_F`` over the last two axes; 0 where ``M = 0`` (``Q(0)`` under (5))."""
    off = M - torch.diag_embed(torch.diagonal(M, dim1=-2, dim2=-1))
    norm = torch.linalg.matrix_norm(M)
    return torch.where(norm > 0, torch.linalg.matrix_norm(off) / norm.clamp(min=torch.finfo(M.dtype).tiny), 0.0)


def _aligned_init(config: X4Config, ap) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``K(0) = U_K Lambda_K V^T``, ``Q(0) = U_Q Lambda_Q V^T`` (Def. 5.1) from initialisation (5) on the singular
    values, ``Lambda_K = sqrt(2) init_scale I``, ``Lambda_Q = 0``; the frame ``V`` and ``W(0)``'s diagonal (0)."""
    gen = torch.Generator().manual_seed(config.seed + 1)
    V, _ = torch.linalg.qr(torch.randn(config.d, config.d, generator=gen, dtype=torch.float64))
    lam_k = torch.full((config.d,), math.sqrt(2.0) * config.init_scale, dtype=torch.float64)  # spec kq §3.1 (5)
    lam_q = torch.zeros(config.d, dtype=torch.float64)  # spec kq §3.1 (5): xi_k xi_q = 0
    K0 = ap.U_K @ torch.diag(lam_k) @ V.T  # spec kq §3.2 Def. 5.1: K = U_K Lambda_K V^T
    Q0 = ap.U_Q @ torch.diag(lam_q) @ V.T  # spec kq §3.2 Def. 5.1: Q = U_Q Lambda_Q V^T
    return K0, Q0, V, lam_k * lam_q


def run_x4(config: X4Config, ctx: RunContext) -> ExperimentResult:
    """X4: aligned init on Assumption-4 data; off-diagonal mass in the aligned frames and the final spectrum."""
    ap = aligned_pairs(config.n, config.m_pairs, config.d, config.radii, config.c, config.score, seed=config.seed)
    data = ap.data
    K0, Q0, V, _ = _aligned_init(config, ap)
    flow = gradient_flow(
        Factored(config.d, config.d, K0=K0, Q0=Q0),
        data,
        step=config.step,
        steps=config.steps,
        record_every=config.record_every,
        progress=ctx.progress,
    )
    off_k = _off_diagonal_mass(ap.U_K.T @ flow.path["K"] @ V)  # (S,)
    off_q = _off_diagonal_mass(ap.U_Q.T @ flow.path["Q"] @ V)
    args = (data.X, data.Z, flow.path["W"], data.select)
    mu, W_hat = attention_margin(*args), margin_normalized(*args)
    aligned = aligned_l1_svm(data, ap.U_K, ap.U_Q, ap.pi)
    nuc = attention_svm(data, norm="nuc")
    beta9 = aligned.beta.abs().sort(descending=True).values[: config.n]  # |beta| of (9): n non-zero entries
    finite = torch.isfinite(W_hat).all(dim=-1).all(dim=-1)  # W(0) = 0 under (5): mu = 0, no direction yet
    sv_hat = torch.linalg.svdvals(torch.where(finite[:, None, None], W_hat, 0.0))  # (S, d)
    frame = flow.frame.assign(
        off_diagonal_K=off_k.numpy(),
        off_diagonal_Q=off_q.numpy(),
        mu=mu.numpy(),
        nuc_ratio=torch.where(finite, sv_hat.sum(-1) / aligned.norm_value, torch.nan).numpy(),
        corr_program9=cosine(W_hat, aligned.W).numpy(),
    )
    outside = [j for j in range(config.d) if j not in set(ap.pi.tolist())]
    diag_end = torch.diagonal(ap.U_K.T @ flow.path["W"][-1] @ ap.U_Q)  # diagonal in the aligned frame, §3.2
    sigma_1 = float(torch.linalg.svdvals(flow.path["W"][-1])[0])
    kept = float(diag_end[outside].abs().max()) / sigma_1 if outside else 0.0  # 0 under (5), spec kq §7.3
    top = sv_hat[-1, : config.n]
    eps = torch.finfo(torch.float64).eps
    rounding = config.steps * config.d * eps  # one rounding per entry and step, accumulated
    text = f"float64 rounding: steps x d x eps = {rounding:.2g} (the lemma's value is 0)"
    off_max, top_error = float(torch.maximum(off_k, off_q).max()), float(((top - beta9).abs() / beta9).max())
    old_aligned = ALIGNED.revised(2)  # the literal bound, at the current sizes
    a3, a4 = small_initial_loss(data, K0 @ Q0.T), assumption4_geometry(data)
    checks = [
        A4_HOLDS.less(a4.measured),
        A3_HOLDS.less(a3.measured, a3.threshold),
        ALIGNED.less(off_max, rounding, spread=text),
        old_aligned.less(off_max, old_aligned.param("bound")),
        OUTSIDE.less(kept, rounding, spread=text.replace("lemma", "theorem")),
        PROGRAM9.close(aligned.norm_value, nuc.norm_value),
        SPECTRUM.less(float(1.0 - cosine(flow.path["W"][-1], aligned.W)), SPECTRUM.param("bound")),
        *(SPECTRUM.revised(k).less(top_error, revised_size(SPECTRUM, k, "spectrum_rtol", ctx.quick)) for k in (3, 2)),
    ]
    spectrum = pd.DataFrame(
        {
            "index": np.arange(config.d),
            "flow": sv_hat[-1].numpy(),
            "program9": aligned.beta.abs().sort(descending=True).values.numpy(),
        }
    )
    fig = _x4_figure(config, frame, spectrum)
    return ExperimentResult(frame=frame, checks=checks, figures={"alignment": fig}, tables={"spectrum": spectrum})


@house_figure
def _x4_figure(config: X4Config, frame: pd.DataFrame, spectrum: pd.DataFrame):
    fig, axes = new_figure(3, width=3.8)
    axes[0].plot(frame["step"], frame["off_diagonal_K"].clip(lower=1e-18), label=r"$U_K^\top K V$")
    axes[0].plot(frame["step"], frame["off_diagonal_Q"].clip(lower=1e-18), label=r"$U_Q^\top Q V$")
    log_gap_axis(axes[0], "off-diagonal mass")
    axes[0].set_xlabel(STEP)
    positive = frame[frame["mu"] > 1]
    axes[1].plot(
        np.log(positive["mu"]),
        (1 - positive["nuc_ratio"]).abs().clip(lower=EPS),
        label=r"$|1 - \|W/\mu\|_* \,/\, \mathrm{value\ of\ (9)}|$",
    )
    axes[1].plot(
        np.log(positive["mu"]),
        (1 - positive["corr_program9"]).clip(lower=EPS),
        label=r"$1 - \mathrm{corr}(W/\mu, W_{(9)})$",
    )
    log_gap_axis(axes[1], "gap to program (9)")
    axes[1].set_xlabel(r"$\ln \mu(t)$")
    axes[2].semilogy(spectrum["index"], spectrum["flow"].clip(lower=1e-12), "o-", label=r"$W/\mu$ at the end")
    axes[2].semilogy(spectrum["index"], spectrum["program9"].clip(lower=1e-12), "x", label=r"$|\beta|$ of (9)")
    label_axes(axes[2], "index $i$", "singular value", "spectrum")
    for ax in axes:
        ax.legend()
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="kq-nuclear.x4",
        cost=11.0,
        config_type=X4Config,
        run=run_x4,
        quick={"steps": 1000, "step": 0.05, "record_every": 50},
        claims=(A4_HOLDS, A3_HOLDS, ALIGNED, OUTSIDE, PROGRAM9, SPECTRUM),
        falsifiers=FALSIFIERS,
    )
)
