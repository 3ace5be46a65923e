"""Shared test settings: float64 everywhere, headless matplotlib, one intra-op thread.

The test tensors are tiny; with more than one intra-op thread PyTorch spends its time waking threads (10x slower
on a loaded 2-core machine), so tests -- and the CLI subprocesses they start, through the environment -- use one.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import torch  # noqa: E402

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)
