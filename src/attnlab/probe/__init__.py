"""attnlab on real attention modules: a head's W in attnlab's convention, its tokens, and a training probe.

Spec: implicit-bias-ngd §1-2 and §5 (token selection, ``softmax(X W z)``, the attention SVM), kq-nuclear-norm §2
(``W = K Q^T``). See ``docs/tutorial/your-model.md``.
"""

from attnlab.probe.adapters import (
    Adapter,
    HeadProjection,
    adapter_for,
    additive_mask,
    linear_projection,
    register_adapter,
    registered,
)
from attnlab.probe.callback import HeadProbe
from attnlab.probe.capture import (
    attended_tokens,
    capture,
    capture_from_tokens,
    head_mask,
    module_calls,
    module_tokens,
)
from attnlab.probe.head import has_bias, head_W, homogeneous_tokens, weight_part

__all__ = [
    "Adapter",
    "HeadProbe",
    "HeadProjection",
    "adapter_for",
    "additive_mask",
    "attended_tokens",
    "capture",
    "capture_from_tokens",
    "has_bias",
    "head_W",
    "head_mask",
    "homogeneous_tokens",
    "linear_projection",
    "module_calls",
    "module_tokens",
    "register_adapter",
    "registered",
    "weight_part",
]
