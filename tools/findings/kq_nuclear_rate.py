"""How fast x3's K,Q flow reaches the nuclear-norm SVM, predicted from the program alone (ours; nothing here is proved).

Along the balanced K,Q flow (``K K^T = |W|_L``, ``Q Q^T = |W|_R``: x3's small inits leave the imbalance negligible
as ``||W||`` grows) ``W`` moves as ``dW/dt = G |W|_R + |W|_L G`` for the negative loss gradient ``G``
(:func:`balanced_velocity`). Near the limit write ``W = mu (W* + D)``, ``mu`` the margin. The loss weights
``exp(-mu <A_n, W>)`` of the support constraints ``A_n = (x_{i,opt} - x_it) z_i^T`` keep their margins equal up to
``O(1/mu)``, so they act as multipliers: ``G`` lies in the support's span and moves every support margin alike. In
the time ``tau = ln mu``, ``dD/dtau = Pi (V'(W*)[D] - D)`` on the directions ``D`` that keep the support margins
equal, where ``V'`` is the velocity's derivative at ``G = G*/2`` (the certificate ``G*`` with ``U^T G* V = I``
makes ``W*`` a fixed point) and ``Pi`` the margin-keeping projection along the span's velocities. Its rates
(:func:`linearised_rates`, the smallest ``r_min``) and the off-range rate ``kappa`` of
``kq_nuclear_rank.off_range_rate`` (the off-range block is not smooth, and grows as ``mu^(1 - kappa)``) give
``1 - corr(W/mu, W*) ~ mu^(-2 min(kappa, r_min))``.

At rank 1, ``r_min = 1/2`` (the singular vectors' tilt), so this is the rank-1 law ``mu^(-2 kappa)`` where
``2 kappa < 1`` and ``mu^(-1)`` beyond; at rank 2, ``r_min`` is 0.009 to 0.41 (median 0.14 over seeds 0-399),
which is why x3's runs end short of the bound there (docs/findings.md, "The rank-2 rate").

The prediction (registered in docs/findings.md after seeds 0-399's followed rank-2 paths, judged on seeds
400-599: it failed, 9/12 and 7/11 against 85% and 75%): :func:`rate_reading` reads each followed path's slope of
``ln gap`` against ``ln mu`` where the gap lies in ``WINDOW`` past ``ln mu = LN_MU_X3``, and :func:`rate_verdict`
compares it with ``-2 min(kappa, r_min)``::

    python tools/findings/kq_nuclear_rate.py --seeds 400-599 --ds 4 8 --out rates.csv --judge
    python tools/findings/kq_nuclear_rate.py --from-paths followed-paths.csv --out rates.csv --judge

The second reads the paths of ``kq_nuclear_rank.py --follow`` (or of ``--seeds``) instead of following anything.
``--near SEED:D ...`` prints the local slopes of the flow started near the solution (:func:`near_solution`), which
tell a program's own rate from x3's transient::

    python tools/findings/kq_nuclear_rate.py --near 456:4 410:4

The fifth prediction (registered in docs/findings.md after seeds 400-599's near-solution paths, judged on seeds
600-799: it held, 38/39 and 32/33) keeps the claim and the verdict and changes the reading: ``--near-seeds``
follows each rank-2 program from near the solution at ``NEAR_STEP`` for ``NEAR_STEPS`` (:func:`near_paths`, about
2 min a program) and :func:`asymptotic_reading` reads the slope where the gap lies in ``ASYMPTOTE``, below the
approach's plateaus and above the steps' floor::

    python tools/findings/kq_nuclear_rate.py --near-seeds 600-699 --ds 4 8 --out near.csv --judge
    python tools/findings/kq_nuclear_rate.py --from-paths near-paths.csv --reading asymptote --out near.csv --judge
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from kq_nuclear_rank import (
    FOLLOW_STEP,
    FOLLOW_STEPS,
    LN_MU_X3,
    certificate,
    constraint_normals,
    follow_all,
    kq_path,
    nuclear_solution,
    off_range,
    off_range_rate,
    paths_beside,
    program,
    range_of,
    seed_range,
    stacked_paths,
    worst_path,
)
from tqdm import tqdm

from attnlab.data import scores_equal
from attnlab.experiments.kq_nuclear.x3 import X3Config
from attnlab.plotting import house_figure, label_axes, new_figure, theory_line
from attnlab.svm import attention_svm

ACTIVE_TOL = 1e-6  # a constraint whose margin is within this of the solution's (1) is a support constraint
FD_STEP = 1e-5  # central differences of the velocity, relative to ||W*||_F
WINDOW, MIN_RECORDS, MIN_SPAN = (1e-5, 1e-3), 5, 5.0  # the reading: gaps in WINDOW; enough records over ln mu
ABOVE_FLOOR = 10.0  # ... and at least this many times the path's last gap (the steps' floor, 1e-6 to 2e-4)
NEAR_STEP, NEAR_STEPS = 5e-4, 700_000  # the fifth prediction's near-solution paths: their steps' floor is 2e-7 to 1e-6
ASYMPTOTE, ASYMPTOTE_SPAN = (5e-6, 5e-5), 2.0  # ... read in this gap window, over at least this span of ln mu
FLOOR_RECORDS = 40  # the steps' floor: the median gap of a path's last records
AT_LEAST, RATIO_BAND = 0.8, (0.8, 1.25)  # measured slope / predicted: >= AT_LEAST, and within RATIO_BAND
STEEP_SHARE, BAND_SHARE = 0.85, 0.75  # shares of the readable programs: >= AT_LEAST; in RATIO_BAND (of the band's)
BAND_RATE = 0.05  # the band's programs: r_min >= BAND_RATE


def balanced_velocity(W: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """``dW/dt = G (W^T W)^(1/2) + (W W^T)^(1/2) G``, shape (d, d): the balanced K,Q flow's velocity in ``W``.

    ``K' = G Q`` and ``Q' = G^T K`` give ``W' = G Q Q^T + K K^T G`` (spec kq-nuclear-norm §3, ``W = K Q^T``), and a
    balanced pair has ``K K^T = (W W^T)^(1/2)`` and ``Q Q^T = (W^T W)^(1/2)``. Both roots are formed from ``W``'s
    singular values, which are accurate to rounding near 0, where the root of ``W^T W``'s eigenvalues is not.
    """
    U, sv, Vh = torch.linalg.svd(W)
    return G @ (Vh.mT * sv) @ Vh + (U * sv) @ U.mT @ G


def velocity_derivative(W: torch.Tensor, G: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """The derivative of :func:`balanced_velocity` in ``W`` along ``D`` at fixed ``G`` (all (d, d)), by central
    differences of step ``FD_STEP ||W||_F``: the square roots are smooth along ``D`` when ``D`` has no block off
    both of ``W``'s ranges (their second-order terms there cancel in the central difference)."""
    h = FD_STEP * float(torch.linalg.matrix_norm(W))
    return (balanced_velocity(W + h * D, G) - balanced_velocity(W - h * D, G)) / (2 * h)


def support_normals(data, W: torch.Tensor) -> torch.Tensor:
    """``A_it = (x_{i,opt} - x_it) z_i^T`` of the constraints ``W`` meets with its smallest margin, shape (m, d, d)."""
    _, normals = constraint_normals(data)
    margins = torch.einsum("mde,de->m", normals, W)
    return normals[margins - margins.min() <= ACTIVE_TOL]


def linearised_rates(data, W: torch.Tensor, duals: torch.Tensor, keep_margins: bool = True) -> np.ndarray:
    """The rates (ascending) at which the K,Q flow's direction approaches the nuclear-norm SVM ``W`` in ``ln mu``.

    The spectrum of ``Pi (V'[D] - D)`` on the smooth directions (``P_L D P_R = 0``, ``P_L``, ``P_R`` off the
    solution's range) that keep the support margins equal (module docstring). ``W`` (d, d) and ``duals`` (n, T)
    are :func:`attnlab.svm.attention_svm`'s (``norm="nuc"``). ``keep_margins=False`` drops ``Pi`` (the drift
    restricted orthogonally, as if the loss weights did not re-balance): a mechanism falsifier of the prediction.
    """
    d = W.shape[0]
    U, V = range_of(W)
    G = certificate(data, duals)
    G = G / torch.diagonal(U.mT @ G @ V).mean()  # U^T G V = I: V(W, G/2) = W, the fixed point
    off_left, off_right = off_range(U, V)
    units = torch.eye(d * d, dtype=W.dtype).reshape(d * d, d, d)
    smooth = torch.stack([(E - off_left @ E @ off_right).reshape(-1) for E in units], 1)
    basis, singular, _ = torch.linalg.svd(smooth)
    basis = basis[:, singular > 0.5]  # orthonormal, (d^2, k): the projector's range
    columns = [basis[:, j].reshape(d, d) for j in range(basis.shape[1])]
    moved = torch.stack([(velocity_derivative(W, G / 2, D) - D).reshape(-1) for D in columns], 1)  # (d^2, k)
    normals = support_normals(data, W).reshape(-1, d * d)  # (m, d^2)
    along = torch.stack([balanced_velocity(W, A.reshape(d, d)).reshape(-1) for A in normals], 1)  # (d^2, m)
    keep = torch.eye(d * d, dtype=W.dtype)
    if keep_margins:  # Pi: the support's velocities cancel the drift's change of the support margins
        keep = keep - along @ torch.linalg.pinv(normals @ along) @ normals
    _, singular, rows = torch.linalg.svd(normals @ basis)
    tangent = rows[int((singular > 1e-9 * singular[0]).sum()) :].mT  # (k, k - m): equal support margins
    if tangent.shape[1] == 0:  # the support pins every smooth direction: no rate to read (e.g. rank 2 at d = 2)
        raise ValueError(
            f"the {normals.shape[0]} support constraints fix all {basis.shape[1]} smooth directions at d = {d}: "
            "the direction cannot move near the solution; pass a wider d (x3 uses 4, 8, 16)"
        )
    operator = tangent.mT @ basis.mT @ keep @ moved @ tangent
    return np.sort(-torch.linalg.eigvals(operator).real.numpy())


def predicted_slope(seed: int, d: int, config: X3Config) -> dict[str, float]:
    """x3's program at ``seed`` and ``d``: ``kappa``, ``r_min``, the next rate and ``predicted = -2 min(kappa,
    r_min)``, the log-log slope of ``1 - corr`` against ``mu`` late on the flow; and two mechanism falsifiers'
    slopes, ``no_margins`` (``Pi`` dropped) and ``rank1_law`` (``r_min`` taken as rank 1's 1/2)."""
    data = scores_equal(config.n, config.T, d, config.gap, seed=seed)
    solution = attention_svm(data, norm="nuc")
    rates = linearised_rates(data, solution.W, solution.duals)
    unbalanced = linearised_rates(data, solution.W, solution.duals, keep_margins=False)[0]
    kappa = off_range_rate(data, solution.W, solution.duals)
    return {
        "kappa": kappa,
        "r_min": float(rates[0]),
        "r_next": float(rates[1]) if rates.size > 1 else float("nan"),
        "predicted": -2 * min(kappa, float(rates[0])),
        "no_margins": -2 * min(kappa, float(unbalanced)),  # falsifier: Pi dropped
        "rank1_law": -2 * min(kappa, 0.5),  # falsifier: the rank-1 law, r_min = 1/2
    }


def rate_reading(path: pd.DataFrame) -> tuple[float, int]:
    """The least-squares slope of ``ln gap`` against ``ln mu`` over ``path``'s records (columns ``ln_mu``, ``gap``;
    in order) past ``LN_MU_X3`` with the gap in ``WINDOW`` and at least ``ABOVE_FLOOR`` times the last record's, and
    how many; NaN with fewer than ``MIN_RECORDS`` or a span under ``MIN_SPAN`` in ``ln mu`` (the gap crossed the
    window too fast to read, or the steps' floor lies in it). The fourth prediction's reading."""
    low, high = WINDOW
    low = max(low, ABOVE_FLOOR * float(path["gap"].iloc[-1]))
    return _fitted(path[(path["ln_mu"] >= LN_MU_X3) & path["gap"].between(low, high)], MIN_SPAN)


def asymptotic_reading(path: pd.DataFrame) -> tuple[float, int]:
    """The fifth prediction's reading of a near-solution path (:func:`near_solution` at ``NEAR_STEP``): the
    least-squares slope of ``ln gap`` against ``ln mu`` over the records with the gap in ``ASYMPTOTE`` and at least
    ``ABOVE_FLOOR`` times the steps' floor (the median gap of the last ``FLOOR_RECORDS`` records), and how many;
    NaN with fewer than ``MIN_RECORDS`` or a span under ``ASYMPTOTE_SPAN`` in ``ln mu``. The window lies below the
    plateaus of the approach (seed 456 at d = 4 sits at 1e-4 to 2e-4 until ln mu = 40) and above the floor."""
    low, high = ASYMPTOTE
    low = max(low, ABOVE_FLOOR * float(path["gap"].iloc[-FLOOR_RECORDS:].median()))
    return _fitted(path[path["gap"].between(low, high)], ASYMPTOTE_SPAN)


def _fitted(kept: pd.DataFrame, span: float) -> tuple[float, int]:
    """The slope of ``ln gap`` against ``ln mu`` over ``kept`` and its length; NaN when too short to read."""
    if len(kept) < MIN_RECORDS or np.ptp(kept["ln_mu"]) < span:
        return float("nan"), len(kept)
    return float(np.polyfit(kept["ln_mu"], np.log(kept["gap"]), 1)[0]), len(kept)


def rate_verdict(frame: pd.DataFrame, predicted: str = "predicted") -> tuple[bool, str]:
    """The prediction judged on ``frame`` (columns ``slope``, ``r_min`` and the ``predicted`` slopes): the share of
    readable programs whose slope is at least ``AT_LEAST`` of the predicted one, and the share within ``RATIO_BAND``
    of those with ``r_min >= BAND_RATE``."""
    readable = frame.dropna(subset=["slope"])
    if readable.empty:
        return False, "no verdict: no program readable"
    ratio = readable["slope"] / readable[predicted]
    steep = ratio >= AT_LEAST
    band = ratio[readable["r_min"] >= BAND_RATE].between(*RATIO_BAND)
    held = steep.mean() >= STEEP_SHARE and not band.empty and band.mean() >= BAND_SHARE
    return bool(held), (
        f"{len(readable)}/{len(frame)} readable; slope / predicted >= {AT_LEAST}: {int(steep.sum())}/{len(readable)} "
        f"(predicted >= {STEEP_SHARE:.0%}); in [{RATIO_BAND[0]}, {RATIO_BAND[1]}] with r_min >= {BAND_RATE}: "
        f"{int(band.sum())}/{len(band)} (predicted >= {BAND_SHARE:.0%}); ratio {ratio.min():.2f} to "
        f"{ratio.max():.2f}; prediction {'holds' if held else 'fails'}"
    )


def rank2_programs(seeds: list[int], config: X3Config) -> list[tuple[int, int]]:
    """The ``(seed, d)`` at ``config.ds`` whose nuclear-norm SVM has rank 2, by seed then width."""
    pairs = [(seed, d) for seed in seeds for d in config.ds]
    return [(s, d) for s, d in tqdm(pairs, desc="programs") if nuclear_solution(s, d, config)[0] == 2]


def balanced_inits(W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The balanced pair ``U S^(1/2)``, ``V S^(1/2)`` of ``W = U S V^T`` (R, d, d): ``K(0)``, ``Q(0)`` with
    ``K Q^T = W`` and ``K^T K = Q^T Q``."""
    U, sv, Vh = torch.linalg.svd(W)
    return U * sv.sqrt().unsqueeze(-2), Vh.mT * sv.sqrt().unsqueeze(-2)


def near_runs(
    seed: int,
    d: int,
    config: X3Config,
    spread: float = 0.3,
    ln_mu0: float = 8.0,
    steps: int = 40_000,
    eta: float = FOLLOW_STEP,
) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    """The flow from near the solution instead of x3's inits: :func:`kq_nuclear_rank.kq_path`'s ``mu``, gaps and
    ``W/mu`` of 3 runs from ``W* + spread ||W*|| D / ||D||`` (``D`` Gaussian, seeded ``seed``) scaled by
    ``e^ln_mu0`` and factored as the balanced pair (:func:`balanced_inits`); ngd-relative steps of arc length
    ``eta (1 + ||theta||)``, 400 records."""
    data = scores_equal(config.n, config.T, d, config.gap, seed=seed)
    W = attention_svm(data, norm="nuc").W
    gen = torch.Generator().manual_seed(seed)
    D = torch.randn((3, d, d), generator=gen, dtype=W.dtype)
    inits = balanced_inits(math.exp(ln_mu0) * (W + spread * W.norm() * D / D.norm(dim=(-2, -1), keepdim=True)))
    flow = {"step": eta, "steps": steps, "method": "ngd-relative", "record_every": max(1, steps // 400)}
    return kq_path(seed, d, config, inits, **flow)


def near_solution(seed: int, d: int, config: X3Config, **start: float) -> pd.DataFrame:
    """The worst path (columns ``ln_mu``, ``gap``) of :func:`near_runs` (``start``: its ``spread``, ``ln_mu0``,
    ``steps`` and ``eta``). Its local slopes show whether a program's rate is the linearisation's without x3's long
    transient."""
    mu, gap, _ = near_runs(seed, d, config, **start)
    return worst_path(mu, gap)


def local_slopes(path: pd.DataFrame, width: float = 10.0) -> list[tuple[float, float, float]]:
    """``(start, slope, gap)`` over consecutive ``width``-long stretches of ``ln mu`` from the path's start: the
    least-squares slope of ``ln gap`` and the geometric mean gap of each stretch with at least 4 records."""
    path = path.dropna()
    out = []
    for start in np.arange(path["ln_mu"].iloc[0], path["ln_mu"].iloc[-1], width):
        part = path[path["ln_mu"].between(start, start + width, inclusive="left")]
        if len(part) >= 4:
            logs = np.log(part["gap"])
            out.append((float(start), float(np.polyfit(part["ln_mu"], logs, 1)[0]), float(np.exp(logs.mean()))))
    return out


FALSIFIERS = ("no_margins", "rank1_law")


READINGS = {"window": rate_reading, "asymptote": asymptotic_reading}  # the fourth prediction's, the fifth's


def near_paths(programs: list[tuple[int, int]], config: X3Config, out: Path) -> pd.DataFrame:
    """:func:`near_solution` at ``NEAR_STEP`` for ``NEAR_STEPS`` on each ``(seed, d)``: the paths (columns
    ``ln_mu``, ``gap``, ``seed``, ``d``), each appended to the CSV ``out`` as it ends, so that an interrupted run
    keeps every finished program (about 2 min each)."""

    def path_of(seed: int, d: int) -> pd.DataFrame:
        return near_solution(seed, d, config, steps=NEAR_STEPS, eta=NEAR_STEP)

    return stacked_paths(programs, path_of, out, "near-solution paths")


def measured(paths: pd.DataFrame, config: X3Config, reading: str = "window") -> pd.DataFrame:
    """Per program of ``paths`` (columns ``seed``, ``d``, ``ln_mu``, ``gap``): its ``reading`` (a key of
    ``READINGS``) over its records with both, and its predictions. A program with none (a run whose margin never
    turns positive: its ``ln mu`` is NaN at every record) is kept, unreadable."""
    rows = []
    for (seed, d), path in tqdm(paths.groupby(["seed", "d"]), desc="predictions"):
        path = path.dropna(subset=["ln_mu", "gap"])
        slope, records = READINGS[reading](path) if len(path) else (float("nan"), 0)
        rows.append({"seed": seed, "d": d, "slope": slope, "records": records, **predicted_slope(seed, d, config)})
    return pd.DataFrame(rows)


@house_figure
def rate_figure(frame: pd.DataFrame):
    """Each readable program's measured slope against the predicted ``-2 min(kappa, r_min)``, and the rank-1 law's."""
    fig, (ax,) = new_figure(1)
    readable = frame.dropna(subset=["slope"])
    ax.scatter(readable["predicted"], readable["slope"], s=12, color="C3", label="linearised (ours)")
    ax.scatter(readable["rank1_law"], readable["slope"], s=9, color="0.6", marker="x", label="rank-1 law")
    low = float(min(readable["slope"].min(), readable["rank1_law"].min(), readable["predicted"].min()))
    theory_line(ax, [low, 0.0], [low, 0.0], "measured = predicted")
    label_axes(ax, "predicted slope", r"measured slope of $\ln(1 - \mathrm{corr})$ in $\ln \mu$", "rank-2 rates")
    ax.legend()
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--seeds", type=seed_range, help="an inclusive range, e.g. 400-599: follow its rank-2 programs")
    source.add_argument("--from-paths", type=Path, nargs="+", help="read followed paths instead (kq_nuclear_rank.py)")
    source.add_argument(
        "--near", type=program, nargs="+", metavar="SEED:D", help="local slopes of the flow from near the solution"
    )
    source.add_argument("--near-seeds", type=seed_range, help="a range: its rank-2 programs from near the solution")
    parser.add_argument("--reading", choices=tuple(READINGS), help="window (fourth prediction), asymptote (fifth)")
    parser.add_argument("--ds", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--out", type=Path, help="CSV of every program (with --seeds, --near-seeds: -paths.csv)")
    parser.add_argument("--judge", action="store_true", help="print the prediction's verdict and its falsifiers'")
    parser.add_argument("--figure", type=Path, help="PNG: measured against predicted slopes")
    parser.add_argument("--eta", type=float, default=FOLLOW_STEP, help="arc length eta (1 + ||theta||) of a step")
    parser.add_argument("--follow-steps", type=int, default=FOLLOW_STEPS, help="steps of each program")
    args = parser.parse_args(argv)
    config = X3Config(ds=tuple(args.ds))
    if args.near:
        return _near(args.near, config)
    if not args.out:
        parser.error("--seeds, --near-seeds and --from-paths write every program: pass --out FILE.csv")
    paths_out = paths_beside(args.out)
    if args.seeds:
        paths = follow_all(rank2_programs(args.seeds, config), config, args.eta, args.follow_steps, paths_out)[1]
    elif args.near_seeds:
        paths = near_paths(rank2_programs(args.near_seeds, config), config, paths_out)
    else:
        paths = pd.concat([pd.read_csv(path) for path in args.from_paths], ignore_index=True)
    if paths.empty:
        parser.error(f"no rank-2 program to read at d in {args.ds}: pass a wider seed range, other --ds or other paths")
    frame = measured(paths, config, args.reading or ("asymptote" if args.near_seeds else "window"))

    def line(r) -> str:
        return (f"seed {r.seed} d {r.d}: slope {r.slope:.3f} over {r.records} records, predicted {r.predicted:.3f} "
                f"(kappa {r.kappa:.3f}, r_min {r.r_min:.3f}, next {r.r_next:.3f})")  # fmt: skip

    return report(frame, args, line, rate_verdict, FALSIFIERS, rate_figure)


def report(frame: pd.DataFrame, args: argparse.Namespace, line, verdict, falsifiers: tuple[str, ...], figure) -> int:
    """Write ``frame`` to ``args.out``, print ``line(row)`` for each program, with ``args.judge`` the ``verdict`` of
    the prediction and of each of its ``falsifiers`` (columns of ``frame``), and with ``args.figure`` save
    ``figure(frame)`` there; 0, the command's exit status."""
    frame.to_csv(args.out, index=False)
    for r in frame.itertuples():
        print(line(r))
    if args.judge:
        print("prediction: " + verdict(frame)[1])
        for name in falsifiers:
            print(f"falsifier {name}: " + verdict(frame, name)[1])
    if args.figure:
        figure(frame).savefig(args.figure)
    return 0


def _near(programs: list[tuple[int, int]], config: X3Config) -> int:
    """Print each ``(seed, d)`` program's prediction and the local slopes of :func:`near_solution`'s path."""
    for seed, d in programs:
        slopes = predicted_slope(seed, d, config)
        stretches = " ".join(f"{a:.0f}:{b:.3f}({c:.0e})" for a, b, c in local_slopes(near_solution(seed, d, config)))
        print(f"seed {seed} d {d}: predicted {slopes['predicted']:.3f} (kappa {slopes['kappa']:.3f}, r_min "
              f"{slopes['r_min']:.3f}); from ln mu: slope (gap) {stretches}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
