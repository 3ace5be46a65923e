"""``explain`` with 16 candidate SVMs: training one run that records all 16 against 16 identical runs, in one process.

Before the engine, ``attnlab explain`` trained one identical run per candidate SVM, because recording took one
reference direction per run. Now it trains one run and records its alignment with every candidate in one pass.
Both training programs are run here with today's :func:`attnlab.training.batched.train` on the same data, so the ratio is
the cost of that design choice alone:

- ``before``: 16 runs (the initialisation repeated), ``W_ref`` of shape (16, d, d), one alignment column each;
- ``after``: one run, ``refs`` with 16 named directions, 16 alignment columns.

The 16 candidates are the Frobenius SVMs of Example 1's optimal tokens and of random token selections (feasible
ones only; the SVM solves are timed separately and are the same in both designs). NGD, ``lr = 0.3``, 1000 steps,
recorded every 10.

Run ``python benchmarks/explain_training.py`` (``--help`` for the options); it prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from attnlab.data import example1
from attnlab.svm import InfeasibleProgramError, attention_svm
from attnlab.training import batched

N, T, D = 8, 6, 16
CANDIDATES = 16


def candidates(data, count: int) -> dict[str, torch.Tensor]:
    """``count`` feasible Frobenius SVM directions: the optimal selection, then random selections."""
    found = {"opt": attention_svm(data, "fro").W}
    gen = torch.Generator().manual_seed(0)
    while len(found) < count:
        select = torch.randint(0, T, (N,), generator=gen)
        try:
            found["sel" + "".join(map(str, select.tolist()))] = attention_svm(data, "fro", select=select).W
        except InfeasibleProgramError:
            continue
    return found


def main(argv: list[str] | None = None) -> None:
    """Parse the options, time both training programs and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5, help="timings per program (medians are kept)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = example1(n=N, T=T, d=D, seed=0)
    start = time.perf_counter()
    refs = candidates(data, CANDIDATES)
    solve = time.perf_counter() - start
    W0 = 0.01 * torch.randn(D, D, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    names = list(refs)

    def before() -> None:
        batched.train(
            data.X,
            data.Z,
            data.y,
            data.v,
            W0.expand(len(names), D, D),
            optimizer="ngd",
            lr=0.3,
            steps=args.steps,
            record_every=10,
            W_ref=torch.stack([refs[c] for c in names]),
        )

    def after() -> None:
        batched.train(
            data.X, data.Z, data.y, data.v, W0, optimizer="ngd", lr=0.3, steps=args.steps, record_every=10, refs=refs
        )

    times: dict[str, list[float]] = {"before": [], "after": []}
    for fn in (before, after):
        fn()  # warm-up
    for k in range(args.repeats):
        for name, fn in (
            (("before", before), ("after", after)) if k % 2 == 0 else (("after", after), ("before", before))
        ):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    print(
        f"## explain's training with {len(names)} candidate SVMs (Example 1, n={N}, T={T}, d={D}, {args.steps} NGD steps)\n"
    )
    print(
        f"torch {torch.__version__}, threads={args.threads}, load average {os.getloadavg()[0]:.1f}; "
        f"solving the {len(names)} SVMs (same in both designs): {solve:.2f} s\n"
    )
    print("| design | training seconds (median) | speed-up |")
    print("|---|---|---|")
    for name, values in times.items():
        ratio = statistics.median(b / a for b, a in zip(times["before"], values))
        print(f"| {name} | {statistics.median(values):.3f} | {ratio:.1f}x |")


if __name__ == "__main__":
    main()
