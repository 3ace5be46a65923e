"""One intra-op thread for the ntk tests: their tensors are small, and on a busy 2-core machine a second
thread costs far more in synchronization than it gains (measured 50x slower per GD step)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
