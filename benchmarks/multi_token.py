"""Accepted runs per second of ``multi-token.equivalence`` against the source notebook's loop, in one process.

The source (TF-as-SVM, ``multi_token_converge.ipynb``) trains one draw at a time with autograd and, for each kept
draw, solves three cvxpy programs written pair by pair; ``reference`` below re-implements that loop from the
notebook's description (our code, the same steps): the ReLU model written with torch operations, 2000 steps of
``W <- W - lr G / (||G|| + eps)`` on the logistic loss, the source's acceptance rule, then the direction program,
the finite part and ``R`` (cvxpy, every pair ``t1 < t2``) and the one-token SVM. ``ours`` is the experiment's own
width loop (:func:`attnlab.experiments.multi_token._one_width`): all draws trained as one batched program, the
programs of :mod:`attnlab.svm.multi_token`, and the kept runs trained again to record their alignments.

Both see the same draws (seeds 1..draws; the same data and initial ``W``). Each keeps runs by its own rule (ours also
refuses a set equal to its whole sequence), so the table gives the runs kept, the seconds, the accepted runs per
second, and the seconds per draw (the like-for-like cost).

Run ``python benchmarks/multi_token.py`` (``--help`` for the options); it prints a Markdown table.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

import cvxpy as cp
import numpy as np
import torch

from attnlab.data import multi_token
from attnlab.experiments.multi_token import MultiTokenConfig, _one_width
from attnlab.verify import RunContext

EPS = torch.finfo(torch.float64).eps


def _outputs(X, Z, W, V, v):
    """The source's model: ReLU head on the attended mixture (our orientation of W and V)."""
    s = torch.einsum("ntd,de,ne->nt", X, W, Z)
    u = torch.einsum("nt,ntd->nd", torch.softmax(s, dim=-1), X)
    return torch.relu(u @ V.T) @ v


def _programs(X, Z, probabilities, W, high):
    """The source's three programs, pair by pair, and its one-token SVM (Frobenius norm)."""
    n, T, d = X.shape
    kept = probabilities >= high
    W_fin, W_dir, W_one = cp.Variable((d, d)), cp.Variable((d, d)), cp.Variable((d, d))
    fin, dirs, one = [], [], []
    best = probabilities.argmax(axis=1)
    for i in range(n):
        for t1 in range(T):
            for t2 in range(t1 + 1, T):
                diff = X[i, t2] - X[i, t1]
                if kept[i, t1] and kept[i, t2]:
                    fin.append(diff @ W_fin @ Z[i] == math.log(probabilities[i, t2] / probabilities[i, t1]))
                    dirs.append(diff @ W_dir @ Z[i] == 0)
                elif kept[i, t1]:
                    dirs.append(diff @ W_dir @ Z[i] <= -1)
                elif kept[i, t2]:
                    dirs.append(diff @ W_dir @ Z[i] >= 1)
        for t in range(T):
            if t != best[i]:
                one.append((X[i, best[i]] - X[i, t]) @ W_one @ Z[i] >= 1)
    for var, cons in ((W_fin, fin), (W_dir, dirs), (W_one, one)):
        problem = cp.Problem(cp.Minimize(cp.norm(var, "fro")), cons)
        problem.solve()
        if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
            raise ValueError(problem.status)
    R = cp.Variable()
    cp.Problem(cp.Minimize(cp.norm(W_fin.value + R * W_dir.value - W, "fro"))).solve()
    return W_dir.value, W_fin.value + R.value * W_dir.value, W_one.value


def reference(config: MultiTokenConfig, d: int, draws: int) -> list[np.ndarray]:
    """The notebook's loop over ``draws`` seeds; returns, per kept run, its correlations along the path (3, S)."""
    kept = []
    for seed in range(config.seed, config.seed + draws):
        draw = multi_token(config.n, config.T, d, seed=seed)
        X, Z, y = draw.data.X, draw.data.Z, draw.data.y
        if bool((y == 1).all()):
            continue
        gen = torch.Generator().manual_seed(10**6 + seed)
        W = ((2 * torch.rand(d, d, generator=gen, dtype=torch.float64) - 1) / math.sqrt(d)).requires_grad_(True)
        path = []
        for step in range(config.steps + 1):
            risk = torch.log1p(torch.exp(-y * _outputs(X, Z, W, draw.V, draw.v))).mean()
            (grad,) = torch.autograd.grad(risk, W)
            if step % config.record_every == 0:
                path.append(W.detach().clone())
            if step == config.steps:
                break
            with torch.no_grad():
                W -= config.lr * grad / (grad.norm() + EPS)
        with torch.no_grad():
            s = torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, Z), dim=-1).numpy()
        if ((s > config.low) & (s <= config.high)).any() or not (s <= config.low).any():
            continue
        try:
            directions = _programs(X.numpy(), Z.numpy(), s, W.detach().numpy(), config.high)
        except (ValueError, cp.error.SolverError):
            continue
        unit = np.stack([w.numpy() / np.linalg.norm(w.numpy()) for w in path])  # (S, d, d)
        kept.append(np.stack([np.einsum("sde,de->s", unit, ref / np.linalg.norm(ref)) for ref in directions]))
    return kept


def main(argv: list[str] | None = None) -> None:
    """Parse the options, time both programs on the same draws and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=4)
    parser.add_argument("--draws", type=int, default=120)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    config = MultiTokenConfig(ds=(args.d,), runs=args.draws, chunk=args.draws, max_draws=args.draws)
    start = time.perf_counter()
    _, table, _ = _one_width(config, args.d, RunContext(Path("."), progress=False))
    ours = time.perf_counter() - start
    start = time.perf_counter()
    kept_reference = len(reference(config, args.d, args.draws))
    theirs = time.perf_counter() - start
    load = os.getloadavg()[0]
    print(f"d = {args.d}, {args.draws} draws, {config.steps} steps, {args.threads} thread(s), load {load:.1f}\n")
    print("| program | runs kept | seconds | accepted runs / s | s per draw |")
    print("|---|---|---|---|---|")
    for name, kept, seconds in (("source's loop", kept_reference, theirs), ("ours", len(table), ours)):
        print(f"| {name} | {kept} | {seconds:.1f} | {kept / seconds:.3f} | {seconds / args.draws:.3f} |")
    print(
        f"\nper draw: {theirs / ours:.1f}x; accepted runs per second: "
        f"{(len(table) / ours) / max(kept_reference / theirs, 1e-300):.1f}x"
    )


if __name__ == "__main__":
    main()
