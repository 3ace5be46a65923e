"""Nonlinear heads ``h`` of the token-selection model ``f(X) = h(X^T softmax(X W z))``.

Spec: multi-token §1 (model with a nonlinear head; the linear head ``h(u) = v^T u`` is the papers' model of
implicit-bias-ngd §2).

A linear head stays a plain tensor ``v`` everywhere (its token scores ``gamma_t = y v^T x_t`` do not depend on
``W``). A :class:`Head` is everything else: it gives ``h(u)`` and ``grad h(u)`` at the attended token mixture
``u_i = X_i^T softmax(X_i W z_i)``, and the gradient's token scores ``gamma_it = y_i grad h(u_i)^T x_it`` then
change with ``W`` (:func:`attnlab.models.functional.loss_gradients` recomputes them every step). Heads are fixed
(not trained).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from attnlab._validation import ValidationError, check_scalar, check_tensor, model_as_float64

__all__ = ["AttentionHeads", "Head", "ModuleHead", "ReluHead", "as_head"]


class Head:
    """A fixed nonlinear head ``h: R^d -> R`` evaluated on ``([R,] n, d)`` mixtures.

    Subclasses implement :meth:`value_and_gradient`; ``d`` is the input width. A head that holds one set of
    tensors per run (a leading runs axis) says how many in :attr:`runs`.
    """

    d: int

    @property
    def runs(self) -> int | None:
        """The number of runs the head holds its own tensors for (their leading axis), or None: one head for every
        run (the default)."""
        return None

    def value_and_gradient(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The head's value and gradient at the attention mixtures ``u`` (multi-token §1).

        Parameters
        ----------
        u : torch.Tensor, shape ([R,] n, d), float64
            One mixture ``u_i = X_i^T softmax(X_i W z_i)`` per sequence.

        Returns
        -------
        value : torch.Tensor, shape ([R,] n)
            ``h(u_i)``.
        gradient : torch.Tensor, shape ([R,] n, d)
            ``grad h(u_i)``.
        """
        raise NotImplementedError


class AttentionHeads(Head):
    """A head that also owns the attention: several key-query matrices side by side in ``W``.

    The token-selection functions (:func:`~attnlab.models.functional.outputs`,
    :func:`~attnlab.models.functional.loss_gradients`) hand such a head the whole ``W`` and use its
    :meth:`outputs` and :meth:`loss_gradients`, so the engine trains it as it trains one ``W``. Spec: multi-token
    §9 (the sum of heads, :class:`~attnlab.models.sum_of_heads.SummedHeads`).
    """

    def columns(self, d_q: int) -> int:
        """The number of columns of ``W`` for queries of width ``d_q``.

        Parameters
        ----------
        d_q : int

        Returns
        -------
        int
            ``H d_q`` for ``H`` heads side by side.
        """
        raise NotImplementedError

    def outputs(self, X: torch.Tensor, W: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
        """Model outputs ``f(X_i)``.

        Parameters
        ----------
        X : torch.Tensor, shape ([R,] n, T, d)
        W : torch.Tensor, shape ([R,] d, H d_q)
            The heads' matrices side by side.
        Z : torch.Tensor, shape ([R,] n, d_q)

        Returns
        -------
        torch.Tensor, shape ([R,] n)
        """
        raise NotImplementedError

    def loss_gradients(
        self, X: torch.Tensor, Z: torch.Tensor, y: torch.Tensor, W: torch.Tensor, loss: str, *, risk: bool = True
    ) -> tuple[Any, None, torch.Tensor | None]:
        """Log-scaled gradient of the empirical risk in ``W`` and ``log L``, as
        :func:`~attnlab.models.functional.loss_gradients` returns them (no head gradient: the head is fixed).

        Parameters
        ----------
        X, Z, W : torch.Tensor
            As in :meth:`outputs`.
        y : torch.Tensor, shape ([R,] n)
        loss : {"exp", "logistic"}
        risk : bool, default=True
            Also compute ``log L``.

        Returns
        -------
        grad_W : LogScaled
            ``mantissa`` of ``W``'s shape, ``log_scale`` shape ([R,]).
        grad_v : None
        log_risk : torch.Tensor, shape ([R,]), or None
        """
        raise NotImplementedError


class ReluHead(Head):
    """``h(u) = v^T ReLU(V u)``: the TF-as-SVM nonlinear head. Spec: multi-token §1.

    Parameters
    ----------
    V : array-like, shape ([R,] m, d)
        Value matrix (the peer code's ``value.weight`` is ``V`` of their ``X V``; ours is its transpose).
    v : array-like, shape ([R,] m)
        Output weights (the peer sets ``v = 1``).

    Notes
    -----
    ``grad h(u) = V^T (v * 1[V u > 0])``: at ``V u = 0`` exactly the subgradient 0 is taken, as autograd's ReLU does.

    Examples
    --------
    >>> h = ReluHead(torch.eye(2), torch.ones(2))
    >>> h.value_and_gradient(torch.tensor([[1.0, -2.0]], dtype=torch.float64))[0]
    tensor([1.], dtype=torch.float64)
    """

    def __init__(self, V: Any, v: Any) -> None:  # noqa: N803 (the spec's symbol)
        V_t = check_tensor("V", V)
        if V_t.dim() not in (2, 3):
            raise ValidationError(f"V has shape {tuple(V_t.shape)}, expected (m, d) or (R, m, d)")
        sizes = {"m": V_t.shape[-2], "d": V_t.shape[-1]}
        if 0 in sizes.values():
            raise ValidationError(
                f"V has shape {tuple(V_t.shape)}: a ReluHead needs m >= 1 units of width d >= 1 (with m = 0, "
                "h(u) = 0 and its gradient is 0, so W never moves); pass V of shape (m, d) with m >= 1"
            )
        v_t = check_tensor("v", v)
        if v_t.shape[-1] != sizes["m"] or v_t.dim() != V_t.dim() - 1:
            raise ValidationError(
                f"v has shape {tuple(v_t.shape)}, expected ({'R, ' if V_t.dim() == 3 else ''}{sizes['m']},) to match "
                f"V of shape {tuple(V_t.shape)}"
            )
        self.V, self.v, self.d = V_t, v_t, int(sizes["d"])

    @property
    def runs(self) -> int | None:
        """R when ``V`` has shape ``(R, m, d)``, else None."""
        return int(self.V.shape[0]) if self.V.dim() == 3 else None

    def value_and_gradient(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pre = torch.einsum("...md,...nd->...nm", self.V, u)  # multi-token §1: V u, ([R,] n, m)
        value = torch.einsum("...nm,...m->...n", pre.clamp(min=0.0), self.v)  # h(u) = v^T ReLU(V u)
        active = self.v.unsqueeze(-2) * (pre > 0)  # v * 1[V u > 0], ([R,] n, m)
        return value, torch.einsum("...nm,...md->...nd", active, self.V)  # grad h = V^T (v * 1[V u > 0])

    def __repr__(self) -> str:
        return f"ReluHead(V={tuple(self.V.shape)}, v={tuple(self.v.shape)})"


class ModuleHead(Head):
    """Any ``torch.nn.Module`` mapping ``(..., d)`` mixtures to ``(...)`` or ``(..., 1)`` outputs, as a fixed head.

    Its gradient is taken by autograd (the module's parameters are not trained). Spec: multi-token §1.

    Parameters
    ----------
    module : torch.nn.Module
        Its floating-point parameters and buffers are converted to float64 in place, as the models' are
        (:func:`attnlab._validation.model_as_float64`: attnlab computes in float64).
    d : int
        Input width.

    Raises
    ------
    ValidationError
        When ``module`` is not a module, or its first layer (the module itself, or the first of a
        ``torch.nn.Sequential``) is a linear layer of another input width than ``d``; a module of another input
        width found only when it runs is refused then.
    """

    def __init__(self, module: nn.Module, d: int) -> None:
        if not isinstance(module, nn.Module):
            raise ValidationError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        self.module, self.d = module, int(check_scalar("d", d, kind=int, low=1))
        first = module[0] if isinstance(module, nn.Sequential) and len(module) else module
        width = getattr(first, "in_features", None) if isinstance(first, nn.Linear) else None
        if width and width != self.d:  # a lazy layer's width is 0 until it runs
            raise ValidationError(self._width_message(f"its first layer is {first!r}"))
        model_as_float64(module)

    def _width_message(self, found: str) -> str:
        return (
            f"the head module {type(self.module).__name__} must take mixtures of width d = {self.d} (the tokens' "
            f"width), but {found}; build it for inputs of width {self.d}, e.g. torch.nn.Linear({self.d}, 1)"
        )

    def value_and_gradient(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # the engine runs under inference mode: leave it to build a graph on a copy of u
        with torch.inference_mode(False), torch.enable_grad():
            leaf = u.detach().clone().requires_grad_(True)
            try:
                out = self.module(leaf)
            except RuntimeError as err:  # a module of another input width (or dtype) fails inside torch
                found = f"it failed on float64 mixtures of shape {tuple(leaf.shape)}: {err}"
                raise ValidationError(self._width_message(found)) from err
            if out.shape == leaf.shape[:-1] + (1,):
                out = out.squeeze(-1)
            if out.shape != leaf.shape[:-1]:
                raise ValidationError(
                    f"the head module maps inputs of shape {tuple(leaf.shape)} to {tuple(out.shape)}; it must return "
                    f"one value per sequence, shape {tuple(leaf.shape[:-1])} or {tuple(leaf.shape[:-1]) + (1,)}"
                )
            (grad,) = torch.autograd.grad(out.sum(), leaf)  # rows are independent: d sum / du_i = grad h(u_i)
        return out.detach(), grad

    def __repr__(self) -> str:
        return f"ModuleHead({type(self.module).__name__}, d={self.d})"


def as_head(value: Any, d: int) -> torch.Tensor | Head:
    """A head as the engine takes it: a tensor ``v`` (linear head) or a :class:`Head`.

    A :class:`Head` is returned as is (its width checked against ``d``), an ``nn.Module`` becomes a
    :class:`ModuleHead`, anything else is read as the linear head's tensor.

    Parameters
    ----------
    value : array-like of shape ([R,] d), Head or torch.nn.Module
        The head as the user gave it.
    d : int
        The tokens' width.

    Returns
    -------
    torch.Tensor or Head
        The linear head's tensor (float64), or a :class:`Head`.
    """
    if isinstance(value, nn.Module):
        value = ModuleHead(value, d)
    if isinstance(value, Head):
        if value.d != d:
            raise ValidationError(f"the head takes inputs of width {value.d} but the tokens have d = {d}")
        return value
    return check_tensor("v", value)
