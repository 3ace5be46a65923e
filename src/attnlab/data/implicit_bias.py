"""Data models of the implicit-bias / fast-rates paper: Example 1 (fixed decoder) and DM (joint training).

Spec: implicit-bias-ngd §6 (data generators).
"""

from __future__ import annotations

import math
from typing import Literal

import torch

from attnlab._validation import ValidationError, check_in, check_scalar, check_tensor
from attnlab.data._random import check_entries, generator, random_labels
from attnlab.data.dataset import TokenSelectionData

__all__ = ["dm", "example1"]


def example1(
    n: int = 8,
    T: int = 6,  # noqa: N803 (the spec's symbol)
    d: int = 128,
    rho: float = 1.0,
    sigma: float = 2.0,
    opt_pos: Literal["first", "random"] = "first",
    antipodal: bool = False,
    *,
    seed: int = 0,
) -> TokenSelectionData:
    """Example 1: Gaussian tokens orthogonal to a fixed decoder, plus one signal token per sequence.

    Spec: implicit-bias-ngd §6.1 (Example 1; defaults of §9 fig. 2, which are proposals [L]).

    Parameters
    ----------
    n : int, default=8
        Number of sequences.
    T : int, default=6
        Tokens per sequence (>= 2).
    d : int, default=128
        Token dimension (>= 2: the noise lives in the complement of the decoder).
    rho : float, default=1.0
        Signal strength: the optimal token's score ``gamma_{i,opt} = rho``.
    sigma : float, default=2.0
        Noise scale: noise entries have variance ``sigma^2 / d`` in the ``d - 1`` directions orthogonal to ``u``.
    opt_pos : {"first", "random"}, default="first"
        Where the optimal token sits: position 0 (then it is also the query) or a uniform position per sequence.
    antipodal : bool, default=False
        Drop the noise of the optimal tokens, so that they are ``y_i rho u``: equal or antipodal across sequences
        (the Fig. 5 variant) instead of nearly orthogonal.
    seed : int, default=0
        Seed of the ``torch.Generator``; the same seed gives the same data.

    Returns
    -------
    TokenSelectionData
        ``X`` (n, T, d), ``Z = X[:, 0]`` (n, d), ``y`` (n,), head ``v = u = e_1`` (d,) and ``select`` (n,) holding
        the optimal token of each sequence.

    Raises
    ------
    ValidationError
        On non-positive sizes, ``T < 2``, ``d < 2``, tokens of more than ``2^26`` entries (``n T d``), non-positive
        ``rho`` or ``sigma``, or an unknown ``opt_pos``.

    Notes
    -----
    ``u = e_1``, ``y_i ~ Unif{-1, +1}``, noise ``z_{i,t} ~ N(0, (sigma^2/d)(I - u u^T))``, ``x_{i,t} = z_{i,t}``
    for ``t != opt_i`` and ``x_{i,opt} = y_i rho u + z_{i,opt}`` (no ``z`` when antipodal). Hence
    ``gamma_{i,opt} = rho`` and every other score is exactly 0 (Assumption 2 with gap ``Delta_i = rho``).
    Near-orthogonality (A1) needs ``rho^2 << sigma^2`` and large ``d``; check it with
    :func:`attnlab.data.near_orthogonal`.

    Examples
    --------
    >>> data = example1(n=4, T=3, d=16, seed=0)
    >>> scores = data.token_scores()  # (n, T): rho on the optimal token, exactly 0 elsewhere
    >>> bool((scores[:, 0] == 1.0).all()), bool((scores[:, 1:] == 0.0).all())
    (True, True)
    """
    check_scalar("n", n, kind=int, low=1)
    check_scalar("T", T, kind=int, low=2)
    check_scalar("d", d, kind=int, low=2)
    check_entries("n T d", n * T * d, n=n, T=T, d=d)
    check_scalar("rho", rho, low=0.0, low_inclusive=False)
    check_scalar("sigma", sigma, low=0.0, low_inclusive=False)
    check_in("opt_pos", opt_pos, ("first", "random"))
    if not isinstance(antipodal, bool):
        raise ValidationError(f"antipodal must be True or False, got {antipodal!r}")
    gen = generator(seed)
    u = torch.zeros(d, dtype=torch.float64)
    u[0] = 1.0  # spec §6.1: u = e_1
    y = random_labels(n, gen)  # spec §6.1: y_i ~ Unif{±1}
    g = torch.randn(n, T, d, generator=gen, dtype=torch.float64) * (sigma / math.sqrt(d))
    X = g - (g @ u)[..., None] * u  # spec §6.1: z ~ N(0, (sigma^2/d)(I - u u^T)), shape (n, T, d)
    if opt_pos == "first":
        opt = torch.zeros(n, dtype=torch.int64)
    else:
        opt = torch.randint(0, T, (n,), generator=gen)
    rows = torch.arange(n)
    signal = (y * rho)[:, None] * u  # (n, d)
    if antipodal:
        X[rows, opt] = signal  # spec §6.1: x_{i,opt} = y_i rho u
    else:
        X[rows, opt] = X[rows, opt] + signal  # spec §6.1: x_{i,opt} = y_i rho u + z_{i,opt}
    return TokenSelectionData(X, y=y, v=u, select=opt)


def dm(
    n: int = 8,
    d: int = 200,
    sigma_opt: float = 2.0,
    sigma_oth: float = 1.0,
    mu: tuple[float, ...] | torch.Tensor | None = None,
    *,
    seed: int = 0,
) -> TokenSelectionData:
    """Data model DM: two Gaussian tokens per sequence, the larger-norm one labelled by a fixed direction.

    Spec: implicit-bias-ngd §6.2 (DM; defaults of §9 fig. 3, which are proposals [L]).

    Parameters
    ----------
    n : int, default=8
        Number of sequences.
    d : int, default=200
        Token dimension.
    sigma_opt : float, default=2.0
        Scale of the optimal token: ``x_{i,1} ~ N(0, (sigma_opt^2/d) I)``.
    sigma_oth : float, default=1.0
        Scale of the other token: ``x_{i,2} ~ N(0, (sigma_oth^2/d) I)``; must be below ``sigma_opt``.
    mu : array-like, shape (d,), optional
        Label direction; drawn ``N(0, I_d)`` (after the tokens) when omitted.
    seed : int, default=0
        Seed of the ``torch.Generator``.

    Returns
    -------
    TokenSelectionData
        ``X`` (n, 2, d), ``Z = X[:, 0]`` (n, d), ``y = sign(mu^T x_{i,1})`` (n,), no head (the head is trained),
        ``select`` (n,) all 0: the optimal token is the first one.

    Raises
    ------
    ValidationError
        On non-positive sizes or scales, tokens of more than ``2^26`` entries (``2 n d``), ``sigma_oth >= sigma_opt``,
        or ``mu`` of the wrong shape or zero.

    Notes
    -----
    The larger-norm token becomes optimal after the first head step from ``u_0 = 0`` (§6.2); check Condition 1
    with :func:`attnlab.data.condition1`. A label ``mu^T x_{i,1} = 0`` (probability zero) is mapped to ``+1``.

    Examples
    --------
    >>> data = dm(n=4, d=32, seed=0)
    >>> (data.T, data.select.tolist())
    (2, [0, 0, 0, 0])
    """
    check_scalar("n", n, kind=int, low=1)
    check_scalar("d", d, kind=int, low=1)
    check_entries("2 n d", 2 * n * d, n=n, d=d)
    check_scalar("sigma_oth", sigma_oth, low=0.0, low_inclusive=False)
    check_scalar("sigma_opt", sigma_opt, low=0.0, low_inclusive=False)
    if sigma_opt <= sigma_oth:
        raise ValidationError(
            f"sigma_opt == {sigma_opt!r} must exceed sigma_oth == {sigma_oth!r}: the optimal token is the larger one"
        )
    mu_t = None if mu is None else check_tensor("mu", mu, "d", {"d": d})
    if mu_t is not None and not bool(mu_t.any()):
        raise ValidationError(
            "mu == 0 labels every sequence +1 (sign(0)); pass a non-zero direction, or None to draw one"
        )
    gen = generator(seed)
    scale = torch.tensor([sigma_opt, sigma_oth], dtype=torch.float64) / math.sqrt(d)
    X = torch.randn(n, 2, d, generator=gen, dtype=torch.float64) * scale[:, None]  # spec §6.2: (n, 2, d)
    if mu_t is None:
        mu_t = torch.randn(d, generator=gen, dtype=torch.float64)  # spec §6.2: mu ~ N(0, I_d)
    y = torch.where(X[:, 0] @ mu_t >= 0, 1.0, -1.0).to(torch.float64)  # spec §6.2: y_i = sign(mu^T x_{i,1})
    return TokenSelectionData(X, y=y, select=torch.zeros(n, dtype=torch.int64))
