"""Two more diagonal parametrisations of ``W``, the ones kq-nuclear-norm contrasts with ``(xi_k, xi_q)``:
``beta = diag(W)`` trained directly, and the signed squares ``(w_+, w_-)`` of Lemma 4.1's flow (3).

Spec: kq-nuclear-norm §3.1 (Lemma 4.1: ``W = Diag((w_+^2 - w_-^2) / 2)``), §7.2 (``beta`` trained directly converges
to the l2 solution, the factorisation ``beta = xi_k * xi_q`` to the l1 one).
"""

from __future__ import annotations

import torch
from torch import nn

from attnlab._validation import ValidationError, check_tensor
from attnlab.models.attention import Parametrization, TokenSelectionModel

__all__ = ["DiagonalW", "SignedSquares"]


def _diagonal_start(name: str, value: object, d: int | None = None) -> torch.Tensor:
    tensor = check_tensor(name, value)
    if tensor.dim() not in (1, 2) or (d is not None and tensor.shape[-1] != d):
        want = "([R,] d)" if d is None else f"([R,] {d})"
        raise ValidationError(f"{name} has shape {tuple(tensor.shape)}, expected {want}: one diagonal per run")
    return tensor


class DiagonalW(TokenSelectionModel):
    """``W = Diag(beta)`` with ``beta`` trained directly: the W-parametrisation restricted to diagonals.

    Spec: kq-nuclear-norm §7.2 ("training beta directly ... converges to the l2 solution").

    Parameters
    ----------
    beta0 : array-like, shape ([R,] d), float64
        Initial diagonal; ``d`` is its last axis.
    v0, train_head : see :class:`~attnlab.models.TokenSelectionModel`.

    Examples
    --------
    >>> DiagonalW(torch.tensor([1.0, 2.0])).W
    tensor([[1., 0.],
            [0., 2.]], dtype=torch.float64, grad_fn=<DiagEmbedBackward0>)
    """

    # spec kq §3.1: W = Diag(beta), grad_beta = diag(grad_W)
    parametrization = Parametrization(
        "beta",
        ("beta",),
        lambda p: torch.diag_embed(p["beta"]),
        lambda p, g: {"beta": torch.diagonal(g, dim1=-2, dim2=-1)},
    )

    def __init__(self, beta0: torch.Tensor, v0=None, train_head: bool = False) -> None:
        beta0 = _diagonal_start("beta0", beta0)
        super().__init__(int(beta0.shape[-1]), v0, train_head)
        self.beta = nn.Parameter(beta0.clone())


class SignedSquares(TokenSelectionModel):
    """``W = Diag((w_+^2 - w_-^2) / 2)``: the diagonal-linear-network form of Lemma 4.1's flow (3).

    Spec: kq-nuclear-norm §3.1 (reparametrisation, Lemma 4.1): ``grad_{w_+} = diag(G) w_+``,
    ``grad_{w_-} = -diag(G) w_-`` for ``G = grad_W L``.

    Parameters
    ----------
    w_plus0, w_minus0 : array-like, shape ([R,] d), float64
        Initial ``w_+`` and ``w_-`` (Lemma 4.1 starts both at ``omega_0``, so ``W(0) = 0``).
    v0, train_head : see :class:`~attnlab.models.TokenSelectionModel`.

    Examples
    --------
    >>> SignedSquares(torch.ones(2), torch.ones(2)).W.abs().max().item()
    0.0
    """

    parametrization = Parametrization(
        "pm",
        ("w_plus", "w_minus"),
        lambda p: torch.diag_embed((p["w_plus"] ** 2 - p["w_minus"] ** 2) / 2),  # spec kq §3.1: w = (w+^2 - w-^2)/2
        lambda p, g: {
            "w_plus": torch.diagonal(g, dim1=-2, dim2=-1) * p["w_plus"],  # spec kq §3.1: diag(G) w_+
            "w_minus": -torch.diagonal(g, dim1=-2, dim2=-1) * p["w_minus"],  # spec kq §3.1: -diag(G) w_-
        },
    )

    def __init__(self, w_plus0: torch.Tensor, w_minus0: torch.Tensor, v0=None, train_head: bool = False) -> None:
        w_plus0 = _diagonal_start("w_plus0", w_plus0)
        w_minus0 = _diagonal_start("w_minus0", w_minus0, int(w_plus0.shape[-1]))
        if w_minus0.shape != w_plus0.shape:
            raise ValidationError(
                f"w_plus0 has shape {tuple(w_plus0.shape)} and w_minus0 {tuple(w_minus0.shape)}; pass one shape"
            )
        super().__init__(int(w_plus0.shape[-1]), v0, train_head)
        self.w_plus = nn.Parameter(w_plus0.clone())
        self.w_minus = nn.Parameter(w_minus0.clone())
