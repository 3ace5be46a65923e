"""Rank-1 saddles of x3's K,Q flow: how fast the flow leaves a rank-1 KKT point, predicted from its duals (ours).

In the K,Q paper's proof (approximate KKT points, its Theorem A.2), a direction limit of the K,Q flow is a KKT point
of the factored program ``min (||K||^2 + ||Q||^2) / 2`` subject to every attention margin ``<A_it, K Q^T> >= 1``
(spec kq-nuclear-norm §3, §5); with aligned inits that point is the nuclear-norm SVM, and x3 is the open non-aligned
case. A rank-1 ``W1 = a b^T`` with ``a = G b`` and
``b = G^T a`` for ``G = sum_it lambda_it A_it``, ``lambda >= 0`` on the active constraints, is such a point
(:func:`rank1_point`). It is not the nuclear-norm SVM when the block of ``G`` off ``W1``'s range has an operator norm
above 1, ``u^T G v`` being 1 on it.

Along the balanced flow each singular value grows as ``d ln sigma = 2 <u, G_t v> dt`` (``kq_nuclear_rank
.off_range_rate``), so near ``W1`` the second singular value of ``W`` over the first grows like ``mu^e`` with the
escape exponent ``e = ||P_L G P_R||_op - 1`` (:func:`escape_rates`), ``P_L``, ``P_R`` the projections off ``W1``'s
range. A small ``e`` is a long stay: seed 591 at d = 4 (docs/findings.md, "Rank-1 saddles") has ``e = 0.0069``,
and its near-solution run that stayed at a gap of 3e-5 from ``ln mu`` 20 to 240 grows ``sigma_2 / sigma_1`` at
0.0069 per unit of ``ln mu``: it would reach the solution's ratio near ``ln mu = 534``.

The prediction (registered in docs/findings.md after seeds 400-599 were explored, judged on seeds 800-999: it held,
31/31 within 10%): started at ``W1`` plus a perturbation of ``SPREAD`` off its range (:func:`saddle_path`), the
slope of ``ln(sigma_2 / sigma_1)`` in ``ln mu`` (:func:`escape_reading`) lies within ``TOLERANCE`` of ``e``,
relatively, for at least ``SHARE`` of the readable programs; three mechanism falsifiers judged by the same reading
fail (``FALSIFIERS``)::

    python tools/findings/kq_nuclear_saddle.py --seeds 800-999 --ds 4 8 --out saddle.csv --judge
    python tools/findings/kq_nuclear_saddle.py --from-paths saddle-paths.csv --out saddle.csv --judge
    python tools/findings/kq_nuclear_saddle.py --parked 591:4

``--parked`` follows the fifth rate prediction's near-solution start and reads the run that ends farthest from the
solution against the rank-1 KKT point it sits at (about 2 min); ``--follow-steps N`` then continues that run for
``N`` steps and prints where its ratio reaches a quarter, half and 90% of the solution's, against the exponent's
prediction (seed 591 at d = 4: ``--follow-steps 1200000``, 4 min more).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch
from kq_nuclear_rank import (
    FOLLOW_STEP,
    constraint_normals,
    kq_path,
    ln_margin,
    off_range,
    off_range_rate,
    paths_beside,
    program,
    range_of,
    seed_range,
    stacked_paths,
    sv_ratio,
)
from kq_nuclear_rate import NEAR_STEP, NEAR_STEPS, balanced_inits, near_runs, rank2_programs, report
from scipy.optimize import minimize, nnls
from tqdm import tqdm

from attnlab.data import scores_equal
from attnlab.experiments.kq_nuclear.x3 import X3Config
from attnlab.metrics import cosine
from attnlab.plotting import house_figure, label_axes, new_figure, theory_line
from attnlab.svm import attention_svm

ACTIVE = 1e-7  # a constraint within this of margin 1 at the rank-1 point is active
KKT_RESIDUAL = 1e-6  # the stationarity residual a rank-1 point must meet to count as a KKT point
SPREAD, LN_MU0 = 1e-8, 8.0  # the start: W1 + SPREAD ||W1|| D / ||D|| (D off W1's range), scaled to ln mu = LN_MU0
SADDLE_STEPS, RECORD_EVERY = 50_000, 25  # ngd-relative steps of FOLLOW_STEP (ln mu to 30-110), and records
LINEAR = 1e-4  # the reading: records with sigma_2 / sigma_1 below this (the linear regime: 1e-3 bends already)
MIN_RECORDS = 10  # ... the second half of them in ln mu, at least this many
TOLERANCE, SHARE = 0.10, 0.90  # |measured / predicted - 1| <= TOLERANCE for at least SHARE of the readable programs
FALSIFIERS = ("unnormalised", "stationary", "nuclear")


class Rank1Point(NamedTuple):
    """A rank-1 KKT point ``W = a b^T`` (d, d) of the factored program, its ``duals`` (n, T) and the stationarity
    residual ``||(a, b) - (G b, G^T a)||``."""

    W: torch.Tensor
    duals: torch.Tensor
    residual: float


def rank1_point(data, start: torch.Tensor) -> Rank1Point:
    """The rank-1 KKT point that SLSQP reaches on ``min (|a|^2 + |b|^2) / 2`` s.t. ``a^T A_it b >= 1`` from
    ``start``'s top singular pair (``start`` (d, d)), its duals by non-negative least squares on ``a = G b``,
    ``b = G^T a`` over the active constraints. Raises ``ValueError`` when SLSQP ends infeasible or the residual exceeds
    ``KKT_RESIDUAL``: the KKT conditions, not SLSQP's flag, decide."""
    pairs, normals = constraint_normals(data)
    A = normals.numpy()
    d = A.shape[1]
    U, sv, Vh = np.linalg.svd(start.numpy())
    x0 = math.sqrt(sv[0]) * np.concatenate([U[:, 0], Vh[0]])

    def margins(x: np.ndarray) -> np.ndarray:
        return np.einsum("d,mde,e->m", x[:d], A, x[d:])

    def margin_jacobian(x: np.ndarray) -> np.ndarray:
        return np.concatenate([np.einsum("mde,e->md", A, x[d:]), np.einsum("d,mde->me", x[:d], A)], 1)

    constraint = {"type": "ineq", "fun": lambda x: margins(x) - 1, "jac": margin_jacobian}
    smallest = margins(x0).min()
    x0 = x0 / math.sqrt(smallest) if smallest > 0 else x0  # on the constraint set when the pair separates
    options = {"ftol": 1e-16, "maxiter": 2000}
    found = minimize(
        lambda x: 0.5 * x @ x, x0, jac=lambda x: x, constraints=[constraint], method="SLSQP", options=options
    )
    if margins(found.x).min() < 1 - ACTIVE:  # SLSQP's own flag is often a line-search warning at a KKT point
        raise ValueError(f"SLSQP ended outside the constraint set from the start's top pair: {found.message}")
    active = margins(found.x) - 1 <= ACTIVE
    lam, residual = nnls(margin_jacobian(found.x)[active].T, found.x)
    if residual > KKT_RESIDUAL:
        raise ValueError(
            f"the rank-1 point's stationarity residual is {residual:.1e} > {KKT_RESIDUAL}: not a KKT point"
        )
    duals = torch.zeros(data.X.shape[:2], dtype=torch.float64)
    index = pairs[torch.from_numpy(active)]
    duals[index[:, 0], index[:, 1]] = torch.from_numpy(lam)
    return Rank1Point(torch.from_numpy(np.outer(found.x[:d], found.x[d:])), duals, float(residual))


def escape_rates(data, point: Rank1Point, solution) -> dict[str, float]:
    """The escape exponent ``e = ||P_L G P_R||_op - 1`` at ``point`` (the slope of ``ln(sigma_2 / sigma_1)`` in
    ``ln mu`` near it), three mechanism falsifiers' slopes, and where the point lies against the nuclear-norm SVM
    ``solution`` (:func:`attnlab.svm.attention_svm`'s, ``norm="nuc"``): ``gap`` ``1 - corr(W1, W*)`` and ``sv_ratio``
    ``W*``'s second singular value over its first.

    Falsifiers: ``unnormalised`` reads ``sigma_2``'s own exponent ``1 + e`` (``W``'s growth not divided out);
    ``stationary`` takes a KKT point for a rest point of the flow (exponent 0: ``G``'s singular value along ``W1``
    is 1, and no direction grows against it); ``nuclear`` takes the off-range rate at the nuclear-norm SVM
    (``-kappa``, at most 0: the complement would decay)."""
    escape = -off_range_rate(data, point.W, point.duals)
    return {
        "predicted": escape,
        "unnormalised": 1.0 + escape,
        "stationary": 0.0,
        "nuclear": -off_range_rate(data, solution.W, solution.duals),
        "gap": float(1 - cosine(point.W, solution.W)),
        "sv_ratio": float(sv_ratio(solution.W)),
    }


def saddle_path(seed: int, d: int, config: X3Config, steps: int = SADDLE_STEPS) -> pd.DataFrame:
    """The flow from x3's program's rank-1 KKT point (:func:`rank1_point` from the nuclear-norm SVM's top pair) plus
    ``SPREAD ||W1|| D / ||D||``, ``D`` Gaussian (3 draws seeded ``seed``) projected off ``W1``'s range, scaled to
    ``ln mu = LN_MU0`` and factored as the balanced pair; ngd-relative steps of ``FOLLOW_STEP``. Columns ``ln_mu``,
    ``ratio`` (``sigma_2 / sigma_1`` of ``W``) and ``run``, one row per record and run; one row of NaN when no
    rank-1 KKT point is found, so that the program is kept, unreadable."""
    data = scores_equal(config.n, config.T, d, config.gap, seed=seed)
    try:
        W1 = rank1_point(data, attention_svm(data, norm="nuc").W).W
    except ValueError:
        return pd.DataFrame({"ln_mu": [math.nan], "ratio": [math.nan], "run": [0]})
    off_left, off_right = off_range(*range_of(W1))
    D = off_left @ torch.randn((3, d, d), generator=torch.Generator().manual_seed(seed), dtype=W1.dtype) @ off_right
    start = W1 + SPREAD * W1.norm() * D / D.norm(dim=(-2, -1), keepdim=True)
    flow = {"step": FOLLOW_STEP, "steps": steps, "method": "ngd-relative", "record_every": RECORD_EVERY}
    mu, _, W_hat = kq_path(seed, d, config, balanced_inits(math.exp(LN_MU0) * start), **flow)
    runs = np.broadcast_to(np.arange(mu.shape[1]), mu.shape)
    return pd.DataFrame({"ln_mu": ln_margin(mu).ravel(), "ratio": sv_ratio(W_hat).ravel(), "run": runs.ravel()})


def escape_reading(path: pd.DataFrame) -> tuple[float, int]:
    """The median over runs of the least-squares slope of ``ln ratio`` against ``ln mu`` (``path``: columns
    ``ln_mu``, ``ratio``, ``run``, records in order), each over the second half in ``ln mu`` of the run's records
    before its ratio first reaches ``LINEAR``, with at least ``MIN_RECORDS`` there; and the fewest records read. NaN
    when no run is readable (a run that crosses the linear regime in too few records)."""
    slopes, counts = [], []
    for _, run in path.groupby("run"):
        run = run.dropna()
        crossed = np.flatnonzero(run["ratio"].to_numpy() >= LINEAR)
        run = run.iloc[: crossed[0] if crossed.size else len(run)]
        if run.empty:
            continue
        late = run[run["ln_mu"] >= (run["ln_mu"].iloc[0] + run["ln_mu"].iloc[-1]) / 2]
        if len(late) >= MIN_RECORDS:
            slopes.append(np.polyfit(late["ln_mu"], np.log(late["ratio"]), 1)[0])
            counts.append(len(late))
    return (float(np.median(slopes)), min(counts)) if slopes else (float("nan"), 0)


def measured(paths: pd.DataFrame, config: X3Config) -> pd.DataFrame:
    """Per program of ``paths`` (columns ``seed``, ``d``, ``ln_mu``, ``ratio``, ``run``): its reading and its
    predictions (:func:`escape_rates`); ``kkt`` False, with NaN predictions, where no rank-1 KKT point is found."""
    rows = []
    for (seed, d), path in tqdm(paths.groupby(["seed", "d"]), desc="predictions"):
        data = scores_equal(config.n, config.T, int(d), config.gap, seed=int(seed))
        solution = attention_svm(data, norm="nuc")
        slope, records = escape_reading(path)
        try:
            rates = {"kkt": True, **escape_rates(data, rank1_point(data, solution.W), solution)}
        except ValueError:
            rates = {"kkt": False}
        rows.append({"seed": seed, "d": d, "slope": slope, "records": records, **rates})
    return pd.DataFrame(rows)


def escape_verdict(frame: pd.DataFrame, predicted: str = "predicted") -> tuple[bool, str]:
    """The prediction judged on ``frame`` (columns ``slope`` and the ``predicted`` slopes): the share of readable
    programs whose slope over the predicted one lies within ``TOLERANCE`` of 1."""
    readable = frame.dropna(subset=["slope"])
    if readable.empty:
        return False, "no verdict: no program readable"
    ratio = readable["slope"] / readable[predicted]
    within = (ratio - 1).abs() <= TOLERANCE
    held = bool(within.mean() >= SHARE)
    return held, (
        f"{len(readable)}/{len(frame)} readable; slope / predicted within {TOLERANCE:.0%} of 1: "
        f"{int(within.sum())}/{len(readable)} (predicted >= {SHARE:.0%}); ratio {ratio.min():.3f} to "
        f"{ratio.max():.3f}; prediction {'holds' if held else 'fails'}"
    )


@house_figure
def escape_figure(frame: pd.DataFrame):
    """Each readable program's measured slope against the escape exponent, and against the falsifier that reads
    ``sigma_2`` alone, on log axes."""
    fig, (ax,) = new_figure(1)
    readable = frame.dropna(subset=["slope"])
    ax.scatter(readable["predicted"], readable["slope"], s=12, color="C3", label="escape exponent (ours)")
    ax.scatter(
        readable["unnormalised"], readable["slope"], s=9, color="0.6", marker="x", label=r"$\sigma_2$ alone (falsifier)"
    )
    low, high = float(readable["slope"].min()) / 2, float(readable["unnormalised"].max()) * 2
    theory_line(ax, [low, high], [low, high], "measured = predicted")
    ax.set_xscale("log")
    ax.set_yscale("log")
    label_axes(ax, "predicted exponent", r"measured slope of $\ln(\sigma_2/\sigma_1)$ in $\ln \mu$", "rank-1 saddles")
    ax.legend()
    return fig


PARKED_FROM = 20.0  # --parked reads the run's slope over its records past this ln mu
ESCAPE_LEVELS = (0.25, 0.5, 0.9)  # --follow-steps: where the ratio reaches these fractions of the solution's


def parked(seed: int, d: int, config: X3Config, follow: int = 0) -> dict[str, float]:
    """The fifth rate prediction's near-solution runs (``kq_nuclear_rate.near_runs`` at ``NEAR_STEP`` for
    ``NEAR_STEPS``) at ``seed`` and ``d``, read at the run that ends farthest from the solution: its gap, its
    distance to the rank-1 KKT point found from its last ``W/mu``, the point's escape exponent, the run's slope of
    ``ln(sigma_2 / sigma_1)`` past ``ln mu = PARKED_FROM``, and the ``ln mu`` at which that growth would reach the
    solution's ratio. With ``follow`` steps, that run is continued from its last state (:func:`escape_levels`)."""
    data = scores_equal(config.n, config.T, d, config.gap, seed=seed)
    solution = attention_svm(data, norm="nuc")
    mu, gap, W_hat = near_runs(seed, d, config, steps=NEAR_STEPS, eta=NEAR_STEP)
    run = int(np.argmax(gap[-1]))
    point = rank1_point(data, W_hat[-1, run])
    rates = escape_rates(data, point, solution)
    ln_mu, ratio = ln_margin(mu[:, run]), sv_ratio(W_hat[:, run])
    late = ln_mu >= PARKED_FROM
    out = {
        "run": run,
        "gap_end": float(gap[-1, run]),
        "ln_mu_end": float(ln_mu[-1]),
        "distance": float((W_hat[-1, run] - point.W).norm() / point.W.norm()),
        "point_gap": rates["gap"],
        "predicted": rates["predicted"],
        "slope": float(np.polyfit(ln_mu[late], np.log(ratio[late]), 1)[0]),
        "ln_mu_escape": float(ln_mu[-1] + math.log(rates["sv_ratio"] / ratio[-1]) / rates["predicted"]),
    }
    if follow:
        inits = balanced_inits(float(mu[-1, run]) * W_hat[-1:, run])  # the run's last state, one run
        flow = {"step": NEAR_STEP, "steps": follow, "method": "ngd-relative", "record_every": max(1, follow // 600)}
        mu_next, gap_next, W_next = kq_path(seed, d, config, inits, **flow)
        out["gap_followed"] = float(gap_next[-1, 0])
        out |= escape_levels(ln_margin(mu_next[:, 0]), sv_ratio(W_next[:, 0]), rates["sv_ratio"], rates["predicted"])
    return out


def escape_levels(ln_mu: np.ndarray, ratio: np.ndarray, sv_ratio: float, escape: float) -> dict[str, float]:
    """Where a run's ``ratio`` (records in order, from its ``ln_mu[0]``) first reaches each fraction ``f`` of
    ``ESCAPE_LEVELS`` of the solution's ``sv_ratio`` (``reached_f``, NaN if never), and where growth at ``escape``
    from its first record would put it (``predicted_f``)."""
    out = {}
    for f in ESCAPE_LEVELS:
        hit = np.flatnonzero(ratio >= f * sv_ratio)
        out[f"reached_{f:g}"] = float(ln_mu[hit[0]]) if hit.size else math.nan
        out[f"predicted_{f:g}"] = float(ln_mu[0] + math.log(f * sv_ratio / ratio[0]) / escape)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--seeds", type=seed_range, help="an inclusive range, e.g. 800-999: its rank-2 programs")
    source.add_argument("--from-paths", type=Path, nargs="+", help="read the paths of earlier --seeds runs instead")
    source.add_argument(
        "--parked", type=program, nargs="+", metavar="SEED:D", help="read near-solution runs at a rank-1 point"
    )
    parser.add_argument("--follow-steps", type=int, default=0, help="with --parked: continue the run this many steps")
    parser.add_argument("--ds", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--out", type=Path, help="CSV of every program (with --seeds, its paths in -paths.csv)")
    parser.add_argument("--judge", action="store_true", help="print the prediction's verdict and its falsifiers'")
    parser.add_argument("--figure", type=Path, help="PNG: measured slopes against the escape exponents")
    args = parser.parse_args(argv)
    config = X3Config(ds=tuple(args.ds))
    if args.follow_steps < 0:
        parser.error(f"--follow-steps {args.follow_steps}: pass a number of steps >= 0 (0: do not continue the run)")
    if args.parked:
        for seed, d in args.parked:
            read = parked(seed, d, config, args.follow_steps)
            print(f"seed {seed} d {d}: " + ", ".join(f"{k} {v:.4g}" for k, v in read.items()))
        return 0
    if not args.out:
        parser.error("--seeds and --from-paths write every program: pass --out FILE.csv")
    if args.seeds:
        programs = rank2_programs(args.seeds, config)
        paths = stacked_paths(programs, lambda s, d: saddle_path(s, d, config), paths_beside(args.out), "saddles",
                              columns=("ln_mu", "ratio", "run"))  # fmt: skip
    else:
        paths = pd.concat([pd.read_csv(path) for path in args.from_paths], ignore_index=True)
    if paths.empty:
        parser.error(f"no rank-2 program at d in {args.ds}: pass a wider seed range, other --ds or other paths")

    def line(r) -> str:
        return (f"seed {r.seed} d {r.d}: slope {r.slope:.4f} over {r.records} records, predicted {r.predicted:.4f} "
                f"(gap of W1 {r.gap:.1e}, sv ratio of W* {r.sv_ratio:.1e})")  # fmt: skip

    return report(measured(paths, config), args, line, escape_verdict, FALSIFIERS, escape_figure)


if __name__ == "__main__":
    raise SystemExit(main())
