"""Two-layer softmax networks in the NTK regime, their comparison networks, and diffusion score estimation.

Spec: docs/theory/softmax-ntk-diffusion.md.
"""

from attnlab.ntk.comparison_nets import ExpMLP, ReluMLP
from attnlab.ntk.decomposition import StepTerms, step_terms
from attnlab.ntk.empirical import empirical_ntk
from attnlab.ntk.forward_process import ForwardProcess
from attnlab.ntk.gaussian_mixture import GaussianMixture, circle_mixture
from attnlab.ntk.init import symmetric_init
from attnlab.ntk.kernel_regression import kernel_regression_limit
from attnlab.ntk.network import TwoLayerNet
from attnlab.ntk.perturbation import perturbed_kernels, with_weights
from attnlab.ntk.sample_metrics import energy_distance, mode_coverage
from attnlab.ntk.sampling import euler_maruyama, reverse_sde_sample
from attnlab.ntk.score_data import DenoisingSet, InputMap, denoising_set, fit_input_map
from attnlab.ntk.score_model import (
    ScoreModel,
    denoiser_error_at,
    score_from_denoiser,
    weighted_score_error,
)
from attnlab.ntk.softmax_mlp import SoftmaxMLP
from attnlab.ntk.tangent_kernel import (
    cross_kernel,
    extreme_eigenvalues,
    gram,
    gram_jacobian,
    infinite_width_gram,
    kernel_drift,
    lambda_max,
    practical_step,
    stability_limit,
)
from attnlab.ntk.theory import contraction_bound, coupling_bound, theorem_B, theorem_log10_width, theorem_step
from attnlab.ntk.unit_ball import to_unit_ball, unit_rows

__all__ = [
    "perturbed_kernels",
    "with_weights",
    "DenoisingSet",
    "StepTerms",
    "ExpMLP",
    "ForwardProcess",
    "GaussianMixture",
    "InputMap",
    "ReluMLP",
    "ScoreModel",
    "SoftmaxMLP",
    "TwoLayerNet",
    "circle_mixture",
    "contraction_bound",
    "coupling_bound",
    "cross_kernel",
    "denoiser_error_at",
    "denoising_set",
    "empirical_ntk",
    "energy_distance",
    "euler_maruyama",
    "extreme_eigenvalues",
    "fit_input_map",
    "gram",
    "gram_jacobian",
    "infinite_width_gram",
    "kernel_drift",
    "kernel_regression_limit",
    "lambda_max",
    "mode_coverage",
    "practical_step",
    "reverse_sde_sample",
    "score_from_denoiser",
    "stability_limit",
    "step_terms",
    "symmetric_init",
    "theorem_B",
    "theorem_log10_width",
    "theorem_step",
    "to_unit_ball",
    "unit_rows",
    "weighted_score_error",
]
