"""The l_p regularisation path: the attention risk minimised on the ball ``||W||_p <= R``, and its KKT residual.

Spec: mirror-descent-lp §8.1 (``W_R = argmin_{||W||_p <= R} L(W)``; ``W_R / R`` turns toward the l_p-AttSVM of the
optimal tokens as ``R`` grows), §2 (the logistic risk), §3 (``grad psi``, the ball's normal).

The risk is minimised through :func:`log_excess_risk_and_gradient`, ``log(L(W) - L_sel)``, which has the minimiser of ``L``
and stays resolved at the large radii of the path, where ``L - L_sel`` is below float64's resolution of ``L``.
A second solver, independent of this one, is :func:`attnlab.training.projected.projected_mirror_descent`.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import minimize

from attnlab._deprecation import moved_names
from attnlab._numerics import all_finite, mirror_map
from attnlab._validation import ValidationError, check_scalar, check_select, check_tensor, check_token_data
from attnlab.data import TokenSelectionData
from attnlab.models.excess_risk import log_excess_risk as models_log_excess_risk

__all__ = ["constrained_erm", "constrained_stationarity", "log_excess_risk_and_gradient"]

FTOL = 1e-12  # SLSQP's stopping tolerance on log(L - L_sel)


def _checked(
    data: object, W: object, select: object, p: float | None = None, name: str = "W"
) -> tuple[torch.Tensor, torch.Tensor]:
    """The public functions' arguments: a data set with a head, ``W`` (d, d_q) finite (rectangular for
    cross-attention, multi-token §8: the risk reads ``W`` only through the logits ``x_it^T W z_i``; ``name``: the
    argument that gave it), ``select`` (n,) the optimal tokens, ``p > 1``."""
    check_token_data("data", data)
    n, T, d = data.X.shape
    d_q = data.Z.shape[-1]
    W = check_tensor(name, W)
    if tuple(W.shape) != (d, d_q):
        raise ValidationError(
            f"{name} has shape {tuple(W.shape)}, but the data's tokens have d = {d} and its queries d_q = {d_q}; "
            f"pass {name} of shape ({d}, {d_q})"
        )
    if p is not None:
        check_scalar("p", p, low=1.0, low_inclusive=False)
    select = check_select("select", select, n, T)
    gamma = data.token_scores()  # (n, T); needs the head
    if bool((gamma.gather(-1, select[:, None])[:, 0] < gamma.amax(dim=-1)).any()):
        raise ValidationError(
            "select must be the optimal tokens argmax_t y_i v^T x_it (L_sel is then the risk's infimum); pass "
            "data.optimal_tokens()"
        )
    return W, select


def _value_and_gradient(data: TokenSelectionData, W: torch.Tensor) -> tuple[float, torch.Tensor]:
    """``log(L(W) - L_*)`` of the logistic risk (:func:`attnlab.models.log_excess_risk`) and its gradient by autograd."""
    W = W.detach().to(torch.float64).requires_grad_()
    value = models_log_excess_risk(data.X, data.Z, data.y, data.v, W, "logistic")  # md §2, §8.1: log(L - L_sel)
    (grad,) = torch.autograd.grad(value, W)
    return float(value.detach()), grad


def log_excess_risk_and_gradient(
    data: TokenSelectionData, W: torch.Tensor, select: torch.Tensor
) -> tuple[float, torch.Tensor]:
    """``log(L(W) - L_sel)`` of the logistic risk and its gradient in ``W``, without cancellation.

    Spec: mirror-descent-lp §2, §8.1. ``L_sel = (1/n) sum_i l(gamma_{i,sel_i})`` is the risk's infimum for the
    optimal tokens ``select``; the value is :func:`attnlab.models.log_excess_risk` (from the margins, in the log
    domain, keeping its relative precision when the softmax saturates) and the gradient its autograd gradient.

    Parameters
    ----------
    data : TokenSelectionData
        ``X (n, T, d)``, ``Z (n, d_q)``, ``y (n,)``, ``v (d,)``.
    W : torch.Tensor, shape (d, d_q)
        Key-query weights (converted to float64); rectangular for cross-attention (multi-token §8).
    select : torch.Tensor of int, shape (n,)
        The optimal tokens ``argmax_t gamma_it`` (others are refused).

    Returns
    -------
    value : float
        ``log(L(W) - L_sel)``.
    grad : torch.Tensor, shape (d, d_q), float64
        Its gradient in ``W``.
    """
    W, select = _checked(data, W, select)
    return _value_and_gradient(data, W)


def constrained_erm(
    data: TokenSelectionData, p: float, R: float, W0: torch.Tensor, select: torch.Tensor
) -> torch.Tensor:
    """``W_R = argmin_{||W||_p <= R} L(W)``, the l_p regularisation path at radius ``R``, by SLSQP from ``W0``.

    Spec: mirror-descent-lp §8.1 (the constrained ERM). Solved in ``U = W / R`` (unit ball, O(1) variables) on
    :func:`log_excess_risk_and_gradient`. SLSQP's own status is not used: near the optimum it often ends on "positive directional
    derivative in the line search" (the objective's rounding); :func:`constrained_stationarity` certifies the point.
    The solve is local: the risk is not convex, and from a poor start it can end where another token's attention has
    saturated (a local minimiser, or a plateau the KKT residual flags). Compare starts by their risk; the
    ``mirror-descent.regpath`` experiment solves again from the SVM direction when that point's risk is lower.

    Parameters
    ----------
    data : TokenSelectionData
        ``X (n, T, d)``, ``Z (n, d_q)``, ``y (n,)``, ``v (d,)``.
    p : float
        Exponent ``p > 1`` of the ball.
    R : float
        Radius ``R > 0``.
    W0 : torch.Tensor, shape (d, d_q)
        Start, best inside the ball (a path's previous solution stretched to the new radius).
    select : torch.Tensor of int, shape (n,)
        The optimal tokens ``argmax_t gamma_it`` (see :func:`log_excess_risk_and_gradient`).

    Returns
    -------
    torch.Tensor, shape (d, d_q), float64
        The minimiser; for separable data it lies on the sphere ``||W||_p = R``.

    Raises
    ------
    ValidationError
        On ``data`` without a head, a ``W0`` of the wrong shape or with non-finite entries (the message names
        ``W0``), ``select`` other than the optimal tokens, ``p <= 1`` or ``R <= 0``.
    """
    W0, select = _checked(data, W0, select, p, name="W0")
    check_scalar("R", R, low=0.0, low_inclusive=False)
    shape = W0.shape

    def objective(u: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = _value_and_gradient(data, R * torch.from_numpy(u).reshape(shape))
        return value, R * grad.reshape(-1).numpy()

    start = (W0 / R).reshape(-1).numpy()
    out = minimize(
        objective, start, jac=True, method="SLSQP", constraints=[_unit_ball(p)], options={"maxiter": 500, "ftol": FTOL}
    )
    return R * torch.from_numpy(out.x).reshape(shape)


def _unit_ball(p: float) -> dict:
    """SLSQP's constraint ``||u||_p <= 1``: ``1 - sum |u|^p >= 0`` and its gradient.

    At large ``p`` (hundreds) ``|u|^p`` of a trial point outside the ball overflows to inf, which reads as violated
    (``1 - inf < 0``), as it is: the overflow is expected there, and NumPy's warning about it is silenced.
    """

    def value(u: np.ndarray) -> float:
        with np.errstate(over="ignore"):
            return 1.0 - np.sum(np.abs(u) ** p)  # md §8.1: ||W||_p <= R

    def jacobian(u: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return -p * np.sign(u) * np.abs(u) ** (p - 1.0)

    return {"type": "ineq", "fun": value, "jac": jacobian}


def constrained_stationarity(data: TokenSelectionData, p: float, W: torch.Tensor, select: torch.Tensor) -> float:
    """KKT residual of ``W`` on the sphere ``||W||_p = R``: ``1 - cos(-grad L(W), grad psi(W))``.

    Spec: mirror-descent-lp §8.1, §3: at a minimiser on the sphere, ``-grad L = lambda grad psi(W)`` with
    ``lambda >= 0`` (``grad psi = sign(W) |W|^(p-1)``, the ball constraint's normal).

    Parameters
    ----------
    data : TokenSelectionData
        ``X (n, T, d)``, ``Z (n, d_q)``, ``y (n,)``, ``v (d,)``.
    p : float
        Exponent ``p > 1`` of the ball.
    W : torch.Tensor, shape (d, d_q)
        A point on the sphere (any radius: the residual is scale-free).
    select : torch.Tensor of int, shape (n,)
        The optimal tokens ``argmax_t gamma_it``.

    Returns
    -------
    float
        In ``[0, 2]``; 0 at a minimiser on the sphere.

    Raises
    ------
    ValidationError
        When ``W`` is zero (on no sphere), the risk has no direction at ``W`` (a zero or non-finite gradient), or the
        inputs do not fit ``data``.
    """
    W, select = _checked(data, W, select, p)
    if not bool(W.any()):
        raise ValidationError("W is zero: it lies on no sphere ||W||_p = R > 0; pass the constrained ERM's W_R")
    _, grad = _value_and_gradient(data, W)
    if not all_finite(grad) or not bool(grad.any()):
        raise ValidationError(
            "the risk has no direction at W (its excess over the infimum is 0 there, e.g. a zero head v, or its "
            "gradient is not finite); the residual is defined where the risk still slopes"
        )
    normal = mirror_map(W, p)
    return float(1.0 - (-grad * normal).sum() / (grad.norm() * normal.norm()))


# the former name of log_excess_risk_and_gradient (attnlab.models.log_excess_risk is the formula's one definition)
__getattr__ = moved_names(__name__, {"log_excess_risk": f"{__name__}.log_excess_risk_and_gradient"})
