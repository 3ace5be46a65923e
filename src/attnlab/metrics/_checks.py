"""The checks of the token-selection diagnostics' arguments, tied together: tokens ``X``, queries ``Z``, weights
``W``, labels ``y``, head ``v`` and the selected tokens.

Run once per call of a public diagnostic (:mod:`attnlab.metrics.diagnostics`); the recorder of the training loop and
the metric objects call the unchecked versions on tensors typed where they entered. The checks are
:mod:`attnlab.models._checks`' (the formula functions of :mod:`attnlab.models` take the same arguments).
"""

from __future__ import annotations

from attnlab.models._checks import attention_args, in_range, nonempty, score_args, selection

__all__ = ["attention_args", "in_range", "nonempty", "score_args", "selection"]
