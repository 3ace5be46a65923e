"""Token selections: support tokens, local and global optimality, their enumeration, and separability.

Spec: mirror-descent-lp §5 (Definition 3) and §7, kq-nuclear-norm §5 (A1 separability).
"""

from __future__ import annotations

import heapq
import itertools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnlab._validation import check_scalar
from attnlab.data.assumptions import AssumptionReport
from attnlab.data.dataset import TokenSelectionData
from attnlab.data.selection import Selection
from attnlab.svm._program import (
    SEPARABLE_TOL,
    ProgramCache,
    attention_constraint_vectors,
    check_data,
    check_solver,
    constraint_matrices,
    max_unit_margin,
    range_bases,
    resolve_select,
    unit_scale,
)
from attnlab.svm.attention_svm import attention_svm, solve_attention_svm
from attnlab.svm.errors import InfeasibleProgramError, TieWarning
from attnlab.svm.norms import Norm, as_norm
from attnlab.svm.result import AttentionSVMResult

__all__ = [
    "SelectionReport",
    "is_globally_optimal",
    "is_locally_optimal",
    "is_separable",
    "locally_optimal_selections",
    "support_tokens",
]


@dataclass(frozen=True, eq=False)  # compared by identity: it holds tensors
class SelectionReport(AssumptionReport):
    """An :class:`~attnlab.data.AssumptionReport` for a token selection, with the selection and its SVM.

    Attributes
    ----------
    select : torch.Tensor, shape (n,), int64
        The selection ``alpha``.
    svm : AttentionSVMResult
        The attention SVM of ``alpha`` (its ``support`` are the support tokens ``T_i``).
    """

    select: torch.Tensor
    svm: AttentionSVMResult


def support_tokens(
    data: TokenSelectionData, select: object = None, p: Norm = 2.0, solver: str | None = None
) -> tuple[tuple[int, int], ...]:
    """Support tokens ``T_i``: pairs ``(i, t)`` whose margin under the selection's SVM solution is 1.

    Spec: mirror-descent-lp §5 (``T_i = {t != alpha_i : (x_{i alpha_i} - x_it)^T W_alpha z_i = 1}``).

    Parameters
    ----------
    data : TokenSelectionData
    select : array-like of int, shape (n,), optional
        The selection ``alpha``; default ``data.select``, else the optimal tokens.
    p : float or {"fro", "nuc", "l1-diag"}, default=2.0
        The norm of the SVM (any ``norm`` of :func:`attention_svm`).
    solver : {"CLARABEL", "SCS"}, optional

    Returns
    -------
    tuple of (int, int)
        Active constraints, slack at most 1e-6.

    Raises
    ------
    ValidationError
        When the selection (``select``, else ``data.select``) holds token sets: support tokens are those of one
        selected token per sequence.
    """
    _one_token(data, select, "support_tokens")
    return attention_svm(data, as_norm(p, "p"), select=select, solver=solver).support


def is_locally_optimal(
    data: TokenSelectionData, select: object = None, p: Norm = 2.0, solver: str | None = None
) -> SelectionReport:
    """Whether every support token scores strictly below the selected token of its sequence.

    Spec: mirror-descent-lp §5, Definition 3 (``gamma_{it} < gamma_{i alpha_i}`` for all ``t`` in ``T_i``).

    Parameters
    ----------
    data : TokenSelectionData
        With a head ``v`` (token scores ``gamma_it = y_i v^T x_it``).
    select : array-like of int, shape (n,), optional
        The selection ``alpha``; default ``data.select``, else the optimal tokens.
    p : float or {"fro", "nuc", "l1-diag"}, default=2.0
    solver : {"CLARABEL", "SCS"}, optional

    Returns
    -------
    SelectionReport
        ``measured = min_{i, t in T_i} (gamma_{i alpha_i} - gamma_it)``, ``threshold = 0``; holds when positive.

    Raises
    ------
    InfeasibleProgramError
        When the selection's SVM is infeasible (Definition 3 needs ``W_alpha``).
    ValidationError
        When the selection (``select``, else ``data.select``) holds token sets (Definition 3 takes one token per
        sequence).
    """
    _one_token(data, select, "is_locally_optimal")
    scores = check_data(data).token_scores()  # (n, T); needs the head
    return local_optimality(scores, attention_svm(data, as_norm(p, "p"), select=select, solver=solver), p)


def _one_token(data: TokenSelectionData, select: object, program: str) -> None:
    """Refuse, by name of ``program``, a selection (``select``, else ``data.select``) of token sets, before the SVM
    of a norm that takes sets only as Frobenius or nuclear blames the norm."""
    data = check_data(data)
    chosen = data.select if select is None else select
    if chosen is not None:
        Selection.parse(chosen, data.n, data.T).one_token(program)


def local_optimality(scores: torch.Tensor, svm: AttentionSVMResult, p: object) -> SelectionReport:
    """:func:`is_locally_optimal` of a selection whose SVM ``svm`` is solved already (token scores ``(n, T)``)."""
    gaps = {(i, t): float(scores[i, svm.select[i]] - scores[i, t]) for i, t in svm.support}  # spec §5 Def. 3
    worst = min(gaps, key=gaps.get)
    bad = [pair for pair, gap in gaps.items() if gap <= 0]
    return SelectionReport(
        name=f"locally optimal selection (l_p-AttSVM, p={p!r})",
        holds=not bad,
        measured=gaps[worst],
        threshold=0.0,
        detail=(
            f"smallest score gap gamma_(i,alpha_i) - gamma_(i,t) over the {len(gaps)} support tokens (worst {worst}); "
            f"must be > threshold" + (f"; support tokens scoring at least the selected one: {bad}" if bad else "")
        ),
        select=svm.select,
        svm=svm,
    )


def is_globally_optimal(data: TokenSelectionData, select: object = None) -> AssumptionReport:
    """Whether each selected token has the highest score of its sequence (``alpha_i = opt_i``).

    Spec: mirror-descent-lp §5 (globally optimal) and §7.

    Parameters
    ----------
    data : TokenSelectionData
        With a head ``v``.
    select : array-like of int, shape (n,), optional
        Default ``data.select``, else the optimal tokens (which hold trivially).

    Returns
    -------
    AssumptionReport
        ``measured = min_i (gamma_{i alpha_i} - max_t gamma_it)`` (0 when globally optimal, ties included),
        ``threshold = 0``.
    """
    scores = check_data(data).token_scores()  # (n, T)
    select_t = resolve_select(data, select)
    gaps = scores[torch.arange(data.n), select_t] - scores.max(dim=1).values  # spec §5: alpha_i in argmax gamma
    worst = int(gaps.argmin())
    return AssumptionReport(
        name="globally optimal selection",
        holds=bool((gaps >= 0).all()),
        measured=float(gaps[worst]),
        threshold=0.0,
        detail=f"smallest gamma_(i,alpha_i) - max_t gamma_(i,t) (sequence {worst}); must be >= threshold",
    )


def locally_optimal_selections(
    data: TokenSelectionData,
    p: Norm = 2.0,
    max_candidates: int = 256,
    solver: str | None = None,
    *,
    include: Sequence[object] = (),
) -> list[SelectionReport]:
    """All feasible, locally optimal selections among the candidates, globally optimal first.

    Spec: mirror-descent-lp §5 (Definition 3), §7.

    Parameters
    ----------
    data : TokenSelectionData
        With a head ``v``.
    p : float or {"fro", "nuc", "l1-diag"}, default=2.0
    max_candidates : int, default=256
        When ``T^n <= max_candidates`` every selection is tried; otherwise this many selections in order of
        increasing total score given up, ``sum_i (max_t gamma_it - gamma_{i alpha_i})``, starting from the optimal
        one: changes in one sequence and in several are ranked together (a k-best enumeration of the separable
        sum), so a selection that differs from the optimum in several sequences by small score losses comes
        before one that gives up much in a single sequence.
    solver : {"CLARABEL", "SCS"}, optional
    include : sequence of array-like of int, shape (n,)
        Selections always tried, whatever the budget (e.g. the tokens a trained model attends to).

    Returns
    -------
    list of SelectionReport
        One per candidate whose SVM is feasible and which is locally optimal, sorted by decreasing total score
        ``sum_i gamma_{i alpha_i}``.
    """
    max_candidates = check_scalar("max_candidates", max_candidates, kind=int, low=1)
    solver = check_solver(solver)
    scores = check_data(data).token_scores()  # (n, T)
    norm = as_norm(p, "p")
    extra = [resolve_select(data, select).tolist() for select in include]
    found, cache = [], ProgramCache()  # the candidates' programs share one shape: solved through one problem
    for candidate in _unique(extra + _candidates(scores, max_candidates)):
        select = resolve_select(data, candidate)
        try:
            svm = solve_attention_svm(data, norm, select, solver, cache=cache)
        except InfeasibleProgramError:
            continue  # spec §5: Definition 3 applies only where the selection's SVM is feasible
        report = local_optimality(scores, svm, norm.label)
        if report.holds:
            found.append(report)
    total = [float(scores[torch.arange(data.n), r.select].sum()) for r in found]
    return [found[k] for k in np.argsort(total, kind="stable")[::-1]]


def _unique(selections: list[list[int]]) -> list[list[int]]:
    seen: set[tuple[int, ...]] = set()
    return [s for s in selections if not (tuple(s) in seen or seen.add(tuple(s)))]


def _candidates(scores: torch.Tensor, max_candidates: int) -> list[list[int]]:
    """Every selection when ``T^n <= max_candidates``, else the ``max_candidates`` of smallest total score loss.

    The loss ``sum_i (max_t gamma_it - gamma_{i alpha_i})`` is a sum over sequences, so the selections come in
    order from a heap over the per-sequence ranks (each popped selection pushes its successors that lower one
    sequence's token by one rank).
    """
    n, T = scores.shape
    if T**n <= max_candidates:
        return [list(c) for c in itertools.product(range(T), repeat=n)]
    order = torch.argsort(scores, dim=1, descending=True, stable=True)  # (n, T): tokens by decreasing score
    loss = (scores.max(dim=1, keepdim=True).values - torch.gather(scores, 1, order)).tolist()  # (n, T), rank order
    start = (0,) * n
    heap, seen, out = [(0.0, start)], {start}, []
    while heap and len(out) < max_candidates:
        total, ranks = heapq.heappop(heap)
        out.append([int(order[i, r]) for i, r in enumerate(ranks)])
        for i in range(n):
            if ranks[i] + 1 < T:
                nxt = ranks[:i] + (ranks[i] + 1,) + ranks[i + 1 :]
                if nxt not in seen:
                    seen.add(nxt)
                    heapq.heappush(heap, (total - loss[i][ranks[i]] + loss[i][ranks[i] + 1], nxt))
    return out


def is_separable(data: TokenSelectionData, select: object = None, solver: str | None = None) -> AssumptionReport:
    """Whether some ``W`` gives every selected token a margin of at least one over the others of its sequence.

    Spec: kq-nuclear-norm §5 (A1: unique optimal tokens and (W_F-SVM) feasible), implicit-bias-ngd §7
    ("W-SVM feasible"), mirror-descent-lp §7 ("SVM feasible").

    Parameters
    ----------
    data : TokenSelectionData
    select : array-like of int, shape (n,), optional
        Default ``data.select``, else the optimal tokens; then A1 also needs those to be unique.
    solver : {"CLARABEL", "SCS"}, optional

    Returns
    -------
    AssumptionReport
        ``measured = max_{||W||_F <= 1} min_{i, t != sel_i} (x_{i,sel_i} - x_it)^T W z_i``, the unit-norm
        margin (``1 / ||W_fro||_F`` when separable, ``<= 0`` otherwise), computed on the differences
        ``x_{i,sel_i} - x_it`` divided by their largest entry and the queries divided by theirs, so that it does
        not depend on the scale of the data; holds when above ``1e-8``. The verdict is certified by the solution
        (its own margin, or its multipliers by weak duality), whatever the solver's status; an uncertified solve is
        done again with the other solver.

    Raises
    ------
    SolverToleranceError
        When neither solver certifies its verdict (the margin is within their accuracy of ``1e-8``).
    """
    solver = check_solver(solver)
    with warnings.catch_warnings():  # a tie is reported in the detail below, not warned about
        warnings.simplefilter("ignore", TieWarning)
        select_t = resolve_select(check_data(data), select)
    pairs, diff, queries = attention_constraint_vectors(data, select_t)
    (diff, _), (queries, _) = unit_scale(diff), unit_scale(queries)  # separability does not depend on scale
    U, V = range_bases(diff, queries)  # the Frobenius norm is unitarily invariant: solve for U^T W V (exact)
    M = constraint_matrices(diff @ U, queries @ V).reshape(len(pairs), -1)
    what = f"separability (n={data.n}, T={data.T}, d={data.d})"
    margin = max_unit_margin(M, solver, what=what)
    holds, detail = margin > SEPARABLE_TOL, "largest margin of a unit-Frobenius-norm W; must be > threshold"
    if select is None and data.select is None:
        top2 = data.token_scores().topk(2, dim=1).values  # spec kq-nuclear-norm §5 A1: opt unique
        ties = torch.nonzero(top2[:, 0] == top2[:, 1]).flatten().tolist()
        if ties:
            holds, detail = False, detail + f"; optimal token not unique in sequences {ties[:5]}"
    return AssumptionReport(
        name="separability (A1, W-SVM feasible)",
        holds=holds,
        measured=margin,
        threshold=SEPARABLE_TOL,
        detail=detail,
    )
