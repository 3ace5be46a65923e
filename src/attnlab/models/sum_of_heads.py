"""A sum of attention heads, ``f(X) = sum_h v_h^T X^T softmax(X W_h z)``, trained as one matrix of heads side by side.

Spec: multi-token §9 (the sum-of-heads model and its joint max-margin program; our construction, derived from the
single-head W-SVM of implicit-bias-ngd §5).

The ``H`` key-query matrices ``W_h`` (each ``(d, d_q)``) are stored side by side, ``W = [W_1, ..., W_H]`` of shape
``(d, H d_q)``: its Frobenius norm is the joint norm ``(sum_h ||W_h||_F^2)^(1/2)``, so normalised gradient descent
on ``W`` is normalised jointly over the heads, and every rule, recorder and metric of the engine runs on it as on one
``W``. The heads' outputs ``v_h`` are fixed (:class:`SummedHeads`, an
:class:`~attnlab.models.heads.AttentionHeads`).

Gradient: with ``gamma_{h,it} = y_i v_h^T x_it`` and the shared margin ``y_i f(X_i)``, the derivative in each
head's logits is ``dL/ds_{h,it} = -(|l'_i| / n) phi_{h,it} c_{h,it}`` (the single-head formula of implicit-bias-ngd
§3.1 per head, one loss derivative per sequence for all heads). It is computed by
:func:`~attnlab.models.logit_derivatives.logit_derivatives` with the ``H n`` (head, sequence) pairs as samples (each
sequence's margin repeated per head), so it stays exact in the log domain after the softmax saturates, with one
scale per run.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from attnlab._validation import ValidationError, check_scalar, check_tensor
from attnlab.models.attention import PARAMETRIZATIONS, TokenSelectionModel
from attnlab.models.functional import LogScaled, logit_derivatives, score_gaps
from attnlab.models.heads import AttentionHeads

__all__ = ["SumOfHeads", "SummedHeads", "head_matrices", "side_by_side"]


def head_matrices(W: torch.Tensor, heads: int) -> torch.Tensor:
    """The heads' matrices ``W_h`` of ``W = [W_1, ..., W_H]``.

    Parameters
    ----------
    W : torch.Tensor, shape ([R,] d, H d_q)
    heads : int
        ``H``.

    Returns
    -------
    torch.Tensor, shape ([R,] H, d, d_q)
    """
    return W.unflatten(-1, (heads, -1)).movedim(-2, -3)  # (.., d, H, d_q) -> (.., H, d, d_q)


def side_by_side(W_heads: torch.Tensor) -> torch.Tensor:
    """``[W_1, ..., W_H]``, the inverse of :func:`head_matrices`.

    Parameters
    ----------
    W_heads : torch.Tensor, shape ([R,] H, d, d_q)

    Returns
    -------
    torch.Tensor, shape ([R,] d, H d_q)
    """
    return W_heads.movedim(-3, -2).flatten(-2)


class SummedHeads(AttentionHeads):
    """The fixed outputs ``v_h`` of ``H`` attention heads whose outputs add up. Spec: multi-token §9.

    Parameters
    ----------
    values : array-like, shape ([R,] H, d)
        Row ``h`` is head ``h``'s output vector ``v_h``.

    Examples
    --------
    >>> heads = SummedHeads(torch.eye(2, dtype=torch.float64))
    >>> heads.H, heads.d
    (2, 2)
    """

    def __init__(self, values: Any) -> None:
        values_t = check_tensor("values", values)
        if values_t.dim() not in (2, 3):
            raise ValidationError(f"values has shape {tuple(values_t.shape)}, expected (H, d) or (R, H, d)")
        if values_t.shape[-2] == 0:
            raise ValidationError(
                f"values has no heads (shape {tuple(values_t.shape)}); pass the output v_h of each head, shape (H, d) "
                "with H >= 1"
            )
        if values_t.shape[-1] == 0:
            raise ValidationError(f"values has shape {tuple(values_t.shape)}: each head's output needs a width d >= 1")
        self.values, self.H, self.d = values_t, int(values_t.shape[-2]), int(values_t.shape[-1])

    @property
    def runs(self) -> int | None:
        """R when ``values`` has shape ``(R, H, d)``, else None."""
        return int(self.values.shape[0]) if self.values.dim() == 3 else None

    def columns(self, d_q: int) -> int:
        return self.H * d_q

    def logits(self, X: torch.Tensor, W: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
        """Every head's logits ``s_{h,it} = x_it^T W_h z_i``.

        Parameters
        ----------
        X : torch.Tensor, shape ([R,] n, T, d)
        W : torch.Tensor, shape ([R,] d, H d_q)
        Z : torch.Tensor, shape ([R,] n, d_q)

        Returns
        -------
        torch.Tensor, shape ([R,] H, n, T)
        """
        return torch.einsum("...ntd,...hde,...ne->...hnt", X, head_matrices(W, self.H), Z)  # multi-token §9

    def scores(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Token scores of every head, ``gamma_{h,it} = y_i v_h^T x_it``.

        Parameters
        ----------
        X : torch.Tensor, shape ([R,] n, T, d)
        y : torch.Tensor, shape ([R,] n)

        Returns
        -------
        torch.Tensor, shape ([R,] H, n, T)
        """
        return y[..., None, :, None] * torch.einsum("...ntd,...hd->...hnt", X, self.values)  # ngd §1 per head

    def outputs(self, X: torch.Tensor, W: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
        values = torch.einsum("...ntd,...hd->...hnt", X, self.values)  # v_h^T x_it, ([R,] H, n, T)
        # multi-token §9: f = sum_h sum_t phi_{h,t} v_h^T x_t
        return (torch.softmax(self.logits(X, W, Z), dim=-1) * values).sum(dim=(-3, -1))

    def loss_gradients(
        self, X: torch.Tensor, Z: torch.Tensor, y: torch.Tensor, W: torch.Tensor, loss: str, *, risk: bool = True
    ) -> tuple[LogScaled, None, torch.Tensor | None]:
        n = X.shape[-3]
        logits = self.logits(X, W, Z).flatten(-3, -2)  # (.., H n, T): each (head, sequence) pair a sample
        gaps = score_gaps(self.scores(X, y).flatten(-3, -2))
        margin = y * self.outputs(X, W, Z)  # (.., n): one margin per sequence, shared by its heads
        margin = margin.unsqueeze(-2).expand(margin.shape[:-1] + (self.H, n)).flatten(-2)  # (.., H n)
        derivatives = logit_derivatives(logits.movedim(-1, 0).contiguous(), gaps, loss, risk=risk, margin=margin)
        weights = derivatives.scaled()  # (T, .., H n): dL/ds with 1/(H n) in place of 1/n
        per_token = weights.mantissa.movedim(0, -1).unflatten(-2, (self.H, n))  # (.., H, n, T)
        grad = torch.einsum("...hnt,...ntd,...ne->...hde", per_token, X, Z)  # ngd §3.1 per head: sum w x z^T
        # the H n samples' mean divides by H n: the log-scale gets log H back (the risk is a mean of H equal copies)
        return LogScaled(side_by_side(grad), weights.log_scale + math.log(self.H)), None, derivatives.log_risk

    def __repr__(self) -> str:
        return f"SummedHeads(H={self.H}, d={self.d}{'' if self.runs is None else f', runs={self.runs}'})"


class SumOfHeads(TokenSelectionModel):
    """``f(X) = sum_h v_h^T X^T softmax(X W_h z)`` with the ``W_h`` trained and the ``v_h`` fixed.

    Spec: multi-token §9. ``W`` (the parameter the engine trains) is ``[W_1, ..., W_H]``, shape ``([R,] d, H d_q)``;
    :attr:`W_heads` gives the heads apart.

    Parameters
    ----------
    values : array-like, shape ([R,] H, d)
        The heads' fixed output vectors ``v_h``.
    W0 : array-like, shape ([R,] H, d, d_q), optional
        Initial heads; default zeros.
    d_q : int, optional
        Query width; default ``d``.

    Examples
    --------
    >>> model = SumOfHeads(torch.ones(2, 3, dtype=torch.float64))
    >>> model.W.shape, model.W_heads.shape
    (torch.Size([3, 6]), torch.Size([2, 3, 3]))
    """

    parametrization = PARAMETRIZATIONS["W"]

    def __init__(self, values: Any, W0: Any = None, *, d_q: int | None = None) -> None:  # noqa: N803
        heads = SummedHeads(values)
        super().__init__(heads.d, heads, d_q=d_q)
        H, d, d_q = heads.H, heads.d, self.d_q
        check_scalar("H", H, kind=int, low=1)
        init = torch.zeros(H, d, d_q, dtype=torch.float64) if W0 is None else check_tensor("W0", W0)
        if init.dim() not in (3, 4) or tuple(init.shape[-3:]) != (H, d, d_q):
            raise ValidationError(
                f"W0 has shape {tuple(init.shape)}, expected ([R,] {H}, {d}, {d_q}): one (d, d_q) matrix per head"
            )
        self.weight = nn.Parameter(side_by_side(init).clone())

    def tensors(self) -> dict[str, torch.Tensor]:
        """The parametrisation's tensor.

        Returns
        -------
        dict of str to torch.Tensor
            ``{"W": [W_1, ..., W_H]}``, shape ``([R,] d, H d_q)``.
        """
        return {"W": self.weight}

    @property
    def W_heads(self) -> torch.Tensor:  # noqa: N802 (the spec's symbol)
        """The heads' matrices, shape ``([R,] H, d, d_q)``."""
        return head_matrices(self.weight, self.v.H)
