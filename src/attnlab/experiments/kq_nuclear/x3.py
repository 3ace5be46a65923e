"""X3: full ``(K, Q)`` against combined ``W`` on random A1/A2 data: nuclear-norm against Frobenius-norm limits.

Spec: kq-nuclear-norm §9 X3 (d in {4, 8, 16}), §7.3-7.4 (Theorem 5.1 and the Frobenius contrast of Section 4.2),
§10.3 (the non-aligned case is open; X3 probes it beyond Assumption 4).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError, check_distinct
from attnlab.data import scores_equal
from attnlab.experiments.kq_nuclear.common import (
    SOURCE,
    KQConfig,
    factor_not_trained,
    gradient_preconditioned,
    kq_as_w,
    revised_size,
    step_scaled_by_size,
    transpose_misplaced,
    w_as_kq,
)
from attnlab.experiments.registry import register
from attnlab.metrics import attention_margin, cosine, margin_normalized
from attnlab.models import Combined, Factored
from attnlab.plotting import EPS, house_figure, label_axes, label_ours, log_gap_axis, new_figure
from attnlab.svm import attention_svm
from attnlab.training.flow import gradient_flow
from attnlab.verify import Check, Claim, Experiment, ExperimentResult, Reading, Revision, RunContext

__all__ = ["X3Config", "run_x3", "x3_inits"]


@dataclass(frozen=True)
class X3Config(KQConfig):
    """X3: the normalised-GD paths of full ``(K, Q)`` (``d_e = d``) and of combined ``W`` on random A1/A2 data.

    Spec: kq-nuclear-norm §9 X3, §7.3-7.4, §10.3. All values are ours (the paper has no experiments; ``ds`` is the
    spec's [X] proposal).

    Attributes
    ----------
    T : int
        Tokens per sequence (>= 2).
    ds : tuple of int
        Token widths, one data set each (spec: 4, 8, 16).
    gap : float
        Score gap of the optimal token.
    runs : int
        Random initialisations per width and parametrisation.
    init_scale : float
        Standard deviation of the i.i.d. normal entries of ``K(0)``, ``Q(0)`` and ``W(0)``.
    step : float
        Arc length of each normalised-GD step.
    steps : int
        Normalised-GD steps: 100 000 of 0.5 (arc length 50 000) take the slowest direction, K,Q at d = 16, under
        the limit rows' bound (it falls about like arc length^-0.85 there).
    record_every : int
        Steps between records.
    seed : int
        Data seed: at 2 the nuc- and fro-SVMs differ at every d (corr 0.77-0.96); at 0 they coincide at d=4.
    """

    T: int = 3
    ds: tuple[int, ...] = (4, 8, 16)
    gap: float = 6.0
    runs: int = 3
    init_scale: float = 0.1
    step: float = 0.5
    steps: int = 100_000
    record_every: int = 1000
    seed: int = 2

    OURS = ("n", "T", "ds", "gap", "runs", "init_scale", "step", "steps", "record_every", "seed")
    RENAMED = {"L": "T"}  # the token axis is T everywhere (the paper writes L)

    INTS = ("n", "T", "runs", "steps", "record_every", "seed")
    POSITIVE = ("gap", "init_scale", "step")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.ds or any(not isinstance(d, int) or d < 2 for d in self.ds):
            raise ValidationError(f"ds must be a non-empty tuple of ints >= 2, got {self.ds}; e.g. (4, 8)")
        check_distinct("ds", self.ds)


KQ_AS_W, W_AS_KQ = kq_as_w("x3"), w_as_kq("x3")
TRANSPOSE, K_FROZEN, SIZE_SCALED = (
    transpose_misplaced("x3"),
    factor_not_trained("x3", "Factored"),
    step_scaled_by_size("x3", "Combined"),
)
K_PRECONDITIONED, W_PRECONDITIONED = (
    gradient_preconditioned("x3", "Factored", 0.9, 1.1),
    gradient_preconditioned("x3", "Combined", 0.95, 1.05),
)
FALSIFIERS = (TRANSPOSE, K_FROZEN, SIZE_SCALED, K_PRECONDITIONED, W_PRECONDITIONED, KQ_AS_W, W_AS_KQ)
# beyond Assumption 4 the paper proves nothing (the general case is open, §10.3), and the Frobenius contrast of its
# Section 4.2 is cited from earlier work: both are ours to check, not numbered results of the paper
_OPEN, _SEC42 = "003:Ext-NonAligned", "003:Ext-Sec4.2"
_RUNS = ("n", "T", "ds", "gap", "runs", "init_scale", "step", "steps", "seed")
_LAST = "the last step"
_WORST = (
    "the runs random initialisations N(0, init_scale^2) at each d of ds (one row per d), on the scores_equal data "
    "set of the config's seed"
)
_FINITE_REL = "(ours: the gap left after a finite arc length; the theorem gives the limit, no rate, §10)"


def _sizes(seed: int, steps: int, record_every: int, **rtol: tuple[float, float]) -> dict:
    """Old values of X3's size fields: the full run had 10000 steps of 0.1 until 2026-11-28; the quick size and the
    seed changed before."""
    full = {"n": 3, "T": 3, "ds": [4, 8, 16], "gap": 6.0, "runs": 3, "init_scale": 0.1, "step": 0.1, "steps": 10000}
    quick = {**full, "ds": [6], "runs": 2, "step": 0.5, "steps": steps}
    sizes = {k: {"full": full[k], "quick": quick[k]} for k in full}
    sizes["seed"] = {"full": seed, "quick": seed}
    for name, (f, q) in rtol.items():
        sizes[name] = {"full": f, "quick": q}
    return sizes


_CI_BUDGET = (
    "the quick size changed for the CI budget with every experiment's (12fefa3: 800 -> 500 steps, recorded every "
    "40 -> 50); the full size did not change"
)
_SEED_2 = (
    "the data seed went from 0 to 2 in the checks review (b0fb727): at seed 0 the nuc- and fro-SVMs nearly "
    "coincide at d = 4 (corr 0.9994), so the full run's ordering row at d = 4 passed as 'n/a' and tested nothing; "
    "at seed 2 they differ at every d (corr 0.896, 0.881, 0.774)"
)
_NUC_READING = Reading(
    "||W/mu||_* / (nuc-SVM optimum) of each K,Q run (W = K Q^T, d_e = d); the row shows the worst run's ratio",
    _LAST,
    _WORST,
    f"|ratio - 1| <= config.nuc_rtol at every run: 0.05 full, 0.02 quick {_FINITE_REL}",
    sizes=(*_RUNS, "nuc_rtol"),
)
_NUC_OLD_READING = dataclasses.replace(
    _NUC_READING, tolerance=f"|ratio - 1| <= config.nuc_rtol at every run: 0.05 full, 0.1 quick {_FINITE_REL}"
)
_OLD_NUC = "d={d}: K,Q direction has ||W/mu||_* -> nuc-SVM optimum (worst run)"
_NUC_RATIO = (
    "d={d}: K,Q direction has ||W/mu||_* -> nuc-SVM optimum (worst run; Thm 5.1 beyond Assumption 4, open §10.3)"
)
_BOUND = (
    "<= bound at every run, bound = 1e-4 (ours: the reading resolves a limit direction 1e-4 from the SVM's in "
    "1 - corr, an angle of 0.8 degrees). The SVM solutions are far more accurate (true runs reach 1e-9 to 1e-10 "
    "at the full size). The true runs' gap falls like a power of mu (W: about mu^-2; K,Q at d = 16, the slowest: "
    "about mu^-0.4, as K Q^T's second singular value decays), so the full run's length (arc 50 000) is set to "
    "bring d = 16 under the bound"
)
_DIRECTION_WHY = (
    "too weak to fail: the ratio of ||W/mu|| to the SVM optimum sees a limit at another optimal point (of a "
    "weighted norm) only to second order in its distance, but the finite run's own transient to first order (W/mu "
    "off the optimal face lowers the margin linearly). A fixed preconditioner on the gradient converges to a "
    "weighted SVM and passed: W's rows x linspace(0.95, 1.05) gave {fro} (tolerance 0.02 quick; full within 0.01), "
    "K's rows x linspace(0.9, 1.1) gave {nuc} (0.02 quick; full within 0.05). 1 - corr with the SVM's direction "
    "reads both at second order: true {true} quick, mechanism {wrong} (now the falsifier '{name}'). The full run "
    "grew from 10000 steps of 0.1 to 100000 of 0.5 so that the slowest true run (K,Q at d = 16: 8.7e-4 at 10000 "
    "steps) comes under the new bound. The run recomputes this reading at the current sizes beside the current row"
)
_NUC_SIZES = _sizes(2, 500, 50, nuc_rtol=(0.05, 0.02))
NUC_LIMIT = Claim(
    "d={d}: K,Q direction W/mu -> the nuc-SVM's (1 - corr, worst run; Thm 5.1 beyond Assumption 4, open §10.3)",
    _OPEN,
    f"{SOURCE} §7.3, §9 X3, §10.3",
    (TRANSPOSE.name, K_FROZEN.name, K_PRECONDITIONED.name, KQ_AS_W.name),
    id="nuc-limit",
    reading=Reading(
        "1 - corr(W/mu, W_nuc) of each K,Q run (W = K Q^T, d_e = d; corr the cosine of the two matrices, W_nuc "
        "the nuc-SVM solution); the row shows the worst run's",
        _LAST,
        _WORST,
        _BOUND,
        {"bound": 1e-4},
        _RUNS,
    ),
    revisions=(
        Revision(
            _NUC_OLD_READING,
            "2026-11-22",
            _CI_BUDGET,
            "pass: 1.0102 (rel 0.1; d = 6, seed 0; recomputed at the old sizes with the current code)",
            "pass: 1.0000068, 1.00020, 1.0050 at d = 4, 8, 16 (rel 0.05; seed 0, recomputed)",
            claim=_OLD_NUC,
            sizes=_sizes(0, 800, 40, nuc_rtol=(0.05, 0.1)),
        ),
        Revision(
            _NUC_OLD_READING,
            "2026-11-25",
            _SEED_2,
            "pass: 1.0156 (rel 0.1; d = 6, seed 0)",
            "pass: 1.0000068, 1.00020, 1.0050 at d = 4, 8, 16 (rel 0.05; seed 0)",
            claim=_OLD_NUC,
            sizes=_sizes(0, 500, 50, nuc_rtol=(0.05, 0.1)),
        ),
        Revision(
            _NUC_OLD_READING,
            "2026-11-25",
            "the quick tolerance went from 0.1 to 0.02 near its measurement (1e-3; 80dbfce), after the falsifier "
            "audit had named the theorem in the row's text (02eeba0); the full size did not change",
            "pass: 1.0022 (rel 0.1)",
            "pass: 1.0015, 1.00035, 1.0073 at d = 4, 8, 16 (rel 0.05)",
            claim=_OLD_NUC,
            sizes=_sizes(2, 500, 50, nuc_rtol=(0.05, 0.1)),
        ),
        Revision(
            _NUC_READING,
            "2026-11-28",
            _DIRECTION_WHY.format(
                fro="1.0029", nuc="1.0051", true="4.6e-6", wrong="9.8e-4", name="k-gradient-preconditioned"
            ),
            "pass: 1.0022 (rel 0.02) (55b3e6f)",
            "pass: 1.0015, 1.00035, 1.0073 at d = 4, 8, 16 (rel 0.05) (55b3e6f)",
            claim=_NUC_RATIO,
            sizes=_NUC_SIZES,
        ),
    ),
)
_FRO_READING = Reading(
    "||W/mu||_F / (fro-SVM optimum) of each run of W trained directly; the row shows the worst run's ratio",
    _LAST,
    _WORST,
    f"|ratio - 1| <= config.fro_rtol at every run: 0.01 full, 0.02 quick {_FINITE_REL}",
    sizes=(*_RUNS, "fro_rtol"),
)
FRO_LIMIT = Claim(
    "d={d}: combined W's direction W/mu -> the fro-SVM's (1 - corr, worst run; Section 4.2)",
    _SEC42,
    f"{SOURCE} §7.4",
    (SIZE_SCALED.name, W_PRECONDITIONED.name, W_AS_KQ.name),
    id="fro-limit",
    reading=Reading(
        "1 - corr(W/mu, W_fro) of each run of W trained directly (corr the cosine of the two matrices, W_fro the "
        "fro-SVM solution); the row shows the worst run's",
        _LAST,
        _WORST,
        _BOUND,
        {"bound": 1e-4},
        _RUNS,
    ),
    revisions=(
        Revision(
            _FRO_READING,
            "2026-11-22",
            _CI_BUDGET,
            "pass: 1.0037 (rel 0.02; d = 6, seed 0; recomputed at the old sizes with the current code)",
            "pass: 1.000029, 1.000085, 1.000069 at d = 4, 8, 16 (rel 0.01; seed 0, recomputed)",
            claim="d={d}: combined W has ||W/mu||_F -> fro-SVM optimum (worst run)",
            sizes=_sizes(0, 800, 40, fro_rtol=(0.01, 0.02)),
        ),
        Revision(
            _FRO_READING,
            "2026-11-25",
            _SEED_2,
            "pass: 1.0060 (rel 0.02; d = 6, seed 0)",
            "pass: 1.000029, 1.000085, 1.000069 at d = 4, 8, 16 (rel 0.01; seed 0)",
            claim="d={d}: combined W has ||W/mu||_F -> fro-SVM optimum (worst run)",
            sizes=_sizes(0, 500, 50, fro_rtol=(0.01, 0.02)),
        ),
        Revision(
            _FRO_READING,
            "2026-11-28",
            _DIRECTION_WHY.format(
                fro="1.0029", nuc="1.0051", true="1.4e-5", wrong="4.0e-4", name="w-gradient-preconditioned"
            ),
            "pass: 1.0025 (rel 0.02) (55b3e6f)",
            "pass: 1.00029, 1.00005, 1.00007 at d = 4, 8, 16 (rel 0.01) (55b3e6f)",
            claim="d={d}: combined W has ||W/mu||_F -> fro-SVM optimum (worst run; Section 4.2)",
            sizes=_sizes(2, 500, 50, fro_rtol=(0.01, 0.02)),
        ),
    ),
)
_SEPARATED_READING = Reading(
    "min over runs of corr(W_hat, W_nuc) - corr(W_hat, W_fro) for the K,Q runs and of corr(W_hat, W_fro) - "
    "corr(W_hat, W_nuc) for the W runs (cosines of W/mu with the two SVM solutions)",
    _LAST,
    f"{_WORST}; both parametrisations",
    "> 0 at every run (the sign); fails when the two SVMs coincide (corr(nuc, fro) >= 0.999), asking for another seed",
    {"coincide": 0.999},
    _RUNS,
)
_OLD_SEPARATED = Reading(
    _SEPARATED_READING.statistic,
    _LAST,
    f"{_WORST}; both parametrisations",
    "> 0 at every run (the sign); passes as 'n/a' when the two SVMs coincide (corr(nuc, fro) >= 0.999)",
    {"coincide": 0.999},
    _RUNS,
)
SEPARATED = Claim(
    "d={d}: K,Q closer to the nuc-SVM, W closer to the fro-SVM (min over runs of the corr gap)",
    _OPEN,
    f"{SOURCE} §7.4, §10.3",
    (TRANSPOSE.name, K_FROZEN.name, SIZE_SCALED.name, KQ_AS_W.name),
    id="separated",
    reading=_SEPARATED_READING,
    revisions=(
        Revision(
            _OLD_SEPARATED,
            "2026-11-22",
            _CI_BUDGET,
            "pass: 0.138 (d = 6, seed 0: corr(nuc, fro) 0.852; recomputed at the old sizes with the current code)",
            "pass, vacuous at d = 4: 'n/a' (corr(nuc, fro) 0.9994, gap 0.00057); 0.069 at d = 8, 0.166 at d = 16 "
            "(seed 0, recomputed)",
            sizes=_sizes(0, 800, 40),
        ),
        Revision(
            _OLD_SEPARATED,
            "2026-11-25",
            f"{_SEED_2}; and a run whose SVMs coincide now fails the row instead of passing it as 'n/a'",
            "pass: 0.135 (d = 6, seed 0: corr(nuc, fro) 0.852)",
            "pass, vacuous at d = 4: 'n/a' (corr(nuc, fro) 0.9994); 0.069 at d = 8, 0.166 at d = 16 (seed 0)",
            sizes=_sizes(0, 500, 50),
        ),
        Revision(
            _SEPARATED_READING,
            "2026-11-28",
            "the full run grew from 10000 steps of 0.1 to 100000 of 0.5, so that the limit rows' direction reading "
            "(nuc-limit's revision 4, fro-limit's 3) reaches its bound at d = 16; this reading is unchanged",
            "the quick size did not change: the current row's quick outcome is this reading's",
            "pass: 0.103, 0.119, 0.206 at d = 4, 8, 16 (55b3e6f)",
            sizes=_sizes(2, 500, 50),
        ),
    ),
)


def _columns(data, flow, refs: dict) -> dict[str, torch.Tensor]:
    """Per record and run: margin, correlations with both SVMs, and the norms of ``W/mu`` over their optima."""
    args = (data.X, data.Z, flow.path["W"], data.select)
    mu, W_hat = attention_margin(*args), margin_normalized(*args)  # (S, R), (S, R, d, d)
    nan = torch.full_like(mu, torch.nan)
    W_hat = torch.nan_to_num(W_hat)  # zero while mu <= 0; those rows are masked to nan below
    return {
        "mu": mu,
        "corr_nuc": cosine(W_hat, refs["nuc"].W),
        "corr_fro": cosine(W_hat, refs["fro"].W),
        "nuc_ratio": torch.where(mu > 0, torch.linalg.matrix_norm(W_hat, "nuc") / refs["nuc"].norm_value, nan),
        "fro_ratio": torch.where(mu > 0, torch.linalg.matrix_norm(W_hat, "fro") / refs["fro"].norm_value, nan),
        "W_hat_end": W_hat[-1],
    }


def _spectrum(d: int, param: str, W: torch.Tensor) -> pd.DataFrame:
    """Singular values of each run's ``W`` (R, d, d), one row per (run, index)."""
    sv = torch.linalg.svdvals(W)
    runs = np.repeat(np.arange(sv.shape[0]), d)
    return pd.DataFrame(
        {
            "d": d,
            "param": param,
            "run": runs,
            "index": np.tile(np.arange(d), sv.shape[0]),
            "singular_value": sv.reshape(-1).numpy(),
        }
    )


def x3_inits(config: X3Config, d: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """X3's random initialisations at width ``d``: ``K(0)``, ``Q(0)`` and ``W(0)``, in that order.

    Spec: kq-nuclear-norm §9 X3 (random initialisations; the scale and the generator's seed are ours).

    Parameters
    ----------
    config : X3Config
        Its ``runs``, ``init_scale`` and ``seed`` are read.
    d : int
        Token width.

    Returns
    -------
    K0, Q0, W0 : torch.Tensor, shape (runs, d, d), float64
        I.i.d. ``N(0, init_scale^2)`` entries, drawn one after the other from a generator seeded ``seed + d``.
    """
    gen = torch.Generator().manual_seed(config.seed + d)
    shape = (config.runs, d, d)
    K0, Q0, W0 = (config.init_scale * torch.randn(shape, generator=gen, dtype=torch.float64) for _ in range(3))
    return K0, Q0, W0


def _one_width(config: X3Config, d: int, ctx: RunContext) -> tuple[pd.DataFrame, list[pd.DataFrame], float]:
    """The K,Q and W runs at width ``d``: their frame, spectra (runs and SVMs) and the SVMs' correlation."""
    data = scores_equal(config.n, config.T, d, config.gap, seed=config.seed)
    refs = {norm: attention_svm(data, norm=norm) for norm in ("nuc", "fro")}
    K0, Q0, W0 = x3_inits(config, d)
    models = {"KQ": Factored(d, d, K0=K0, Q0=Q0), "W": Combined(d, W0=W0)}
    frames, spectra = [], []
    for name, model in models.items():
        flow = gradient_flow(
            model, data, step=config.step, steps=config.steps, record_every=config.record_every, progress=ctx.progress
        )
        columns = _columns(data, flow, refs)
        spectra.append(_spectrum(d, name, columns.pop("W_hat_end")))
        frames.append(flow.frame.assign(d=d, param=name, **{k: v.reshape(-1).numpy() for k, v in columns.items()}))
    spectra += [_spectrum(d, f"{norm}-SVM", refs[norm].W[None]) for norm in ("nuc", "fro")]
    return pd.concat(frames, ignore_index=True), spectra, float(cosine(refs["nuc"].W, refs["fro"].W))


def run_x3(config: X3Config, ctx: RunContext) -> ExperimentResult:
    """X3: for each d, NGD paths of full K,Q and of W from ``runs`` random inits, against the nuc and fro SVMs."""
    frames, spectra, checks = [], [], []
    for d in ctx.bar(config.ds, desc="d"):
        frame, spectrum, corr_refs = _one_width(config, d, ctx)
        frames.append(frame)
        spectra += spectrum
        checks += _x3_checks(config, d, frame, corr_refs, ctx.quick)
    frame = pd.concat(frames, ignore_index=True)
    spectrum = pd.concat(spectra, ignore_index=True)
    fig = _x3_figure(config, frame, spectrum)
    return ExperimentResult(
        frame=frame, checks=checks, figures={"nuclear_vs_frobenius": fig}, tables={"spectra": spectrum}
    )


def _worst(ratios: pd.Series) -> float:
    """The ratio farthest from 1; NaN when a run ended with ``mu <= 0`` (no direction: the row then fails)."""
    if ratios.isna().any():
        return float("nan")
    return float(ratios.iloc[int((ratios - 1).abs().argmax())])


def _worst_gap(end: pd.DataFrame, column: str) -> float:
    """The largest ``1 - corr`` over the runs at the last step; NaN when a run ended with ``mu <= 0``."""
    if (end["mu"] <= 0).any() or end[column].isna().any():
        return float("nan")
    return float((1.0 - end[column]).max())


def _limit_rows(claim: Claim, d: int, gap: float, ratio: float, old: dict[int, str], quick: bool) -> list[Check]:
    """The direction row of a limit claim at width ``d``, and beside it the ratio readings it replaced (revision
    number: the config field of its tolerance, read from the revision's sizes)."""
    bound = claim.param("bound")
    rows = [claim.format(d=d).less(gap, bound)]
    for number, name in old.items():
        rows.append(claim.revised(number).format(d=d).close(1.0, ratio, revised_size(claim, number, name, quick)))
    return rows


def _x3_checks(config: X3Config, d: int, frame: pd.DataFrame, corr_refs: float, quick: bool = False) -> list[Check]:
    """The three rows of one width from its frame (both parametrisations) at the last step, and the ratio readings
    the limit rows replaced (nuclear: revisions 3 and 4; Frobenius: revision 3) beside them."""
    end = frame[frame["step"] == frame["step"].max()]
    kq, w = end[end["param"] == "KQ"], end[end["param"] == "W"]
    coincide = SEPARATED.param("coincide")
    distinct = corr_refs < coincide  # else the ordering below says nothing: the run fails and asks for another seed
    gap = float(min((kq["corr_nuc"] - kq["corr_fro"]).min(), (w["corr_fro"] - w["corr_nuc"]).min()))
    separated = bool((kq["corr_nuc"] > kq["corr_fro"]).all() and (w["corr_fro"] > w["corr_nuc"]).all())
    nuc_gap, fro_gap = _worst_gap(kq, "corr_nuc"), _worst_gap(w, "corr_fro")
    return [
        *_limit_rows(NUC_LIMIT, d, nuc_gap, _worst(kq["nuc_ratio"]), {4: "nuc_rtol", 3: "nuc_rtol"}, quick),
        *_limit_rows(FRO_LIMIT, d, fro_gap, _worst(w["fro_ratio"]), {3: "fro_rtol"}, quick),
        SEPARATED.format(d=d).holds(
            f"> 0 (SVMs differ: corr(nuc, fro) = {corr_refs:.4g})"
            if distinct
            else f"untestable: the two SVMs coincide (corr {corr_refs:.5f} >= {coincide:g}); pick another seed",
            gap,
            "sign: deterministic runs, every run on its own side",
            distinct and separated,
            margin=gap if distinct else None,
        ),
    ]


@house_figure
def _x3_figure(config: X3Config, frame: pd.DataFrame, spectrum: pd.DataFrame):
    fig, axes = new_figure(2, len(config.ds), width=3.6)  # one row per d: correlations, then the spectrum
    corr, spec = axes[0::2], axes[1::2]
    for k, d in enumerate(config.ds):
        rows = frame[(frame["d"] == d) & (frame["mu"] > 1)]
        for (name, run), part in rows.groupby(["param", "run"]):
            style = "-" if name == "KQ" else "--"
            who = "$K,Q$" if name == "KQ" else "$W$"
            for column, svm, color in (("corr_nuc", "nuc", "C0"), ("corr_fro", "fro", "C1")):
                corr[k].plot(
                    np.log(part["mu"]),
                    (1 - part[column]).clip(lower=EPS),
                    style,
                    color=color,
                    lw=1,
                    label=f"{who}: to the {svm}-SVM" if run == 0 else None,
                )
        log_gap_axis(corr[k], r"$1 - \mathrm{corr}(W_t, W_{svm})$")
        corr[k].set(xlabel=r"$\ln \mu(t)$", title=f"$d = {d}$")
        sv = spectrum[(spectrum["d"] == d) & (spectrum["run"] == 0)]
        for name, part in sv.groupby("param"):
            spec[k].semilogy(part["index"], part["singular_value"].clip(lower=1e-12), "o-", ms=3, label=name)
        label_axes(spec[k], "index $i$", r"$\sigma_i(W / \mu)$ at the end", f"spectrum, $d = {d}$")
    corr[0].legend()
    spec[0].legend()
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="kq-nuclear.x3",
        cost=54.0,
        config_type=X3Config,
        run=run_x3,
        quick={
            "ds": (6,),
            "runs": 2,
            "steps": 500,
            "step": 0.5,
            "record_every": 50,
        },
        claims=(NUC_LIMIT, FRO_LIMIT, SEPARATED),
        falsifiers=FALSIFIERS,
    )
)
