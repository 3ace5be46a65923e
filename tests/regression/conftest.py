"""Tiny float64 regression instances shared by the tests of attnlab.regression (spec preconditioned-regression)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from attnlab.regression import make_problem


@pytest.fixture
def problem():
    """d = 3, k = 5, sigma = 0.1, ||M*||_op = 0.25 (spec §9.2 generator at a smaller size)."""
    return make_problem(d=3, k=5, noise_std=0.1, seed=3)


@pytest.fixture
def params():
    """A random (V, Q) pair for covariate tokens, modest size so the softmax is not saturated."""

    def make(k: int = 5, p: int = 3, d: int = 3, runs: int | None = None, scale: float = 0.5, seed: int = 0):
        gen = torch.Generator().manual_seed(seed)
        lead = () if runs is None else (runs,)
        V = scale * torch.randn(*lead, k, p, generator=gen, dtype=torch.float64)
        Q = scale * torch.randn(*lead, p, d, generator=gen, dtype=torch.float64)
        return V, Q

    return make


@pytest.fixture
def finite_difference() -> Callable[[Callable[[torch.Tensor], torch.Tensor], torch.Tensor], torch.Tensor]:
    """Central finite-difference gradient of a scalar function of one tensor (step 1e-6, error O(1e-12))."""

    def grad(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        out = torch.zeros_like(x)
        flat = out.view(-1)
        for i in range(x.numel()):
            step = torch.zeros_like(x).view(-1)
            step[i] = eps
            step = step.view_as(x)
            flat[i] = (f(x + step) - f(x - step)) / (2 * eps)
        return out

    return grad
