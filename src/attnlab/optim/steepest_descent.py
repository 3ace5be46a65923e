"""Normalised steepest descent in the l_p norm of all parameters; sign descent at ``p = inf``.

Spec: docs/theory/steepest-descent.md §1 (the step as the argmax of <g, d> over the unit l_p ball), mirror-descent-lp
§4 (the dual exponent q).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnlab.optim import transforms as tx
from attnlab.optim._base import FunctionalOptimizer, ScaleInvariance

__all__ = ["SteepestDescent", "sd_rule"]


def sd_rule(lr: float | torch.Tensor | Sequence[float], p: float) -> tx.Rule:
    """The chain of l_p steepest descent: the unit-l_p direction of the gradient, then ``-lr`` times it.

    Spec: steepest-descent §1 (``theta <- theta - eta d``, ``d = argmax_{||d||_p <= 1} <g, d>``).
    """
    return tx.Rule((tx.steepest(p), tx.scale_by_lr(lr)))  # steepest-descent §1: -eta d, ||d||_p = 1


class SteepestDescent(FunctionalOptimizer):
    r"""Normalised steepest descent in l_p over all parameters; ``p = inf`` is sign descent.

    Spec: docs/theory/steepest-descent.md §1 (the update), §2 (its implicit bias: the l_p attention SVM).

    .. math::

        &\textbf{input}: \theta_0,\ \eta > 0,\ 1 < p \le \infty,\ q = p / (p - 1) \\
        &\textbf{for } t = 0, 1, \dots: \\
        &\quad g_t = \nabla \mathcal L(\theta_t) \\
        &\quad d_t = \operatorname{sign}(g_t) \odot |g_t|^{q-1} / \|g_t\|_q^{q-1}
            \quad (\operatorname{sign}(g_t) \text{ at } p = \infty) \\
        &\quad \theta_{t+1} = \theta_t - \eta\, d_t

    :math:`d_t` is the argmax of :math:`\langle g_t, d \rangle` over :math:`\|d\|_p \le 1`, so every step has
    l_p length :math:`\eta`, whatever the size of the gradient.

    Parameters
    ----------
    params : iterable of torch.Tensor or of dict
        Parameters or parameter groups (any shapes and floating dtypes); ``lr`` may be overridden per group.
    lr : float
        Step :math:`\eta > 0`: the l_p length of every step.
    p : float, default=2.0
        :math:`1 < p \le \infty`; ``float("inf")`` is sign descent, 2 is NGD with one global Frobenius norm. One
        value for every group: the norm is taken over all parameters together.
    schedule : str, default="constant"
        ``"inv_sqrt"`` or ``"poly:<a>"``: the step times :math:`(t + 1)^{-a}` (:mod:`attnlab.optim.registry`); the
        linear-classifier theory of sign descent assumes a decaying step (steepest-descent §2).

    Attributes
    ----------
    scale_invariant : bool
        Always True: the step is unchanged when each step's gradients are all multiplied by one positive constant.

    Raises
    ------
    ValidationError
        If ``lr <= 0``, ``p <= 1``, ``params`` is empty, or a parameter group sets a ``p`` of its own; the message
        names the argument.

    Notes
    -----
    The same transforms as the optimizer grammar's ``"sd:<p>"`` and ``"sign"`` (:func:`attnlab.optim.parse_optimizer`),
    which :func:`attnlab.train` runs on the gradient's mantissa, so the direction stays exact after the gradient
    underflows in float64. A zero gradient takes no step.

    Examples
    --------
    >>> W = torch.nn.Parameter(torch.zeros(2, 2, dtype=torch.float64))
    >>> opt = SteepestDescent([W], lr=0.5, p=float("inf"))
    >>> W.grad = torch.tensor([[3.0, 0.0], [-1e-30, 4.0]], dtype=torch.float64)
    >>> opt.step()
    >>> W.data
    tensor([[-0.5000,  0.0000],
            [ 0.5000, -0.5000]], dtype=torch.float64)
    """

    entry_name = "sd"
    scale_invariant = ScaleInvariance(default=True)

    def __init__(self, params, lr: float, p: float = 2.0, schedule: str = "constant") -> None:
        super().__init__(params, dict(lr=lr, p=p, schedule=schedule))

    def _group_is_scale_invariant(self, group: dict) -> bool:
        return True
