"""In-context linear regression with one softmax-attention layer: data, closed-form and empirical losses, the
regularizer, the geometry of the minima, integrability diagnostics, the spectral start and Algorithm 1.

Spec: docs/theory/preconditioned-regression.md (Goel, Soltanolkotabi, Bartlett 2026). Notation: ``V`` value
(k, p), ``Q`` key-query (p, d), tokens of width p = d (covariates, default) or d + k (``tokens="joint"``); an
optional leading runs axis R batches independent runs.
"""

from attnlab._deprecation import moved_names
from attnlab.regression.context import ContextStatistics, conditional_moments, context_statistics, mean_jacobian
from attnlab.regression.curvature import (
    normal_curvatures,
    objective_excess,
    segment_curvature,
    whitened_hessian,
    whitened_hessian_spectrum,
)
from attnlab.regression.data import (
    RegressionAssumptions,
    RegressionProblem,
    assumptions,
    make_problem,
    sample,
    sample_covariates,
    token_covariance,
    token_matrix,
)
from attnlab.regression.empirical import empirical_loss, empirical_loss_and_gradient
from attnlab.regression.finite_context import (
    bias_expansion,
    bias_table,
    loss_and_gradient_bias,
    profile_exponent,
    regularizer_gradient_bias,
)
from attnlab.regression.integrability import cross_logit_mgf, self_logit_mgf
from attnlab.regression.linalg import empirical_covariance, sym_inv_sqrt, sym_sqrt
from attnlab.regression.manifold import (
    Projection,
    extended_inner,
    manifold_point,
    near_manifold_point,
    perturbed_manifold_point,
    project,
    random_rotation,
    target_svd,
    unwhiten,
    whiten,
)
from attnlab.regression.metrics import gap_metrics
from attnlab.regression.oracle_floor import noise_and_bias
from attnlab.regression.oracles import MinibatchOracle, MonteCarloOracle, PopulationOracle
from attnlab.regression.population import population_excess_loss, population_gradient, population_loss
from attnlab.regression.regularizer import empirical_regularizer, regularizer, regularizer_gradient
from attnlab.regression.renormalization import renormalize
from attnlab.regression.spectral import spectral_init

__all__ = [
    "regularizer_gradient_bias",
    "profile_exponent",
    "loss_and_gradient_bias",
    "bias_table",
    "bias_expansion",
    "whitened_hessian_spectrum",
    "whitened_hessian",
    "objective_excess",
    "segment_curvature",
    "normal_curvatures",
    "RegressionAssumptions",
    "ContextStatistics",
    "MinibatchOracle",
    "MonteCarloOracle",
    "PopulationOracle",
    "Projection",
    "RegressionProblem",
    "assumptions",
    "conditional_moments",
    "context_statistics",
    "cross_logit_mgf",
    "empirical_covariance",
    "empirical_loss",
    "empirical_loss_and_gradient",
    "empirical_regularizer",
    "extended_inner",
    "gap_metrics",
    "noise_and_bias",
    "near_manifold_point",
    "perturbed_manifold_point",
    "make_problem",
    "manifold_point",
    "mean_jacobian",
    "population_excess_loss",
    "population_gradient",
    "population_loss",
    "project",
    "random_rotation",
    "regularizer",
    "regularizer_gradient",
    "renormalize",
    "sample",
    "sample_covariates",
    "self_logit_mgf",
    "spectral_init",
    "sym_inv_sqrt",
    "sym_sqrt",
    "target_svd",
    "token_covariance",
    "token_matrix",
    "unwhiten",
    "whiten",
]

# the former name of RegressionAssumptions (attnlab.data.AssumptionReport is the one class of that name)
__getattr__ = moved_names(__name__, {"AssumptionReport": "attnlab.regression.data.RegressionAssumptions"})
