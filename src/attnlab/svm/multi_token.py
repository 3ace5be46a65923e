"""Programs of multi-token selection: the set-direction SVM, the finite part, and the SVM-equivalence direction.

Spec: multi-token §3 (the three programs), §4 (KKT certificates), after Tarzanagh, Li, Thrampoulidis and Oymak,
"Transformers as Support Vector Machines" (arXiv 2308.16898), Section 6 (SVM-equivalence, a conjecture there).

With token sets ``O_i`` (:mod:`attnlab.data.token_sets`):

- the **direction program** ``min ||W|| s.t. (x_{i,tau} - x_{i,t})^T W z_i >= 1`` for ``tau in O_i``,
  ``t not in O_i``, and ``(x_{i,tau} - x_{i,tau'})^T W z_i = 0`` for ``tau, tau' in O_i``;
- the **finite part** ``min ||W_fin|| s.t. (x_{i,tau'} - x_{i,tau})^T W_fin z_i = log(s_{i,tau'} / s_{i,tau})``
  for ``tau, tau' in O_i``;
- the **equivalence direction** ``W_fin + R W_dir`` with ``R`` the least-squares fit to a trained ``W``.

Both programs are ``min ||x|| s.t. M vec(x) >= 1, E vec(x) = b``: one solve routine (cvxpy, the same tolerances as
:func:`~attnlab.svm.attention_svm`) on unit-scaled constraint vectors and on the spans of the token differences and
queries (exact for the Frobenius and nuclear norms), certified by its own KKT residual. Within a set only the
differences to its first token are constrained: the other pairs are their differences, so the feasible set is the
same as with all pairs and the equality rows stay independent.

A set may be its whole sequence (the source's notebook keeps such runs): that sequence has no token outside its set,
so it contributes equalities only. The programs warn with :class:`~attnlab.svm.errors.WholeSequenceWarning`, naming
those sequences, and the direction program is refused only when no sequence has a margin constraint.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import cvxpy as cp
import numpy as np
import torch

from attnlab._validation import ValidationError, check_tensor
from attnlab.data.dataset import TokenSelectionData
from attnlab.data.token_sets import HIGH, LOW, as_token_sets, refuse_no_margin, sets_from_probabilities, whole_sequences
from attnlab.models.functional import attention_logits, attention_probabilities
from attnlab.svm._program import (
    Equalities,
    ProgramSolution,
    check_data,
    check_solver,
    constraint_matrices,
    range_bases,
    refuse_empty_constraints,
    scaled_back,
    solve_margin_program,
    unit_scale,
)
from attnlab.svm.errors import InfeasibleProgramError, WholeSequenceWarning
from attnlab.svm.norms import Norm, as_norm

__all__ = ["EquivalenceResult", "SetProgramResult", "finite_part", "set_direction_svm", "svm_equivalence"]

_TIE_CAUSE = "a token of the set equals a token outside it (a tie), or the query z_i is zero"
_INFEASIBLE_CAUSE = (
    "the sets are not separable with equal logits inside each set: the constraints contradict each other (e.g. two "
    "sequences with the same query rank one token pair both ways); choose other sets"
)
# A zero equality row with |target| at most this is 0 = 0 (dropped); above it the finite part is infeasible.
_ZERO_TARGET = 1e-12


@dataclass(frozen=True, eq=False)
class SetProgramResult:
    """Solution of the direction program or the finite part.

    Attributes
    ----------
    W : torch.Tensor, shape (d, d_q), float64
    status : str
        cvxpy status (``"optimal"`` or ``"optimal_inaccurate"``; the KKT residual decides trust).
    margin : float
        Smallest ``(x_{i,tau} - x_{i,t})^T W z_i`` over ``tau in O_i, t not in O_i`` (1 at the direction
        program's optimum; ``inf`` for the finite part, which has no margins).
    norm_value : float
    pairs : torch.Tensor, shape (m, 3), int64
        The inequality constraints ``(i, tau, t)``.
    duals : torch.Tensor, shape (m,), float64
        Their multipliers (``>= 0``).
    equalities : torch.Tensor, shape (k, 3), int64
        The equality constraints ``(i, tau_0, tau)`` (``tau_0`` the set's first token).
    equality_duals : torch.Tensor, shape (k,), float64
        Their multipliers (any sign). With them, ``sum duals A - sum equality_duals E`` is ``W`` (``"fro"``) or a
        subgradient of ``||W||_*`` (``"nuc"``).
    kkt_residual : float
        Largest KKT defect (stationarity, complementarity, dual feasibility), relative.
    max_violation : float
        Worst violation of a margin (``(1 - margin)_+``) or an equality (``|E W - b|``).
    solver : str
    norm : {"fro", "nuc"}
    sets : torch.Tensor, shape (n, T), bool
    """

    W: torch.Tensor
    status: str
    margin: float
    norm_value: float
    pairs: torch.Tensor
    duals: torch.Tensor
    equalities: torch.Tensor
    equality_duals: torch.Tensor
    kkt_residual: float
    max_violation: float
    solver: str
    norm: str
    sets: torch.Tensor


@dataclass(frozen=True, eq=False)
class EquivalenceResult:
    """The SVM-equivalence direction of a trained ``W`` and its parts.

    Attributes
    ----------
    W : torch.Tensor, shape (d, d_q), float64
        ``W_fin + R W_dir``.
    R : float
        ``argmin_R ||W_fin + R W_dir - W_trained||_F``.
    direction, finite : SetProgramResult
        The direction program and the finite part.
    sets : torch.Tensor, shape (n, T), bool
    """

    W: torch.Tensor
    R: float
    direction: SetProgramResult
    finite: SetProgramResult
    sets: torch.Tensor


def _set_rows(
    data: TokenSelectionData, sets: torch.Tensor
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Constraint vectors: ``pairs (m, 3)``, ``diff (m, d)`` = ``x_tau - x_t``, ``queries (m, d_q)``, and the
    equality rows ``equalities (k, 3)``, ``eq_diff (k, d)`` = ``x_tau - x_tau0``, ``eq_queries (k, d_q)``."""
    X, Z, mask = data.X.numpy(), data.Z.numpy(), sets.numpy()
    pairs, equalities = [], []
    for i in range(data.n):
        inside, outside = np.flatnonzero(mask[i]), np.flatnonzero(~mask[i])
        pairs += [(i, tau, t) for tau in inside for t in outside]
        equalities += [(i, inside[0], tau) for tau in inside[1:]]
    pairs_a = np.asarray(pairs, dtype=np.int64).reshape(-1, 3)
    eq_a = np.asarray(equalities, dtype=np.int64).reshape(-1, 3)
    diff = X[pairs_a[:, 0], pairs_a[:, 1]] - X[pairs_a[:, 0], pairs_a[:, 2]]
    eq_diff = X[eq_a[:, 0], eq_a[:, 2]] - X[eq_a[:, 0], eq_a[:, 1]]
    return pairs_a, diff, Z[pairs_a[:, 0]], eq_a, eq_diff, Z[eq_a[:, 0]]


def _solve(
    diff: np.ndarray,
    queries: np.ndarray,
    eq_diff: np.ndarray,
    eq_queries: np.ndarray,
    target: np.ndarray,
    norm: Norm,
    solver: str,
    *,
    what: str,
    labels: list[str],
) -> ProgramSolution:
    """``min ||W|| s.t. <A_k, W> >= 1, <E_j, W> = target_j`` by the programs' one solver, ``x`` the ``(d, d_q)`` ``W``.

    Solved at unit scale on the spans of the differences and the queries (both exact for unitarily invariant norms;
    :func:`~attnlab.svm._program.range_bases`), then scaled back: ``W(a X, b Z) = W(X, Z) / (a b)``.
    """
    d, d_q = diff.shape[1], queries.shape[1]  # multi-token §8: W is (d, d_q)
    all_diff, all_queries = np.concatenate([diff, eq_diff]), np.concatenate([queries, eq_queries])
    if len(all_diff) == 0:  # no constraint at all (singleton sets in the finite part): the minimiser is 0
        zero = np.zeros(0)
        return ProgramSolution(np.zeros((d, d_q)), zero, zero, cp.OPTIMAL, solver, 0.0, 0.0)
    (unit_diff, a), (unit_queries, b) = unit_scale(all_diff), unit_scale(all_queries)
    U, V = range_bases(unit_diff, unit_queries)
    m, r = len(diff), U.shape[1] * V.shape[1]
    M = constraint_matrices(unit_diff[:m] @ U, unit_queries[:m] @ V).reshape(m, r)  # <A_k, U What V^T>
    E = constraint_matrices(unit_diff[m:] @ U, unit_queries[m:] @ V).reshape(-1, r)  # multi-token §3: equal logits
    if m:
        refuse_empty_constraints(M, labels, _TIE_CAUSE)
    equalities = Equalities(E, target) if len(E) else None
    shape = (U.shape[1], V.shape[1])
    solution = solve_margin_program(M, shape, norm, solver, what=what, cause=_INFEASIBLE_CAUSE, equalities=equalities)
    W = U @ solution.x @ V.T / a / b  # back on the data's scale; the larger scale first never overflows here
    return replace(scaled_back(solution, (a, b), norm, what), x=W)


def _result(
    solution: ProgramSolution,
    rows: tuple[np.ndarray, ...],
    target: np.ndarray,
    norm: Norm,
    sets: torch.Tensor,
    *,
    with_margins: bool,
) -> SetProgramResult:
    pairs, diff, queries, equalities, eq_diff, eq_queries = rows
    W = solution.x
    values = np.einsum("kd,de,ke->k", diff, W, queries) if with_margins else np.zeros(0)
    eq_values = np.einsum("kd,de,ke->k", eq_diff, W, eq_queries)
    violation = max(float(np.max(1.0 - values, initial=0.0)), float(np.max(np.abs(eq_values - target), initial=0.0)))
    return SetProgramResult(
        W=torch.from_numpy(np.ascontiguousarray(W)),
        status=solution.status,
        margin=float(values.min()) if values.size else float("inf"),
        norm_value=norm.value(W),
        pairs=torch.from_numpy(pairs if with_margins else pairs[:0]),
        duals=torch.from_numpy(solution.duals),
        equalities=torch.from_numpy(equalities),
        equality_duals=torch.from_numpy(solution.equality_duals),
        kkt_residual=solution.kkt_residual,
        max_violation=violation,
        solver=solution.solver,
        norm=norm.label,
        sets=sets.clone(),
    )


def _inputs(
    data: object, sets: object, norm: object, solver: object
) -> tuple[TokenSelectionData, torch.Tensor, Norm, str]:
    data = check_data(data)
    norm = as_norm(norm)
    if not norm.unitarily_invariant:  # solved on the spans of the differences and queries (exact only then)
        raise ValidationError(f'norm == {norm.label!r}, must be "fro" or "nuc" (a unitarily invariant norm)')
    mask = as_token_sets(sets, data.n, data.T, name="sets")
    return data, mask, norm, check_solver(solver)


def _warn_whole(mask: torch.Tensor, what: str, stacklevel: int = 3) -> None:
    """Warn, naming them, about the sequences whose set is the whole sequence (multi-token §2)."""
    whole = whole_sequences(mask)
    if whole:
        shown = ", ".join(map(str, whole[:8])) + (f" and {len(whole) - 8} more" if len(whole) > 8 else "")
        warnings.warn(
            f"{what}: the token sets of sequences [{shown}] hold the whole sequence (all {mask.shape[1]} tokens); "
            "they contribute equal logits only (no margin), as in the source's program. Dropping those sequences "
            "is a different program with another direction",
            WholeSequenceWarning,
            stacklevel=stacklevel,
        )


def set_direction_svm(
    data: TokenSelectionData, sets: object, norm: str = "fro", solver: str | None = None
) -> SetProgramResult:
    """The direction program of token sets: ``min ||W||`` with margin 1 between each set and the rest of its
    sequence, and equal logits inside each set.

    Spec: multi-token §3.1 (the max-margin direction of multi-token selection).

    Parameters
    ----------
    data : TokenSelectionData
    sets : array-like of bool, shape (n, T), or sequence of n sequences of int
        The sets ``O_i`` (:func:`~attnlab.data.token_sets.as_token_sets`).
    norm : {"fro", "nuc"}, default="fro"
    solver : {"CLARABEL", "SCS"}, optional

    Returns
    -------
    SetProgramResult

    Raises
    ------
    InfeasibleProgramError
        When no ``W`` separates the sets with equal logits inside them, or a token of a set equals one outside it
        (the constraint reads ``0 >= 1``; the message names the sequence and tokens).
    ValidationError
        On a bad ``norm``, ``solver`` or ``sets`` (an empty set), or when every set is its whole sequence (no
        margin constraint is left).

    Warns
    -----
    WholeSequenceWarning
        When some sets are their whole sequence: those sequences contribute equalities only (the message names
        them).

    Notes
    -----
    With one token per set this is :func:`~attnlab.svm.attention_svm` (no equalities).

    Examples
    --------
    >>> X = torch.eye(3, dtype=torch.float64).repeat(2, 1, 1)
    >>> data = TokenSelectionData(X, Z=[[1.0, 0, 0], [0, 1.0, 0]], y=[1, -1])
    >>> round(set_direction_svm(data, [[0, 1], [1]]).margin, 6)
    1.0
    """
    data, mask, norm, solver = _inputs(data, sets, norm, solver)
    refuse_no_margin(mask, "set-direction SVM")  # multi-token §3.1: whole-sequence sets add equalities only
    _warn_whole(mask, "set-direction SVM")
    return _direction(data, mask, norm, solver)


def _direction(data: TokenSelectionData, mask: torch.Tensor, norm: Norm, solver: str) -> SetProgramResult:
    """:func:`set_direction_svm` on validated inputs with a margin constraint somewhere (no warning)."""
    what = f"set-direction SVM (norm={norm.label!r}, n={data.n}, T={data.T}, d={data.d})"
    rows = _set_rows(data, mask)
    pairs = rows[0]
    labels = [f"(sequence i={i}: tau={tau} in the set, t={t} outside)" for i, tau, t in pairs]
    target = np.zeros(len(rows[3]))
    solution = _solve(rows[1], rows[2], rows[4], rows[5], target, norm, solver, what=what, labels=labels)
    return _result(solution, rows, target, norm, mask, with_margins=True)


def finite_part(
    data: TokenSelectionData,
    sets: object,
    log_probabilities: object,
    norm: str = "fro",
    solver: str | None = None,
) -> SetProgramResult:
    """The finite part: the smallest ``W_fin`` whose logits reproduce the log-ratios of the softmax inside each set.

    Spec: multi-token §3.2.

    Parameters
    ----------
    data : TokenSelectionData
    sets : array-like of bool, shape (n, T), or sequence of n sequences of int
    log_probabilities : array-like, shape (n, T)
        ``log s_{i,t}`` of the trained model (only differences inside each set are read, so logits work too).
    norm : {"fro", "nuc"}, default="fro"
    solver : {"CLARABEL", "SCS"}, optional

    Returns
    -------
    SetProgramResult
        ``margin`` is ``inf`` (no margins); ``max_violation`` is the worst ``|logit gap - log-ratio|``.

    Raises
    ------
    InfeasibleProgramError
        When no matrix reproduces the log-ratios (possible only for log-probabilities not made by one ``W``).

    Warns
    -----
    WholeSequenceWarning
        When some sets are their whole sequence (the message names them): every logit gap there is fixed.
    """
    data, mask, norm, solver = _inputs(data, sets, norm, solver)
    log_s = check_tensor("log_probabilities", log_probabilities, "nT", {"n": data.n, "T": data.T})
    _warn_whole(mask, "finite part")
    return _finite(data, mask, log_s, norm, solver)


def _finite(
    data: TokenSelectionData, mask: torch.Tensor, log_s: torch.Tensor, norm: Norm, solver: str
) -> SetProgramResult:
    """:func:`finite_part` on validated inputs (no warning)."""
    log_s = log_s.numpy()
    rows = _set_rows(data, mask)
    equalities = rows[3]
    target = log_s[equalities[:, 0], equalities[:, 2]] - log_s[equalities[:, 0], equalities[:, 1]]  # log(s'/s)
    zero = np.abs(rows[4]).max(axis=1, initial=0.0) == 0.0
    if bool((np.abs(target[zero]) > _ZERO_TARGET).any()):
        i, tau0, tau = equalities[zero][np.abs(target[zero]) > _ZERO_TARGET][0]
        raise InfeasibleProgramError(
            f"the finite part is infeasible: in sequence {i} tokens {tau0} and {tau} are equal but their "
            "log-probabilities differ; pass log-probabilities of a model of these tokens"
        )
    keep = ~zero  # equal tokens inside a set: 0 = 0, no constraint
    rows = (rows[0][:0], rows[1][:0], rows[2][:0], equalities[keep], rows[4][keep], rows[5][keep])
    what = f"finite part (norm={norm.label!r}, n={data.n}, T={data.T}, d={data.d})"
    solution = _solve(rows[1], rows[2], rows[4], rows[5], target[keep], norm, solver, what=what, labels=[])
    return _result(solution, rows, target[keep], norm, mask, with_margins=False)


def svm_equivalence(
    data: TokenSelectionData,
    W: object,
    sets: object = None,
    norm: str = "fro",
    *,
    low: float = LOW,
    high: float = HIGH,
    solver: str | None = None,
) -> EquivalenceResult:
    """The SVM-equivalence direction ``W_fin + R W_dir`` of a trained ``W``.

    Spec: multi-token §3.3 (the source's Conjecture: trained attention ~ ``W_fin + ||W|| W_dir / ||W_dir||``).

    Parameters
    ----------
    data : TokenSelectionData
    W : array-like, shape (d, d_q)
        The trained combined matrix.
    sets : optional
        The sets ``O_i``; default read off the softmax at ``W`` with :func:`sets_from_probabilities`.
    norm : {"fro", "nuc"}, default="fro"
    low, high : float, default=1e-6, 1e-3
        Thresholds when ``sets`` is not given.
    solver : {"CLARABEL", "SCS"}, optional

    Returns
    -------
    EquivalenceResult

    Raises
    ------
    ValidationError
        On a bad ``W``, ``norm`` or ``sets``; when ``sets`` is not given, on a softmax with a weight between the
        thresholds or one saturated nowhere (:func:`sets_from_probabilities`).
    InfeasibleProgramError
        When the direction program or the finite part has no solution.

    Warns
    -----
    WholeSequenceWarning
        When some sets are their whole sequence (once, naming them): those sequences contribute equalities only.

    Notes
    -----
    ``R = <W - W_fin, W_dir> / ||W_dir||_F^2`` (least squares in closed form; the source fits it with cvxpy).
    The finite part's log-ratios are the trained logit gaps ``(x_{i,tau'} - x_{i,tau})^T W z_i`` (log-softmax
    differences are logit differences), so they stay exact however saturated the softmax is.
    """
    data = check_data(data)
    W_t = check_tensor("W", W, "dq", {"d": data.d, "q": data.d_q})
    logits = attention_logits(data.X, W_t, data.Z)  # (n, T): log s up to a per-sequence constant
    if sets is None:
        sets = sets_from_probabilities(attention_probabilities(data.X, W_t, data.Z), low, high)
    data, mask, norm, solver = _inputs(data, sets, norm, solver)
    refuse_no_margin(mask, "SVM-equivalence")  # multi-token §3.1: the direction needs a margin somewhere
    _warn_whole(mask, "SVM-equivalence")
    direction = _direction(data, mask, norm, solver)
    finite = _finite(data, mask, logits, norm, solver)
    W_dir, W_fin = direction.W, finite.W
    R = float(((W_t - W_fin) * W_dir).sum() / (W_dir * W_dir).sum())  # multi-token §3.3: least-squares R
    return EquivalenceResult(W_fin + R * W_dir, R, direction, finite, direction.sets)
