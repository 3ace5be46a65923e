"""Throughput of batched NGD runs against one-run-at-a-time loops, as ratios measured in one process.

Workload (issue 6, item 5): Example 1 (``n=8, T=6, d=64``, spec implicit-bias-ngd §6.1), ``W0 ~ N(0, 0.01^2)``,
normalised gradient descent ``W <- W - eta grad / ||grad||_F`` with ``eta = 0.1`` and the exponential loss, run
``R = 1, 16, 256`` times on independent data sets (seeds ``0..R-1``). Three ways to run it:

- ``batched``: one call of :func:`attnlab.training.batched.train` with all ``R`` runs on the leading axis;
- ``loop``: the same function called once per run, in a Python loop;
- ``reference``: the model written with plain torch ops, ``loss.backward()`` and a ``torch.optim.SGD`` step on the
  normalised gradient (``W.grad / ||W.grad||``), one run at a time, as public reference code trains it.

Throughput is ``runs * steps / second``. The two loops take the same time per run and step whatever ``R`` is, so
they are timed on the first ``min(R, --loop-runs)`` runs for ``--loop-steps`` steps and reported per run-step;
the batched call is timed for the full ``--steps``. Every timing is the median of ``--repeats``.

Run ``python benchmarks/batched_throughput.py`` (``--help`` for the options); it prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform

import torch
from _timing import median_seconds

from attnlab.data import example1, stack
from attnlab.training import batched

N, T, D = 8, 6, 64
LR = 0.1


def workload(R: int) -> tuple[torch.Tensor, ...]:
    """Example-1 data of ``R`` independent runs and their initialisations.

    Returns
    -------
    X, Z, y, v, W0 : torch.Tensor
        Shapes (R, n, T, d), (R, n, d), (R, n), (R, d) and (R, d, d), float64.
    """
    data = stack([example1(n=N, T=T, d=D, seed=seed) for seed in range(R)])
    W0 = 0.01 * torch.randn(R, D, D, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return data.X, data.Z, data.y, data.v, W0


def reference_run(
    X: torch.Tensor, Z: torch.Tensor, y: torch.Tensor, v: torch.Tensor, W0: torch.Tensor, steps: int
) -> torch.Tensor:
    """One run with autograd and ``torch.optim.SGD`` on the normalised gradient.

    Parameters
    ----------
    X, Z, y, v, W0 : torch.Tensor
        One run: (n, T, d), (n, d), (n,), (d,), (d, d).
    steps : int

    Returns
    -------
    torch.Tensor, shape (d, d)
        The final ``W``.
    """
    W = W0.clone().requires_grad_(True)
    opt = torch.optim.SGD([W], lr=LR)
    values = X @ v  # (n, T): v^T x_it
    for _ in range(steps):
        opt.zero_grad()
        phi = torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, Z), dim=-1)  # (n, T)
        loss = torch.exp(-y * (phi * values).sum(dim=-1)).mean()
        loss.backward()
        with torch.no_grad():
            W.grad /= W.grad.norm()
        opt.step()
    return W.detach()


def measure(R: int, steps: int, loop_runs: int, loop_steps: int, repeats: int) -> dict[str, float]:
    """Throughputs (run-steps per second) of the three ways at ``R`` runs.

    Returns
    -------
    dict
        ``batched``, ``loop`` and ``reference`` throughputs.
    """
    X, Z, y, v, W0 = workload(R)
    k = min(R, loop_runs)

    def run_batched() -> None:
        batched.train(X, Z, y, v, W0, optimizer="ngd", lr=LR, loss="exp", steps=steps)

    def run_loop() -> None:
        for r in range(k):
            batched.train(X[r], Z[r], y[r], v[r], W0[r], optimizer="ngd", lr=LR, loss="exp", steps=loop_steps)

    def run_reference() -> None:
        for r in range(k):
            reference_run(X[r], Z[r], y[r], v[r], W0[r], loop_steps)

    return {
        "batched": R * steps / median_seconds(run_batched, repeats),
        "loop": k * loop_steps / median_seconds(run_loop, repeats),
        "reference": k * loop_steps / median_seconds(run_reference, repeats),
    }


def agreement(steps: int) -> float:
    """Largest relative Frobenius difference between the batched and the reference final ``W`` over 4 runs.

    Only meaningful before the softmax saturates: autograd forms ``phi (1 - phi)``-type differences that cancel,
    so the reference drifts from the exact gradient once ``1 - phi_opt`` falls below ~1e-8 (about step 100 here).
    """
    X, Z, y, v, W0 = workload(4)
    W = batched.train(X, Z, y, v, W0, optimizer="ngd", lr=LR, loss="exp", steps=steps).W
    ref = torch.stack([reference_run(X[r], Z[r], y[r], v[r], W0[r], steps) for r in range(4)])
    return float((torch.linalg.matrix_norm(W - ref) / torch.linalg.matrix_norm(ref)).max())


def cpu_model() -> str:
    """The CPU model name from ``/proc/cpuinfo`` (``platform.processor()`` where that is missing)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str] | None = None) -> None:
    """Parse the options, measure every ``R`` and print the Markdown table with the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1, 16, 256], help="values of R")
    parser.add_argument("--steps", type=int, default=1000, help="NGD steps of the batched call")
    parser.add_argument("--loop-runs", type=int, default=4, help="runs timed in each loop (at most R)")
    parser.add_argument("--loop-steps", type=int, default=100, help="steps per run timed in each loop")
    parser.add_argument("--repeats", type=int, default=3, help="timings per measurement (the median is kept)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    print(f"## Batched NGD throughput (Example 1, n={N}, T={T}, d={D}, eta={LR}, {args.steps} steps)\n")
    print(
        f"machine: {cpu_model()}, nproc={os.cpu_count()}, torch {torch.__version__}, threads={args.threads}, "
        f"load average {os.getloadavg()[0]:.1f} at start"
    )
    print(
        f"loops timed on min(R, {args.loop_runs}) runs x {args.loop_steps} steps and scaled per run-step; "
        f"median of {args.repeats}; batched vs reference final W after 50 steps (before the softmax saturates): "
        f"max relative difference {agreement(50):.1e}\n"
    )
    print("| R | batched (run-steps/s) | loop (run-steps/s) | reference (run-steps/s) | batched/loop | batched/ref |")
    print("|---|---|---|---|---|---|")
    for R in args.runs:
        m = measure(R, args.steps, args.loop_runs, args.loop_steps, args.repeats)
        print(
            f"| {R} | {m['batched']:,.0f} | {m['loop']:,.0f} | {m['reference']:,.0f} | "
            f"{m['batched'] / m['loop']:.1f}x | {m['batched'] / m['reference']:.1f}x |",
            flush=True,
        )
    print(f"\nload average {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
