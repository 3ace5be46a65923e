"""Optimizers for softmax-attention training, each a ``torch.optim.Optimizer`` around one pure functional update.

Spec: implicit-bias-ngd §4 (NGD, NGD-mom, Polyak step, joint adaptive rule, SNGD/SPS), mirror-descent-lp §4
(l_p mirror descent).
"""

from attnlab.optim.normalized_gd import NormalizedGD, normalized_gd

__all__ = ["NormalizedGD", "normalized_gd"]
