"""Max-margin programs of softmax attention (cvxpy) and token-selection optimality.

Spec: implicit-bias-ngd §5, mirror-descent-lp §5 and §7, kq-nuclear-norm §4 and §5.
"""

from attnlab.svm.attention_svm import AttentionSVMResult, attention_svm
from attnlab.svm.errors import InfeasibleProgramError, SolverAccuracyWarning

__all__ = [
    "AttentionSVMResult",
    "InfeasibleProgramError",
    "SolverAccuracyWarning",
    "attention_svm",
]
