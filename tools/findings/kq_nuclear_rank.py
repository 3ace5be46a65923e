"""Which data sets let x3's K,Q flow reach the nuclear-norm SVM within its run: the solution's rank, judged.

``kq-nuclear.x3``'s ``nuc-limit`` row (the open, non-aligned case of the K,Q paper) failed at seeds 6 and 9 of the
full size and passes at its default seed 2. For each data set ``scores_equal(3, 3, d, 6, seed)`` this script reads
the nuclear-norm program alone, before any flow:

- ``rank``: the solution's singular values above ``1e-6`` of the largest (``attention_svm(norm="nuc")``);
- ``sv_ratio``: its second singular value over the first;
- ``kappa``: one minus the norm of its dual certificate off the solution's range (:func:`off_range_rate`);

then runs x3's K,Q flows at x3's full settings (``X3Config``: 3 inits of scale 0.1, NGD of step 0.5, 100 000
steps; ``--steps`` shortens them) and reports the worst run's ``1 - corr(W/mu, W_nuc)`` at the end against the
row's bound (1e-4), the local log-log slope of that gap against the margin ``mu`` over the run's last factor of 3
in ``mu`` (the slowest run's), and the runs' mean second-over-first singular value of ``W/mu``.

Three predictions, each registered in docs/findings.md before the seeds it reads ran:

- ``--select rank`` (registered after seeds 0-199, judged on 200-399: it failed). Every rank-2 program of the seeds
  asked is run, and as many rank-1 programs (the lowest seeds). At ``d`` = 4 and 8, at least 95% of the rank-1
  programs pass the bound at x3's full settings, and at least 30% of the rank-2 ones fail it.
- ``--select kappa`` (registered after seeds 0-399, judged on 400-599). ``kappa`` is the rate of
  :func:`off_range_rate`. The first 30 rank-1 programs by seed with ``kappa`` in ``KAPPA_BAND`` are run. The late
  slope lies within ``SLOPE_RATIO`` times ``-2 kappa`` for at least 90% of them, and at least 95% of those with
  ``kappa >= 0.15`` pass the bound.
- ``--follow`` (registered after seeds 0-199's rank-2 failures were followed, judged on those of 200-399). Each
  rank-2 program of a ``--seeds`` run's CSV that fails the bound at x3's length is followed on the same flow far
  beyond it (:func:`followed`: ``gradient_flow(method="ngd-relative")``, ``ln mu`` in the 80s to the 300s). At least
  ``FOLLOW_SHARE`` of them end within the bound, and every one ends below its gap where x3's runs end.

``--judge`` prints the verdict over the programs run::

    python tools/findings/kq_nuclear_rank.py --seeds 200-399 --ds 4 8 --out ranks.csv --judge
    python tools/findings/kq_nuclear_rank.py --seeds 400-599 --ds 4 8 --select kappa --out law.csv --judge

``--from-csv`` reads programs earlier runs wrote instead of running flows (to judge them again, or together), and
``--figure`` draws the rate and the row against ``kappa`` (docs/findings/x3-kappa.png)::

    python tools/findings/kq_nuclear_rank.py --from-csv ranks.csv law.csv --select kappa --judge --figure law.png
    python tools/findings/kq_nuclear_rank.py --from-csv ranks.csv --follow --out followed.csv --judge \
        --figure followed.png

``--follow`` writes each program's path beside ``--out`` (``followed-paths.csv``) and draws the paths with
``--figure`` (docs/findings/x3-follow.png).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from attnlab.data import scores_equal
from attnlab.experiments.kq_nuclear.x3 import NUC_LIMIT, X3Config, x3_inits
from attnlab.metrics import attention_margin, cosine, margin_normalized
from attnlab.models import Factored
from attnlab.plotting import EPS, house_figure, label_axes, new_figure, theory_hline, theory_line
from attnlab.svm import attention_svm
from attnlab.svm._program import attention_constraint_vectors, constraint_matrices
from attnlab.training.flow import gradient_flow

RANK_TOL = 1e-6  # singular values above this fraction of the largest count toward the rank
PASS_RANK1, FAIL_RANK2 = 0.95, 0.30  # the rank prediction's shares
KAPPA_BAND, LAW_COUNT = (0.1, 0.4), 30  # the rate prediction's programs: kappa in the band, the first 30 by seed
SLOPE_RATIO, LAW_SHARE = (0.8, 1.25), 0.90  # slope / (-2 kappa) in this range for at least this share
KAPPA_PASS, PASS_SHARE = 0.15, 0.95  # at least this share of the programs with kappa >= KAPPA_PASS pass the bound
LN_MU_X3 = 21.0  # ln mu where x3's full runs end (mu near 1e9): the followed runs' gap there, against the end
FOLLOW_STEP, FOLLOW_STEPS = 2e-3, 125_000  # ngd-relative: ln mu near 80 at the end (seed 199 at d = 4)
FOLLOW_SHARE = 0.80  # the followed programs: at least this share end within x3's bound, and every one below gap_x3


def _rank(sv: torch.Tensor) -> int:
    """How many singular values ``sv`` (descending) lie above ``RANK_TOL`` of the largest."""
    return int((sv > RANK_TOL * sv[0]).sum())


def range_of(W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The left and right singular vectors ``U``, ``V`` (d, r each) of ``W``'s range, ``r`` its rank (:func:`_rank`)."""
    U, sv, Vh = torch.linalg.svd(W)
    rank = _rank(sv)
    return U[:, :rank], Vh[:rank].mT


def off_range(U: torch.Tensor, V: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``P_L = I - U U^T`` and ``P_R = I - V V^T`` (d, d): the projections off the range :func:`range_of` gives."""
    eye = torch.eye(U.shape[0], dtype=U.dtype)
    return eye - U @ U.mT, eye - V @ V.mT


def sv_ratio(W: torch.Tensor) -> np.ndarray:
    """``sigma_2 / sigma_1`` of each ``W`` (..., d, d), shape (...)."""
    sv = torch.linalg.svdvals(W).numpy()
    return sv[..., 1] / sv[..., 0]


def ln_margin(mu: np.ndarray) -> np.ndarray:
    """``ln mu`` where the margin ``mu`` is positive, NaN where a run does not separate yet."""
    return np.log(np.where(mu > 0, mu, np.nan))


def constraint_normals(data) -> tuple[torch.Tensor, torch.Tensor]:
    """The attention SVM's constraints ``(i, t)`` with ``t != select_i`` (``pairs``, shape (m, 2)) and their
    matrices ``A_it = (x_{i,select_i} - x_it) z_i^T`` (m, d, d): the library's own, as its programs build them."""
    pairs, diff, queries = attention_constraint_vectors(data, data.select)
    return torch.from_numpy(pairs), torch.from_numpy(constraint_matrices(diff, queries))


def certificate(data, duals: torch.Tensor) -> torch.Tensor:
    """``G = sum_it lambda_it A_it``, shape (d, d): the nuclear program's dual certificate for its ``duals``
    (n, T)."""
    pairs, normals = constraint_normals(data)
    return torch.einsum("m,mde->de", duals[pairs[:, 0], pairs[:, 1]], normals)


def off_range_rate(data, W: torch.Tensor, duals: torch.Tensor) -> float:
    """``kappa = 1 - ||P_L G P_R||_op``: how fast ``W/mu``'s directions off the nuclear solution's range fall.

    ``G = sum_it lambda_it (x_{i,opt} - x_it) z_i^T`` is the program's dual certificate (``U^T G V = I`` on the
    range of the solution ``W``, ``P_L``, ``P_R`` the projections off it). Along the balanced K,Q flow each
    singular value grows as ``d log sigma = 2 <u, G_t v> dt`` with ``G_t -> G``, so a direction off the range falls
    like ``mu^(-kappa)`` against the solution's, and ``1 - corr``, second order in it, like ``mu^(-2 kappa)`` (ours;
    the l1 analogue is ``attnlab.experiments.kq_nuclear.common.zero_entry_rate``). 1.0 when ``W`` has full rank.
    """
    U, V = range_of(W)
    if U.shape[1] == W.shape[0]:
        return 1.0
    off_left, off_right = off_range(U, V)
    return 1.0 - float(torch.linalg.matrix_norm(off_left @ certificate(data, duals) @ off_right, ord=2))


def nuclear_solution(seed: int, d: int, config: X3Config) -> tuple[int, float, float]:
    """``(rank, sv_ratio, kappa)`` of the nuclear-norm SVM of x3's data set at ``seed`` and width ``d``."""
    data = scores_equal(config.n, config.T, d, config.gap, seed=seed)
    solution = attention_svm(data, norm="nuc")
    rank = _rank(torch.linalg.svdvals(solution.W))
    return rank, float(sv_ratio(solution.W)), off_range_rate(data, solution.W, solution.duals)


def kq_path(
    seed: int, d: int, config: X3Config, inits: tuple[torch.Tensor, torch.Tensor] | None = None, **flow: object
) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    """x3's K,Q runs at ``seed`` and ``d`` (``flow``: :func:`gradient_flow`'s step, steps, method, record_every):
    ``mu`` and ``1 - corr(W/mu, W_nuc)`` at every record, shape (S, R) each, and ``W/mu`` (S, R, d, d).

    The inits are x3's own (:func:`attnlab.experiments.kq_nuclear.x3.x3_inits` at ``seed``) unless ``inits`` gives
    ``K(0)`` and ``Q(0)``, shape (R, d, d) each.
    """
    data = scores_equal(config.n, config.T, d, config.gap, seed=seed)
    reference = attention_svm(data, norm="nuc").W
    K0, Q0 = inits if inits is not None else x3_inits(dataclasses.replace(config, seed=seed), d)[:2]
    path = gradient_flow(Factored(d, d, K0=K0, Q0=Q0), data, progress=False, **flow).path
    args = (data.X, data.Z, path["W"], data.select)
    mu, W_hat = attention_margin(*args).numpy(), margin_normalized(*args)
    return mu, (1 - cosine(torch.nan_to_num(W_hat), reference)).numpy(), W_hat


def kq_gap(seed: int, d: int, config: X3Config) -> dict[str, float]:
    """x3's K,Q runs at ``seed`` and ``d``: the worst final gap, the slowest run's late slope, the runs' sv ratio."""
    mu, gap, W_hat = kq_path(seed, d, config, step=config.step, steps=config.steps, record_every=config.record_every)
    late = mu[:, 0] >= mu[-1, 0] / 3  # the last factor of 3 in mu (run 0's records; the runs grow alike)
    slopes = [
        np.polyfit(np.log(mu[late, r]), np.log(np.maximum(gap[late, r], 1e-16)), 1)[0] for r in range(gap.shape[1])
    ]
    return {
        "gap": float(gap[-1].max()),
        "slope": float(max(slopes)),
        "run_sv_ratio": float(sv_ratio(W_hat[-1]).mean()),
        "mu": float(mu[-1].min()),
    }


def followed(
    seed: int, d: int, config: X3Config, step: float = FOLLOW_STEP, steps: int = FOLLOW_STEPS
) -> tuple[dict[str, float], pd.DataFrame]:
    """x3's K,Q runs at ``seed`` and ``d`` followed far beyond x3's length, on the flow's path at a growing speed
    (``gradient_flow(method="ngd-relative")``: steps of arc length ``step (1 + ||theta||)`` from x3's inits).

    Returns the readings, ``gap_x3``: the worst run's gap at the first record where every run has ``ln mu >=
    LN_MU_X3`` (about where x3's full runs end; NaN if never), ``gap_end`` at the last record, ``ln_mu_end`` (the
    smallest over the runs) and ``end_slope``: the slowest run's log-log slope of the gap against ``mu`` over the last
    10 in ``ln mu``; and the path, one row per record: ``ln_mu`` (the smallest over the runs) and the worst ``gap``.
    """
    mu, gap, _ = kq_path(
        seed, d, config, step=step, steps=steps, method="ngd-relative", record_every=max(1, steps // 400)
    )
    path = worst_path(mu, gap)
    ln_mu = path["ln_mu"].to_numpy()
    reached = np.flatnonzero(ln_mu >= LN_MU_X3)
    late = ln_mu >= ln_mu[-1] - 10
    slopes = [np.polyfit(ln_mu[late], np.log(np.maximum(gap[late, r], 1e-16)), 1)[0] for r in range(gap.shape[1])]
    readings = {
        "gap_x3": float(gap[reached[0]].max()) if reached.size else float("nan"),
        "gap_end": float(gap[-1].max()),
        "ln_mu_end": float(ln_mu[-1]),
        "end_slope": float(max(slopes)),
    }
    return readings, path


def worst_path(mu: np.ndarray, gap: np.ndarray) -> pd.DataFrame:
    """One row per record of runs' ``mu`` and gaps (S, R): ``ln_mu``, the smallest over the runs (every run past
    it), and the worst ``gap``."""
    return pd.DataFrame({"ln_mu": ln_margin(mu).min(axis=1), "gap": gap.max(axis=1)})


def chosen(survey: pd.DataFrame, select: str = "rank") -> pd.DataFrame:
    """The programs a prediction reads (``survey``: one row per program, ``rank`` and ``kappa`` columns).

    ``"rank"``: every rank-2 program and, per width, as many rank-1 programs (the lowest seeds). ``"kappa"``: the
    first ``LAW_COUNT`` rank-1 programs by seed (then width) whose ``kappa`` lies in ``KAPPA_BAND``.
    """
    if select == "kappa":
        low, high = KAPPA_BAND
        band = survey[(survey["rank"] == 1) & survey["kappa"].between(low, high)]
        return band.sort_values(["seed", "d"]).head(LAW_COUNT).reset_index(drop=True)
    picked = []
    for _, at_d in survey.groupby("d"):
        rank2 = at_d[at_d["rank"] >= 2]
        picked += [rank2, at_d[at_d["rank"] == 1].head(len(rank2))]
    return pd.concat(picked, ignore_index=True)


def verdict(frame: pd.DataFrame, bound: float) -> tuple[bool, str]:
    """The prediction judged on ``frame`` (columns ``rank`` and ``gap``): the two shares and whether both hold."""
    passes = frame["gap"] <= bound
    rank1, rank2 = passes[frame["rank"] == 1], passes[frame["rank"] >= 2]
    if rank1.empty or rank2.empty:
        return False, "no verdict: the prediction needs programs of both ranks"
    held = rank1.mean() >= PASS_RANK1 and (1 - rank2.mean()) >= FAIL_RANK2
    return bool(held), (
        f"rank 1: {int(rank1.sum())}/{len(rank1)} pass (predicted >= {PASS_RANK1:.0%}); rank 2: "
        f"{int((~rank2).sum())}/{len(rank2)} fail (predicted >= {FAIL_RANK2:.0%}); prediction "
        f"{'holds' if held else 'fails'}"
    )


def law_verdict(frame: pd.DataFrame, bound: float) -> tuple[bool, str]:
    """The rate prediction judged on ``frame``'s rank-1 programs with ``kappa`` in ``KAPPA_BAND`` (columns ``rank``,
    ``kappa``, ``slope``, ``gap``): both shares, and whether both hold."""
    frame = frame[(frame["rank"] == 1) & frame["kappa"].between(*KAPPA_BAND)]
    if frame.empty:
        return False, "no verdict: no program in the band"
    ratio = frame["slope"] / (-2 * frame["kappa"])
    on_law = ratio.between(*SLOPE_RATIO)
    passes = frame.loc[frame["kappa"] >= KAPPA_PASS, "gap"] <= bound
    held = on_law.mean() >= LAW_SHARE and (passes.empty or passes.mean() >= PASS_SHARE)
    return bool(held), (
        f"slope / (-2 kappa) in [{SLOPE_RATIO[0]}, {SLOPE_RATIO[1]}]: {int(on_law.sum())}/{len(frame)} (predicted >= "
        f"{LAW_SHARE:.0%}; range of the ratio {ratio.min():.3f} to {ratio.max():.3f}); kappa >= {KAPPA_PASS}: "
        f"{int(passes.sum())}/{len(passes)} pass {bound:g} (predicted >= {PASS_SHARE:.0%}); prediction "
        f"{'holds' if held else 'fails'}"
    )


def follow_programs(
    frame: pd.DataFrame,
    config: X3Config,
    bound: float,
    step: float = FOLLOW_STEP,
    steps: int = FOLLOW_STEPS,
    out: Path | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`followed` on every rank-2 program of ``frame`` that fails x3's row (``gap > bound``), by seed: the
    programs with their readings, and their paths (columns ``seed``, ``d``, ``ln_mu``, ``gap``; with ``out``,
    written there as each ends: :func:`stacked_paths`)."""
    picked = frame[(frame["rank"] >= 2) & (frame["gap"] > bound)].sort_values(["seed", "d"]).reset_index(drop=True)
    readings, paths = follow_all(list(zip(picked["seed"], picked["d"])), config, step, steps, out)
    return pd.concat([picked, readings], axis=1), paths


def follow_all(
    programs: list[tuple[int, int]],
    config: X3Config,
    step: float = FOLLOW_STEP,
    steps: int = FOLLOW_STEPS,
    out: Path | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`followed` on every ``(seed, d)`` of ``programs``: their readings, one row each, and their paths
    (:func:`stacked_paths`, written to the CSV ``out`` as each ends)."""
    rows = []

    def path_of(seed: int, d: int) -> pd.DataFrame:
        readings, path = followed(seed, d, config, step, steps)
        rows.append(readings)
        return path

    paths = stacked_paths(programs, path_of, out)
    return pd.DataFrame(rows), paths


def stacked_paths(
    programs: list[tuple[int, int]],
    path_of: Callable[[int, int], pd.DataFrame],
    out: Path | None = None,
    desc: str = "follow",
    columns: tuple[str, ...] = ("ln_mu", "gap"),
) -> pd.DataFrame:
    """``path_of(seed, d)`` (``columns``) of every ``(seed, d)`` of ``programs``, stacked with their ``seed`` and
    ``d``. With ``out``, the CSV is started with its header and each path appended as it ends, so that an interrupted
    run keeps every finished program."""
    header = [*columns, "seed", "d"]
    if out is not None:
        pd.DataFrame(columns=header).to_csv(out, index=False)
    frames = []
    for seed, d in tqdm(programs, desc=desc):
        frames.append(path_of(int(seed), int(d)).assign(seed=int(seed), d=int(d))[header])
        if out is not None:
            frames[-1].to_csv(out, mode="a", header=False, index=False)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=header)


def paths_beside(out: Path) -> Path:
    """The paths' CSV beside the programs' CSV ``out``: ``F.csv`` -> ``F-paths.csv``."""
    return out.with_name(out.stem + "-paths.csv")


def follow_verdict(frame: pd.DataFrame, bound: float) -> tuple[bool, str]:
    """The third prediction judged on the followed programs (columns ``gap_x3``, ``gap_end``): the share that ends
    within ``bound``, whether every one fell below its gap at ``LN_MU_X3``, and whether both hold."""
    if frame.empty:
        return False, "no verdict: no program followed"
    within, fell = frame["gap_end"] <= bound, frame["gap_end"] < frame["gap_x3"]
    held = within.mean() >= FOLLOW_SHARE and bool(fell.all())
    return bool(held), (
        f"followed to ln mu {frame['ln_mu_end'].min():.0f}-{frame['ln_mu_end'].max():.0f}: {int(within.sum())}/"
        f"{len(frame)} end within {bound:g} (predicted >= {FOLLOW_SHARE:.0%}); {int(fell.sum())}/{len(frame)} end "
        f"below their gap at ln mu {LN_MU_X3:g} (predicted all); prediction {'holds' if held else 'fails'}"
    )


def seed_range(text: str) -> list[int]:
    """``"200-399"`` or ``"9"``: an inclusive range of seeds, or one."""
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


def program(text: str) -> tuple[int, int]:
    """``"591:4"``: a program's ``(seed, d)``, for the command lines' ``SEED:D`` arguments."""
    seed, _, d = text.partition(":")
    if not (seed.isdigit() and d.isdigit() and int(d) >= 2):
        raise argparse.ArgumentTypeError(f"{text!r} is not SEED:D with a seed >= 0 and a width d >= 2; e.g. 591:4")
    return int(seed), int(d)


def run_programs(seeds: list[int], config: X3Config, select: str) -> pd.DataFrame:
    """Survey the programs of ``seeds`` at ``config.ds``, then run x3's K,Q flows on those ``select`` picks."""
    survey = pd.DataFrame(
        [(s, d, *nuclear_solution(s, d, config)) for d in config.ds for s in seeds],
        columns=["seed", "d", "rank", "sv_ratio", "kappa"],
    )
    print(f"rank 2 at {int((survey['rank'] >= 2).sum())} of {len(survey)} programs")
    frame = chosen(survey, select)
    rows = [kq_gap(int(r.seed), int(r.d), config) for r in tqdm(frame.itertuples(), total=len(frame), desc="flows")]
    return pd.concat([frame, pd.DataFrame(rows)], axis=1)


def read_programs(
    paths: list[Path], config: X3Config, only: Callable[[pd.DataFrame], pd.Series] | None = None
) -> pd.DataFrame:
    """Programs earlier runs wrote (each ``(seed, d)`` once; with ``only``, the rows it keeps of the files' own
    columns), their program columns (rank, sv_ratio, kappa) computed again."""
    frame = pd.concat([pd.read_csv(path) for path in paths], ignore_index=True).drop_duplicates(["seed", "d"])
    if only is not None:
        frame = frame[only(frame)].reset_index(drop=True)
    programs = [nuclear_solution(int(s), int(d), config) for s, d in zip(frame["seed"], frame["d"])]
    rank, sv_ratio, kappa = (list(column) for column in zip(*programs))
    return frame.assign(rank=rank, sv_ratio=sv_ratio, kappa=kappa)


@house_figure
def law_figure(frame: pd.DataFrame, bound: float):
    """Left: each rank-1 program's late slope against ``-2 kappa`` and the rate; right: every program's final gap
    against ``kappa``, by rank, and the row's bound."""
    fig, (left, right) = new_figure(2)
    rank1, rank2 = frame[frame["rank"] == 1], frame[frame["rank"] >= 2]
    left.scatter(-2 * rank1["kappa"], rank1["slope"], s=9, color="C0", label="rank-1 programs")
    theory_line(left, [-1.0, 0.0], [-1.0, 0.0], r"slope $= -2\kappa$ (ours)")
    label_axes(left, r"$-2\kappa$", r"late slope of $1 - \mathrm{corr}$ in $\ln \mu$", "the rate")
    for part, color, name in ((rank1, "C0", "rank 1"), (rank2, "C3", "rank 2")):
        right.scatter(part["kappa"], part["gap"].clip(lower=EPS), s=9, color=color, label=name)
    theory_hline(right, bound, f"x3's bound {bound:g}")
    right.set_yscale("log")
    label_axes(right, r"$\kappa$", r"$1 - \mathrm{corr}(W/\mu, W_{\mathrm{nuc}})$ at the end", "the row")
    left.legend()
    right.legend(loc="lower left")
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--seeds", type=seed_range, help="an inclusive range, e.g. 200-399: survey and run these")
    source.add_argument("--from-csv", type=Path, nargs="+", help="read programs earlier runs wrote instead")
    parser.add_argument("--ds", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--steps", type=int, default=X3Config.steps, help="NGD steps (x3's full run: 100000)")
    parser.add_argument("--out", type=Path, help="CSV of every program run (with --seeds)")
    parser.add_argument("--select", choices=("rank", "kappa"), default="rank", help="which prediction's programs")
    parser.add_argument("--judge", action="store_true", help="print the prediction's verdict")
    parser.add_argument("--figure", type=Path, help="PNG: the rate and the row against kappa (--follow: the paths)")
    parser.add_argument("--follow", action="store_true", help="follow the failing rank-2 programs of --from-csv")
    parser.add_argument("--eta", type=float, default=FOLLOW_STEP, help="--follow: arc length eta (1 + ||theta||)")
    parser.add_argument("--follow-steps", type=int, default=FOLLOW_STEPS, help="--follow: steps of each program")
    args = parser.parse_args(argv)
    if (args.seeds or args.follow) and not args.out:
        parser.error("--seeds and --follow run flows for minutes: pass --out FILE.csv to keep them")
    if args.follow and not args.from_csv:
        parser.error("--follow reads the programs x3's row failed from --from-csv (a --seeds run's CSV)")
    config = X3Config(ds=tuple(args.ds), steps=args.steps, record_every=max(1, args.steps // 100))
    bound = NUC_LIMIT.param("bound")
    if args.follow:  # only the failing rank-2 programs need their program solved again
        frame = read_programs(args.from_csv, config, lambda f: (f["rank"] >= 2) & (f["gap"] > bound))
        followed_programs = follow_programs(frame, config, bound, args.eta, args.follow_steps, paths_beside(args.out))
        return _follow(*followed_programs, args)
    frame = read_programs(args.from_csv, config) if args.from_csv else run_programs(args.seeds, config, args.select)
    if args.out:
        frame.to_csv(args.out, index=False)
    for (d, rank), group in frame.groupby(["d", "rank"]):
        print(f"d {d}, rank {rank}: {int((group['gap'] <= bound).sum())}/{len(group)} pass {bound:g}; "
              f"median gap {group['gap'].median():.2e}, median slope {group['slope'].median():.2f}")  # fmt: skip
    if args.judge:
        print((verdict if args.select == "rank" else law_verdict)(frame, bound)[1])
    if args.figure:
        law_figure(frame, bound).savefig(args.figure)
    return 0


@house_figure
def follow_figure(paths: pd.DataFrame, bound: float):
    """Each followed program's worst gap against ``ln mu``, with where x3's runs end and x3's bound."""
    fig, (ax,) = new_figure(1)
    colors = {d: f"C{i}" for i, d in enumerate(sorted(paths["d"].unique()))}
    for (d, _), path in paths.groupby(["d", "seed"]):
        ax.plot(path["ln_mu"], path["gap"].clip(lower=EPS), color=colors[d], lw=0.8)
    for d, color in colors.items():
        ax.plot([], [], color=color, label=f"d = {d}")
    ax.axvline(LN_MU_X3, color="0.4", ls=":", label="where x3's full runs end")
    theory_hline(ax, bound, f"x3's bound {bound:g}")
    ax.set_yscale("log")
    label_axes(ax, r"$\ln \mu$", r"worst $1 - \mathrm{corr}(W/\mu, W_{\mathrm{nuc}})$", "rank-2 failures, followed")
    ax.legend()
    return fig


def _follow(frame: pd.DataFrame, paths: pd.DataFrame, args: argparse.Namespace) -> int:
    """Write and print the followed programs (their paths are written as they end; the verdict with ``--judge``, the
    figure with ``--figure``)."""
    frame.to_csv(args.out, index=False)
    for r in frame.itertuples():
        print(f"seed {r.seed} d {r.d}: gap {r.gap_x3:.2e} at ln mu {LN_MU_X3:g}, {r.gap_end:.2e} at ln mu "
              f"{r.ln_mu_end:.1f} (slope {r.end_slope:.2f})")  # fmt: skip
    if args.judge:
        print(follow_verdict(frame, NUC_LIMIT.param("bound"))[1])
    if args.figure:
        follow_figure(paths, NUC_LIMIT.param("bound")).savefig(args.figure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
