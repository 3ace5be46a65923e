"""Adam, with its epsilon and optional decoupled weight decay (AdamW), and without epsilon; buffers in the log domain.

Spec: docs/theory/steepest-descent.md §5 (Adam: what we measure, no theorem claimed for attention), implicit-bias-ngd
§9 (Adam; Kingma & Ba 2015, Algorithm 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnlab.optim import transforms as tx
from attnlab.optim._base import FunctionalOptimizer, ScaleInvariance

__all__ = ["Adam", "AdamNoEps", "adam_rule"]


def adam_rule(
    lr: float | torch.Tensor | Sequence[float],
    beta1: float,
    beta2: float,
    eps: float = 0.0,
    weight_decay: float | Sequence[float] = 0.0,
) -> tx.Rule:
    """The chain of Adam: ``m_hat / (sqrt(v_hat) + eps)`` (log-domain buffers), the decoupled decay ``+ lambda theta``
    where set, then ``-lr`` times it.

    Spec: steepest-descent §5 (Kingma & Ba 2015, Algorithm 1; Loshchilov & Hutter 2019, Algorithm 2).
    """
    decays = weight_decay if isinstance(weight_decay, (list, tuple)) else [weight_decay]
    decay = (tx.decoupled_decay(weight_decay),) if any(w != 0.0 for w in decays) else ()
    return tx.Rule((tx.adam(beta1, beta2, eps), *decay, tx.scale_by_lr(lr)))  # -lr (m_hat / (sqrt(v_hat) + eps))


class Adam(FunctionalOptimizer):
    r"""Adam with :math:`\epsilon`, and AdamW's decoupled weight decay when ``weight_decay > 0``.

    Spec: docs/theory/steepest-descent.md §5; Kingma & Ba (2015), "Adam: A Method for Stochastic Optimization",
    arXiv:1412.6980, Algorithm 1; Loshchilov & Hutter (2019), "Decoupled Weight Decay Regularization",
    arXiv:1711.05101, Algorithm 2.

    .. math::

        &\textbf{input}: \theta_0,\ \eta > 0,\ \beta_1 \in [0, 1),\ \beta_2 \in (0, 1),\ \epsilon \ge 0,\
            \lambda \ge 0;\ m_0 = v_0 = 0 \\
        &\textbf{for } t = 1, 2, \dots: \\
        &\quad g_t = \nabla \mathcal L(\theta_{t-1}) \\
        &\quad m_t = \beta_1 m_{t-1} + (1 - \beta_1) g_t,\quad v_t = \beta_2 v_{t-1} + (1 - \beta_2) g_t^2 \\
        &\quad \theta_t = \theta_{t-1} - \eta \Big(\frac{m_t / (1 - \beta_1^t)}{\sqrt{v_t / (1 - \beta_2^t)} +
            \epsilon} + \lambda\, \theta_{t-1}\Big)

    Parameters
    ----------
    params : iterable of torch.Tensor or of dict
        Parameters or parameter groups (any shapes and floating dtypes); ``lr``, ``weight_decay`` and ``schedule``
        may be overridden per group.
    lr : float
        Step :math:`\eta > 0`.
    beta1 : float, default=0.9
        :math:`\beta_1 \in [0, 1)`.
    beta2 : float, default=0.999
        :math:`\beta_2 \in (0, 1)`.
    eps : float, default=1e-8
        :math:`\epsilon \ge 0`, ``torch.optim.Adam``'s default; 0 is :class:`AdamNoEps`.
    weight_decay : float, default=0.0
        Decoupled decay :math:`\lambda \ge 0` (``torch.optim.AdamW``'s form, off by default).
    schedule : str, default="constant"
        ``"inv_sqrt"`` or ``"poly:<a>"``: the step times :math:`(t + 1)^{-a}` (:mod:`attnlab.optim.registry`).

    Attributes
    ----------
    scale_invariant : bool
        Always False.

    Raises
    ------
    ValidationError
        If a hyperparameter is out of range, or a parameter group sets betas or eps of its own; the message names
        the argument.

    Notes
    -----
    The same transforms as the optimizer grammar's ``"adam"``. The buffers are ``m = M e^S``, ``v = V e^{2S}`` with
    one log-scale ``S`` over all parameters (so betas and eps are one value for every group), and the direction is
    :math:`\hat M / (\sqrt{\hat V} + \epsilon e^{-S})`: it equals ``torch.optim.Adam``'s step where the gradients
    are of moderate size, and keeps adding gradients below float64's range, where ``torch.optim.Adam`` sees zeros.

    Examples
    --------
    >>> W = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    >>> opt = Adam([W], lr=0.1)
    >>> W.grad = torch.tensor([2.0, -1e-3], dtype=torch.float64)
    >>> opt.step()  # the first step is -lr g / (|g| + eps): -lr sign(g) unless |g| is near eps
    >>> W.data
    tensor([-0.1000,  0.1000], dtype=torch.float64)
    """

    entry_name = "adam"
    scale_invariant = ScaleInvariance(default=False)

    def __init__(
        self,
        params,
        lr: float,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        schedule: str = "constant",
    ) -> None:
        defaults = dict(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay, schedule=schedule)
        super().__init__(params, defaults)

    def _group_is_scale_invariant(self, group: dict) -> bool:
        return False


class AdamNoEps(FunctionalOptimizer):
    r"""Adam with :math:`\epsilon = 0`, its moment buffers kept as mantissas and one log-scale.

    Spec: docs/theory/steepest-descent.md §5; Kingma & Ba (2015), "Adam: A Method for Stochastic Optimization",
    arXiv:1412.6980, Algorithm 1 with :math:`\epsilon = 0`.

    .. math::

        &\textbf{input}: \theta_0,\ \eta > 0,\ \beta_1 \in [0, 1),\ \beta_2 \in (0, 1);\ m_0 = v_0 = 0 \\
        &\textbf{for } t = 1, 2, \dots: \\
        &\quad g_t = \nabla \mathcal L(\theta_{t-1}) \\
        &\quad m_t = \beta_1 m_{t-1} + (1 - \beta_1) g_t,\quad v_t = \beta_2 v_{t-1} + (1 - \beta_2) g_t^2 \\
        &\quad \theta_t = \theta_{t-1} - \eta\, \frac{m_t / (1 - \beta_1^t)}{\sqrt{v_t / (1 - \beta_2^t)}}

    Parameters
    ----------
    params : iterable of torch.Tensor or of dict
        Parameters or parameter groups (any shapes and floating dtypes); ``lr`` may be overridden per group.
    lr : float
        Step :math:`\eta > 0`.
    beta1 : float, default=0.9
        :math:`\beta_1 \in [0, 1)`; 0 is RMSProp with :math:`v`'s bias correction.
    beta2 : float, default=0.999
        :math:`\beta_2 \in (0, 1)`.
    schedule : str, default="constant"
        ``"inv_sqrt"`` or ``"poly:<a>"``: the step times :math:`(t + 1)^{-a}` (:mod:`attnlab.optim.registry`).

    Attributes
    ----------
    scale_invariant : bool
        Always False: one step's gradients rescaled alone weigh differently against the buffers and change the
        step (multiplying *every* step's gradients by one constant does not).

    Raises
    ------
    ValidationError
        If ``lr <= 0``, a beta lies outside its range, or a parameter group sets betas of its own; the message names
        the argument.

    Notes
    -----
    The same transforms as the optimizer grammar's ``"adam-noeps"`` (:func:`attnlab.optim.parse_optimizer`). The
    buffers are ``m = M e^S``, ``v = V e^{2S}`` with one log-scale ``S`` over all parameters, so they keep adding
    gradients after those underflow in true units; the betas are therefore one value for every group.
    Coordinates whose gradient has always been zero do not move (``torch.optim.Adam`` at ``eps=0`` would divide
    0 by 0). No theorem is claimed for the limit direction of this rule: the steepest-descent experiment measures
    it.

    Examples
    --------
    >>> W = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    >>> opt = AdamNoEps([W], lr=0.1)
    >>> W.grad = torch.tensor([2.0, -1e-3, 0.0], dtype=torch.float64)
    >>> opt.step()  # the first step is -lr sign(g): m_hat / sqrt(v_hat) = g / |g|
    >>> W.data
    tensor([-0.1000,  0.1000,  0.0000], dtype=torch.float64)
    """

    entry_name = "adam-noeps"
    scale_invariant = ScaleInvariance(default=False)

    def __init__(self, params, lr: float, beta1: float = 0.9, beta2: float = 0.999, schedule: str = "constant") -> None:
        super().__init__(params, dict(lr=lr, beta1=beta1, beta2=beta2, schedule=schedule))

    def _group_is_scale_invariant(self, group: dict) -> bool:
        return False
