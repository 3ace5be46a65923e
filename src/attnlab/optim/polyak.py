"""The Polyak step size with a cap, an optimal loss given or computed, and the SPS constant ``c`` (Polyak, SPS_max).

Spec: implicit-bias-ngd §4 A3 (Polyak step, cap), A8 (SPS_max on mini-batches, constant c).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from attnlab._validation import check_scalar
from attnlab.optim import transforms as tx
from attnlab.optim._base import (
    FunctionalOptimizer,
    ScaleInvariance,
    check_step_tensors,
    checked_hyperparameters,
    checked_values,
)

__all__ = ["PolyakStep", "polyak_rule", "polyak_step", "polyak_step_size"]


def polyak_step_size(
    loss: float | torch.Tensor,
    optimal_loss: float | torch.Tensor,
    grad_sq_norm: torch.Tensor,
    *,
    max_step: float = math.inf,
    c: float = 1.0,
    log_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""The Polyak step size :math:`\eta_t = \min((L - L^*) / (c\|g\|^2), \eta_{\max})`, per run; 0 where g = 0.

    Spec: implicit-bias-ngd §4 A3 (step size and cap), A8 (constant c). The step size of :func:`polyak_rule` (the
    :func:`~attnlab.optim.transforms.polyak` and :func:`~attnlab.optim.transforms.cap` transforms), read off alone.

    Parameters
    ----------
    loss, optimal_loss : float or torch.Tensor, shape ([R,])
        :math:`\mathcal L(\theta_t)` and :math:`\mathcal L^* \le \mathcal L(\theta_t)`.
    grad_sq_norm : torch.Tensor, shape ([R,])
        :math:`\|g_t\|^2` over all parameters.
    max_step : float, default=inf
        Cap :math:`\eta_{\max}`.
    c : float, default=1.0
    log_scale : torch.Tensor, shape ([R,]), optional
        For log-scaled gradients :math:`g = m\,e^{s}`: ``grad_sq_norm`` is :math:`\|m\|^2` and the result is the
        coefficient of :math:`m`, :math:`\eta_t e^{s}`, formed in the log domain so that it stays exact where
        :math:`\|g\|^2` underflows.

    Returns
    -------
    torch.Tensor, shape ([R,]), float64

    Raises
    ------
    ValidationError
        If ``optimal_loss`` is above ``loss``, ``loss``, ``optimal_loss`` or ``grad_sq_norm`` is negative or not
        finite, ``log_scale`` is not finite, ``c <= 0`` or ``max_step <= 0``; the message names the argument.
    """
    loss, grad_sq_norm = _checked_polyak(loss, optimal_loss, (max_step,), (c,), grad_sq_norm=grad_sq_norm)
    norm = torch.sqrt(grad_sq_norm)
    scale = torch.zeros_like(norm) if log_scale is None else checked_values("log_scale", log_scale, nonnegative=False)
    log_risk = torch.log(loss).expand(norm.shape)
    return tx.step_size(polyak_rule(optimal_loss, [c], [max_step]), norm, scale, log_risk=log_risk)


def _checked_polyak(
    loss: object, optimal_loss: object, max_step: object, c: object, n: int = 1, grad_sq_norm: object = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """The Polyak functions' arguments checked (``max_step`` and ``c`` once or per tensor, for ``n`` tensors; a
    callable ``optimal_loss``, which the rule calls, as it is): ``loss`` and ``grad_sq_norm`` as float64 tensors,
    finite and ``>= 0``."""
    checked_hyperparameters("polyak", n, max_step=max_step, c=c)
    if not callable(optimal_loss):
        checked_hyperparameters("polyak", 1, optimal_loss=(optimal_loss,))
    return checked_values("loss", loss), checked_values("grad_sq_norm", grad_sq_norm)


def polyak_step(
    params: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor],
    *,
    loss: float | torch.Tensor,
    optimal_loss: float | torch.Tensor = 0.0,
    max_step: float | Sequence[float] = math.inf,
    c: float | Sequence[float] = 1.0,
    run_dims: int = 0,
) -> list[torch.Tensor]:
    r"""One Polyak step on a list of tensors; returns new tensors, the inputs are left unchanged.

    Spec: implicit-bias-ngd §4 A3 (step size and cap), A8 (constant c).

    Parameters
    ----------
    params, grads : sequence of torch.Tensor, matching shapes ([R,] ...)
        Current parameters and the gradients of ``loss`` at them.
    loss : float or torch.Tensor, shape ([R,])
        :math:`\mathcal L(\theta_t)`, the loss whose gradients are ``grads`` (per run if ``run_dims``).
    optimal_loss : float or torch.Tensor, shape ([R,]), default=0.0
        :math:`\mathcal L^* \le \mathcal L(\theta_t)`.
    max_step : float or sequence of float, default=inf
        Cap :math:`\eta_{\max}` on the step size (one value, or one per tensor).
    c : float or sequence of float, default=1.0
        SPS constant :math:`c > 0`.
    run_dims : int, default=0
        Leading axes that index independent runs: loss, gap, norm and step size are per run.

    Returns
    -------
    list of torch.Tensor

    Raises
    ------
    ValidationError
        If ``optimal_loss`` is above ``loss``, ``loss`` or ``optimal_loss`` is negative or not finite, ``c <= 0``,
        ``max_step <= 0``, ``params`` and ``grads`` differ in number or shapes, or ``run_dims`` is not a count; the
        message names the argument.

    Notes
    -----
    With one gradient norm over all tensors,

    .. math::

        \eta_t = \min\Big(\frac{\mathcal L(\theta_t) - \mathcal L^*}{c\,\|g_t\|^2},\ \eta_{\max}\Big),\qquad
        \theta_{t+1} = \theta_t - \eta_t\, g_t .

    A zero gradient takes no step.
    """
    n = check_step_tensors(params, grads, run_dims)
    loss, _ = _checked_polyak(loss, optimal_loss, max_step, c, n)
    rule = polyak_rule(optimal_loss, tx.per_tensor(c, n, "c"), tx.per_tensor(max_step, n, "max_step"))
    log_risk = torch.log(loss)
    return tx.run_rule(rule, params, grads, run_dims=run_dims, log_risk=log_risk)[0]


def polyak_rule(optimal_loss: float | torch.Tensor | Callable[[], float], c: list, max_step: list) -> tx.Rule:
    """The chain of the Polyak step: step size ``(L - L*) / (c ||g||^2)``, then the cap. Spec: implicit-bias-ngd A3, A8."""
    return tx.Rule((tx.polyak(optimal_loss, c), tx.cap(max_step)))


class PolyakStep(FunctionalOptimizer):
    r"""Gradient descent with the Polyak step size, capped (Polyak step, SPS_max); ``step`` needs a closure.

    Spec: implicit-bias-ngd §4 A3 (Polyak step with cap), A8 (SPS_max with constant c).

    .. math::

        &\textbf{input}: \theta_0,\ \mathcal L^*,\ \eta_{\max} \in (0, \infty],\ c > 0 \\
        &\textbf{for } t = 0, 1, \dots: \\
        &\quad L_t = \text{closure}(),\quad g_t = \nabla \mathcal L(\theta_t) \\
        &\quad \eta_t = \min\big((L_t - \mathcal L^*)/(c\,\|g_t\|^2),\ \eta_{\max}\big) \\
        &\quad \theta_{t+1} = \theta_t - \eta_t\, g_t

    Parameters
    ----------
    params : iterable of torch.Tensor or of dict
        Parameters or parameter groups; ``max_step`` and ``c`` may be overridden per group. The gradient norm is one
        global norm over all parameters of all groups.
    max_step : float, default=inf
        Cap :math:`\eta_{\max} > 0` on the step size (the paper's "threshold"); once the uncapped value exceeds it
        the method is GD with step ``max_step``.
    optimal_loss : float, callable or "infimum", default=0.0
        :math:`\mathcal L^*`, or a function of no arguments called once per step (after the closure) that returns
        it, e.g. the mini-batch optimum for SPS. For the fixed-decoder problem of spec A3 pass
        :math:`\mathcal L_* = \frac1n\sum_i \ell(\gamma_{i,\mathrm{opt}_i})`, or ``"infimum"`` under
        :func:`attnlab.train` to have the engine take :math:`L - \mathcal L_*` from the margins (exact below
        float64's resolution of :math:`L`); 0 is right for SPS with cross-entropy.
    c : float, default=1.0
        Constant :math:`c > 0`. The default 1 is the theory form of A3 (no constant); SPS uses :math:`c = 0.5`
        (spec A8, value [L]: proposed, not from the paper).
    schedule : str, default="constant"
        ``"inv_sqrt"`` or ``"poly:<a>"``: the step times :math:`(t + 1)^{-a}` (:mod:`attnlab.optim.registry`).

    Attributes
    ----------
    scale_invariant : bool
        Always False: the step size scales like the inverse of the gradient.

    Raises
    ------
    ValidationError
        If ``max_step <= 0``, ``c <= 0`` or ``optimal_loss`` is not a finite number ``>= 0`` or a callable; at
        ``step``, if no closure is given or ``optimal_loss`` is above the loss.

    Notes
    -----
    A loss that rounds to within a few units in the last place below :math:`\mathcal L^*` counts as converged
    (no step) rather than as an error.

    Examples
    --------
    >>> w = torch.nn.Parameter(torch.tensor([2.0], dtype=torch.float64))
    >>> opt = PolyakStep([w])
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = (w**2).sum()  # minimum 0, so the Polyak step from w is w/2
    ...     loss.backward()
    ...     return loss
    >>> _ = opt.step(closure)
    >>> w.data
    tensor([1.], dtype=torch.float64)
    """

    entry_name = "polyak"
    scale_invariant = ScaleInvariance(default=False)

    def __init__(
        self,
        params,
        max_step: float | None = math.inf,
        optimal_loss: float | Callable[[], float] | str = 0.0,
        c: float = 1.0,
        schedule: str = "constant",
    ) -> None:
        if not callable(optimal_loss) and not (isinstance(optimal_loss, str) and optimal_loss == tx.INFIMUM):
            check_scalar("optimal_loss", optimal_loss, low=0.0)  # a loss is never negative (as the grammar says)
        self.optimal_loss = optimal_loss
        super().__init__(params, dict(max_step=max_step, c=c, schedule=schedule))

    def _group_is_scale_invariant(self, group: dict) -> bool:
        return False

    def _rule_inputs(self) -> dict:
        return {"optimal_loss": self.optimal_loss}
