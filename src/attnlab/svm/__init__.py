"""Max-margin programs of softmax attention (cvxpy) and token-selection optimality.

Spec: implicit-bias-ngd §5, mirror-descent-lp §5 and §7, kq-nuclear-norm §4 and §5.
"""

from attnlab._deprecation import moved_names
from attnlab.data.token_sets import sets_from_probabilities
from attnlab.svm.aligned_svm import aligned_l1_svm
from attnlab.svm.attention_svm import attended_svm, attention_svm
from attnlab.svm.diagonal_svm import diagonal_svm
from attnlab.svm.errors import (
    InfeasibleProgramError,
    SolverAccuracyWarning,
    SolverToleranceError,
    TieWarning,
    WholeSequenceWarning,
)
from attnlab.svm.head_svm import HeadSVMResult, head_svm
from attnlab.svm.joint_svm import JointSVMResult, joint_attention_svm
from attnlab.svm.multi_token import EquivalenceResult, SetProgramResult, finite_part, set_direction_svm, svm_equivalence
from attnlab.svm.norms import Norm, as_norm, register_norm
from attnlab.svm.regularization_path import constrained_erm, constrained_stationarity, log_excess_risk_and_gradient
from attnlab.svm.result import AttentionSVMResult
from attnlab.svm.selection import (
    SelectionReport,
    is_globally_optimal,
    is_locally_optimal,
    is_separable,
    locally_optimal_selections,
    support_tokens,
)
from attnlab.svm.selection_svms import SelectionSVMs

__all__ = [
    "AttentionSVMResult",
    "EquivalenceResult",
    "SetProgramResult",
    "HeadSVMResult",
    "JointSVMResult",
    "Norm",
    "InfeasibleProgramError",
    "SolverToleranceError",
    "SelectionReport",
    "SelectionSVMs",
    "SolverAccuracyWarning",
    "TieWarning",
    "WholeSequenceWarning",
    "aligned_l1_svm",
    "as_norm",
    "attended_svm",
    "attention_svm",
    "constrained_erm",
    "constrained_stationarity",
    "diagonal_svm",
    "finite_part",
    "head_svm",
    "is_globally_optimal",
    "is_locally_optimal",
    "is_separable",
    "joint_attention_svm",
    "locally_optimal_selections",
    "log_excess_risk_and_gradient",
    "register_norm",
    "set_direction_svm",
    "sets_from_probabilities",
    "support_tokens",
    "svm_equivalence",
]

# the former name of log_excess_risk_and_gradient (attnlab.models.log_excess_risk is the formula's one definition)
__getattr__ = moved_names(__name__, {"log_excess_risk": "attnlab.svm.regularization_path.log_excess_risk_and_gradient"})
