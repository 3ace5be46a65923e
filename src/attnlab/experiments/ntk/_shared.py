"""What the three softmax-NTK experiments share: the source page, the networks by name, size checks, log factors.

Spec: docs/theory/softmax-ntk-diffusion.md §9 (the reference setting of unit-norm rows).
"""

from __future__ import annotations

import math

from attnlab.ntk import ExpMLP, ReluMLP, SoftmaxMLP

SOURCE = "docs/theory/softmax-ntk-diffusion.md"
ACTIVATIONS = {"softmax": SoftmaxMLP, "relu": ReluMLP, "exp": ExpMLP}


def log_factor_allowance(x: list[float], power: float = 2.0) -> float:
    """Change of a log-log slope over ``x`` that a factor ``log(x)^power`` can cause (the theorems' log factors)."""
    return power * math.log(math.log(max(x)) / math.log(min(x))) / math.log(max(x) / min(x))
