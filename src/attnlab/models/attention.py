"""Thin ``nn.Module`` wrappers: the three key-query parametrisations with a fixed or trainable head.

Spec: implicit-bias-ngd §2 (combined ``W``), kq-nuclear-norm §1-3 (``W = K Q^T``; diagonal
``W = diag(xi_k * xi_q)`` with the zero-padded ``K = [Diag(xi_k) 0]``), mirror-descent-lp §4 (joint ``(W, v)``).

Each model exposes ``.W``, the combined matrix (``([R,] d, d_q)``, square but for cross-attention), and computes its loss and gradients through the
pure functions of :mod:`attnlab.models.functional`; the math is never repeated here. Parameters may carry a leading
runs axis ``R`` (independent runs trained together).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import nn

from attnlab._validation import ValidationError, check_bool, check_scalar, check_tensor
from attnlab.models.functional import LogScaled, _matmul, attention_loss, loss_gradients, outputs
from attnlab.models.heads import Head, as_head

__all__ = ["PARAMETRIZATIONS", "Combined", "Diagonal", "Factored", "Parametrization", "TokenSelectionModel"]


class Parametrization(NamedTuple):
    """How the combined matrix ``W`` is built from a parametrisation's tensors, and the chain rule back.

    Pure functions of plain tensors (each with an optional leading runs axis), shared by the modules below and by
    the training engine, so each chain rule is written once.

    Attributes
    ----------
    kind : str
        ``"W"``, ``"KQ"`` or ``"diag"``.
    names : tuple of str
        The tensors, in order (``("W",)``, ``("K", "Q")``, ``("xi_k", "xi_q")``).
    combine : callable
        ``combine(params) -> W`` of shape ``([R,] d, d_q)`` (``d_q = d`` but for cross-attention).
    chain : callable
        ``chain(params, grad_W) -> {name: grad}``; linear in ``grad_W``, so gradient mantissas map exactly.
    """

    kind: str
    names: tuple[str, ...]
    combine: Callable[[dict[str, torch.Tensor]], torch.Tensor]
    chain: Callable[[dict[str, torch.Tensor], torch.Tensor], dict[str, torch.Tensor]]


def _factored_chain(p: dict[str, torch.Tensor], g: torch.Tensor) -> dict[str, torch.Tensor]:
    # spec kq §2: grad_K = G Q, grad_Q = G^T K (bmm for stacked runs, as matmul would call it, without its views)
    return {"K": _matmul(g, p["Q"]), "Q": _matmul(g.transpose(-1, -2), p["K"])}


def _diagonal_chain(p: dict[str, torch.Tensor], g: torch.Tensor) -> dict[str, torch.Tensor]:
    diag = torch.diagonal(g, dim1=-2, dim2=-1)  # spec kq §3.1: grad_xi_k = diag(G) * xi_q
    return {"xi_k": diag * p["xi_q"], "xi_q": diag * p["xi_k"]}


#: The three parametrisations of the papers: implicit-bias-ngd §2 (W), kq-nuclear-norm §1-2 (W = K Q^T) and §3.1
#: (W = Diag(xi_k * xi_q)).
PARAMETRIZATIONS: dict[str, Parametrization] = {
    "W": Parametrization("W", ("W",), lambda p: p["W"], lambda p, g: {"W": g}),
    "KQ": Parametrization("KQ", ("K", "Q"), lambda p: _matmul(p["K"], p["Q"].transpose(-1, -2)), _factored_chain),
    "diag": Parametrization(
        "diag", ("xi_k", "xi_q"), lambda p: torch.diag_embed(p["xi_k"] * p["xi_q"]), _diagonal_chain
    ),
}


class TokenSelectionModel(nn.Module):
    """Base class: ``f(X) = v^T X^T softmax(X W z)`` with ``W`` built from the subclass's parameters.

    Parameters
    ----------
    d : int
        Token (key) width; the head acts on mixtures of tokens, so ``v`` has width ``d``.
    v0 : array-like of shape ([R,] d), Head or torch.nn.Module, optional
        Head: linear ``v``, or a fixed nonlinear head (:class:`~attnlab.models.heads.ReluHead`, or any module
        mapping ``(..., d)`` to ``(...)``; multi-token §1). ``None`` means the head comes from the data
        (``data.v``) unless ``train_head``.
    train_head : bool, default=False
        Train ``v`` jointly (spec implicit-bias-ngd §4 A5-A6, mirror-descent-lp §4 JointGD); starts at ``v0``
        or at zero (the papers' zero initialisation).
    d_q : int, optional
        Query width; default ``d``. Another width is cross-attention: ``W`` is ``(d, d_q)`` (multi-token §8).
    """

    def __init__(self, d: int, v0=None, train_head: bool = False, *, d_q: int | None = None) -> None:
        super().__init__()
        d = check_scalar("d", d, kind=int, low=1)
        train_head = check_bool("train_head", train_head)
        self.d = d
        self.d_q = d if d_q is None else check_scalar("d_q", d_q, kind=int, low=1)
        if isinstance(v0, (Head, nn.Module)):
            if train_head:
                raise ValidationError(
                    "train_head=True trains a linear head; a nonlinear head v0 is fixed: pass train_head=False"
                )
            self.v = as_head(v0, d)
            return
        head = None if v0 is None else check_tensor("v0", v0)
        if head is not None and head.shape[-1] != d:
            raise ValidationError(f"v0 has shape {tuple(head.shape)}, expected ([R,] {d})")
        if train_head:
            self.v = nn.Parameter(torch.zeros(d, dtype=torch.float64) if head is None else head.clone())
        else:
            self.register_buffer("v", head)

    #: The parametrisation (None for a subclass that defines ``W`` and ``_chain`` itself).
    parametrization: Parametrization | None = None

    def tensors(self) -> dict[str, torch.Tensor]:
        """The parametrisation's tensors by their names in :attr:`parametrization` (``{"W": self.weight}``...).

        Returns
        -------
        dict of str to torch.Tensor
            ``{"W": (d, d_q)}``, ``{"K": (d, d_e), "Q": (d_q, d_e)}``, ..., each with a leading runs axis ``R``
            when the model has one; the tensors themselves (parameters), not copies.
        """
        return {name: getattr(self, name) for name in self.parametrization.names}

    @property
    def W(self) -> torch.Tensor:  # noqa: N802 (the spec's symbol)
        """Combined key-query matrix, shape ``([R,] d, d_q)``."""
        return self.parametrization.combine(self.tensors())

    @property
    def train_head(self) -> bool:
        """Whether the model trains its own head ``v`` (it is a parameter) rather than using a fixed one."""
        return isinstance(self.v, nn.Parameter)

    def head(self, data_v: torch.Tensor | None) -> torch.Tensor:
        """The head in use: the model's ``v`` if it has one, else the data's.

        Parameters
        ----------
        data_v : torch.Tensor of shape ([R,] d), or None
            The data set's head.

        Returns
        -------
        torch.Tensor, shape ([R,] d), or Head

        Raises
        ------
        ValidationError
            When neither the model nor the data has a head.
        """
        if self.v is not None:
            return self.v
        if data_v is None:
            raise ValidationError("no head: the data has no v and the model was built without v0 or train_head=True")
        return data_v

    def forward(self, X: torch.Tensor, Z: torch.Tensor, data_v: torch.Tensor | None = None) -> torch.Tensor:
        """Outputs ``f(X_i) = h(X_i^T softmax(X_i W z_i))``.

        Parameters
        ----------
        X : torch.Tensor, shape ([R,] n, T, d)
            Tokens.
        Z : torch.Tensor, shape ([R,] n, d_q)
            Queries.
        data_v : torch.Tensor of shape ([R,] d), optional
            The data's head, used when the model has none of its own.

        Returns
        -------
        torch.Tensor, shape ([R,] n)
        """
        return outputs(X, self.W, Z, self.head(data_v))

    def loss(self, data, loss: str = "exp") -> torch.Tensor:
        """Empirical risk per run, with the exact backward pass (see ``attention_loss``).

        Parameters
        ----------
        data : TokenSelectionData or StackedData
            Anything with ``X, Z, y, v``.
        loss : {"exp", "logistic"}, default="exp"
            ``l(z) = e^{-z}`` or ``log(1 + e^{-z})`` of the margin.

        Returns
        -------
        torch.Tensor, shape ([R,])
        """
        return attention_loss(data.X, data.Z, data.y, self.head(data.v), self.W, loss)

    def gradients(self, data, loss: str = "exp") -> tuple[dict[str, LogScaled], torch.Tensor]:
        """Log-scaled gradients of every trainable parameter (one scale per run) and ``log L`` per run.

        Parameters
        ----------
        data : TokenSelectionData or StackedData
            Anything with ``X, Z, y, v``.
        loss : {"exp", "logistic"}, default="exp"
            ``l(z) = e^{-z}`` or ``log(1 + e^{-z})`` of the margin.

        Returns
        -------
        grads : dict of str to LogScaled
            Keyed by parameter name; ``grad = mantissa * exp(log_scale)``.
        log_risk : torch.Tensor, shape ([R,])
        """
        with torch.no_grad():
            gW, gv, log_risk = loss_gradients(
                data.X, data.Z, data.y, self.head(data.v), self.W, loss, head=self.train_head
            )
            grads = {name: LogScaled(m, gW.log_scale) for name, m in self._chain(gW.mantissa).items()}
            if gv is not None:
                grads["v"] = gv
        return grads, log_risk

    def _chain(self, grad_W: torch.Tensor) -> dict[str, torch.Tensor]:
        """Map a gradient in ``W`` to gradients of the module's parameters (linear, so mantissas map exactly)."""
        names = {id(p): n for n, p in self.named_parameters()}
        grads = self.parametrization.chain(self.tensors(), grad_W)
        return {names[id(t)]: grads[k] for k, t in self.tensors().items() if id(t) in names}


class Combined(TokenSelectionModel):
    """Combined key-query matrix ``W`` trained directly. Spec: implicit-bias-ngd §2.

    Parameters
    ----------
    d : int
    W0 : array-like, shape ([R,] d, d_q), optional
        Initial matrix; default zeros.
    v0, train_head, d_q : see :class:`TokenSelectionModel`.

    Examples
    --------
    >>> Combined(3).W.shape
    torch.Size([3, 3])
    """

    def __init__(self, d: int, W0=None, v0=None, train_head: bool = False, *, d_q: int | None = None) -> None:
        super().__init__(d, v0, train_head, d_q=d_q)
        d_q = self.d_q
        init = torch.zeros(d, d_q, dtype=torch.float64) if W0 is None else check_tensor("W0", W0)
        if init.dim() not in (2, 3) or tuple(init.shape[-2:]) != (d, d_q):
            raise ValidationError(
                f"W0 has shape {tuple(init.shape)}, expected ([R,] {d}, {d_q}) (keys of width d = {d}, queries of "
                f"width d_q = {d_q})"
            )
        self.weight = nn.Parameter(init.clone())

    parametrization = PARAMETRIZATIONS["W"]

    def tensors(self) -> dict[str, torch.Tensor]:
        return {"W": self.weight}


class Factored(TokenSelectionModel):
    """Separate key and query matrices, ``W = K Q^T``. Spec: kq-nuclear-norm §1-3.

    Parameters
    ----------
    d, d_e : int
        Token dimension and key/query width (the theory needs ``d_e >= d``).
    K0 : array-like, shape ([R,] d, d_e), optional
    Q0 : array-like, shape ([R,] d_q, d_e), optional
        Initial matrices; default i.i.d. ``N(0, init_scale^2)`` from ``seed`` (``K = Q = 0`` is a saddle).
    d_q : int, optional
        Query width (default ``d``); ``W = K Q^T`` is then ``(d, d_q)`` (multi-token §8).
    init_scale : float, default=0.01
        Ours (the paper leaves the scale free; it only asks for a small initialisation).
    seed : int, default=0
    v0, train_head : see :class:`TokenSelectionModel`.
    """

    def __init__(
        self,
        d: int,
        d_e: int,
        K0=None,
        Q0=None,
        v0=None,
        train_head: bool = False,
        init_scale: float = 0.01,
        seed: int = 0,
        *,
        d_q: int | None = None,
    ) -> None:
        super().__init__(d, v0, train_head, d_q=d_q)
        d_e = check_scalar("d_e", d_e, kind=int, low=1)
        check_scalar("init_scale", init_scale, low=0.0)
        gen = torch.Generator().manual_seed(seed)
        mats = []
        for name, value, rows in (("K0", K0, d), ("Q0", Q0, self.d_q)):
            if value is None:
                mat = init_scale * torch.randn(rows, d_e, generator=gen, dtype=torch.float64)
            else:
                mat = check_tensor(name, value)
                if tuple(mat.shape[-2:]) != (rows, d_e):
                    raise ValidationError(f"{name} has shape {tuple(mat.shape)}, expected ([R,] {rows}, {d_e})")
            mats.append(mat.clone())
        self.d_e = d_e
        self.K = nn.Parameter(mats[0])
        self.Q = nn.Parameter(mats[1])

    parametrization = PARAMETRIZATIONS["KQ"]  # spec kq §1: W = K Q^T


class Diagonal(TokenSelectionModel):
    """Diagonal key and query weights, ``W = diag(xi_k * xi_q)``. Spec: kq-nuclear-norm §3.1.

    Parameters
    ----------
    d : int
    xi_k0, xi_q0 : array-like, shape ([R,] d), optional
        Initial diagonals. Default: the paper's initialisation (5), ``xi_k = sqrt(2) omega_0``, ``xi_q = 0`` with
        ``omega_0 = omega * 1`` (so ``beta(0) = 0``).
    omega : float, default=0.1
        Scale of the default initialisation (ours; spec §9 X2 sweeps 1e-3, 1e-1, 1).
    v0, train_head : see :class:`TokenSelectionModel`.
    """

    def __init__(self, d: int, xi_k0=None, xi_q0=None, v0=None, train_head: bool = False, omega: float = 0.1) -> None:
        super().__init__(d, v0, train_head)
        check_scalar("omega", omega, low=0.0, low_inclusive=False)
        k0 = (2.0**0.5) * omega * torch.ones(d, dtype=torch.float64) if xi_k0 is None else check_tensor("xi_k0", xi_k0)
        q0 = torch.zeros(d, dtype=torch.float64) if xi_q0 is None else check_tensor("xi_q0", xi_q0)
        for name, value in (("xi_k0", k0), ("xi_q0", q0)):
            if value.shape[-1] != d:
                raise ValidationError(f"{name} has shape {tuple(value.shape)}, expected ([R,] {d})")
        self.xi_k = nn.Parameter(k0.clone())
        self.xi_q = nn.Parameter(q0.clone())

    @property
    def beta(self) -> torch.Tensor:
        """``beta = xi_k * xi_q``, shape ``([R,] d)``. Spec: kq-nuclear-norm §3.1."""
        return self.xi_k * self.xi_q

    parametrization = PARAMETRIZATIONS["diag"]  # spec kq §3.1: W = Diag(xi_k * xi_q)
