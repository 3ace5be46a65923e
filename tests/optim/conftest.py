"""A tiny softmax-attention problem shared by the optimizer tests (implicit-bias-ngd §2-3, exponential loss)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch


@dataclass
class AttentionProblem:
    """f(X) = uᵀ Xᵀ softmax(X W x₁) on fixed tokens; parameters are [W (d,d), u (d,)], loss mean exp(−y f)."""

    X: torch.Tensor  # (n, T, d)
    y: torch.Tensor  # (n,)

    def params(self, dtype: torch.dtype = torch.float64) -> list[torch.nn.Parameter]:
        generator = torch.Generator().manual_seed(1)
        d = self.X.shape[-1]
        W = 0.3 * torch.randn(d, d, generator=generator, dtype=torch.float64)
        u = torch.randn(d, generator=generator, dtype=torch.float64)
        return [torch.nn.Parameter(W.to(dtype)), torch.nn.Parameter(u.to(dtype))]

    def loss(self, params: list[torch.Tensor]) -> torch.Tensor:
        W, u = params
        X = self.X.to(W.dtype)
        logits = torch.einsum("ntd,de,ne->nt", X, W, X[:, 0])  # spec implicit-bias-ngd §2: s = X W x₁
        f = torch.einsum("ntd,nt,d->n", X, torch.softmax(logits, dim=-1), u)  # §2 eq. (1)
        return torch.exp(-self.y.to(W.dtype) * f).mean()  # §3, exponential loss

    def closure(self, optimizer: torch.optim.Optimizer, params: list[torch.Tensor], grad_scale: float = 1.0):
        """A closure for ``optimizer.step``; it multiplies the gradients by ``grad_scale`` after backward."""

        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            loss = self.loss(params)
            loss.backward()
            for param in params:
                param.grad.mul_(grad_scale)
            return loss

        return closure


@pytest.fixture
def problem() -> AttentionProblem:
    generator = torch.Generator().manual_seed(0)
    n, T, d = 4, 3, 5
    X = torch.randn(n, T, d, generator=generator, dtype=torch.float64)
    y = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
    return AttentionProblem(X, y)
