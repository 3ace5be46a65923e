"""One GD step of the two-layer softmax network, and its step size's lambda_max, as n and m grow.

A step (Algorithm C) needs the outputs ``F = m S a^T`` and the Jacobian factors ``(m S, S a^T)``. The baseline
calls ``output_from_logits`` and ``jacobian_factors`` (two softmaxes, as ``gradient_descent`` did first);
``output_and_factors`` shares one softmax (``F = m b``); "in buffers" is the step ``gradient_descent`` takes now:
the same softmax computed in the logits' storage and every (n, m) and (d_in, m) tensor written into buffers that
each step reuses (no allocation of size m per step). Sizes: diffusion.gmm's (d_in = 3, d_out = 2) and
ntk.table1's largest common one (n = 64, m = 65536, d_in = 16, d_out = 1). ``lambda_max(H*)`` for the practical step is timed
dense (``eigvalsh`` of the ``n d x n d`` Gram) against Lanczos on ``J J^T v``. Both variants run in one process,
so the ratios are measured in the same run. Prints a Markdown section for ``BENCHMARKS.md``.

Run ``python benchmarks/ntk_gd_step.py [--repeats 20]``.
"""

from __future__ import annotations

import argparse
import os
import platform

import torch
from _timing import median_seconds

from attnlab.ntk import SoftmaxMLP, extreme_eigenvalues, gram, lambda_max, tangent_kernel
from attnlab.ntk.network import weight_gradient

# (n, m, d_in, d_out): diffusion.gmm's inputs (t, x) and score, then ntk.table1's n = 64 at the width it needs
SIZES = [(256, 128, 3, 2), (1024, 512, 3, 2), (4096, 512, 3, 2), (4096, 2048, 3, 2), (64, 65536, 16, 1)]
EIG_SIZES = [256, 1024, 2048]  # n for the lambda_max timing (Gram of size 2n)


def problem(n: int, m: int, d_in: int = 3, d_out: int = 2) -> tuple[SoftmaxMLP, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(n, d_in, generator=gen, dtype=torch.float64)
    X = X / X.norm(dim=1, keepdim=True)
    Y = torch.randn(n, d_out, generator=gen, dtype=torch.float64) / 2
    return SoftmaxMLP(d_in, d_out, m, 2.0, seed=0), X, Y


def main(argv: list[str] | None = None) -> None:
    """Time both step variants and both eigenvalue paths, print the Markdown section."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="steps per measurement (the median is kept)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    step_rows = []
    for n, m, d_in, d_out in SIZES:
        net, X, Y = problem(n, m, d_in, d_out)
        W, a = net.W.detach(), net.a
        logits, work, grad = X.new_empty(n, m), X.new_empty(n, m), torch.empty_like(W)

        def two_pass() -> torch.Tensor:
            Z = X @ W
            phi, b = net.jacobian_factors(Z)
            return weight_gradient(X, net.output_from_logits(Z) - Y, phi, b, a)

        def one_pass() -> torch.Tensor:
            F, phi, b = net.output_and_factors(X @ W)
            return weight_gradient(X, F - Y, phi, b, a)

        def in_buffers() -> torch.Tensor:
            F, phi, b = net.output_and_factors(torch.mm(X, W, out=logits), overwrite=True)
            return weight_gradient(X, F - Y, phi, b, a, out=grad, work=work)

        assert torch.allclose(two_pass(), one_pass(), rtol=1e-12, atol=1e-12)  # same step
        assert torch.allclose(in_buffers(), one_pass(), rtol=1e-12, atol=1e-12)
        times = [median_seconds(f, args.repeats) for f in (two_pass, one_pass, in_buffers)]
        step_rows.append((n, m, *times))
    eig_rows = []
    for n in EIG_SIZES:
        net, X, _ = problem(n, 512)
        exact = extreme_eigenvalues(gram(net, X))[1]
        dense = median_seconds(lambda: extreme_eigenvalues(gram(net, X))[1], max(1, args.repeats // 10))
        tangent_kernel._DENSE_MAX, saved = 0, tangent_kernel._DENSE_MAX  # force the matrix-free path
        try:
            lanczos = median_seconds(lambda: lambda_max(net, X), max(1, args.repeats // 10))
            gap = abs(lambda_max(net, X) - exact) / exact
        finally:
            tangent_kernel._DENSE_MAX = saved
        eig_rows.append((n, dense, lanczos, gap))
    load = os.getloadavg()[0]
    print("<!-- section: ntk-gd-step -->")
    print("## Softmax-NTK GD step and lambda_max(H*)\n")
    print(
        f"Command: `.venv/bin/python benchmarks/ntk_gd_step.py --repeats {args.repeats}` (d_in = 3, d_out = 2, "
        f"sigma_w = 2, float64, {args.threads} torch thread; median of {args.repeats} steps).\n"
    )
    print(
        f"Machine: `nproc` = {os.cpu_count()}, {platform.processor() or platform.machine()}, load average {load:.1f} "
        "at the end (shared machine: absolute times are noisy, ratios were measured in the same run).\n"
    )
    print("| n | m | two softmaxes (ms) | one softmax (ms) | in buffers (ms) | one / two | buffers / two |")
    print("|---|---|---|---|---|---|---|")
    for n, m, two, one, buffers in step_rows:
        print(
            f"| {n} | {m} | {1e3 * two:.2f} | {1e3 * one:.2f} | {1e3 * buffers:.2f} | {two / one:.2f}x | "
            f"{two / buffers:.2f}x |"
        )
    print("\n| n (Gram 2n x 2n) | dense eigvalsh (ms) | Lanczos (ms) | speed-up | relative difference |")
    print("|---|---|---|---|---|")
    for n, dense, lanczos, gap in eig_rows:
        print(f"| {n} | {1e3 * dense:.1f} | {1e3 * lanczos:.1f} | {dense / lanczos:.1f}x | {gap:.1e} |")
    print("<!-- end section: ntk-gd-step -->")


if __name__ == "__main__":
    main()
