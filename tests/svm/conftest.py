"""Tiny float64 token sets shared by the SVM tests, plus a plain reference for the constraint matrices."""

import numpy as np
import pytest
import torch

from attnlab.data import TokenSelectionData


def random_data(seed: int, n: int = 4, T: int = 3, d: int = 4) -> TokenSelectionData:
    """Gaussian tokens, queries and head, labels +-1 (generic: every program is feasible when n (T - 1) <= d^2)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, T, d, generator=g)
    Z = torch.randn(n, d, generator=g)
    y = torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0)
    v = torch.randn(d, generator=g)
    return TokenSelectionData(X, Z, y, v)


def reference_constraints(data: TokenSelectionData, select) -> tuple[list[tuple[int, int]], np.ndarray]:
    """A plain loop over the spec's constraints: pairs (i, t), t != sel_i, and A_it = (x_sel - x_t) z_i^T."""
    X, Z = data.X.numpy(), data.Z.numpy()
    pairs, mats = [], []
    for i in range(data.n):
        for t in range(data.T):
            if t != int(select[i]):
                pairs.append((i, t))
                mats.append(np.outer(X[i, int(select[i])] - X[i, t], Z[i]))
    return pairs, np.array(mats)


@pytest.fixture
def data() -> TokenSelectionData:
    return random_data(0)


@pytest.fixture
def make_data():
    return random_data


@pytest.fixture
def constraints():
    return reference_constraints


@pytest.fixture(params=[0, 1, 2])
def any_data(request) -> TokenSelectionData:
    return random_data(request.param)
