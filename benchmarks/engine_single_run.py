"""One training run: attnlab's front doors against a plain ten-line autograd loop, as ratios measured in one process.

Workload (issue 11): a 6 x 8 x 10 problem (``n=6`` sequences of ``T=8`` tokens in ``d=10``, Example 1's data model),
``W_0 = 0``, normalised GD ``W <- W - eta g / ||g||_F`` with ``eta = 0.1`` and the exponential loss, recording
only the first and last step. Three ways to run it:

- ``plain``: the model in plain torch ops, ``loss.backward()``, the gradient divided by its norm and a
  ``torch.optim.SGD`` step -- the ten-line loop a user writes first;
- ``al.train``: ``attnlab.train(Combined(d), NormalizedGD(lr=0.1), data, record_every=steps)``;
- ``batched``: ``attnlab.training.batched.train(..., optimizer="ngd")`` with one run.

The three are timed in turn, ``--repeats`` times, in a rotating order, so a change of machine load hits all of
them; each ratio is the median over the repeats of ``plain time / front-door time`` (higher is faster).

Run ``python benchmarks/engine_single_run.py`` (``--help`` for the options); it prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

import attnlab as al
from attnlab.data import example1
from attnlab.training import batched

N, T, D = 6, 8, 10
LR = 0.1


def plain_loop(data: al.data.TokenSelectionData, steps: int) -> torch.Tensor:
    """The ten-line autograd loop: NGD through ``torch.optim.SGD`` on the normalised gradient. Returns W (d, d)."""
    W = torch.zeros(D, D, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([W], lr=LR)
    values = data.X @ data.v  # (n, T)
    for _ in range(steps):
        opt.zero_grad()
        phi = torch.softmax(torch.einsum("ntd,de,ne->nt", data.X, W, data.Z), dim=-1)  # (n, T)
        loss = torch.exp(-data.y * (phi * values).sum(dim=-1)).mean()
        loss.backward()
        with torch.no_grad():
            W.grad /= W.grad.norm()
        opt.step()
    return W.detach()


def front_doors(data: al.data.TokenSelectionData, steps: int) -> dict[str, object]:
    """The three ways, each a function of no arguments that trains ``steps`` steps from scratch."""

    def train() -> None:
        model = al.models.Combined(D)
        al.train(model, al.optim.NormalizedGD(model.parameters(), lr=LR), data, steps=steps, record_every=steps)

    def run_batched() -> None:
        batched.train(data.X, data.Z, data.y, data.v, None, optimizer="ngd", lr=LR, steps=steps)

    return {"plain": lambda: plain_loop(data, steps), "al.train": train, "batched": run_batched}


def measure(steps: int, repeats: int) -> dict[str, list[float]]:
    """Seconds per step of each way, ``repeats`` times, timed in a rotating order."""
    data = example1(n=N, T=T, d=D, seed=0)
    ways = front_doors(data, steps)
    for fn in ways.values():  # warm-up
        fn()
    names = list(ways)
    times: dict[str, list[float]] = {name: [] for name in names}
    for k in range(repeats):
        for name in names[k % len(names) :] + names[: k % len(names)]:
            start = time.perf_counter()
            ways[name]()
            times[name].append((time.perf_counter() - start) / steps)
    return times


def agreement(steps: int) -> float:
    """Largest entry of |W_al.train - W_plain| after ``steps`` steps (before the softmax saturates)."""
    data = example1(n=N, T=T, d=D, seed=0)
    model = al.models.Combined(D)
    al.train(model, al.optim.NormalizedGD(model.parameters(), lr=LR), data, steps=steps, record_every=steps)
    return float((model.W.detach() - plain_loop(data, steps)).abs().max())


def main(argv: list[str] | None = None) -> None:
    """Parse the options, measure and print the Markdown table with the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="NGD steps per timing")
    parser.add_argument("--repeats", type=int, default=9, help="timings per way (medians are kept)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"## One NGD run: front doors vs a plain autograd loop (n={N}, T={T}, d={D}, eta={LR}, {args.steps} steps)\n")
    print(
        f"torch {torch.__version__}, threads={args.threads}, load average {os.getloadavg()[0]:.1f} at start; "
        f"al.train vs plain W after 50 steps: max |difference| {agreement(50):.1e}\n"
    )
    times = measure(args.steps, args.repeats)
    plain = times["plain"]
    print("| way | ms per step (median) | speed-up over plain (median of per-repeat ratios) |")
    print("|---|---|---|")
    for name, values in times.items():
        ratio = statistics.median(p / t for p, t in zip(plain, values))
        print(f"| {name} | {1e3 * statistics.median(values):.3f} | {ratio:.2f}x |")
    print(f"\nload average {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
