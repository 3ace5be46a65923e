"""What the kq-nuclear experiments share: the paper's initialisation (5), the configs' base and its
validation, and the falsifiers' wrong models (the diagonal models they swap in are :mod:`attnlab.models.diagonal`).

Spec: kq-nuclear-norm §3.1 (initialisation (5)), §7.2 (``beta`` trained directly).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch

from attnlab._validation import ValidationError, check_scalar
from attnlab.models import Combined, Diagonal, DiagonalW, Factored
from attnlab.verify import Falsifier

PAPER = "kq-nuclear-norm"
SOURCE = f"docs/theory/{PAPER}.md"  # what checks cite


def diagonal_init(omegas: tuple[float, ...], d: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Initialisation (5) for each omega: ``xi_k = sqrt(2) omega 1``, ``xi_q = 0``; returns ``omega0 (R, d)`` too."""
    omega0 = torch.tensor(omegas, dtype=torch.float64)[:, None].expand(len(omegas), d).clone()
    return omega0, math.sqrt(2.0) * omega0, torch.zeros_like(omega0)  # spec kq §3.1 (5)


def check_positive(config, names: tuple[str, ...]) -> None:
    for name in names:
        check_scalar(name, getattr(config, name), low=0.0, low_inclusive=False)


def check_ints(config, names: tuple[str, ...]) -> None:
    for name in names:
        check_scalar(name, getattr(config, name), kind=int, low=0 if name == "seed" else 1)


def check_omegas(omegas: tuple[float, ...]) -> None:
    if not omegas or any(w <= 0 for w in omegas):
        raise ValidationError(f"omegas must be a non-empty tuple of positive scales, got {omegas}; e.g. (0.1, 1.0)")


@dataclass(frozen=True)
class KQConfig:
    """What every kq-nuclear config has: ``n`` sequences and the checks of its fields.

    ``__post_init__`` checks the subclass's ``INTS`` (integers >= 1, ``seed`` >= 0) and ``POSITIVE`` (floats > 0);
    a subclass with more to check extends it.

    Attributes
    ----------
    n : int
        Sequences.
    """

    n: int = 3

    INTS: ClassVar[tuple[str, ...]] = ("n",)
    POSITIVE: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        check_ints(self, self.INTS)
        check_positive(self, self.POSITIVE)


@dataclass(frozen=True)
class ScoresConfig(KQConfig):
    """The ``scores_equal`` data set X1, X2 and X5 train on; each adds its run's fields.

    Attributes
    ----------
    T : int
        Tokens per sequence.
    d : int
        Token width.
    """

    n: int = 2
    T: int = 3
    d: int = 8

    RENAMED: ClassVar[dict[str, str]] = {"L": "T"}  # the token axis is T everywhere (the paper writes L)


# ---- falsifiers: wrong mechanisms, each patched where one experiment module looks it up ------------------------


def _with_chain(model_cls: type, change: Callable[[dict], dict]) -> type:
    """``model_cls`` whose chain rule is ``change(original grads)``: a wrong gradient of one factor."""
    original = model_cls.parametrization

    class Wrong(model_cls):
        parametrization = original._replace(chain=lambda p, g: change(original.chain(p, g)))

    return Wrong


def k_gradient_halved(module: str) -> Falsifier:
    """The flow on ``(xi_k, xi_q)`` with ``xi_k``'s gradient halved: an unbalanced update of the factorisation."""
    return Falsifier(
        "k-gradient-halved",
        "gradient flow on (xi_k, xi_q) with xi_k's gradient halved (the balanced factorisation broken)",
        f"attnlab.experiments.kq_nuclear.{module}:Diagonal",
        lambda cls: _with_chain(cls, lambda g: {**g, "xi_k": g["xi_k"] / 2}),
        kind="mechanism",
    )


def q_gradient_reversed(module: str) -> Falsifier:
    """The flow on ``(xi_k, xi_q)`` with the sign of ``xi_q``'s gradient flipped (a chain-rule sign error)."""
    return Falsifier(
        "q-gradient-reversed",
        "xi_q moves up its gradient (a sign error in the chain rule of beta = xi_k xi_q)",
        f"attnlab.experiments.kq_nuclear.{module}:Diagonal",
        lambda cls: _with_chain(cls, lambda g: {**g, "xi_q": -g["xi_q"]}),
        kind="mechanism",
    )


def kq_as_beta(module: str) -> Falsifier:
    """The diagonal ``(xi_k, xi_q)`` run replaced by ``beta`` trained directly from ``beta(0) = xi_k(0) xi_q(0)``."""
    return Falsifier(
        "kq-as-beta",
        "the diagonal K, Q factorisation replaced by beta = diag(W) trained directly (no product structure)",
        f"attnlab.experiments.kq_nuclear.{module}:Diagonal",
        lambda cls: lambda d, xi_k0, xi_q0: DiagonalW(xi_k0 * xi_q0),
        kind="gross",
    )


def beta_as_kq(module: str) -> Falsifier:
    """``beta`` trained directly replaced by a diagonal ``(xi_k, xi_q)`` run from (5) at ``omega_0 = 0.1``."""

    def factored(beta0: torch.Tensor) -> Diagonal:
        xi_k0 = torch.full_like(beta0, math.sqrt(2.0) * 0.1)  # spec kq §3.1 (5): beta(0) = 0
        return Diagonal(int(beta0.shape[-1]), xi_k0=xi_k0, xi_q0=torch.zeros_like(beta0))

    return Falsifier(
        "beta-as-kq",
        "beta trained directly replaced by the diagonal factorisation beta = xi_k xi_q (initialisation (5))",
        f"attnlab.experiments.kq_nuclear.{module}:DiagonalW",
        lambda cls: factored,
        kind="gross",
    )


def kq_as_w(module: str) -> Falsifier:
    """The ``(K, Q)`` run replaced by ``W`` trained directly from ``W(0) = K(0) Q(0)^T``."""
    return Falsifier(
        "kq-as-w",
        "the factorisation W = K Q^T replaced by W trained directly (from W(0) = K(0) Q(0)^T)",
        f"attnlab.experiments.kq_nuclear.{module}:Factored",
        lambda cls: lambda d, d_e, K0, Q0: Combined(d, W0=K0 @ Q0.transpose(-1, -2)),
        kind="gross",
    )


def w_as_kq(module: str) -> Falsifier:
    """``W`` trained directly replaced by a ``(K, Q)`` run from ``K(0) = W(0)``, ``Q(0) = W(0)^T``."""
    return Falsifier(
        "w-as-kq",
        "W trained directly replaced by the factorisation W = K Q^T (K(0) = W(0), Q(0) = W(0)^T)",
        f"attnlab.experiments.kq_nuclear.{module}:Combined",
        lambda cls: lambda d, W0: Factored(d, d, K0=W0, Q0=W0.transpose(-1, -2)),
        kind="gross",
    )
