"""Wrong mechanisms under which the mirror-descent theory rows must fail (tests/experiments/test_falsifiers.py).

Each patches the batched trainer where :func:`~attnlab.experiments.mirror_descent.common.md_path` looks it up, so
it changes the algorithm (l_p-AttGD) the lemmas are about, never a check's arithmetic.
"""

from __future__ import annotations

from typing import Any

from attnlab.models.functional import attention_probabilities
from attnlab.verify import Falsifier

__all__ = ["EXPONENT_SHIFT", "RUNNER_UP", "STEP_TEN_TIMES"]

_TARGET = "attnlab.experiments.mirror_descent.common:batched_train"
_NEXT = {1.75: 2.0, 2.0: 3.0, 3.0: 1.75}  # the default ps, each mapped to the next one, cyclically


def _with(**change: Any):
    def wrap(train):
        def wrong(*args: Any, **kwargs: Any) -> Any:
            for key, mend in change.items():
                kwargs[key] = mend(kwargs[key])
            return train(*args, **kwargs)

        return wrong

    return wrap


EXPONENT_SHIFT = Falsifier(
    "mirror-exponent-off-by-one",
    "the mirror map's exponent taken from the next entry of ps (1.75 -> 2 -> 3 -> 1.75; others p + 0.3)",
    _TARGET,
    _with(p=lambda p: _NEXT.get(float(p), float(p) + 0.3)),
    kind="mechanism",
)
STEP_TEN_TIMES = Falsifier(
    "step-ten-times",
    "l_p-AttGD with 10x the step size (Lemma 27 needs a small step)",
    _TARGET,
    _with(lr=lambda lr: 10 * lr),
    kind="mechanism",
)


def _runner_up(selected):
    """The SVM's tokens taken as the second-largest final attention (an off-by-one in the ranking)."""

    def wrong(batch, W):
        return attention_probabilities(batch.X, W, batch.Z).topk(2, dim=-1).indices[..., 1]

    return wrong


RUNNER_UP = Falsifier(
    "svm-of-the-runner-up",
    "the SVM solved for the token of second-largest final attention instead of the largest",
    "attnlab.experiments.mirror_descent.e1:selected",
    _runner_up,
    kind="reference",
)
