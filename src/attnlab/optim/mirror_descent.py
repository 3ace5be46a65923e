"""Mirror descent with the l_p potential ψ(W) = ‖W‖_p^p / p, plain and dual-norm normalized (l_p-AttGD/JointGD).

Spec: mirror-descent-lp §3 (mirror map), §4 (algorithms).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnlab._validation import ValidationError, check_scalar, check_tensor
from attnlab.metrics import entrywise_norm
from attnlab.optim import transforms as tx
from attnlab.optim._base import FunctionalOptimizer, ScaleInvariance, check_step_tensors, checked_hyperparameters
from attnlab.svm.norms import P_MIN as SVM_P_MIN

__all__ = ["FLOAT64_EPS", "P_MIN", "MirrorDescent", "md_rule", "mirror_descent", "norm_growth_bounds"]

FLOAT64_EPS = torch.finfo(torch.float64).eps  # spec mirror-descent-lp §4: the official code's eps in ‖G‖_q + eps

P_MIN = SVM_P_MIN
"""The smallest exponent ``p`` of l_p mirror descent, the l_p SVMs' (:data:`attnlab.svm.norms.P_MIN`). The mirror map ``sign(W) |W|^(p-1)`` and its inverse ``sign(M) |M|^(1/(p-1))`` raise to the power
``1/(p-1)``: at ``p = 1 + 1e-7`` that is ``1e7``, so every entry not within about 1e-4 of 1 overflows to inf or
underflows to 0 (one step of ``"md:1.0000001"`` turned ``[[1, -2], [0.5, 3]]`` into ``[[0, -inf], [0, 0]]``); at
``p = 1.001`` entries up to float64's largest number stay in range. (Steepest descent near ``p = 1`` is computed
scale-free and keeps every ``p > 1``.)"""


def mirror_descent(
    params: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor],
    *,
    lr: float | Sequence[float],
    p: float | Sequence[float],
    normalized: bool | Sequence[bool] = False,
    eps: float | Sequence[float] = FLOAT64_EPS,
    run_dims: int = 0,
) -> list[torch.Tensor]:
    r"""One l_p mirror-descent step on each tensor; returns new tensors, the inputs are left unchanged.

    Spec: mirror-descent-lp §3 (∇ψ and its inverse), §4 (l_p-AttGD; normalized: dual-norm normalisation).

    Parameters
    ----------
    params, grads : sequence of torch.Tensor, matching shapes ([R,] ...)
    lr : float, torch.Tensor of shape ([R,]), or a sequence of them
        Step :math:`\eta > 0` (one value, one per run, or one per tensor).
    p : float or sequence of float
        Potential exponent :math:`p \ge 1.001` (:data:`P_MIN`).
    normalized : bool or sequence of bool, default=False
        Divide each tensor's gradient by its dual norm :math:`\|G\|_q + \epsilon`, :math:`q = p/(p-1)`.
    eps : float or sequence of float, default=FLOAT64_EPS
        :math:`\epsilon` in the normalisation (float64 machine epsilon, as in the official code).
    run_dims : int, default=0
        Leading axes that index independent runs: the dual norm is taken per run.

    Returns
    -------
    list of torch.Tensor

    Raises
    ------
    ValidationError
        If ``lr <= 0``, ``p < 1.001`` (:data:`P_MIN`: nearer 1 the mirror map's powers
        overflow) or ``p = inf``, ``eps < 0``, ``normalized`` is not a bool, ``params`` and ``grads`` differ in number
        or shapes, or ``run_dims`` is not a count; the message names the argument.

    Notes
    -----
    Entrywise, per tensor:

    .. math::

        G &\leftarrow G / (\|G\|_q + \epsilon) \quad\text{(normalized only)} \\
        M &= \operatorname{sign}(W) \odot |W|^{p-1} - \eta\, G \\
        W &\leftarrow \operatorname{sign}(M) \odot |M|^{1/(p-1)}

    This is :math:`\arg\min_W \{\eta\langle G, W\rangle + D_\psi(W, W_k)\}`. For :math:`p = 2` it is GD (the
    dual step is computed like ``torch.optim.SGD``'s, so the two agree bit for bit) and, normalized, NGD with one
    Frobenius norm per tensor.
    """
    n = check_step_tensors(params, grads, run_dims)
    lrs, ps, normalize, epss = checked_hyperparameters("md", n, lr=lr, p=p, normalized=normalized, eps=eps)
    return _mirror_descent(params, grads, lr=lrs, p=ps, normalized=normalize, eps=epss, run_dims=run_dims)


def _mirror_descent(
    params: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor],
    *,
    lr: float | Sequence[float],
    p: float | Sequence[float],
    normalized: bool | Sequence[bool] = False,
    eps: float | Sequence[float] = FLOAT64_EPS,
    run_dims: int = 0,
) -> list[torch.Tensor]:
    """:func:`mirror_descent` on checked arguments, checking nothing: for library loops that take a step per
    iteration on arguments checked once (:func:`attnlab.training.projected.projected_mirror_descent`)."""
    n = len(params)
    lrs, ps, normalize, epss = (
        tx.per_tensor(value, n, name) for name, value in dict(lr=lr, p=p, normalized=normalized, eps=eps).items()
    )
    return tx.run_rule(md_rule(lrs, ps, normalize, epss), params, grads, run_dims=run_dims)[0]


def md_rule(lr: list, p: list, normalized: list, eps: list) -> tx.Rule:
    """The chain of l_p mirror descent: dual-norm normalisation per tensor (optional), ``eta``, the mirror map.

    Spec: mirror-descent-lp §4 (``G / (||G||_q + eps)``, ``q = p / (p - 1)``), §3 (mirror map). The dual norm of a
    true gradient is taken rescaled where its plain form over- or underflows (``q = 101`` at ``p = 1.01``: from
    ``|G| ~ 1e3`` it was ``inf`` and the step 0, below ``|G| ~ 6e-4`` it was 0 and ``W`` went to ``+-inf``).
    """
    q = [p_i / (p_i - 1.0) for p_i in p]
    normalize = tx.normalize("tensor", ord=q, eps=eps, enabled=normalized)  # md §4: ||G||_q, exact at any size
    return tx.Rule((normalize, tx.scale_by_lr(lr)), mirror_p=p)


def norm_growth_bounds(
    W: torch.Tensor, grad: torch.Tensor, *, lr: float, p: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds on ``||W_{k+1}||_p^(p-1)`` after one plain l_p mirror-descent step from ``W`` with gradient ``grad``.

    Spec: mirror-descent-lp §4 (the norm-growth inequality of Lemmas 4 and 22): ``||W||^(p-1) + eta <-G, W> /
    ||W|| <= ||W_{k+1}||^(p-1) <= ||W||^(p-1) + eta ||G||_q``, norms entrywise ``l_p``, ``q = p / (p - 1)``. Both
    hold for any ``G`` (convexity of ``||.||_p`` and Hoelder's inequality on the dual step), with equality when ``G``
    is a negative multiple of ``grad psi(W)``.

    Parameters
    ----------
    W : torch.Tensor, shape (..., d, d), nonzero
        Iterates (leading axes: steps, runs).
    grad : torch.Tensor, shape of ``W``
        Gradients at ``W``.
    lr : float
        Step ``eta > 0`` of plain (unnormalised) mirror descent.
    p : float
        Exponent ``p > 1``.

    Returns
    -------
    lower, upper : torch.Tensor, shape (...)
    """
    W, grad = check_tensor("W", W), check_tensor("grad", grad)
    if W.shape != grad.shape or W.dim() < 2:
        raise ValidationError(
            f"W and grad must be matrices of one shape (..., d, d), got {tuple(W.shape)} and {tuple(grad.shape)}"
        )
    check_scalar("lr", lr, low=0.0, low_inclusive=False)
    check_scalar("p", p, low=1.0, low_inclusive=False)
    norm = entrywise_norm(W, p)
    power = norm ** (p - 1)
    lower = power + lr * (-grad * W).sum((-2, -1)) / norm  # md §4 (Lemma 22): convexity of ||.||_p
    upper = power + lr * entrywise_norm(grad, p / (p - 1.0))  # md §4 (Lemma 4): Hoelder on the dual step
    return lower, upper


class MirrorDescent(FunctionalOptimizer):
    r"""l_p mirror descent on every parameter tensor, plain or dual-norm normalized.

    Spec: mirror-descent-lp §3 (potential), §4 (l_p-AttGD on W; l_p-JointGD on W and v; all parameters of a
    transformer in the real-data experiments).

    .. math::

        &\textbf{input}: W_0,\ \eta > 0,\ p > 1,\ q = p/(p-1) \\
        &\textbf{for } k = 0, 1, \dots \textbf{ and each tensor } W: \\
        &\quad G = \nabla \mathcal L(W_k);\quad \textbf{if } \text{normalized}: G \leftarrow G / (\|G\|_q + \epsilon) \\
        &\quad M = \operatorname{sign}(W_k) \odot |W_k|^{p-1} - \eta\, G \\
        &\quad W_{k+1} = \operatorname{sign}(M) \odot |M|^{1/(p-1)}

    Parameters
    ----------
    params : iterable of torch.Tensor or of dict
        Parameters or parameter groups; every hyperparameter below may be overridden per group.
    lr : float
        Step :math:`\eta > 0`.
    p : float
        Potential exponent :math:`p \ge 1.001` (:data:`P_MIN`); :math:`p = 2` is GD
        (normalized: NGD per tensor).
    normalized : bool, default=False
        Normalise each tensor's gradient by its own dual norm :math:`\|G\|_q` (the synthetic experiments);
        the theory and the real-data experiments use the plain update.
    eps : float, default=FLOAT64_EPS
        :math:`\epsilon \ge 0` added to the dual norm (float64 machine epsilon, as in the official code).
    schedule : str, default="constant"
        ``"inv_sqrt"`` or ``"poly:<a>"``: the step times :math:`(t + 1)^{-a}` (:mod:`attnlab.optim.registry`).

    Attributes
    ----------
    scale_invariant : bool
        True when every group is normalized: the update is then unchanged (up to :math:`\epsilon`) if each
        step's gradients are all multiplied by one positive constant. The class attribute gives the default's value.

    Raises
    ------
    ValidationError
        If ``lr <= 0``, ``p < 1.001`` (nearer 1 the mirror map's powers overflow; :data:`P_MIN`),
        ``eps < 0``, ``normalized`` is not a bool, ``params`` is empty or a parameter is complex; the message names
        the argument.

    Notes
    -----
    Norms are entrywise (a matrix is a vector of its entries), and each tensor is normalised on its own, as in the
    official code; unlike :class:`~attnlab.optim.NormalizedGD` there is no global norm.

    Examples
    --------
    >>> W = torch.nn.Parameter(torch.tensor([[1.0, -1.0]], dtype=torch.float64))
    >>> opt = MirrorDescent([W], lr=0.5, p=3.0)
    >>> W.grad = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    >>> opt.step()
    >>> W.data  # dual: [1, -1] - 0.5 = [0.5, -1.5], back: sign * sqrt(|.|)
    tensor([[ 0.7071, -1.2247]], dtype=torch.float64)
    """

    entry_name = "md"
    scale_invariant = ScaleInvariance(default=False)

    def __init__(
        self,
        params,
        lr: float,
        p: float,
        normalized: bool = False,
        eps: float = FLOAT64_EPS,
        schedule: str = "constant",
    ) -> None:
        super().__init__(params, dict(lr=lr, p=p, normalized=normalized, eps=eps, schedule=schedule))

    def _group_is_scale_invariant(self, group: dict) -> bool:
        return group["normalized"]

    def _check_group(self, group: dict) -> None:
        """The registry's checks of the hyperparameters, and real parameters: the mirror map is entrywise real."""
        super()._check_group(group)
        complex_at = [i for i, param in enumerate(group["params"]) if param.is_complex()]
        if complex_at:
            index = next((i for i, g in enumerate(self.param_groups) if g is group), len(self.param_groups) - 1)
            raise ValidationError(
                f"params {complex_at} of parameter group {index} are complex "
                f"({group['params'][complex_at[0]].dtype}); MirrorDescent's mirror map sign(W) |W|^(p-1) is defined "
                "on real entries: pass real parameters (a complex tensor as torch.view_as_real(W), its real and "
                "imaginary parts)"
            )
