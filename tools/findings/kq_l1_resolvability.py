"""Which data sets let a finite K,Q run reach its l1-SVM solution: the prediction of docs/findings.md, judged.

For each data set (``scores_equal(2, 3, 8, gap, seed)``, the data of ``kq-nuclear.x2`` at gap 3 and of
``kq-nuclear.x5`` at its gaps) two numbers of the l1 program alone, before any flow:

- ``kappa = 1 - max |g_j|`` over the solution's zero entries, ``g`` the LP's dual certificate: the rate at which
  those entries fall, ``(omega0^2 / mu)^kappa`` (``attnlab.experiments.kq_nuclear.common.zero_entry_rate``, the
  rows' own rate);
- ``delta``: the smallest relative rise of the LP's optimum when one entry of the solution's support is held at 0,
  how far the nearest vertex that lacks one support entry is from optimal.

A data set is *resolvable* when ``kappa >= 0.1`` and ``delta >= 0.1`` (thresholds chosen on seeds 0-8). The
prediction: on a resolvable data set the row's fitted limit ``a`` (``l1-optimum`` of x2 at each omega0,
``dist_limit`` of x5's sweep table at each gap where A3 holds) is at most the rows' ``atol``, 0.035. Unresolvable
data sets carry no prediction. Run the experiments first, then this script::

    attnlab run kq-nuclear.x2 --set seed=S --out DIR/x2-S --no-progress
    attnlab run kq-nuclear.x5 --set seed=S --out DIR/x5-S --no-progress
    python tools/findings/kq_l1_resolvability.py DIR --seeds 9 10 ...
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import pandas as pd

from attnlab.data import scores_equal
from attnlab.experiments.kq_nuclear.common import zero_entry_rate
from attnlab.svm import attention_svm
from attnlab.svm._program import solve_margin_program
from attnlab.training.flow import constraint_vectors

ZERO_TOL, ATOL, RESOLVABLE = 1e-2, 0.035, 0.1


def program_gaps(seed: int, gap: float) -> tuple[float, float]:
    """``(kappa, delta)`` of the l1 program of ``scores_equal(2, 3, 8, gap, seed)``."""
    data = scores_equal(2, 3, 8, gap, seed=seed)
    l1 = attention_svm(data, norm="l1-diag")
    beta = l1.beta.numpy()
    optimum = float(np.abs(beta).sum())
    B = constraint_vectors(data.X, data.Z, data.select).reshape(-1, beta.size).numpy()
    B = B[np.abs(B).sum(1) > 0]  # the optimal tokens' own rows are 0
    rises = []
    for j in np.flatnonzero(np.abs(beta) > ZERO_TOL * np.abs(beta).max()):
        without = np.delete(B, j, axis=1)  # entry j held at 0: the same l1 program on the other entries
        solution = solve_margin_program(
            without,
            (beta.size - 1,),
            1.0,
            "CLARABEL",
            what=f"l1 program without entry {j}",
            cause="the other entries cannot separate the tokens",
        )
        rises.append((solution.norm_value - optimum) / optimum)
    return zero_entry_rate(data, l1.beta, l1.duals, ZERO_TOL), min(rises)


def limits(folder: Path, seed: int) -> list[tuple[str, float, float]]:
    """``(experiment, gap, a)`` of every fitted limit the two runs of ``seed`` under ``folder`` report."""
    found = []
    checks = pd.read_csv(folder / f"x2-{seed}" / "checks.csv")
    rows = checks[(checks["claim_id"] == "l1-optimum") & (checks["kind"] == "theory")]
    for claim, a in zip(rows["claim"], rows["measured"]):
        found.append((f"x2 omega0={re.search(r'omega0=([0-9.e-]+)', claim).group(1)}", 3.0, float(a)))
    sweep = pd.read_parquet(folder / f"x5-{seed}" / "sweep.parquet")
    for gap, a in zip(sweep.loc[sweep["a3_holds"], "gap"], sweep.loc[sweep["a3_holds"], "dist_limit"]):
        found.append(("x5", float(gap), float(a)))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the folder holding x2-SEED and x5-SEED run folders")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    args = parser.parse_args(argv)
    rows, programs = [], {}
    for seed in args.seeds:
        for name, gap, a in limits(args.folder, seed):
            kappa, delta = programs.setdefault((seed, gap), program_gaps(seed, gap))
            resolvable = kappa >= RESOLVABLE and delta >= RESOLVABLE
            rows.append(dict(seed=seed, run=name, gap=gap, kappa=kappa, delta=delta, resolvable=resolvable, a=a))
    table = pd.DataFrame(rows)
    table["reached"] = table["a"] <= ATOL
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    held = table[table["resolvable"]]
    wrong = held[~held["reached"]]
    print(f"prediction: {len(held) - len(wrong)} of {len(held)} resolvable runs reached (a <= {ATOL}); "
          f"{int((~table['resolvable']).sum())} runs on unresolvable data sets ({int(table.loc[~table['resolvable'], 'reached'].sum())} reached)")  # fmt: skip
    return 1 if len(wrong) else 0


if __name__ == "__main__":
    raise SystemExit(main())
