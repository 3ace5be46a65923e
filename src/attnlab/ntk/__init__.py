"""Two-layer softmax networks in the NTK regime, their comparison networks, and diffusion score estimation.

Spec: ../shared/spec/softmax-ntk-diffusion.md.
"""

from attnlab.ntk.comparison_nets import ExpMLP, ReluMLP
from attnlab.ntk.tangent_kernel import (
    cross_kernel,
    extreme_eigenvalues,
    gram,
    gram_jacobian,
    infinite_width_gram,
    kernel_drift,
    lambda_max,
)
from attnlab.ntk.gd import GDResult, gradient_descent, practical_step, stability_limit
from attnlab.ntk.init import symmetric_init
from attnlab.ntk.kernel_regression import kernel_regression_limit, kernel_regression_path
from attnlab.ntk.network import TwoLayerNet
from attnlab.ntk.softmax_mlp import SoftmaxMLP
from attnlab.ntk.theory import contraction_bound, coupling_bound, theorem_B, theorem_step
from attnlab.ntk.unit_ball import to_unit_ball

__all__ = [
    "ExpMLP",
    "GDResult",
    "ReluMLP",
    "SoftmaxMLP",
    "TwoLayerNet",
    "contraction_bound",
    "coupling_bound",
    "cross_kernel",
    "extreme_eigenvalues",
    "gram",
    "gradient_descent",
    "gram_jacobian",
    "infinite_width_gram",
    "kernel_drift",
    "kernel_regression_limit",
    "kernel_regression_path",
    "lambda_max",
    "practical_step",
    "stability_limit",
    "symmetric_init",
    "theorem_B",
    "theorem_step",
    "to_unit_ball",
]
