"""The joint max-margin program of a sum of attention heads.

Spec: multi-token §9 (our construction, from the single-head W-SVM of implicit-bias-ngd §5).

For ``f(X) = sum_h v_h^T X^T softmax(X W_h z)`` with head ``h`` selecting token ``sel_{h,i}`` of sequence ``i``:

    min_{W_1..W_H}  sum_h ||W_h||   s.t.   (x_{i,sel_{h,i}} - x_{i,t})^T W_h z_i >= 1   for every h, i, t != sel_{h,i}.

Each constraint involves one head, so the program separates: its minimiser is the stack of the single-head attention
SVMs, each at margin exactly 1, and ``(W, lambda)`` satisfies the joint KKT conditions exactly when every head's block
satisfies its own (the Lagrangian is a sum over heads). Any objective increasing in each ``||W_h||`` (the sum, or the
joint Frobenius norm ``(sum_h ||W_h||_F^2)^(1/2)`` that normalised gradient descent on the heads side by side
normalises) has this same minimiser; what the joint program adds to the single-head ones is the relative scale of
the heads, all at margin 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from attnlab._validation import ValidationError, check_select, check_tensor
from attnlab.data.dataset import TokenSelectionData
from attnlab.models.sum_of_heads import SummedHeads, side_by_side
from attnlab.svm._program import check_data, check_solver
from attnlab.svm.attention_svm import attention_svm
from attnlab.svm.errors import InfeasibleProgramError
from attnlab.svm.norms import Norm, as_norm
from attnlab.svm.result import AttentionSVMResult

__all__ = ["JointSVMResult", "joint_attention_svm"]


@dataclass(frozen=True, eq=False)
class JointSVMResult:
    """Solution of the joint program of a sum of heads.

    Attributes
    ----------
    W : torch.Tensor, shape (H, d, d_q), float64
        The heads' max-margin matrices.
    heads : tuple of AttentionSVMResult
        Each head's program (its duals, support, status, solver).
    select : torch.Tensor, shape (H, n), int64
        The selected token of each head and sequence.
    margin : float
        Smallest margin over every head (1 at the optimum).
    norm_value : float
        ``sum_h ||W_h||``.
    kkt_residual : float
        Largest KKT defect over the heads (the joint conditions are the heads' own; see the module notes).
    max_violation : float
        Worst constraint violation over the heads.
    status : str
        ``"optimal"`` when every head's solve says so, else the first other status.
    norm : str or float
    """

    W: torch.Tensor
    heads: tuple[AttentionSVMResult, ...]
    select: torch.Tensor
    margin: float
    norm_value: float
    kkt_residual: float
    max_violation: float
    status: str
    norm: str | float

    @property
    def side_by_side(self) -> torch.Tensor:
        """``[W_1, ..., W_H]``, shape ``(d, H d_q)``: the matrix :class:`~attnlab.models.SumOfHeads` trains."""
        return side_by_side(self.W)


def _selection(data: TokenSelectionData, values: Any, select: Any) -> torch.Tensor:
    """The ``(H, n)`` selection: given (then ``values``, if given too, must have its ``H`` heads), else each head's
    optimal tokens ``argmax_t y_i v_h^T x_it``."""
    heads = None if values is None else _heads(data, values)
    if select is not None:
        try:
            chosen = torch.as_tensor(select)
        except (ValueError, TypeError, RuntimeError) as err:  # ragged rows, token sets, text
            raise ValidationError(
                f"select must be a rectangular array of integer token indices, one per head and sequence, shape "
                f"(H, {data.n}); got rows of different lengths or several tokens per sequence ({err}). Token sets are "
                "single-head programs: attention_svm(data, 'fro' or 'nuc', select=sets) or set_direction_svm"
            ) from None
        if chosen.dim() != 2 or chosen.shape[1] != data.n:
            raise ValidationError(
                f"select must hold one token index per head and sequence, shape (H, {data.n}), got "
                f"{tuple(chosen.shape)} of {chosen.dtype}; pass e.g. [[0] * n, [1] * n] for two heads"
            )
        if chosen.shape[0] == 0:
            raise ValidationError(
                f"select has no heads (shape (0, {data.n})); pass one row of token indices per head, shape "
                f"(H, {data.n}) with H >= 1, e.g. [[0] * n] for one head"
            )
        if heads is not None and heads.H != chosen.shape[0]:
            raise ValidationError(
                f"values holds {heads.H} heads but select holds {chosen.shape[0]} (shape {tuple(chosen.shape)}); "
                "values only sets the default selection (each head's optimal tokens): pass one of them, or both "
                "with one row per head"
            )
        return check_select("select", chosen, data.n, data.T, runs=chosen.shape[0])  # integers (not bool), in range
    if heads is None:
        raise ValidationError(
            "no selection: pass select of shape (H, n), or values (H, d) (the heads' outputs v_h) to select each "
            "head's optimal tokens"
        )
    return heads.scores(data.X, data.y).argmax(dim=-1)  # spec ngd §1 per head: opt_{h,i}


def _heads(data: TokenSelectionData, values: Any) -> SummedHeads:
    """``values`` as the heads of the data: ``(H, d)``, no runs axis."""
    heads = values if isinstance(values, SummedHeads) else SummedHeads(values)
    if heads.runs is not None or heads.d != data.d:
        raise ValidationError(f"values has shape {tuple(heads.values.shape)}, expected (H, {data.d})")
    return heads


def joint_attention_svm(
    data: TokenSelectionData,
    values: Any = None,
    select: Any = None,
    norm: Norm | str | float = "fro",
    solver: str | None = None,
) -> JointSVMResult:
    """Solve the joint max-margin program of a sum of heads: ``min sum_h ||W_h||`` with every head's selected
    token ahead of the others by margin 1.

    Spec: multi-token §9 (our construction from implicit-bias-ngd §5).

    Parameters
    ----------
    data : TokenSelectionData
        Tokens ``X (n, T, d)``, queries ``Z (n, d_q)``, labels ``y``.
    values : array-like of shape (H, d), or SummedHeads, optional
        The heads' outputs ``v_h``; they define the default selection (each head's optimal tokens).
    select : array-like of int, shape (H, n), optional
        The selected token of each head and sequence (one token each: token sets are single-head programs); given
        with ``values``, it is the selection, and ``values`` must have its ``H`` heads.
    norm : {"fro", "nuc"} or float, default="fro"
        Each head's norm (Frobenius, nuclear, or entrywise ``l_p`` with ``p >= 1``, ``inf`` included).
    solver : {"CLARABEL", "SCS"}, optional

    Returns
    -------
    JointSVMResult

    Raises
    ------
    InfeasibleProgramError
        When a head's selection cannot be separated; the message names the head, and for a tie (a constraint
        ``0 >= 1``) the sequence and token, e.g. ``head 1: ... (i=2, t=0)``.
    ValidationError
        On ``data`` that is not a :class:`~attnlab.data.TokenSelectionData`, a bad ``norm`` (``"l1-diag"`` and
        token sets are single-head programs), ``select`` (ragged rows, booleans, floats and indices outside
        ``[0, T - 1]`` included, as for :func:`~attnlab.svm.attention_svm`) or ``values`` (no heads, ``H = 0``,
        included), or ``values`` and ``select`` of different ``H``.

    Notes
    -----
    The program separates over the heads (see the module notes), so it is solved head by head with
    :func:`~attnlab.svm.attention_svm`, each with its own KKT certificate; ``kkt_residual`` is their largest.

    Examples
    --------
    >>> X = torch.eye(2, dtype=torch.float64).repeat(2, 1, 1)
    >>> data = TokenSelectionData(X, Z=[[1.0, 0.0], [0.0, 1.0]], y=[1, 1])
    >>> result = joint_attention_svm(data, select=[[0, 0], [1, 1]])
    >>> tuple(result.W.shape), round(result.margin, 6)
    ((2, 2, 2), 1.0)
    """
    data = check_data(data)
    norm = as_norm(norm)
    if norm.diagonal is not None:
        raise ValidationError('norm="l1-diag" is a single-head program; pass "fro", "nuc" or a float p >= 1')
    solver = check_solver(solver)
    if values is not None and not isinstance(values, SummedHeads):
        values = check_tensor("values", values)
    chosen = _selection(data, values, select)
    heads = []
    for h, head_select in enumerate(chosen):
        try:
            heads.append(attention_svm(data, norm, select=head_select, solver=solver))  # multi-token §9, head h
        except InfeasibleProgramError as err:
            raise type(err)(f"head {h} (selection {head_select.tolist()}): {err}") from err
    statuses = [r.status for r in heads if r.status != "optimal"]
    return JointSVMResult(
        W=torch.stack([r.W for r in heads]),  # (H, d, d_q)
        heads=tuple(heads),
        select=chosen,
        margin=min(r.margin for r in heads),
        norm_value=sum(r.norm_value for r in heads),
        kkt_residual=max(r.kkt_residual for r in heads),
        max_violation=max(r.max_violation for r in heads),
        status=statuses[0] if statuses else "optimal",
        norm=norm.label,
    )
