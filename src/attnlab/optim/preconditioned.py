"""Structure-aware preconditioned gradient descent: the gradient step in the extended-covariance geometry.

Spec: preconditioned-regression §4.1 (metric), §5.4 (preconditioned directions), §6.2 step c (Algorithm 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnlab._validation import ValidationError
from attnlab.optim import transforms as tx
from attnlab.optim._base import FunctionalOptimizer, check_step_tensors, checked_hyperparameters

__all__ = ["PreconditionedGD", "covariance", "preconditioned_gd", "preconditioned_rule"]

# A covariance counts as symmetric when its largest asymmetry is below this fraction of its largest entry.
_SYMMETRY_TOL = 1e-10


def covariance(name: str, value: object, where: str = "") -> torch.Tensor | None:
    """A symmetric positive definite covariance (``([R,] a, a)``, float64, detached), or None (the identity).

    Parameters
    ----------
    name : str
        ``"left"`` or ``"right"``, for the message.
    value : array-like of shape ([R,] a, a), or None
    where : str, optional
        Where it was given (``" of parameter group 0"``), for the message.

    Returns
    -------
    torch.Tensor or None

    Raises
    ------
    ValidationError
        When it is not a square matrix, not symmetric, or not positive definite.
    """
    if value is None:
        return None
    cov = (value if isinstance(value, torch.Tensor) else torch.as_tensor(value)).detach().to(torch.float64)
    if cov.dim() < 2 or cov.shape[-1] != cov.shape[-2]:
        raise ValidationError(f"{name} covariance{where} has shape {tuple(cov.shape)}; pass a square matrix")
    _, info = torch.linalg.cholesky_ex(cov)
    asym = float((cov - cov.transpose(-1, -2)).abs().amax())
    if bool((info != 0).any()) or asym > _SYMMETRY_TOL * max(1.0, float(cov.abs().amax())):
        raise ValidationError(
            f"{name} covariance{where} is not symmetric positive definite; pass a sample covariance X^T X / n of at "
            "least as many samples as dimensions"
        )
    return cov


def preconditioned_gd(
    params: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor],
    *,
    lr: float | Sequence[float],
    left_inverses: Sequence[torch.Tensor | None],
    right_inverses: Sequence[torch.Tensor | None],
) -> list[torch.Tensor]:
    r"""One preconditioned step ``theta <- theta - lr * L^{-1} g R^{-1}`` per tensor; returns new tensors.

    Spec: preconditioned-regression §5.4.

    Parameters
    ----------
    params, grads : sequence of torch.Tensor, shape ([R,] a, b)
    lr : float or sequence of float
    left_inverses : sequence of torch.Tensor of shape ([R,] a, a), or None (identity)
    right_inverses : sequence of torch.Tensor of shape ([R,] b, b), or None (identity)

    Returns
    -------
    list of torch.Tensor
        New parameters, same shapes and dtypes; the inputs are unchanged.

    Raises
    ------
    ValidationError
        If ``lr <= 0``, or ``params`` and ``grads`` differ in number or shapes; the message names the argument.
    """
    (lrs,) = checked_hyperparameters("preconditioned", check_step_tensors(params, grads), lr=lr)
    rule = preconditioned_rule(lrs, list(left_inverses), list(right_inverses))
    return tx.run_rule(rule, params, grads)[0]


def preconditioned_rule(lr: list, left_inverses: list, right_inverses: list) -> tx.Rule:
    """The chain of preconditioned GD: ``L^{-1} g R^{-1}``, then ``eta``. Spec: preconditioned-regression §5.4."""
    return tx.Rule((tx.precondition(left_inverses, right_inverses), tx.scale_by_lr(lr)))


class PreconditionedGD(FunctionalOptimizer):
    r"""Gradient descent preconditioned on both sides by inverse covariance estimates (Algorithm 1, step c).

    Spec: preconditioned-regression §5.4, §6.2.

    .. math::

        &\textbf{input}: \theta_0,\ \eta > 0,\ \text{per group } \hat\Sigma_L, \hat\Sigma_R \succ 0
            \text{ (either may be the identity)} \\
        &\textbf{for } t = 0, 1, \dots: \quad
            \theta_{t+1} = \theta_t - \eta\, \hat\Sigma_L^{-1}\, \nabla f(\theta_t)\, \hat\Sigma_R^{-1}

    For attention on regression (see :meth:`for_attention`) the value matrix ``V`` takes ``right = Sigma_z_hat`` and
    the key-query matrix ``Q`` takes ``left = Sigma_z_hat``, ``right = Sigma_hat``; the step is then plain gradient
    descent on the whitened pair ``(A, C)`` (spec §5.4).

    Parameters
    ----------
    params : iterable of torch.Tensor or of dict
        Matrices (or batches of matrices with a leading runs axis), or parameter groups.
    lr : float
        Step size :math:`\eta > 0`.
    left, right : torch.Tensor, shape ([R,] a, a) / ([R,] b, b), float64, optional
        Covariance estimates whose inverses multiply the gradient from the left / right (``None``: identity).
        Inverted once, through a Cholesky factorization, when the rule is built.
    schedule : str, default="constant"
        ``"inv_sqrt"`` or ``"poly:<a>"``: the step times :math:`(t + 1)^{-a}` (:mod:`attnlab.optim.registry`).

    Raises
    ------
    ValidationError
        ``lr <= 0``, a covariance that is not symmetric positive definite, or one whose size does not match the
        parameter; the message names the group and the argument.

    Examples
    --------
    >>> V = torch.zeros(1, 2, dtype=torch.float64)
    >>> opt = PreconditionedGD([V], lr=1.0, right=torch.diag(torch.tensor([2.0, 4.0], dtype=torch.float64)))
    >>> V.grad = torch.ones(1, 2, dtype=torch.float64)
    >>> opt.step()
    >>> V
    tensor([[-0.5000, -0.2500]], dtype=torch.float64)
    """

    entry_name = "preconditioned"
    scale_invariant = False

    def __init__(
        self,
        params,
        lr: float,
        left: torch.Tensor | None = None,
        right: torch.Tensor | None = None,
        schedule: str = "constant",
    ) -> None:
        super().__init__(params, dict(lr=lr, left=left, right=right, schedule=schedule))

    @classmethod
    def for_attention(
        cls,
        V: torch.Tensor,
        Q: torch.Tensor,
        covariance: torch.Tensor,
        lr: float,
        token_covariance: torch.Tensor | None = None,
    ) -> PreconditionedGD:
        """The optimizer of Algorithm 1 for value ``V`` (([R,] k, p)) and key-query ``Q`` (([R,] p, d)).

        ``covariance`` is ``Sigma_hat`` (([R,] d, d)); ``token_covariance`` is ``Sigma_z_hat`` (([R,] p, p)),
        default ``covariance`` (covariate tokens). Spec: preconditioned-regression §5.4, §10.1.

        Parameters
        ----------
        V : torch.Tensor of shape ([R,] k, p)
            The value matrix, preconditioned on the right by ``token_covariance``.
        Q : torch.Tensor of shape ([R,] p, d)
            The key-query matrix, preconditioned on the left by ``token_covariance`` and on the right by
            ``covariance``.
        covariance : torch.Tensor of shape ([R,] d, d)
            The empirical covariate covariance ``Sigma_hat``, symmetric positive definite.
        lr : float
            Step size, > 0.
        token_covariance : torch.Tensor of shape ([R,] p, p), optional
            The empirical token covariance ``Sigma_z_hat``; default ``covariance``.

        Returns
        -------
        PreconditionedGD
            An optimizer of two parameter groups, ``[V]`` and ``[Q]``.
        """
        token_covariance = covariance if token_covariance is None else token_covariance
        return cls(
            [
                {"params": [V], "right": token_covariance},
                {"params": [Q], "left": token_covariance, "right": covariance},
            ],
            lr=lr,
        )

    def _check_group(self, group: dict) -> None:
        self._check_options(group, skip=("left", "right"))
        index = len(self.param_groups) - 1
        for side, axis in (("left", -2), ("right", -1)):
            group[side] = cov = covariance(side, group[side], f" of parameter group {index}")
            if cov is None:
                continue
            for param in group["params"]:
                if param.dim() < 2 or param.shape[axis] != cov.shape[-1]:
                    raise ValidationError(
                        f"{side} covariance of parameter group {index} has shape {tuple(cov.shape)}, but the "
                        f"parameter has shape {tuple(param.shape)}; pass a square matrix of size "
                        f"{param.shape[axis] if param.dim() >= 2 else '?'} (the parameter's {side} dimension)"
                    )

    def _group_is_scale_invariant(self, group: dict) -> bool:
        return False
