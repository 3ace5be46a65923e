"""SVM solve time for the Frobenius, nuclear and l_p attention SVMs as n, T and d grow, and the Frobenius dual fast path.

Each program is :func:`attnlab.svm.attention_svm` on Example-1 data (the optimal tokens selected); ``fro-dual``
is the same Frobenius SVM through ``method="dual"`` (the exact non-negative least-squares dual, no cvxpy).
One size grows at a time from a base point; times are medians of ``--repeats`` solves, in one process, so the
ratios between programs are measured in one run. Prints a Markdown section for ``BENCHMARKS.md``.

Run ``python benchmarks/svm_times.py [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np
import torch

from attnlab.data import example1
from attnlab.svm import attention_svm

#: program name -> keyword arguments of attention_svm
PROGRAMS = {
    "fro (QP)": {"norm": "fro"},
    "fro-dual (NNLS)": {"norm": "fro", "method": "dual"},
    "nuc (SDP)": {"norm": "nuc"},
    "l1 (LP)": {"norm": 1.0},
    "l_1.5 (cone)": {"norm": 1.5},
}
BASE = {"n": 8, "T": 4, "d": 16}
GROW = {"n": [4, 8, 16, 32], "T": [2, 4, 8, 16], "d": [8, 16, 32, 64]}


def seconds(data, kwargs, repeats: int) -> float:
    """Median wall time of ``repeats`` solves."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        attention_svm(data, **kwargs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    """Time every program at every size and print the Markdown section."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="solves per measurement (the median is kept)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for axis, values in GROW.items():
        for value in values:
            sizes = {**BASE, axis: value}
            data = example1(**sizes, seed=0)
            times = {name: seconds(data, kwargs, args.repeats) for name, kwargs in PROGRAMS.items()}
            rows.append((axis, sizes, times))
    load = os.getloadavg()[0]
    print("<!-- section: svm-times -->")
    print("## SVM solve time as n, T, d grow\n")
    print(
        f"Command: `.venv/bin/python benchmarks/svm_times.py --repeats {args.repeats}` (Example 1, optimal tokens "
        f"selected, base n={BASE['n']}, T={BASE['T']}, d={BASE['d']}, one size grown at a time; median of "
        f"{args.repeats}; {args.threads} torch thread; default solver Clarabel).\n"
    )
    print(
        f"Machine: `nproc` = {os.cpu_count()}, {platform.processor() or platform.machine()}, load average {load:.1f} "
        "at the end (shared machine: absolute times are noisy, ratios were measured in the same run).\n"
    )
    names = list(PROGRAMS)
    print("| grown | n | T | d | " + " | ".join(f"{n} (ms)" for n in names) + " | fro QP / dual |")
    print("|---|---|---|---|" + "---|" * len(names) + "---|")
    for axis, sizes, times in rows:
        cells = " | ".join(f"{1e3 * times[n]:.1f}" for n in names)
        ratio = times["fro (QP)"] / times["fro-dual (NNLS)"]
        print(f"| {axis} | {sizes['n']} | {sizes['T']} | {sizes['d']} | {cells} | {ratio:.1f}x |")
    ratios = [t["fro (QP)"] / t["fro-dual (NNLS)"] for _, _, t in rows]
    print(
        f"\nThe dual fast path is {min(ratios):.1f}x to {max(ratios):.1f}x faster than the Frobenius QP "
        f"(median {np.median(ratios):.1f}x) over these sizes."
    )
    print("<!-- end section: svm-times -->")


if __name__ == "__main__":
    main()
