"""Normalized gradient descent with an optional step-size cap and momentum (NGD, NGD-mom, SNGD, per-block NGD).

Spec: implicit-bias-ngd §4 A2 (NGD), A4 (NGD-mom), A7 (per-block NGD), A8 (SNGD).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

from attnlab.optim import transforms as tx
from attnlab.optim._base import (
    FunctionalOptimizer,
    ScaleInvariance,
    check_step_tensors,
    checked_hyperparameters,
    checked_values,
)

__all__ = ["MOMENTUM_VARIANTS", "NORMALIZATIONS", "NormalizedGD", "ngd_rule", "normalized_gd", "normalized_step_size"]

MOMENTUM_VARIANTS = ("heavy_ball", "normalized_buffer")
NORMALIZATIONS = ("global", "group", "tensor")


def normalized_step_size(
    lr: float | torch.Tensor, norm: torch.Tensor, max_step: float | torch.Tensor | None = None
) -> torch.Tensor:
    r"""The NGD step size :math:`\eta_t = \min(\eta / \|n\|, \eta_{\max})`, per run; 0 where :math:`\|n\| = 0`.

    Spec: implicit-bias-ngd §4 A2.

    Parameters
    ----------
    lr : float or torch.Tensor, shape ([R,])
        :math:`\eta > 0`, one value or one per run.
    norm : torch.Tensor, shape ([R,])
        Norm of the normalizing vector (the gradient, or the momentum buffer).
    max_step : float, torch.Tensor of shape ([R,]), or None, default=None
        Cap :math:`\eta_{\max}`; ``None`` means no cap.

    Returns
    -------
    torch.Tensor, shape ([R,])

    Raises
    ------
    ValidationError
        If ``lr <= 0``, ``max_step <= 0``, or ``norm`` is negative or not finite; the message names the argument.

    Notes
    -----
    A caller holding log-scaled gradients :math:`g = m\,e^{s}` (:class:`attnlab.models.LogScaled`) passes
    :math:`\|m\|` and :math:`\eta_{\max} e^{s}` and gets the coefficient of :math:`m`, which stays exact when
    :math:`g` itself underflows. The value is the one :func:`ngd_rule` applies (read off its transforms).
    """
    checked_hyperparameters("ngd", 1, lr=(lr,), max_step=(max_step,))
    norm = checked_values("norm", norm)
    rule = ngd_rule([lr], [max_step], [0.0], ["heavy_ball"])
    return tx.step_size(rule, norm, torch.zeros_like(norm))  # spec A2: η_t = min(η / ‖n‖, η_max)


def normalized_gd(
    params: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor],
    momentum_buffers: Sequence[torch.Tensor | None] | None = None,
    *,
    lr: float | Sequence[float],
    max_step: float | None | Sequence[float | None] = None,
    momentum: float | Sequence[float] = 0.0,
    momentum_variant: str | Sequence[str] = "heavy_ball",
    blocks: Sequence[Hashable] | None = None,
    run_dims: int = 0,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    r"""One normalized-GD step on a list of tensors; returns new tensors, the inputs are left unchanged.

    Spec: implicit-bias-ngd §4 A2 (step size), A4 (momentum, both variants).

    Parameters
    ----------
    params, grads : sequence of torch.Tensor, matching shapes
        Current parameters :math:`\theta_i` and their gradients :math:`g_i`.
    momentum_buffers : sequence of torch.Tensor or None, optional
        Buffers :math:`m_i` from the previous step; ``None`` (or a ``None`` entry) is the zero buffer.
    lr : float or sequence of float
        Base step :math:`\eta > 0` (one value, or one per tensor).
    max_step : float or None, or a sequence of them, default=None
        Cap :math:`\eta_{\max}` on the step size; ``None`` means no cap.
    momentum : float or sequence of float, default=0.0
        :math:`\beta \in [0, 1)`.
    momentum_variant : {"heavy_ball", "normalized_buffer"} or a sequence of them, default="heavy_ball"
        Which vector sets the step size: the gradient (heavy ball) or the buffer itself.
    blocks : sequence of hashable, one per tensor, optional
        Tensors with the same label share one norm; ``None`` is one global norm over all tensors.
    run_dims : int, default=0
        Leading axes that index independent runs (shapes ``([R,] ...)``): norms and step sizes are per run.

    Returns
    -------
    new_params : list of torch.Tensor
    new_momentum_buffers : list of torch.Tensor
        :math:`m_i` after this step (equal to :math:`g_i` when :math:`\beta = 0`).

    Raises
    ------
    ValidationError
        If ``lr <= 0``, ``max_step <= 0``, ``momentum`` is outside [0, 1), ``momentum_variant`` is unknown,
        ``params`` and ``grads`` differ in number or shapes, or ``run_dims`` is not a count; the message names the
        argument.

    Notes
    -----
    With :math:`b(i)` the block of tensor :math:`i` and :math:`\|v\|_{b} = (\sum_{j \in b}\|v_j\|_F^2)^{1/2}`:

    .. math::

        m_i &\leftarrow \beta\, m_i + g_i \\
        \eta_i &= \min\big(\eta / \|n\|_{b(i)},\ \eta_{\max}\big),\qquad
            n = g \text{ (heavy ball)},\ n = m \text{ (normalized buffer)} \\
        \theta_i &\leftarrow \theta_i - \eta_i\, m_i

    A block whose normalizing vector is zero takes no step. Uncapped and without momentum, the step of each block
    has Frobenius length exactly :math:`\eta`. Uncapped heavy ball steps :math:`\eta\,\|m\| / \|g\|`: when the
    gradient collapses while the buffer still holds earlier, larger gradients (softmax saturation), that length
    follows the ratio (``1e19`` after a drop of 18 orders) and the iterate can leave float64 (the run ends
    diverged, as the rule says); cap it with :math:`\eta_{\max}` or use the normalized-buffer variant. The
    heavy-ball variant is PyTorch's SGD with momentum whose learning rate is reset every step to the NGD value
    (spec A4 default); the normalized-buffer variant is
    :math:`\theta \leftarrow \theta - \eta\, m/\|m\|`.
    """
    n = check_step_tensors(params, grads, run_dims)
    hyperparameters = dict(lr=lr, max_step=max_step, momentum=momentum, momentum_variant=momentum_variant)
    lrs, caps, betas, variants = checked_hyperparameters("ngd", n, **hyperparameters)
    rule = ngd_rule(lrs, caps, betas, variants, blocks)
    buffers = [None] * n if momentum_buffers is None else list(momentum_buffers)
    state = [
        {"momentum_buffer": buffers, "momentum_log_scale": [None] * n} if t.name == "momentum" else None
        for t in rule.transforms
    ]  # buffers in true units (log-scale 0)
    new_params, state = tx.run_rule(rule, params, grads, state, run_dims=run_dims)
    kept = next((s for s in state if s is not None), {"momentum_buffer": [None] * n, "momentum_log_scale": [None] * n})
    true = [
        g.clone() if m is None else m * torch.exp(S).reshape(S.shape + (1,) * (m.dim() - S.dim()))
        for g, m, S in zip(grads, kept["momentum_buffer"], kept["momentum_log_scale"])
    ]  # spec A4: m = M e^S
    return new_params, true


def ngd_rule(
    lr: list,
    max_step: list,
    momentum: list,
    momentum_variant: list,
    blocks: str | Sequence[Hashable] | None = None,
    eps: float | list = 0.0,
) -> tx.Rule:
    """The chain of transforms of normalised GD, one hyperparameter per tensor.

    Spec: implicit-bias-ngd §4 A2 (normalise, scale by ``eta``, cap), A4 (momentum: heavy ball normalises by the
    gradient *before* the buffer, the normalised-buffer variant by the buffer *after* it). ``eps > 0`` divides by
    ``||g|| + eps`` instead, as the Transformers-as-SVMs code does (``"ngd:eps=..."``).
    """
    heavy = [v == "heavy_ball" or b == 0.0 for v, b in zip(momentum_variant, momentum)]  # beta = 0: buffer = g
    chain = [tx.normalize(blocks, eps=eps, enabled=heavy)]
    if any(b != 0.0 for b in momentum):
        chain += [tx.momentum(momentum), tx.normalize(blocks, eps=eps, enabled=[not h for h in heavy])]
    chain.append(tx.scale_by_lr(lr))
    if not all(tx.uncapped(m) for m in max_step):
        chain.append(tx.cap(max_step))
    return tx.Rule(tuple(chain))


class NormalizedGD(FunctionalOptimizer):
    r"""Normalized gradient descent: every step has length ``lr`` (unless capped), optionally with momentum.

    Spec: implicit-bias-ngd §4 A2 (NGD, cap), A4 (NGD-mom), A7 (per-block NGD), A8 (SNGD).

    .. math::

        &\textbf{input}: \theta_0,\ \eta > 0,\ \eta_{\max} \in (0, \infty],\ \beta \in [0, 1) \\
        &m_0 = 0 \\
        &\textbf{for } t = 0, 1, \dots: \\
        &\quad g_t = \nabla \mathcal L(\theta_t) \\
        &\quad m_{t+1} = \beta\, m_t + g_t \\
        &\quad \eta_t = \min(\eta / \|n_t\|, \eta_{\max}),\quad n_t = g_t \text{ (heavy ball) or } m_{t+1}
            \text{ (normalized buffer)} \\
        &\quad \theta_{t+1} = \theta_t - \eta_t\, m_{t+1}

    Parameters
    ----------
    params : iterable of torch.Tensor or of dict
        Parameters or parameter groups (any shapes and floating dtypes); every hyperparameter below may be
        overridden per group.
    lr : float
        Base step :math:`\eta > 0`: the Frobenius length of every uncapped step without momentum.
    max_step : float or None, default=None
        Cap :math:`\eta_{\max} > 0` on the step size :math:`\eta_t` (not on the step length); ``None`` means no cap
        (the theory, spec A2); the paper's experiments use a cap.
    momentum : float, default=0.0
        :math:`\beta \in [0, 1)`; spec A4 proposes 0.9 [L] for NGD-mom.
    momentum_variant : {"heavy_ball", "normalized_buffer"}, default="heavy_ball"
        "heavy_ball": step size from the gradient norm, applied to the buffer (spec A4 default).
        "normalized_buffer": :math:`\theta \leftarrow \theta - \eta\, m/\|m\|` (spec A4 alternative).
    normalization : {"global", "group", "tensor"}, default="global"
        Over which tensors the norm is taken: all parameters of all groups (one global norm; NGD on
        :math:`\theta`, joint NGD A5 and SNGD A8), each parameter group, or each tensor (per-block NGD, A7).
    eps : float, default=0.0
        :math:`\epsilon \ge 0`: divide by :math:`\|g\| + \epsilon` (the true norm), as the Transformers-as-SVMs
        code does; replay such a loop with ``"ngd:eps=1e-8"`` (0 is the theory's NGD).
    schedule : str, default="constant"
        ``"inv_sqrt"`` or ``"poly:<a>"``: the step times :math:`(t + 1)^{-a}` (:mod:`attnlab.optim.registry`).

    Attributes
    ----------
    scale_invariant : bool
        True when every group is uncapped, without momentum and eps: the update is then unchanged if each step's
        gradients are all multiplied by one positive constant. The class attribute gives the default's value.

    Raises
    ------
    ValidationError
        If ``lr <= 0``, ``max_step <= 0``, ``momentum`` is outside [0, 1), or a choice is unknown; the message
        names the argument.

    Notes
    -----
    ``step(closure)`` runs the closure (if given) to get fresh gradients and returns its loss; for SNGD let the
    closure compute a mini-batch loss. Parameters without a gradient are skipped and do not enter the norm.
    The cap makes the rule plain GD with step :math:`\eta_{\max}` once :math:`\|g\| < \eta/\eta_{\max}`.

    Examples
    --------
    >>> W = torch.nn.Parameter(torch.zeros(2, 2, dtype=torch.float64))
    >>> opt = NormalizedGD([W], lr=0.5)
    >>> W.grad = torch.tensor([[3.0, 0.0], [0.0, 4.0]], dtype=torch.float64)
    >>> opt.step()
    >>> W.data
    tensor([[-0.3000,  0.0000],
            [ 0.0000, -0.4000]], dtype=torch.float64)
    """

    entry_name = "ngd"
    scale_invariant = ScaleInvariance(default=True)

    def __init__(
        self,
        params,
        lr: float,
        max_step: float | None = None,
        momentum: float = 0.0,
        momentum_variant: str = "heavy_ball",
        normalization: str = "global",
        eps: float = 0.0,
        schedule: str = "constant",
    ) -> None:
        defaults = dict(
            lr=lr,
            max_step=max_step,
            momentum=momentum,
            momentum_variant=momentum_variant,
            normalization=normalization,
            eps=eps,
            schedule=schedule,
        )
        super().__init__(params, defaults)

    def _group_is_scale_invariant(self, group: dict) -> bool:
        uncapped = group["max_step"] is None or group["max_step"] == float("inf")
        return uncapped and group["momentum"] == 0.0 and group["eps"] == 0.0
