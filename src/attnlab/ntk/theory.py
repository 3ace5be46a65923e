"""The theorem's quantities: contraction factor, step size, coupling bound.

Spec: softmax-ntk-diffusion §5 (Theorem 4.2, Lemma 5.3), §6.2 (Theorem F.2). Constants marked [R] in the spec
are recalled, not verified; the functions below keep them explicit so a reader can change them.
"""

from __future__ import annotations

import math

from attnlab._validation import check_scalar

__all__ = ["contraction_bound", "coupling_bound", "theorem_B", "theorem_step"]


def contraction_bound(lr: float, scale: float, lam: float) -> float:
    """Per-step factor ``1 - s lr lambda / 2`` of the loss bound ``||F(t) - Y||^2 <= factor^t ||F(0) - Y||^2``.

    Spec: §5, Lemma 5.3 (loss); ``s = m`` for the softmax network (``kernel_scale``).
    """
    check_scalar("lr", lr, low=0.0, low_inclusive=False)
    check_scalar("lam", lam, low=0.0)
    return 1.0 - scale * lr * lam / 2  # spec §5 Lemma 5.3: (1 - m eta lambda / 2)


def theorem_B(sigma_w: float, n: int, d: int, delta: float = 0.1, C: float = 10.0) -> float:  # noqa: N802 (spec B)
    """``B = max(C sigma_w sqrt(log(n d / delta)), 1)`` of Definition 4.1 (spec §5, constant C recalled [R])."""
    check_scalar("delta", delta, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    return max(C * sigma_w * math.sqrt(math.log(n * d / delta)), 1.0)  # spec §5 Def. 4.1


def theorem_step(lam: float, n: int, d: int, width: int, B: float) -> float:
    """``eta = 0.1 lambda / (m n^2 d^2 e^{16 B})`` of Theorem 4.2 (spec §5; exponent recalled [R]).

    With the ``B`` of Definition 4.1 this is astronomically small (about 1e-170 for n=12, d=3); it underflows
    to 0.0 once ``16 B`` passes about 745.
    """
    check_scalar("lam", lam, low=0.0, low_inclusive=False)
    return math.exp(math.log(0.1 * lam) - math.log(width * n**2 * d**2) - 16 * B)  # spec §5 Thm 4.2


def coupling_bound(eps_H: float, n: int, d: int, y_norm: float, lam: float) -> float:
    """``eps_H sqrt(n d) ||Y||_F / lambda``: Theorem F.2's bound on ``|F_nn - F_ker|`` with constant 1.

    Spec: §6.2 (shape [P], constant and log factors [R]; we take the constant to be 1).
    """
    check_scalar("lam", lam, low=0.0, low_inclusive=False)
    return eps_H * math.sqrt(n * d) * y_norm / lam  # spec §6.2 Thm F.2
