"""Wrong mechanisms shared by the softmax-NTK experiments: each must fail the theory rows that name it.

Spec: docs/theory/softmax-ntk-diffusion.md §9 (the falsifiers paragraph). They patch the library where the
experiments reach it, never a check's arithmetic.
"""

from __future__ import annotations

from attnlab.ntk import ExpMLP, SoftmaxMLP
from attnlab.verify import Falsifier


def output_scale(power: float):
    """The softmax network with output ``m^power a S`` instead of ``m a S``; its Jacobian ``phi (a - b)`` scales
    through ``phi`` (``b = <a, S>`` is the softmax's own)."""

    def wrap(cls):
        class Scaled(cls):
            def _scale(self) -> float:
                return self.width ** (1.0 - power)

            def output_from_logits(self, Z):
                return super().output_from_logits(Z) / self._scale()

            def output_change(self, Z, dZ):
                return super().output_change(Z, dZ) / self._scale()

            def jacobian_factors(self, Z):
                phi, b = super().jacobian_factors(Z)
                return phi / self._scale(), b

            def output_and_factors(self, Z, *, overwrite=False):
                F, phi, b = super().output_and_factors(Z, overwrite=overwrite)
                return F / self._scale(), phi / self._scale(), b

        return Scaled

    return wrap


def _underestimated_lambda_max(lambda_max):
    """GD's stability estimate 20x too small: the practical step becomes 10 / (s lambda_max), 5x the limit."""
    return lambda net, X: lambda_max(net, X) / 20


LR_PAST_STABILITY = Falsifier(
    "lr-past-stability",
    "GD's lambda_max(H*) under-estimated 20x: the step 10 / (s lambda_max) is 5x the stability limit 2 / (...)",
    "attnlab.ntk.tangent_kernel:lambda_max",
    _underestimated_lambda_max,
    kind="gross",
)
SOFTMAX_KERNEL_OF_EXP = Falsifier(
    "softmax-kernel-of-exp",
    "the softmax network's limit kernel replaced by the exp network's closed form (activation swapped in §4.2)",
    "attnlab.ntk.softmax_mlp:SoftmaxMLP.limit_kernel",
    lambda _: ExpMLP.limit_kernel,
    kind="reference",
)
EXP_KERNEL_OF_SOFTMAX = Falsifier(
    "exp-kernel-of-softmax",
    "the exp network's limit kernel replaced by the softmax network's closed form (activation swapped in §4.2)",
    "attnlab.ntk.comparison_nets:ExpMLP.limit_kernel",
    lambda _: SoftmaxMLP.limit_kernel,
    kind="reference",
)
