"""01: the ten-line token-selection example of the README: NGD on example-1 data aligns W with the attention SVM.

Run: ``python examples/01_token_selection.py`` (``--small`` or ``ATTNLAB_EXAMPLE_SMALL=1``: 200 steps, for tests).
Spec: implicit-bias-ngd §5 (W-SVM) and §8.3 (normalised GD converges in direction to W_mm).
"""

import argparse
import os

import attnlab as al

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--small", action="store_true", default=os.environ.get("ATTNLAB_EXAMPLE_SMALL") == "1")
args = parser.parse_args()
steps = 200 if args.small else 2000

data = al.data.example1(n=8, T=6, d=64, seed=0)  # TokenSelectionData: X (n,T,d), Z (n,d), y (n,), v (d,)
sol = al.svm.attention_svm(data, norm="fro")  # also "nuc", "l1-diag", or a float p >= 1; select=...
model = al.models.Combined(d=data.d)  # Factored(d, d_e) and Diagonal(d) expose the same .W
opt = al.optim.NormalizedGD(model.parameters(), lr=0.1)  # a torch.optim.Optimizer: also trains a transformer
traj = al.train(
    model,
    opt,
    data,
    loss="logistic",
    steps=steps,
    record_every=steps // 20,
    metrics=[al.metrics.alignment(sol.W), al.metrics.opt_softmax()],
)
print(traj.frame.tail(1).to_string(index=False))  # step 2000: alignment with W_mm 0.99998
