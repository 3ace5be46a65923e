"""Data models of the key/query nuclear-norm paper: equal non-optimal scores, and the Assumption-4 geometry.

Spec: kq-nuclear-norm §6 (generators; both are ours [D], the paper has no experiments).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from attnlab._validation import ValidationError, check_scalar, check_tensor
from attnlab.data._random import check_entries, generator, random_labels, random_orthogonal
from attnlab.data.dataset import TokenSelectionData

__all__ = ["AlignedPairs", "aligned_pairs", "scores_equal"]


def scores_equal(
    n: int = 2,
    T: int = 3,
    d: int = 8,
    gap: float = 3.0,
    *,
    seed: int = 0,
) -> TokenSelectionData:
    """Gaussian tokens with the head's coordinate zeroed except on the optimal token: A1-A2 by construction.

    Spec: kq-nuclear-norm §6 (diagonal-case generator; defaults of experiment X2 in §9).

    Parameters
    ----------
    n : int, default=2
        Number of sequences.
    T : int, default=3
        Tokens per sequence (>= 2); kq-nuclear-norm writes ``L``.
    d : int, default=8
        Token dimension (>= 2). Take ``d > n (T - 1)`` so that the l1 and l2 max-margin solutions differ.
    gap : float, default=3.0
        Score of the optimal token; every other score is exactly 0. Raise it until A3 holds
        (:func:`attnlab.data.small_initial_loss`), roughly ``gap >~ T log n``.
    seed : int, default=0
        Seed of the ``torch.Generator``.

    Returns
    -------
    TokenSelectionData
        ``X`` (n, T, d), separate queries ``Z ~ N(0, I_d)`` (n, d), ``y`` (n,), head ``v = e_1`` (d,),
        ``select`` (n,) all 0 (the optimal token is the first).

    Notes
    -----
    ``X ~ N(0, I)``, then ``X[:, :, 0] = 0`` and ``X[i, 0, 0] = y_i gap``, so ``gamma_{i,0} = gap`` and
    ``gamma_{i,l} = 0`` for ``l > 0``.

    Examples
    --------
    >>> scores = scores_equal(seed=0).token_scores()  # (n, T)
    >>> bool((scores[:, 0] == 3.0).all()), bool((scores[:, 1:] == 0.0).all())
    (True, True)
    """
    check_scalar("n", n, kind=int, low=1)
    check_scalar("T", T, kind=int, low=2)
    check_scalar("d", d, kind=int, low=2)
    check_scalar("gap", gap, low=0.0, low_inclusive=False)
    check_entries("n T d", n * T * d, n=n, T=T, d=d)
    gen = generator(seed)
    y = random_labels(n, gen)  # spec §6: y_i ~ Unif{±1}
    X = torch.randn(n, T, d, generator=gen, dtype=torch.float64)  # spec §6: X ~ N(0, I), (n, T, d)
    X[:, :, 0] = 0.0  # spec §6: no token loads on v = e_1 ...
    X[:, 0, 0] = y * gap  # spec §6: ... except the optimal one, x_{i,opt,1} = y_i gap
    Z = torch.randn(n, d, generator=gen, dtype=torch.float64)  # spec §6: z_i ~ N(0, I_d)
    v = torch.zeros(d, dtype=torch.float64)
    v[0] = 1.0  # spec §6: v = e_1
    return TokenSelectionData(X, Z=Z, y=y, v=v, select=torch.zeros(n, dtype=torch.int64))


@dataclass(frozen=True)
class AlignedPairs:
    """A data set with the Assumption-4 geometry and the orthogonal frames that witness it.

    Spec: kq-nuclear-norm §3.2 (eq. 7) and §6.

    Attributes
    ----------
    data : TokenSelectionData
        ``X`` (n, 1 + 2 m_pairs, d), ``Z`` (n, d), ``y`` (n,), ``v`` (d,), ``select`` (n,) all 0.
    U_K : torch.Tensor, shape (d, d), float64
        Orthogonal; ``x_{i,opt} / ||x_{i,opt}|| = U_K[:, pi[i]]``.
    U_Q : torch.Tensor, shape (d, d), float64
        ``U_K`` with the columns of negative query signs flipped; ``z_i / ||z_i|| = U_Q[:, pi[i]]``.
    pi : torch.Tensor, shape (n,), int64
        The injective map from sequences to directions (here ``pi(i) = i``).
    """

    data: TokenSelectionData
    U_K: torch.Tensor  # noqa: N815 (the spec's symbol)
    U_Q: torch.Tensor  # noqa: N815
    pi: torch.Tensor


def _per_sequence(name: str, value: float | tuple[float, ...], n: int) -> torch.Tensor:
    """A scalar broadcast to (n,), or a length-n sequence, as float64."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        check_scalar(name, value)
        return torch.full((n,), float(value), dtype=torch.float64)
    return check_tensor(name, value, "n", {"n": n})


def aligned_pairs(
    n: int = 3,
    m_pairs: int = 2,
    d: int = 8,
    radii: float | tuple[float, ...] = 1.0,
    c: float | tuple[float, ...] = 0.0,
    score: float = 1.0,
    *,
    seed: int = 0,
) -> AlignedPairs:
    """Orthogonal optimal tokens and queries, non-optimal tokens in mirrored pairs: Assumptions 2 and 4 exactly.

    Spec: kq-nuclear-norm §6 (Assumption-4 generator), §5 (A4 (i)-(iii)).

    Parameters
    ----------
    n : int, default=3
        Number of sequences; needs ``n <= d - 1`` so that directions orthogonal to every optimal token remain.
    m_pairs : int, default=2
        Pairs of non-optimal tokens per sequence; ``T = 1 + 2 m_pairs`` tokens (odd, as A4 (iii) requires).
    d : int, default=8
        Token dimension.
    radii : float or tuple of n floats, default=1.0
        Norms ``r_i > 0`` of the optimal tokens.
    c : float or tuple of n floats, default=0.0
        Pair centres ``c_i`` in [-1, 1): ``x_{2k-1} + x_{2k} = 2 c_i x_{i,opt}``; the non-optimal scores are
        ``c_i * score``.
    score : float, default=1.0
        The optimal tokens' score ``gamma_{i,opt}`` (a scale on the head; ours, not in the spec's signature). With
        ``W0 = 0`` Assumption 3 needs a gap ``score (1 - c)`` of roughly ``T log n`` or more.
    seed : int, default=0
        Seed of the ``torch.Generator``.

    Returns
    -------
    AlignedPairs
        The data set (optimal token at position 0, query ``z_i = s_i U[:, i]`` with a random sign ``s_i``)
        and the frames ``U_K``, ``U_Q`` and map ``pi``.

    Raises
    ------
    ValidationError
        On ``n > d - 1``, data of more than ``2^26`` entries (``n (1 + 2 m_pairs) d + d^2``), non-positive radii,
        ``c`` outside [-1, 1), or wrong lengths of ``radii`` / ``c``.

    Notes
    -----
    ``U`` Haar-random orthogonal; ``x_{i,opt} = r_i U[:, i]``; for each pair ``w ~ N(0, I / (d - n))`` in the span
    of ``U[:, n:]`` and tokens ``c_i x_{i,opt} ± w``; head ``v = score * sum_i y_i x_{i,opt} / r_i^2``. Then
    ``gamma_{i,opt} = score`` and ``gamma_{i,l} = c_i score`` for every non-optimal ``l``.

    Examples
    --------
    >>> ap = aligned_pairs(seed=0)
    >>> scores = ap.data.token_scores()  # (n, 5): 1 on the optimal token, c = 0 on the others
    >>> float((scores[:, 0] - 1).abs().max()) < 1e-12, float(scores[:, 1:].abs().max()) < 1e-12
    (True, True)
    """
    check_scalar("n", n, kind=int, low=1)
    check_scalar("m_pairs", m_pairs, kind=int, low=1)
    check_scalar("d", d, kind=int, low=2)
    check_entries("n (1 + 2 m_pairs) d + d^2", n * (1 + 2 * m_pairs) * d + d * d, n=n, m_pairs=m_pairs, d=d)
    if n > d - 1:
        raise ValidationError(f"n == {n} needs d >= n + 1 == {n + 1}, got d == {d}; raise d or lower n")
    r = _per_sequence("radii", radii, n)
    if bool((r <= 0).any()):
        raise ValidationError(f"radii must all be > 0, got {r.tolist()}")
    c_t = _per_sequence("c", c, n)
    if bool(((c_t < -1) | (c_t >= 1)).any()):
        raise ValidationError(f"c must lie in [-1, 1) (Assumption 4 (iii)), got {c_t.tolist()}")
    check_scalar("score", score, low=0.0, low_inclusive=False)
    gen = generator(seed)
    U = random_orthogonal(d, gen)  # spec §6: U random orthogonal (d, d); pi(i) = i
    y = random_labels(n, gen)
    s = random_labels(n, gen)  # query signs s_i
    x_opt = r[:, None] * U[:, :n].T  # spec §6: x_{i,opt} = r_i U[:, i], (n, d)
    Z = s[:, None] * U[:, :n].T  # spec §6: z_i = s_i U[:, i], (n, d)
    g = torch.randn(n, m_pairs, d - n, generator=gen, dtype=torch.float64) / math.sqrt(d - n)
    w = g @ U[:, n:].T  # spec §6: w_k in span(U[:, n:]), (n, m_pairs, d)
    centre = (c_t[:, None] * x_opt)[:, None, :]  # (n, 1, d)
    pairs = torch.stack([centre + w, centre - w], dim=2).reshape(n, 2 * m_pairs, d)  # spec §6: c_i x_opt ± w_k
    X = torch.cat([x_opt[:, None, :], pairs], dim=1)  # (n, 1 + 2 m_pairs, d)
    v = score * (U[:, :n] @ (y / r))  # spec §6: v = sum_i y_i x_{i,opt} / r_i^2, scaled so gamma_opt = score
    U_Q = U.clone()
    U_Q[:, :n] = U[:, :n] * s  # spec §3.2: z_i / ||z_i|| = U_Q[:, pi(i)]
    data = TokenSelectionData(X, Z=Z, y=y, v=v, select=torch.zeros(n, dtype=torch.int64))
    return AlignedPairs(data=data, U_K=U, U_Q=U_Q, pi=torch.arange(n))
