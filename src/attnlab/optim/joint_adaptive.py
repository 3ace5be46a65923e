"""The per-block adaptive rule for joint training of the head and the attention weights (eq. 13, and its NGD form).

Spec: implicit-bias-ngd §4 A6 (adaptive rule, knobs), A7 (alpha = 0: per-block NGD), §10 item 1 (the normaliser
is the main open point, hence the choice).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

from attnlab._validation import ValidationError
from attnlab.optim import transforms as tx
from attnlab.optim._base import FunctionalOptimizer, ScaleInvariance, check_step_tensors, checked_hyperparameters

__all__ = ["JointAdaptive", "joint_adaptive", "joint_rule"]

NORMALIZERS = ("loss", "block_grad_norm", "joint_grad_norm")


def joint_adaptive(
    params: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor],
    steps: Sequence[int],
    *,
    lr: float | Sequence[float],
    alpha: float | Sequence[float] = 2.0 / 3.0,
    normalizer: str | Sequence[str] = "loss",
    adaptive: bool | Sequence[bool] = True,
    loss: float | torch.Tensor | None = None,
    blocks: Sequence[Hashable] | None = None,
    run_dims: int = 0,
) -> tuple[list[torch.Tensor], list[int]]:
    r"""One step of the joint adaptive rule on a list of tensors; returns new tensors and step counts.

    Spec: implicit-bias-ngd §4 A6 (eq. 13 as reconstructed), A7 (``alpha=0``, block norm: per-block NGD).

    Parameters
    ----------
    params, grads : sequence of torch.Tensor, matching shapes ([R,] ...)
    steps : sequence of int
        :math:`t`, the number of steps each tensor has taken (the state).
    lr : float or sequence of float
        Base step :math:`\eta > 0` (one value, or one per tensor).
    alpha : float or sequence of float, default=2/3
        Decay exponent :math:`\alpha \ge 0` of :math:`(t+1)^{-\alpha}`.
    normalizer : {"loss", "block_grad_norm", "joint_grad_norm"} or a sequence of them, default="loss"
        :math:`N_t`: the loss, the gradient norm of the tensor's block, or the gradient norm over all tensors.
    adaptive : bool or sequence of bool, default=True
        Whether the tensor's step is divided by :math:`N_t` (False: :math:`N_t = 1`).
    loss : float or torch.Tensor, shape ([R,]), optional
        :math:`\mathcal L(\theta_t) > 0`; required where ``normalizer == "loss"`` and ``adaptive``.
    blocks : sequence of hashable, one per tensor, optional
        Block labels for "block_grad_norm"; ``None`` makes all tensors one block.
    run_dims : int, default=0
        Leading axes that index independent runs: loss, norms and step sizes are per run.

    Returns
    -------
    new_params : list of torch.Tensor
    new_steps : list of int
        ``t + 1`` for each tensor.

    Raises
    ------
    ValidationError
        If the loss normaliser is used without a positive loss, ``lr <= 0``, ``alpha < 0``, ``normalizer`` is
        unknown, ``adaptive`` is not a bool, ``params`` and ``grads`` differ in number or shapes, or ``run_dims`` is
        not a count; the message names the argument.

    Notes
    -----
    For each block :math:`b` (``u`` and ``W`` in the paper):

    .. math::

        \eta_{t,b} = \frac{\eta}{N_{t,b}\,(t+1)^{\alpha}},\qquad
        N_{t,b} \in \big\{\mathcal L(\theta_t),\ \|\nabla_b \mathcal L\|,\ \|\nabla_\theta \mathcal L\|\big\},
        \qquad \theta_{b,t+1} = \theta_{b,t} - \eta_{t,b}\, \nabla_b \mathcal L(\theta_t).

    A zero gradient norm normaliser takes no step.
    """
    n = check_step_tensors(params, grads, run_dims)
    lrs, alphas, normalizers, adaptives = checked_hyperparameters(
        "joint", n, lr=lr, alpha=alpha, normalizer=normalizer, adaptive=adaptive
    )
    uses_loss = [a and name == "loss" for a, name in zip(adaptives, normalizers)]
    if any(uses_loss) and (loss is None or not bool((torch.as_tensor(loss) > 0).all())):
        raise ValidationError(
            f"loss == {loss if loss is None else torch.as_tensor(loss).tolist()}, must be a positive number for "
            f'normalizer="loss"; pass the current loss (exp or logistic losses are positive)'
        )
    rule = joint_rule(lrs, alphas, normalizers, adaptives, blocks)
    state = [{"step": list(steps)} if t.name == "decay" else None for t in rule.transforms]
    log_risk = None if loss is None else torch.log(torch.as_tensor(loss, dtype=torch.float64))
    new_params, _ = tx.run_rule(rule, params, grads, state, run_dims=run_dims, log_risk=log_risk)
    return new_params, [t + 1 for t in steps]


def joint_rule(
    lr: list, alpha: list, normalizer: list, adaptive: list, blocks: Sequence[Hashable] | None = None
) -> tx.Rule:
    """The chain of the joint adaptive rule: divide by ``N_t`` where adaptive, by ``(t+1)^alpha``, scale by ``eta``.

    Spec: implicit-bias-ngd §4 A6 (``eta / (N_t (t+1)^alpha)``), A7 (per-block NGD: ``alpha = 0``, block norm).
    """
    by = [a and name for a, name in zip(adaptive, normalizer)]  # the normaliser in use, False where not adaptive
    return tx.Rule(
        (
            tx.normalize_by_loss(enabled=[b == "loss" for b in by]),
            tx.normalize("global" if blocks is None else list(blocks), enabled=[b == "block_grad_norm" for b in by]),
            tx.normalize("global", enabled=[b == "joint_grad_norm" for b in by]),
            tx.decay(alpha),
            tx.scale_by_lr(lr),
        )
    )


class JointAdaptive(FunctionalOptimizer):
    r"""Joint training with a per-block adaptive step :math:`\eta / (N_t (t+1)^\alpha)` (eq. 13; per-block NGD).

    Spec: implicit-bias-ngd §4 A6 (rule and knobs), A7 (``alpha=0`` with ``normalizer="block_grad_norm"`` is the
    per-block NGD of the joint experiment), §10 item 1 (the normaliser is reconstructed: choose it here).

    .. math::

        &\textbf{input}: \theta_0 = (u_0, W_0) = 0,\ \eta > 0,\ \alpha \ge 0 \\
        &\textbf{for } t = 0, 1, \dots \textbf{ and each block } b \text{ (parameter group)}: \\
        &\quad N_{t,b} = \mathcal L(\theta_t)\ \text{or}\ \|\nabla_b \mathcal L(\theta_t)\|\
            \text{or}\ \|\nabla_\theta \mathcal L(\theta_t)\|\quad (1 \text{ if the block is not adaptive}) \\
        &\quad \theta_{b,t+1} = \theta_{b,t} - \frac{\eta}{N_{t,b}\,(t+1)^\alpha}\,\nabla_b \mathcal L(\theta_t)

    Parameters
    ----------
    params : iterable of torch.Tensor or of dict
        Parameters or parameter groups; **each group is one block** (pass ``[{"params": [u]}, {"params": [W]}]``
        for the paper's blocks). Every hyperparameter below may be overridden per group.
    lr : float
        Base step :math:`\eta > 0`.
    alpha : float, default=2/3
        Decay exponent :math:`\alpha \ge 0`; spec A6 default 2/3 (the theory needs :math:`\alpha \in [2/3, 1)`),
        0 for A7.
    normalizer : {"loss", "block_grad_norm", "joint_grad_norm"}, default="loss"
        :math:`N_t`: the loss (spec A6 default, exponential loss), the block's gradient norm, or one gradient norm
        over all parameters of all groups.
    adaptive : bool, default=True
        Per-block on/off of the adaptive factor: False gives the block the step :math:`\eta (t+1)^{-\alpha}`.
    schedule : str, default="constant"
        ``"inv_sqrt"`` or ``"poly:<a>"``: the step times :math:`(t + 1)^{-a}` besides :math:`(t+1)^{-\alpha}`
        (:mod:`attnlab.optim.registry`).

    Attributes
    ----------
    scale_invariant : bool
        True when every group is adaptive with a gradient-norm normaliser. The class attribute gives the
        default's value (False: the loss normaliser does not rescale with the gradient).

    Raises
    ------
    ValidationError
        If ``lr <= 0``, ``alpha < 0``, or ``normalizer``/``adaptive`` is not an allowed value; at ``step``, if the
        loss normaliser is used without a closure or the loss is not positive.

    Notes
    -----
    The step count :math:`t` is kept per parameter in ``state[p]["step"]`` (saved by ``state_dict``). ``step``
    needs a closure when a group uses ``normalizer="loss"``.

    Examples
    --------
    >>> u = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    >>> opt = JointAdaptive([u], lr=1.0, alpha=0.0, normalizer="block_grad_norm")
    >>> u.grad = torch.tensor([3.0, 4.0], dtype=torch.float64)
    >>> opt.step()
    >>> u.data
    tensor([-0.6000, -0.8000], dtype=torch.float64)
    """

    entry_name = "joint"
    scale_invariant = ScaleInvariance(default=False)

    def __init__(
        self,
        params,
        lr: float,
        alpha: float = 2.0 / 3.0,
        normalizer: str = "loss",
        adaptive: bool = True,
        schedule: str = "constant",
    ) -> None:
        defaults = dict(lr=lr, alpha=alpha, normalizer=normalizer, adaptive=adaptive, schedule=schedule)
        super().__init__(params, defaults)

    def _group_is_scale_invariant(self, group: dict) -> bool:
        return group["adaptive"] and group["normalizer"] != "loss"
