"""Shared test settings: float64 everywhere, headless matplotlib."""

import matplotlib

matplotlib.use("Agg")

import torch  # noqa: E402

torch.set_default_dtype(torch.float64)
