"""02: your own tokens from a file: write an .npz, load it, check the assumptions, solve the SVM, run explain.

Run: ``python examples/02_your_tokens.py [--out DIR]`` (``--small`` or ``ATTNLAB_EXAMPLE_SMALL=1``: fewer steps).
A data file is an ``.npz`` with ``X (n, T, d)``, ``y (n,)`` and optionally ``Z (n, d)``, ``v (d,)``, ``select (n,)``
(``Z`` defaults to each sequence's first token). Here the tokens are made with NumPy, as yours would be.
Spec: implicit-bias-ngd §1 (data), §5 (W-SVM), §8.3; kq-nuclear-norm §4 (nuclear norm for K, Q).
"""

import argparse
import os
from pathlib import Path

import numpy as np

from attnlab.data import TokenSelectionData, check_assumptions
from attnlab.explain import explain
from attnlab.metrics import cosine
from attnlab.svm import attention_svm

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--small", action="store_true", default=os.environ.get("ATTNLAB_EXAMPLE_SMALL") == "1")
parser.add_argument("--out", type=Path, default=Path("runs/examples/02"))
args = parser.parse_args()
args.out.mkdir(parents=True, exist_ok=True)

# 1. Your tokens: n sequences of T tokens in d dimensions, a label per sequence and a linear head v.
rng = np.random.default_rng(0)
n, T, d = 6, 5, 8
X = rng.standard_normal((n, T, d))
v = np.eye(d)[0]
y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
X[np.arange(n), rng.integers(1, T, n), 0] = 3.0 * y  # one token per sequence scores high: y v^T x = 3
path = args.out / "tokens.npz"
np.savez(path, X=X, y=y, v=v)

# 2. Load it back (validated, float64) and check the papers' assumptions on it.
data = TokenSelectionData.load(path)
print(f"round trip exact: {np.array_equal(data.X.numpy(), X)}")
for report in check_assumptions(data):
    print(f"{report.name:28s} holds={report.holds!s:5s} {report.measured}")

# 3. The max-margin problems of the optimal tokens, and which one training finds.
fro, nuc = attention_svm(data, "fro"), attention_svm(data, "nuc")
print(f"W-SVM margin {fro.margin:.6f}, cos(W_fro, W_nuc) = {float(cosine(fro.W, nuc.W)):.4f}")
steps = 300 if args.small else 3000
for param in ("W", "KQ"):
    result = explain(data, param=param, opt="ngd", steps=steps, lr=0.1)
    print(f"param={param}: closest SVM = {result.closest}")
    print(result.table[["candidate", "one_minus_cos"]].to_string(index=False))
    result.figure.savefig(args.out / f"explain_{param}.png", dpi=120)
