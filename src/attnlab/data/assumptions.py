"""The papers' data assumptions as predicates that measure, compare with a threshold, and explain.

Spec: implicit-bias-ngd §7, mirror-descent-lp §7, kq-nuclear-norm §5. (Separability, i.e. feasibility of the
attention SVM, is checked by :mod:`attnlab.svm`.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from attnlab._numerics import log_mean_exp
from attnlab._validation import ValidationError, check_scalar, check_tensor
from attnlab.data.dataset import TokenSelectionData

__all__ = [
    "ASSUMPTIONS",
    "AssumptionReport",
    "assumption4_geometry",
    "check_assumptions",
    "condition1",
    "default_assumptions",
    "equal_nonopt_scores",
    "near_orthogonal",
    "small_init",
    "small_initial_loss",
    "unique_optimal_token",
]


@dataclass(frozen=True)
class AssumptionReport:
    """The outcome of one assumption check.

    Attributes
    ----------
    name : str
        The assumption, with its paper's label.
    holds : bool
        Whether the data satisfy it.
    measured : float
        The measured quantity (see ``detail`` for what it is and which way the comparison goes).
    threshold : float
        The bound it was compared with.
    detail : str
        What was measured, the comparison, and any diagnostics.
    """

    name: str
    holds: bool
    measured: float
    threshold: float
    detail: str

    def __str__(self) -> str:
        mark = "holds" if self.holds else "FAILS"
        return f"[{mark}] {self.name}: measured {self.measured:.6g}, threshold {self.threshold:.6g} -- {self.detail}"


def _check_data(data: object) -> TokenSelectionData:
    if not isinstance(data, TokenSelectionData):
        raise ValidationError(
            f"data must be a TokenSelectionData, got {type(data).__name__}; wrap arrays with TokenSelectionData(X, y=...)"
        )
    return data


def _unit_scaled(data: TokenSelectionData) -> TokenSelectionData:
    """``X / max |X|`` and ``Z / max |Z|`` (the head, labels and selection kept): for the scale-free checks.

    Cosines and kappa do not depend on the scale of the tokens, but computed on tokens of size 1e300 their Gram
    entries and norms overflow (cosine 0, kappa nan), and on tokens of size 1e-300 they underflow (0 / 0).
    """
    sx, sz = float(data.X.abs().max()), float(data.Z.abs().max())
    X = data.X / sx if sx > 0 else data.X
    Z = data.Z / sz if sz > 0 else data.Z
    return TokenSelectionData(X, Z=Z, y=data.y, v=data.v, select=data.select)  # scores scale by 1/sx > 0: same argmax


def _one_token_select(data: TokenSelectionData) -> torch.Tensor | None:
    """The stored selection when it is one token per sequence, ``(n,)``; None when there is none.

    These checks are about one optimal token per sequence (the papers' assumptions); token sets (an ``(n, T)``
    mask, multi-token §2) name no such token, so a check that needs one refuses them instead of indexing with the
    mask. ``attnlab data check`` reports on the sets apart and checks the head's optimal tokens.
    """
    if data.select is None:
        return None
    if data.select.dim() == 2:
        raise ValidationError(
            f"this check needs one optimal token per sequence, but data.select holds token sets (an ({data.n}, "
            f"{data.T}) mask); pass data.with_(select=tokens) with one token index per sequence, or "
            "data.with_(select=None) to check the head's optimal tokens (or the default of the check)"
        )
    return data.select


def _opt_tokens(data: TokenSelectionData) -> torch.Tensor:
    """Optimal tokens from the head when there is one, else the stored selection; shape (n,), int64."""
    if data.v is not None:
        return data.optimal_tokens()
    select = _one_token_select(data)
    if select is not None:
        return select
    raise ValidationError(
        "this check needs the optimal tokens: give the data a head v or a select (one index per sequence)"
    )


def _check_W(W0: object, data: TokenSelectionData) -> torch.Tensor:  # noqa: N802 (the spec's symbol)
    """``W0`` of shape ``(d, d_q)`` (multi-token §8: rectangular for cross-attention), default zeros."""
    if W0 is None:
        return torch.zeros(data.d, data.d_q, dtype=torch.float64)
    return check_tensor("W0", W0, "dq", {"d": data.d, "q": data.d_q})


def _logits(data: TokenSelectionData, W: torch.Tensor) -> torch.Tensor:
    return torch.einsum("ntd,de,ne->nt", data.X, W, data.Z)  # kq-nuclear-norm §1: g_i = X_i W z_i, (n, T)


def unique_optimal_token(data: TokenSelectionData, tol: float = 0.0) -> AssumptionReport:
    """Each sequence has one token of strictly highest score.

    Spec: implicit-bias-ngd §7 ("unique opt"), kq-nuclear-norm §5 (A1, first half).

    Parameters
    ----------
    data : TokenSelectionData
        With a head ``v``.
    tol : float, default=0.0
        Holds when the smallest top-two score gap exceeds ``tol``.

    Returns
    -------
    AssumptionReport
        ``measured = min_i (gamma_{i,opt} - max_{t != opt} gamma_{i,t})``.
    """
    data = _check_data(data)
    check_scalar("tol", tol, low=0.0)
    top2 = data.token_scores().topk(2, dim=1).values  # (n, 2)
    gaps = top2[:, 0] - top2[:, 1]  # spec implicit-bias-ngd §7: gamma_opt - max_{t != opt} gamma_t
    worst = int(gaps.argmin())
    measured = float(gaps[worst])
    return AssumptionReport(
        name="unique optimal token",
        holds=measured > tol,
        measured=measured,
        threshold=tol,
        detail=f"smallest gap between the top two token scores (sequence {worst}); must be > threshold",
    )


def _kappas(data: TokenSelectionData, opt: torch.Tensor | None) -> tuple[float, float]:
    """kappa and kappa' of A1; kappa' is nan when the optimal tokens are unknown."""
    n, T, d = data.n, data.T, data.d
    F = data.X.reshape(n * T, d)  # every token, (nT, d)
    G = F @ F.T  # Gram matrix, (nT, nT)
    min_sq_norm = float(torch.diagonal(G).min())
    off = ~torch.eye(n * T, dtype=torch.bool)
    kappa = float(G[off].abs().max()) / min_sq_norm if min_sq_norm > 0 else math.inf  # spec §7: A1 kappa
    if opt is None:
        return kappa, math.nan
    is_opt = torch.zeros(n, T, dtype=torch.bool)
    is_opt[torch.arange(n), opt] = True
    is_opt = is_opt.reshape(n * T)
    keep = off & ~(is_opt[:, None] & is_opt[None, :])  # pairs that are not both optimal tokens
    if not bool(keep.any()):
        return kappa, 0.0
    kappa_prime = float(G[keep].abs().max()) / min_sq_norm if min_sq_norm > 0 else math.inf  # spec §7: kappa'
    return kappa, kappa_prime


def near_orthogonal(data: TokenSelectionData, C: float = 1.0, exclude_opt_pairs: bool = False) -> AssumptionReport:  # noqa: N803
    """Assumption 1 (near-orthogonal tokens) with the kappa and kappa' diagnostics.

    Spec: implicit-bias-ngd §7 (A1; the paper's inequality and constant were lost, the form is ours [R, low]).

    Parameters
    ----------
    data : TokenSelectionData
    C : float, default=1.0
        Holds when ``kappa * n * T <= 1 / C``.
    exclude_opt_pairs : bool, default=False
        Gate on ``kappa'`` (pairs of two optimal tokens left out), for the antipodal Example 1; needs a head or a
        ``select`` of one token per sequence (token sets are refused; without it they leave ``kappa'`` unknown).

    Returns
    -------
    AssumptionReport
        ``measured = kappa * n * T`` (or ``kappa' * n * T``) with
        ``kappa = max_{(i,t) != (j,tau)} |<x_{i,t}, x_{j,tau}>| / min_{(i,t)} ||x_{i,t}||^2``.

    Notes
    -----
    Worst-case bound: the defaults of Example 1 give ``kappa n T ~ 27`` yet NGD converges there, so treat A1 as a
    diagnostic rather than a gate (§7).
    The Gram matrix of all ``n T`` tokens is formed, so memory grows as ``(n T)^2``: meant for theory-sized data.
    """
    data = _unit_scaled(_check_data(data))  # kappa is scale-free
    check_scalar("C", C, low=0.0, low_inclusive=False)
    sets = data.select is not None and data.select.dim() == 2  # token sets name no optimal token (multi-token §2)
    known = exclude_opt_pairs or data.v is not None or (data.select is not None and not sets)
    opt = _opt_tokens(data) if known else None  # without a head or a one-token selection kappa' is unknown (nan)
    kappa, kappa_prime = _kappas(data, opt)
    used = kappa_prime if exclude_opt_pairs else kappa
    measured = used * data.n * data.T  # spec §7: A1 holds if kappa n T <= 1/C
    which = "kappa'" if exclude_opt_pairs else "kappa"
    return AssumptionReport(
        name="A1 near-orthogonal tokens",
        holds=measured <= 1.0 / C,
        measured=measured,
        threshold=1.0 / C,
        detail=f"{which} * n * T must be <= 1/C; kappa = {kappa:.4g}, kappa' (opt pairs left out) = {kappa_prime:.4g}",
    )


def equal_nonopt_scores(data: TokenSelectionData, tol: float = 1e-9) -> AssumptionReport:
    """Assumption 2: in every sequence the non-optimal tokens share one score, below the optimal one.

    Spec: implicit-bias-ngd §7 (A2), kq-nuclear-norm §5 (A2).

    Parameters
    ----------
    data : TokenSelectionData
        With a head ``v``.
    tol : float, default=1e-9
        Absolute tolerance on the spread of the non-optimal scores (the generators reach ~1e-15).

    Returns
    -------
    AssumptionReport
        ``measured = max_i (max_{t != opt} gamma_{i,t} - min_{t != opt} gamma_{i,t})``; holds when it is
        ``<= tol`` and every optimal token beats the others by more than ``tol``.
    """
    data = _check_data(data)
    check_scalar("tol", tol, low=0.0)
    scores = data.token_scores()  # (n, T)
    opt = scores.argmax(dim=1)
    is_opt = torch.zeros_like(scores, dtype=torch.bool)
    is_opt[torch.arange(data.n), opt] = True
    hi = scores.masked_fill(is_opt, -math.inf).max(dim=1).values  # max_{t != opt} gamma, (n,)
    lo = scores.masked_fill(is_opt, math.inf).min(dim=1).values  # min_{t != opt} gamma, (n,)
    spread = float((hi - lo).max())  # spec §7: A2 spread
    gap = float((scores.max(dim=1).values - hi).min())
    return AssumptionReport(
        name="A2 equal non-optimal scores",
        holds=spread <= tol and gap > tol,
        measured=spread,
        threshold=tol,
        detail=f"largest spread of the non-optimal scores must be <= tol; smallest optimal gap {gap:.4g} must be > tol",
    )


def small_initial_loss(data: TokenSelectionData, W0: object = None) -> AssumptionReport:  # noqa: N803
    """Assumption 3 of the nuclear-norm paper: the initial exponential loss is below every one-mistake loss.

    Spec: kq-nuclear-norm §5 (A3), §2 (loss).

    Parameters
    ----------
    data : TokenSelectionData
        With a head ``v``.
    W0 : array-like, shape (d, d), optional
        Initial combined weights ``K(0) Q(0)^T``; default 0 (``beta(0) = 0``, init (5)).

    Returns
    -------
    AssumptionReport
        ``measured = L(W0) = (1/n) sum_i exp(-gamma_i^T softmax(X_i W0 z_i))``;
        ``threshold = min_j (1/n) (exp(-gamma_{j,nopt}) + sum_{i != j} exp(-gamma_{i,opt}))``; holds when
        ``measured <= threshold``.

    Notes
    -----
    Both sides are computed in the log domain (log-softmax, log-sum-exp). ``gamma_{j,nopt}`` is the largest
    non-optimal score (equal to the common one under A2). With ``W0 = 0`` and identical scores the condition reads
    ``n exp(-Delta / L) <= 1 + (n - 1) exp(-Delta)``.
    """
    data = _check_data(data)
    W = _check_W(W0, data)
    scores = data.token_scores()  # (n, T)
    margin = (scores * torch.softmax(_logits(data, W), dim=1)).sum(dim=1)  # spec §2: y_i f_i = gamma_i^T sigma(g_i)
    log_loss = log_mean_exp(-margin, dim=0)  # spec §2: log L = log (1/n) sum exp(-y f)
    top2 = scores.topk(2, dim=1).values  # (n, 2): gamma_opt, gamma_nopt
    a = -top2[:, 0]  # -gamma_{i,opt}, (n,)
    M = a[None, :].expand(data.n, data.n).clone()
    M.diagonal().copy_(-top2[:, 1])  # row j: -gamma_{j,nopt} at i = j, -gamma_{i,opt} elsewhere
    log_bound = log_mean_exp(M, dim=1).min()  # spec §5: A3 right-hand side
    return AssumptionReport(
        name="A3 small initial loss",
        holds=bool(log_loss <= log_bound),
        measured=float(torch.exp(log_loss)),
        threshold=float(torch.exp(log_bound)),
        detail=f"L(W0) must be <= min_j one-mistake loss; log L(W0) = {float(log_loss):.6g}, log bound = {float(log_bound):.6g}",
    )


def small_init(data: TokenSelectionData, W0: object, eps0: float = 0.1) -> AssumptionReport:  # noqa: N803
    """Small initialisation: every initial logit is at most ``eps0`` in size.

    Spec: implicit-bias-ngd §7 (small init, Lemma 4; the constant was lost, ``eps0 = 0.1`` is ours).

    Parameters
    ----------
    data : TokenSelectionData
    W0 : array-like, shape (d, d)
        Initial combined weights.
    eps0 : float, default=0.1
        Bound on ``max_{i,t} |s_{i,t}(W0)|``.

    Returns
    -------
    AssumptionReport
        ``measured = max_{i,t} |x_{i,t}^T W0 z_i|``; holds when ``<= eps0``.
    """
    data = _check_data(data)
    W = _check_W(W0, data)
    check_scalar("eps0", eps0, low=0.0)
    measured = float(_logits(data, W).abs().max())  # spec §7: max |s_{i,t}(W0)|
    return AssumptionReport(
        name="small initialisation",
        holds=measured <= eps0,
        measured=measured,
        threshold=eps0,
        detail="largest initial logit |x^T W0 z| must be <= eps0",
    )


def _pair_residuals(others: torch.Tensor, x_opt: torch.Tensor) -> tuple[float, list[float]]:
    """Greedy pairing of the non-optimal tokens of one sequence; returns (worst residual, pair centres c).

    A pair (a, b) fits A4 (iii) when both project equally on ``x_opt`` and their orthogonal parts cancel, so the
    residual is ``max(|p_a - p_b| ||x_opt||, ||w_a + w_b||)`` divided by the sequence's largest token norm.
    """
    sq = float(x_opt @ x_opt)
    p = others @ x_opt / sq  # projection coefficients, (T - 1,)
    w = others - p[:, None] * x_opt  # parts orthogonal to x_opt, (T - 1, d)
    scale = max(float(torch.linalg.vector_norm(others, dim=1).max()), math.sqrt(sq))
    left = list(range(others.shape[0]))
    worst, centres = 0.0, []
    while len(left) >= 2:
        a = left.pop(0)
        res = [
            max(abs(float(p[a] - p[b])) * math.sqrt(sq), float(torch.linalg.vector_norm(w[a] + w[b]))) / scale
            for b in left
        ]
        k = min(range(len(left)), key=res.__getitem__)
        b = left.pop(k)
        worst = max(worst, res[k])
        centres.append(float(p[a] + p[b]) / 2)  # spec §5: x_a + x_b = 2 c x_opt
    return worst, centres


def assumption4_geometry(data: TokenSelectionData, tol: float = 1e-8) -> AssumptionReport:
    """Assumption 4 of the nuclear-norm paper: orthogonal optimal tokens and queries, aligned, paired others.

    Spec: kq-nuclear-norm §5 (A4 (i)-(iii), pairing test).

    Parameters
    ----------
    data : TokenSelectionData
        With a head ``v`` (optimal tokens by score) or a ``select``.
    tol : float, default=1e-8
        Tolerance on every (scale-free) violation.

    Returns
    -------
    AssumptionReport
        ``measured`` = the largest violation among (i) ``|cos|`` between optimal tokens of different sequences and
        between their queries, (ii) ``1 - |cos(x_{i,opt}, z_i)|``, (iii) the pairing residual; holds when it is
        ``<= tol``, ``T`` is odd and every pair centre ``c`` lies in [-1, 1).
    """
    data = _unit_scaled(_check_data(data))  # every violation is scale-free
    if data.d_q != data.d:
        raise ValidationError(
            f"assumption 4 aligns each optimal token with its query, but the tokens have width d = {data.d} and the "
            f"queries d_q = {data.d_q} (cross-attention, multi-token §8); it does not apply to these data: leave A4 out (--which on the command line)"
        )
    check_scalar("tol", tol, low=0.0)
    opt = _opt_tokens(data)
    rows = torch.arange(data.n)
    x_opt = data.X[rows, opt]  # (n, d)
    unit_x = x_opt / torch.linalg.vector_norm(x_opt, dim=1, keepdim=True)
    unit_z = data.Z / torch.linalg.vector_norm(data.Z, dim=1, keepdim=True)
    off = ~torch.eye(data.n, dtype=torch.bool)
    cos_x = float((unit_x @ unit_x.T)[off].abs().max()) if data.n > 1 else 0.0  # spec §5: A4 (i) tokens
    cos_z = float((unit_z @ unit_z.T)[off].abs().max()) if data.n > 1 else 0.0  # spec §5: A4 (i) queries
    align = float((1 - (unit_x * unit_z).sum(dim=1).abs()).clamp_min(0).max())  # spec §5: A4 (ii) |x^T z| = ||x|| ||z||
    odd = data.T % 2 == 1
    pairing, centres = 0.0, []
    if odd:
        for i in range(data.n):
            keep = torch.arange(data.T) != opt[i]
            worst, cs = _pair_residuals(data.X[i][keep], x_opt[i])  # spec §5: A4 (iii) pairing test
            pairing = max(pairing, worst)
            centres.extend(cs)
    c_ok = all(-1.0 - tol <= c < 1.0 for c in centres)
    measured = max(cos_x, cos_z, align, pairing)
    problems = []
    if not odd:
        problems.append(f"T = {data.T} is even, A4 (iii) needs an odd number of tokens")
    if not c_ok:
        problems.append(f"pair centres c outside [-1, 1): range [{min(centres):.4g}, {max(centres):.4g}]")
    detail = (
        f"largest violation must be <= tol; (i) |cos| opt tokens {cos_x:.3g}, queries {cos_z:.3g}; "
        f"(ii) 1 - |cos(x_opt, z)| {align:.3g}; (iii) pairing residual {pairing:.3g}"
    )
    if problems:
        detail += "; " + "; ".join(problems)
    return AssumptionReport(
        name="A4 aligned geometry",
        holds=measured <= tol and odd and c_ok,
        measured=measured,
        threshold=tol,
        detail=detail,
    )


def condition1(
    data: TokenSelectionData,
    C: float = 1.0,  # noqa: N803 (the spec's symbol)
    u0: object = None,
    W0: object = None,  # noqa: N803
    a1_C: float | None = None,  # noqa: N803
) -> AssumptionReport:
    """Condition 1 of joint training on DM: zero init, optimal tokens longer than all others, (A1).

    Spec: implicit-bias-ngd §6.2 and §7 (Condition 1; constants lost, ``C = 1`` is ours).

    Parameters
    ----------
    data : TokenSelectionData
        The optimal token is ``select`` when stored (one token per sequence; token sets are refused), else
        position 0.
    C : float, default=1.0
        Holds when ``min_i ||x_{i,opt}||^2 / max_{i, t != opt} ||x_{i,t}||^2 >= C``.
    u0 : array-like, shape (d,), optional
        Initial head; None means the zero start of §4 A6.
    W0 : array-like, shape (d, d), optional
        Initial weights; None means zero.
    a1_C : float, optional
        Also require A1 with this constant; by default A1 is only reported (it fails at practical sizes, §7).

    Returns
    -------
    AssumptionReport
        ``measured`` = the norm ratio, ``threshold = C``.
    """
    data = _check_data(data)
    check_scalar("C", C, low=0.0, low_inclusive=False)
    select = _one_token_select(data)
    opt = select if select is not None else torch.zeros(data.n, dtype=torch.int64)
    sq = (data.X**2).sum(dim=2)  # ||x_{i,t}||^2, (n, T)
    is_opt = torch.zeros_like(sq, dtype=torch.bool)
    is_opt[torch.arange(data.n), opt] = True
    ratio = float(sq[is_opt].min() / sq[~is_opt].max())  # spec §7: min ||x_opt||^2 / max ||x_oth||^2
    u = torch.zeros(data.d, dtype=torch.float64) if u0 is None else check_tensor("u0", u0, "d", {"d": data.d})
    zero_init = bool((u == 0).all()) and bool((_check_W(W0, data) == 0).all())
    a1 = near_orthogonal(data, C=1.0 if a1_C is None else a1_C)
    holds = ratio >= C and zero_init and (a1_C is None or a1.holds)
    detail = (
        f"min ||x_opt||^2 / max ||x_other||^2 must be >= C; zero init: {zero_init}; "
        f"A1 kappa*n*T = {a1.measured:.4g} ({'required' if a1_C is not None else 'reported only'})"
    )
    return AssumptionReport(name="Condition 1 (DM)", holds=holds, measured=ratio, threshold=C, detail=detail)


#: Assumption name -> predicate taking ``(data, W0)``; used by :func:`check_assumptions` and ``attnlab data check``.
ASSUMPTIONS: dict[str, Callable[[TokenSelectionData, object], AssumptionReport]] = {
    "unique_opt": lambda data, W0: unique_optimal_token(data),
    "A1": lambda data, W0: near_orthogonal(data),
    "A2": lambda data, W0: equal_nonopt_scores(data),
    "A3": lambda data, W0: small_initial_loss(data, W0),
    "A4": lambda data, W0: assumption4_geometry(data),
    "small_init": lambda data, W0: small_init(data, _check_W(W0, data)),
    "condition1": lambda data, W0: condition1(data, W0=W0),
}


def default_assumptions(data: TokenSelectionData) -> list[str]:
    """The assumptions that apply to ``data``: what :func:`check_assumptions` and ``attnlab data check`` run.

    Parameters
    ----------
    data : TokenSelectionData

    Returns
    -------
    list of str
        ``unique_opt, A1, A2, A3, A4`` for data with a head, ``A1, condition1`` for data without one (the head is
        trained); A4 (the K,Q paper's aligned geometry) is left out for cross-attention data (``d_q != d``), where
        it does not apply.
    """
    if data.v is None:
        return ["A1", "condition1"]
    names = ["unique_opt", "A1", "A2", "A3", "A4"]
    return names if data.d_q == data.d else names[:-1]


def check_assumptions(
    data: TokenSelectionData,
    which: Sequence[str] | None = None,
    *,
    W0: object = None,  # noqa: N803
) -> list[AssumptionReport]:
    """Run several assumption predicates with their default thresholds.

    Spec: implicit-bias-ngd §7, kq-nuclear-norm §5.

    Parameters
    ----------
    data : TokenSelectionData
    which : sequence of str, optional
        Names from :data:`ASSUMPTIONS`. Default: :func:`default_assumptions` (``unique_opt, A1, A2, A3, A4`` for
        data with a head, without A4 on cross-attention data; ``A1, condition1`` for data without a head).
    W0 : array-like, shape (d, d), optional
        Initial weights for ``A3``, ``small_init`` and ``condition1``; default 0.

    Returns
    -------
    list of AssumptionReport
        One per name, in order.

    Raises
    ------
    ValidationError
        On an unknown name (the message lists the known ones), a check that needs a head the data lack, or one that
        needs one optimal token per sequence on data whose ``select`` holds token sets (``condition1``; A1's
        ``kappa'`` and A4 without a head): pass ``data.with_(select=None)`` to check without them.

    Examples
    --------
    >>> from attnlab.data import scores_equal
    >>> [r.holds for r in check_assumptions(scores_equal(seed=0), which=["A2", "A3"])]
    [True, True]
    """
    data = _check_data(data)
    if which is None:
        which = default_assumptions(data)
    if isinstance(which, str):
        which = [which]
    unknown = [name for name in which if name not in ASSUMPTIONS]
    if unknown:
        raise ValidationError(f"unknown assumption(s) {unknown}; known: {', '.join(ASSUMPTIONS)}")
    return [ASSUMPTIONS[name](data, W0) for name in which]
