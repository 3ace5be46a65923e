"""Fixtures of the training wing's tests: one intra-op thread (small tensors: on a busy 2-core machine a second
thread costs far more in synchronization than it gains), and a tiny regression instance."""

import pytest
import torch

from attnlab.regression import make_problem


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def problem():
    """d = 3, k = 5, sigma = 0.1, ||M*||_op = 0.25 (preconditioned-regression §9.2 generator at a smaller size)."""
    return make_problem(d=3, k=5, noise_std=0.1, seed=3)
