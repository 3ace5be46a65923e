"""Achieved GFLOP/s of batched NGD on W at large d, as a fraction of a float64 matmul peak measured alongside.

With ``n T^2 <= d^2`` (every default shape) :func:`attnlab.training.batched.train` trains ``W = W_0 + sum_it omega_it x_it
z_i^T`` through the ``nT`` coefficients ``omega`` of each run (``batched._KernelSpace``). Its flops, counted from
the contractions it does (a multiply-add counts 2), per run:

- once per call: the logit kernel ``K = (x_it . x_ju)(z_i . z_j)``, ``2 (nT)^2 d + 2 n^2 d + (nT)^2``; the logits
  of ``W_0``, ``2 n d^2 + 2 n T d``; the final ``W``, ``2 n T d + 2 n d^2 + d^2``;
- per gradient: ``K u`` ``2 (nT)^2`` and ``||grad||^2 = u^T K u`` ``2 nT``;
- per update: ``omega`` and the logits ``4 nT``, finiteness guard ``2 nT``;

the O(n T^2) softmax and centred-score work is not counted. ``train(steps=S)`` does ``S + 1`` gradients and ``S``
updates; the count uses exactly that. The same steps taken on ``W`` itself would cost ``R (4 n d^2 + 4 n T d + 5
d^2)`` flops each (``W z_i``, the logits, the rank-n gradient, its norm, the update, the guard): the table also
gives that count over the measured time as "W-equivalent", a speed figure, not flops done.

The peak is the rate of one ``torch.matmul`` of two square float64 matrices of side ``--peak-size``. Each timing
is paired with a peak timing taken right after it, and both are medians over ``--repeats`` pairs, so they see the
same machine load.

Run ``python benchmarks/batched_gflops.py`` (``--help`` for the options); it prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from attnlab.data import example1, stack
from attnlab.training import batched

LR = 0.1


def call_flops(R: int, n: int, T: int, d: int, steps: int) -> int:  # noqa: N803 (the spec's symbols)
    """Flops of ``train(steps=steps)`` on the kernel coefficients (setup, ``steps + 1`` gradients, ``steps`` updates)."""
    m = n * T
    setup = (
        2 * m * m * d
        + 2 * n * n * d
        + m * m
        + (2 * n * d * d + 2 * n * T * d)
        + (2 * n * T * d + 2 * n * d * d + d * d)
    )
    return R * (setup + (steps + 1) * (2 * m * m + 2 * m) + steps * 6 * m)


def w_step_flops(R: int, n: int, T: int, d: int) -> int:  # noqa: N803 (the spec's symbols)
    """Flops of one NGD step taken on ``W`` itself: ``R (4 n d^2 + 4 n T d + 5 d^2)``."""
    return R * (4 * n * d * d + 4 * n * T * d + 5 * d * d)


def matmul_gflops(size: int) -> float:
    """GFLOP/s of one ``torch.matmul`` of two random square float64 matrices (after a warm-up product)."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, dtype=torch.float64, generator=g)
    b = torch.randn(size, size, dtype=torch.float64, generator=g)
    torch.matmul(a, b)
    start = time.perf_counter()
    torch.matmul(a, b)
    return 2 * size**3 / (time.perf_counter() - start) / 1e9


def call_seconds(R: int, n: int, T: int, d: int, steps: int) -> float:  # noqa: N803 (the spec's symbols)
    """Wall time of ``train(steps=steps)`` on ``R`` Example-1 runs of size ``(n, T, d)``."""
    data = stack([example1(n=n, T=T, d=d, seed=seed) for seed in range(R)])
    W0 = 0.01 * torch.randn(R, d, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    start = time.perf_counter()
    batched.train(data.X, data.Z, data.y, data.v, W0, optimizer="ngd", lr=LR, steps=steps)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    """Parse the options, measure every shape and print the Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shapes",
        nargs="+",
        default=["16,8,6,512", "4,8,6,1024", "4,64,6,1024"],
        help="R,n,T,d of each measurement",
    )
    parser.add_argument("--steps", type=int, default=20, help="NGD steps per timing")
    parser.add_argument("--peak-size", type=int, default=1536, help="side of the square matmul of the peak")
    parser.add_argument("--repeats", type=int, default=3, help="step/peak timing pairs (the median is kept)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    print("## Batched NGD step GFLOP/s against the float64 matmul peak\n")
    print(
        f"nproc={os.cpu_count()}, torch {torch.__version__}, threads={args.threads}, {args.steps} steps per timing, "
        f"peak: {args.peak_size}^2 float64 matmul, median of {args.repeats} pairs, "
        f"load average {os.getloadavg()[0]:.1f} at start\n"
    )
    print("| R | n | T | d | ms per step | GFLOP/s done | matmul peak GFLOP/s | % of peak | W-equivalent GFLOP/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for shape in args.shapes:
        R, n, T, d = (int(x) for x in shape.split(","))  # noqa: N806 (the spec's symbols)
        call_seconds(R, n, T, d, 1)  # warm-up
        pairs = [(call_seconds(R, n, T, d, args.steps), matmul_gflops(args.peak_size)) for _ in range(args.repeats)]
        seconds = statistics.median(p[0] for p in pairs)
        peak = statistics.median(p[1] for p in pairs)
        done = call_flops(R, n, T, d, args.steps) / seconds / 1e9
        equivalent = args.steps * w_step_flops(R, n, T, d) / seconds / 1e9
        print(
            f"| {R} | {n} | {T} | {d} | {1000 * seconds / args.steps:.2f} | {done:.2f} | {peak:.2f} | "
            f"{100 * done / peak:.0f}% | {equivalent:.1f} |",
            flush=True,
        )
    print(f"\nload average {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
