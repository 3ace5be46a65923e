"""The in-sample regression gradient: the covariance form the library uses against spec §5.3's steps as written.

Spec preconditioned-regression §5.3 computes the gradient in seven steps; step 6 forms ``G`` of shape ``(B, m)``
(``G_il = S_il (u_i . z_l - u_i . mu_i)``), and with it ``U Z^T``, their difference and ``G`` itself: four
``(B, m)`` tensors per run besides the attention weights ``S``. The section's own remark gives the equivalent
covariance form, ``grad_Q = (2/B) sum_i Cov_{S_i}(z) u_i x_i^T``, which :func:`attnlab.regression.empirical.
loss_and_gradient` computes from one product ``S [z, z z^T]`` (no ``(B, m)`` tensor besides ``S``, whose softmax
is taken in place). ``steps`` below is the spec's seven steps in plain torch (the library's code before issue 12);
both run in this process on the same inputs, and their results are compared.

Sizes: regression.scaling's (5 runs, ``d = 3`` covariate tokens, ``k = 6``, ``B = m = n`` up to 1600) and the
joint-token option (``p = d + k = 9``).

Run ``python benchmarks/regression_gradient.py`` (``--help`` for the options); it prints a Markdown section.
"""

from __future__ import annotations

import argparse
import os

import torch
from _timing import median_seconds

from attnlab.regression.empirical import loss_and_gradient

SIZES = [(5, 400, 3, 6, "covariates"), (5, 1600, 3, 6, "covariates"), (5, 1600, 3, 6, "joint")]  # (R, n, d, k, tokens)


def steps(V: torch.Tensor, Q: torch.Tensor, X: torch.Tensor, Y: torch.Tensor, Z: torch.Tensor) -> tuple:
    """Spec §5.3 steps 1-7 as written: ``(loss, grad_V, grad_Q)``."""
    B = X.shape[-2]
    S = torch.softmax(X @ Q.transpose(-1, -2) @ Z.transpose(-1, -2), dim=-1)  # steps 1-2
    M = S @ Z  # step 3
    R = M @ V.transpose(-1, -2) - Y  # step 4
    U = R @ V  # step 5
    G = S * (U @ Z.transpose(-1, -2) - (U * M).sum(-1, keepdim=True))  # step 6
    return (
        (R * R).sum((-2, -1)) / B,
        2 / B * R.transpose(-1, -2) @ M,
        2 / B * Z.transpose(-1, -2) @ G.transpose(-1, -2) @ X,
    )


def problem(R: int, n: int, d: int, k: int, tokens: str) -> tuple[torch.Tensor, ...]:
    """Random parameters and a sample: V (R, k, p), Q (R, p, d), X (R, n, d), Y (R, n, k), Z (R, n, p)."""
    gen = torch.Generator().manual_seed(0)
    p = d + (k if tokens == "joint" else 0)
    X = torch.randn(R, n, d, generator=gen, dtype=torch.float64)
    Y = torch.randn(R, n, k, generator=gen, dtype=torch.float64)
    V = torch.randn(R, k, p, generator=gen, dtype=torch.float64)
    Q = 0.3 * torch.randn(R, p, d, generator=gen, dtype=torch.float64)
    return V, Q, X, Y, (X if tokens == "covariates" else torch.cat([X, Y], dim=-1))


def main(argv: list[str] | None = None) -> None:
    """Parse the options, time both forms at every size and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timings per form (the median is kept)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print("<!-- section: regression-gradient -->")
    print("## The in-sample regression gradient: covariance form vs spec §5.3's steps (issue 12)\n")
    print(
        f"Command: `.venv/bin/python benchmarks/regression_gradient.py --repeats {args.repeats}`; torch "
        f"{torch.__version__}, {args.threads} thread(s), load average {os.getloadavg()[0]:.1f} at the start.\n"
    )
    print("| runs | n = B = m | tokens | steps (ms) | covariance form (ms) | speed-up | max relative difference |")
    print("|---|---|---|---|---|---|---|")
    for R, n, d, k, tokens in SIZES:
        inputs = problem(R, n, d, k, tokens)
        ours, spec = loss_and_gradient(*inputs), steps(*inputs)
        gap = max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(ours, spec))
        slow = median_seconds(lambda inputs=inputs: steps(*inputs), args.repeats)
        fast = median_seconds(lambda inputs=inputs: loss_and_gradient(*inputs), args.repeats)
        print(f"| {R} | {n} | {tokens} | {1e3 * slow:.1f} | {1e3 * fast:.1f} | {slow / fast:.2f}x | {gap:.1e} |")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    print("<!-- end section: regression-gradient -->")


if __name__ == "__main__":
    main()
