"""04: the empirical NTK of your own module, and the lazy-training check: wider networks train like their kernel.

Run: ``python examples/04_empirical_ntk_lazy_training.py`` (``--small`` or ``ATTNLAB_EXAMPLE_SMALL=1``: two small
widths, for tests). Any ``nn.Module`` works with :func:`attnlab.ntk.empirical_ntk`; here a two-layer tanh
network in the NTK parametrisation, ``f(x) = a^T tanh(W x / sqrt(d)) / sqrt(m)``, fits 16 points by full-batch
gradient descent on ``1/2 ||f(X) - y||^2`` with step ``1 / lambda_max(K_0)``. For each width ``m`` it prints

- ``kernel_drift = ||K_T - K_0||_F / ||K_0||_F``, how far the NTK moved during training, and
- ``linear_gap = ||f_T(X) - f_lin_T(X)|| / ||f_0(X) - y||``, the distance from the kernel's prediction
  ``f_lin_t = y + (I - lr K_0)^t (f_0 - y)`` (gradient descent on the network linearised at initialisation).

Both shrink as the width grows: the lazy regime (numbers in docs/tutorial/your-model.md).
Spec: softmax-ntk-diffusion §4 (NTK Gram, its stability along training), §4.3 (kernel drift).
"""

import argparse
import math
import os

import torch
from torch import nn

from attnlab.ntk import empirical_ntk

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--small", action="store_true", default=os.environ.get("ATTNLAB_EXAMPLE_SMALL") == "1")
args = parser.parse_args()


class TwoLayer(nn.Module):
    """Your module: any nn.Module mapping (N, d) to (N, O) works the same way."""

    def __init__(self, d: int, m: int, seed: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.W = nn.Parameter(torch.randn(m, d, generator=g, dtype=torch.float64))
        self.a = nn.Parameter(torch.randn(1, m, generator=g, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.tanh(x @ self.W.T / math.sqrt(self.W.shape[1]))  # (N, m)
        return hidden @ self.a.T / math.sqrt(self.W.shape[0])  # (N, 1)


angles = torch.linspace(0, 2 * math.pi, 17, dtype=torch.float64)[:-1]
X = torch.stack([angles.cos(), angles.sin()], dim=1)  # (16, 2) points on the circle
y = torch.sin(3 * angles)[:, None]  # (16, 1)
widths, steps = ((32, 512), 100) if args.small else ((64, 256, 1024, 4096), 400)

print(f"{'width':>6} {'kernel_drift':>13} {'linear_gap':>11} {'train_loss':>11}")
for m in widths:
    net = TwoLayer(2, m, seed=0)
    K0 = empirical_ntk(net, X)[..., 0, 0]  # (16, 16): one output
    lr = 1.0 / float(torch.linalg.eigvalsh(K0)[-1])
    with torch.no_grad():
        f0 = net(X)
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = 0.5 * (net(X) - y).square().sum()
        loss.backward()
        optimizer.step()
    KT = empirical_ntk(net, X, mode="trace")  # the trace over one output is the kernel itself
    step_matrix = torch.eye(16, dtype=torch.float64) - lr * K0
    f_lin = y + torch.linalg.matrix_power(step_matrix, steps) @ (f0 - y)
    with torch.no_grad():
        f_trained = net(X)
    drift = float(torch.linalg.norm(KT - K0) / torch.linalg.norm(K0))
    gap = float(torch.linalg.norm(f_trained - f_lin) / torch.linalg.norm(f0 - y))
    print(f"{m:>6} {drift:>13.5f} {gap:>11.5f} {0.5 * float((f_trained - y).square().sum()):>11.2e}")
