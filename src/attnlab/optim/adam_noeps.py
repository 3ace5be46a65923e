"""Adam without epsilon (RMSProp-style at ``beta1 = 0``), its buffers carried in the log domain.

Spec: docs/theory/steepest-descent.md §5 (Adam without epsilon: what we measure, no theorem claimed), implicit-bias-ngd
§9 (Adam; Kingma & Ba 2015, Algorithm 1 with epsilon = 0).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnlab._validation import ValidationError, check_scalar
from attnlab.optim import transforms as tx
from attnlab.optim._base import FunctionalOptimizer, ScaleInvariance

__all__ = ["AdamNoEps", "adam_noeps_rule"]


def adam_noeps_rule(lr: float | torch.Tensor | Sequence[float], beta1: float, beta2: float) -> tx.Rule:
    """The chain of Adam without epsilon: ``m_hat / sqrt(v_hat)`` (log-domain buffers), then ``-lr`` times it.

    Spec: steepest-descent §5 (Kingma & Ba 2015, Algorithm 1 with epsilon = 0).
    """
    return tx.Rule((tx.adam(beta1, beta2), tx.scale_by_lr(lr)))  # steepest-descent §5: -lr m_hat / sqrt(v_hat)


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

    scale_invariant = ScaleInvariance(default=False)

    def __init__(self, params, lr: float, beta1: float = 0.9, beta2: float = 0.999) -> None:
        super().__init__(params, dict(lr=lr, beta1=beta1, beta2=beta2))

    def _check_group(self, group: dict) -> None:
        check_scalar("lr", group["lr"], low=0.0, low_inclusive=False)
        check_scalar("beta1", group["beta1"], low=0.0, high=1.0, high_inclusive=False)
        check_scalar("beta2", group["beta2"], low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
        _shared_betas(group, self.defaults)

    def _group_is_scale_invariant(self, group: dict) -> bool:
        return False

    def _rule(self, groups: list[dict], group_ids: list[int]) -> tx.Rule:
        for group in groups:  # a group edited after construction is checked again here
            _shared_betas(group, groups[0])
        return adam_noeps_rule([g["lr"] for g in groups], float(groups[0]["beta1"]), float(groups[0]["beta2"]))


def _shared_betas(group: dict, shared: dict) -> None:
    """Refuse a parameter group whose betas are not the ones shared by all groups."""
    for key in ("beta1", "beta2"):
        if group[key] != shared[key]:
            raise ValidationError(
                f"{key} == {group[key]!r} in a parameter group, but the optimizer's {key} is {shared[key]!r}: the "
                f"buffers share one log-scale over all parameters; drop {key} from the group or build one optimizer "
                "per setting"
            )
