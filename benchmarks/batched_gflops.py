"""Achieved GFLOP/s of the batched NGD step at large d, as a fraction of a float64 matmul peak measured alongside.

One NGD step of :func:`attnlab.batched.train` (``param="W"``, exponential loss) on Example-1 data does, per run,
these contractions (a multiply-add counts 2 flops):

- logits ``s_it = x_it^T (W z_i)``: ``W z_i`` for every ``i`` is ``2 n d^2``, then ``x_it^T (W z_i)`` is ``2 n T d``;
- gradient ``sum_i (sum_t w_it x_it) z_i^T``: the inner sums ``2 n T d``, the rank-n product ``2 n d^2``;
- gradient norm ``2 d^2``, update ``W - c g`` ``2 d^2``, finiteness guard (one sum) ``d^2``.

so ``F = R (4 n d^2 + 4 n T d + 5 d^2)`` per step (the token scores are computed once per call, not per step);
the O(n T^2) softmax and centred-score work is not counted, which makes the figure a slight underestimate.
``train(steps=S)`` evaluates the gradient ``S + 1`` times and updates ``S`` times; the count uses exactly that.
The peak is the rate of one ``torch.matmul`` of two square float64 matrices of side ``--peak-size``. Each step
timing is paired with a peak timing taken right after it, and both are medians over ``--repeats`` pairs, so
they see the same machine load.

With ``n`` rows in ``Z`` the two ``d x d`` contractions do ``2 n`` flops per ``W`` entry read or written, so at
Example 1's ``n = 8`` the step is bound by memory bandwidth, not arithmetic; larger ``n`` raises the intensity.

Run ``python benchmarks/batched_gflops.py`` (``--help`` for the options); it prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from attnlab import batched
from attnlab.data import example1, stack

LR = 0.1


def step_flops(R: int, n: int, T: int, d: int) -> tuple[int, int]:  # noqa: N803 (the spec's symbols)
    """Flops of one gradient evaluation and of one update of ``R`` runs.

    Returns
    -------
    gradient, update : int
        ``R (4 n d^2 + 4 n T d + 2 d^2)`` and ``R (2 d^2 + d^2)`` (update plus finiteness guard).
    """
    return R * (4 * n * d * d + 4 * n * T * d + 2 * d * d), R * 3 * d * d


def matmul_gflops(size: int) -> float:
    """GFLOP/s of one ``torch.matmul`` of two random square float64 matrices (after a warm-up product)."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, dtype=torch.float64, generator=g)
    b = torch.randn(size, size, dtype=torch.float64, generator=g)
    torch.matmul(a, b)
    start = time.perf_counter()
    torch.matmul(a, b)
    return 2 * size**3 / (time.perf_counter() - start) / 1e9


def step_gflops(R: int, n: int, T: int, d: int, steps: int) -> float:  # noqa: N803 (the spec's symbols)
    """GFLOP/s of ``train(steps=steps)`` on ``R`` Example-1 runs of size ``(n, T, d)``."""
    data = stack([example1(n=n, T=T, d=d, seed=seed) for seed in range(R)])
    W0 = 0.01 * torch.randn(R, d, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    start = time.perf_counter()
    batched.train(data.X, data.Z, data.y, data.v, W0, optimizer="ngd", lr=LR, steps=steps)
    seconds = time.perf_counter() - start
    gradient, update = step_flops(R, n, T, d)
    return ((steps + 1) * gradient + steps * update) / seconds / 1e9


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
    print("| R | n | T | d | flops per step | step GFLOP/s | matmul peak GFLOP/s | % of peak |")
    print("|---|---|---|---|---|---|---|---|")
    for shape in args.shapes:
        R, n, T, d = (int(x) for x in shape.split(","))  # noqa: N806 (the spec's symbols)
        step_gflops(R, n, T, d, 1)  # warm-up
        pairs = [(step_gflops(R, n, T, d, args.steps), matmul_gflops(args.peak_size)) for _ in range(args.repeats)]
        achieved = statistics.median(p[0] for p in pairs)
        peak = statistics.median(p[1] for p in pairs)
        per_step = sum(step_flops(R, n, T, d))
        print(
            f"| {R} | {n} | {T} | {d} | {per_step / 1e6:,.1f} M | {achieved:.2f} | {peak:.2f} | "
            f"{100 * achieved / peak:.0f}% |",
            flush=True,
        )
    print(f"\nload average {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
