"""Where the parameters of R runs live, how their gradients and norms are computed, and how a rule moves them.

Spec: implicit-bias-ngd §2-3.1 (model, cancellation-free log-scaled gradient, the logit kernel), kq-nuclear-norm
§2-3.1 (chain rule of ``(K, Q)`` and of the diagonal), mirror-descent-lp §4 (the mirror map acts on the parameters).

Two spaces serve every rule of :mod:`attnlab.optim.transforms`:

- :class:`ParamSpace`: the parametrisation's own tensors (``W``; ``K, Q``; ``xi_k, xi_q``; and ``v`` when the head
  is trained), one :func:`~attnlab.models.functional.loss_gradients` per step and the parametrisation's chain rule;
- :class:`KernelSpace`: ``W = W_0 + sum_it omega_it x_it z_i^T`` trained through its ``nT`` coefficients, for a
  combined ``W`` with a fixed head under a rule that only rescales gradients, when ``n T^2 <= d^2``: a step costs one
  ``(nT) x (nT)`` product per run instead of two ``d x d`` contractions.

Both keep the state before the last step (the update is written into a spare buffer and the two are swapped), so
a run whose loss turns non-finite can be put back to its last finite state without a copy per step.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, NamedTuple

import torch

from attnlab._validation import ValidationError
from attnlab.metrics import optimal_loss  # the one L* (the Polyak target); kept importable here
from attnlab.models import PARAMETRIZATIONS, Parametrization
from attnlab.models.functional import (
    ScoreGaps,
    attention_logits,
    logit_derivatives,
    logit_kernel,
    loss_gradients,
    outer_sum,
    score_gaps,
    token_scores,
    tokens_first,
)
from attnlab.models.heads import Head
from attnlab.optim.transforms import INFIMUM, Rule, Step, block_norms

__all__ = [
    "Gradient",
    "KernelSpace",
    "ParamSpace",
    "Problem",
    "check_optimal_loss",
    "default_optimal_loss",
    "optimal_loss",
]


class Problem(NamedTuple):
    """Token-selection data of R runs (runs axis first; runs that share a data set may be stride-0 views).

    Attributes
    ----------
    X : torch.Tensor, shape (R, n, T, d)
        Token sequences.
    Z : torch.Tensor, shape (R, n, d)
        Query tokens.
    y : torch.Tensor, shape (R, n)
        Labels in {-1, +1}.
    v : torch.Tensor, shape (R, d), Head, or None
        The fixed head (a linear ``v`` or a nonlinear :class:`~attnlab.models.heads.Head`); None when the head is
        trained (it is then a parameter, ``"v"``).
    loss : {"exp", "logistic"}
        ``"exp"``: ``l(z) = e^{-z}`` of the margin ``z = y f``; ``"logistic"``: ``log(1 + e^{-z})``.
    """

    X: torch.Tensor
    Z: torch.Tensor
    y: torch.Tensor
    v: torch.Tensor | None
    loss: str


def default_optimal_loss(problem: Problem, head: Any, moves: bool) -> float | torch.Tensor | str | None:
    """Polyak's ``L*`` when none is given: a fixed linear head's infimum (``"infimum"``), 0 for a head that is
    trained, None for a nonlinear one.

    Spec: implicit-bias-ngd §3 (``L_*`` of a fixed decoder, all attention on the optimal tokens), §4 A3 (Polyak).
    A fixed linear head's ``L_*`` is the infimum of its risk, approached as ``||W||`` grows: ``L - L_*`` then falls
    below float64's resolution of ``L`` (about ``2e-16 L``) within tens of steps, and a gap formed as the difference
    of the two numbers is 0 there, so the step stops. ``"infimum"`` has the engine take ``L - L_*`` from the margins
    (:func:`attnlab.models.log_excess_risk`), exact at every norm; its ``L_*`` is the same number. A trained head can
    grow, so the ``L*`` of its initial value is no lower bound of the joint loss: a run would stall at it, or be
    refused mid-run once its loss fell below it. 0 bounds every loss (exp, logistic) and is the joint problem's
    infimum when the head separates the data (Fig. 3 takes ``L_* = 0`` for the same reason).

    Parameters
    ----------
    problem : Problem
        The runs' data and loss.
    head : torch.Tensor of shape (R, d), Head or None
        The head, fixed or initial.
    moves : bool
        Whether the head is trained (some of its entries move).

    Returns
    -------
    float, torch.Tensor of shape (R,), str or None
        ``"infimum"`` for a fixed linear head, 0.0 for a trained one, None where ``L*`` has no closed form (a
        nonlinear head): Polyak then needs ``optimal_loss``. A head that is a parameter held fixed (a model that
        trains its head, with the head frozen) gets its ``L*`` as a number, whose gap float64 resolves only while
        ``L - L* > 2e-16 L``.
    """
    if moves:
        return 0.0  # spec ngd §4 A3: L - 0 >= L - inf L, a valid Polyak gap however the head moves
    if not isinstance(head, torch.Tensor):
        return None  # a nonlinear head: no closed form
    if problem.v is None:  # a head parameter held fixed: the engine reads margins of problem.v only, so the number
        return optimal_loss(problem.X, problem.y, head.detach(), loss=problem.loss)  # spec ngd §3
    return INFIMUM  # spec ngd §3, §4 A3: the fixed head's L_*, its gap L - L_* read from the margins


def check_optimal_loss(value: Any, runs: int) -> None:
    """Refuse a per-run Polyak ``L*`` (``optimal_loss``) whose length is not the number of runs.

    Parameters
    ----------
    value : float, torch.Tensor of shape (R,), str or None
        The optimizer's ``optimal_loss`` as its options hold it (a number, one value per run, ``"infimum"``).
    runs : int
        The number of runs R.

    Raises
    ------
    ValidationError
        When ``value`` is a tensor of another length than ``runs``.
    """
    if isinstance(value, torch.Tensor) and value.dim() == 1 and value.shape[0] != runs:
        raise ValidationError(
            f"optimal_loss has {value.shape[0]} values for {runs} runs; pass one L* per run (shape ({runs},)) or "
            "one number for every run"
        )


class Gradient(NamedTuple):
    """Log-scaled gradients of R runs: ``grad_i = mantissas[i] * exp(log_scale)``, one scale per run.

    ``log_scale`` (shape (R,)) is finite exactly for the runs whose loss is finite. ``log_risk`` is ``log L`` per
    run, or None when the gradient was asked for without it. ``weights`` is ``dL/ds`` (shape (R, n, T), same
    scale) when the space was asked for it (gradient flow's phi).
    """

    mantissas: list[torch.Tensor]
    log_scale: torch.Tensor
    log_risk: torch.Tensor | None
    weights: torch.Tensor | None = None


class ParamSpace:
    """The parametrisation's tensors of R runs, each with the runs axis first.

    Parameters
    ----------
    param : {"W", "KQ", "diag"} or Parametrization
        Combined ``W``, key and query ``(K, Q)``, or diagonal ``(xi_k, xi_q)``; or a parametrisation object.
    params : dict of str to torch.Tensor
        The tensors of :data:`attnlab.models.PARAMETRIZATIONS` ``[param].names``, plus ``"v"`` (shape (R, d)) when
        the head is trained. Owned by the space from here on (moved in place).
    problem : Problem
        The data of the R runs and the fixed head (None when ``params`` holds ``"v"``).
    trainable : mapping of str to torch.Tensor, optional
        Boolean masks of the entries that move, broadcastable to the tensors (see :func:`attnlab.training.fit`).
    """

    def __init__(
        self,
        param: str | Parametrization,
        params: dict[str, torch.Tensor],
        problem: Problem,
        trainable: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        self.parametrization = PARAMETRIZATIONS[param] if isinstance(param, str) else param
        self.names = list(self.parametrization.names) + (["v"] if "v" in params else [])
        self.theta = {k: params[k] for k in self.names}
        unknown = sorted(set(trainable or {}) - set(self.names))
        if unknown:
            raise ValidationError(f"trainable names {unknown} are not tensors of this model; valid: {self.names}")
        self.masks = {k: m.to(self.theta[k].device) for k, m in (trainable or {}).items()}
        self.frozen = {k for k, m in self.masks.items() if not bool(m.any())}  # tensors that never move
        self.problem = problem
        self.head = "v" in params
        # fixed data and head: the W-independent part of every gradient, once
        # (a nonlinear head's scores move with W: recomputed at every gradient)
        fixed = not self.head and not isinstance(problem.v, Head)
        self.gaps: ScoreGaps | None = score_gaps(token_scores(problem.X, problem.y, problem.v)) if fixed else None
        self.X_first = tokens_first(problem.X)  # the logits token-first with no copy per step
        self.spare: dict[str, torch.Tensor] | None = None  # the state before the last step, once one was taken
        self.buffer: torch.Tensor | None = None  # each gradient's W mantissa is used up within its step: reuse it
        self.want_weights = False  # also return dL/ds (set by the engine for rules that integrate it)

    def W(self) -> torch.Tensor:  # noqa: N802 (the spec's symbol)
        """The combined matrix of every run (``W``; ``K Q^T``; ``diag(xi_k * xi_q)``).

        Returns
        -------
        torch.Tensor, shape (R, d, d)
        """
        return self.parametrization.combine(self.theta)

    def params(self) -> dict[str, torch.Tensor]:
        """The current tensors by name, in :attr:`names` order.

        Returns
        -------
        dict of str to torch.Tensor, shapes (R, ...)
            A new dict holding the space's own tensors (not copies: a later step may overwrite them in place).
        """
        return dict(self.theta)

    def gradient(self, risk: bool = True) -> Gradient:
        """The gradient at the current tensors.

        Parameters
        ----------
        risk : bool, default=True
            Also compute ``log L`` per run (:attr:`Gradient.log_risk`; None when False).

        Returns
        -------
        Gradient
            One mantissa per tensor, in :attr:`names` order and with the tensors' shapes (R, ...).
        """
        return self.gradient_at([self.theta[k] for k in self.names], out=self.buffer, risk=risk)

    def gradient_at(
        self, tensors: Sequence[torch.Tensor], out: torch.Tensor | None = None, risk: bool = True
    ) -> Gradient:
        """The gradient at other values of the tensors, e.g. a Runge-Kutta stage.

        Parameters
        ----------
        tensors : sequence of torch.Tensor, shapes (R, ...)
            Values of the tensors, in :attr:`names` order.
        out : torch.Tensor, shape (R, d, d), optional
            Buffer for the mantissa of ``dL/dW`` (reused from step to step); None allocates one.
        risk : bool, default=True
            Also compute ``log L`` per run (None when False).

        Returns
        -------
        Gradient
            One mantissa per tensor, in :attr:`names` order; frozen entries (``trainable``) are zero.
        """
        theta = dict(zip(self.names, tensors))
        X, Z, y, v, loss = self.problem
        head = theta["v"] if self.head else v
        gaps = self.gaps if not self.head else None
        gW, gv, log_risk, *weights = loss_gradients(
            X,
            Z,
            y,
            head,
            self.parametrization.combine(theta),
            loss,
            head=self.head,
            gaps=gaps,
            out=out,
            return_weights=self.want_weights,
            risk=risk,
            X_first=self.X_first,
        )
        if out is not None:
            self.buffer = gW.mantissa
        grads = self.parametrization.chain(theta, gW.mantissa)  # spec kq §2: linear, so mantissas map exactly
        if self.head:
            grads["v"] = gv.mantissa
        for k, mask in self.masks.items():
            grads[k] = torch.where(mask, grads[k], 0.0)  # a frozen entry has no gradient (out of every norm too)
        return Gradient(
            [grads[k] for k in self.names], gW.log_scale, log_risk, weights[0].mantissa if weights else None
        )

    def norms(
        self, tensors: Sequence[torch.Tensor], blocks: Sequence[Hashable] | None, ord: float
    ) -> list[torch.Tensor]:
        """Entrywise ``l_ord`` norm of each tensor's block, per run (:func:`~attnlab.optim.transforms.block_norms`).

        Parameters
        ----------
        tensors : sequence of torch.Tensor, shapes (R, ...)
        blocks : sequence of hashable, one per tensor, optional
            Tensors with equal labels share one norm; None: one global norm.
        ord : float
            The order ``p`` of the entrywise norm.

        Returns
        -------
        list of torch.Tensor, shape (R,), float64
            One per tensor.
        """
        return block_norms(tensors, blocks, 1, ord)

    def apply(self, rule: Rule, step: Step) -> None:
        """Move every run by ``step`` (written into the spare buffers, then swapped).

        Parameters
        ----------
        rule : Rule
            The update rule; its mirror map, if any, is applied here.
        step : Step
            The update built by the rule's transforms, one direction per tensor in :attr:`names` order.
        """
        old = [self.theta[k] for k in self.names]
        out = None if self.spare is None or rule.mirror_p is not None else [self.spare[k] for k in self.names]
        new = rule.apply(old, step, out=out)
        for i, k in enumerate(self.names):
            if k in self.masks:  # frozen entries stay bit for bit (a mirror map's round trip would not)
                new[i] = torch.where(self.masks[k], new[i], old[i])
        self.spare, self.theta = self.theta, dict(zip(self.names, new))

    def keep(self, runs: torch.Tensor) -> None:
        """Put some runs back to their state before the last step.

        Parameters
        ----------
        runs : torch.Tensor, shape (R,), bool
            The runs to restore (e.g. those whose loss turned non-finite).
        """
        for k in self.names:
            self.theta[k][runs] = self.spare[k][runs]


class KernelSpace:
    """``W = W_0 + sum_it omega_it x_it z_i^T`` of R runs, trained through the ``nT`` coefficients ``omega``.

    Spec: implicit-bias-ngd §2-3.1. Gradient rules keep ``W - W_0`` in the span of the ``x_it z_i^T``, since every
    gradient is ``outer_sum(X, Z, dL/ds)``. With the logit kernel ``K`` (:func:`logit_kernel`), a step
    ``omega <- omega - c u`` moves the logits by ``-c K u`` and ``||outer_sum(X, Z, u)||_F^2 = u^T K u``. Same
    iterates as on ``W`` itself, up to rounding (the logits are updated, not recomputed from ``W``).

    Parameters
    ----------
    problem : Problem
        With a fixed head.
    W0 : torch.Tensor, shape (R, d, d)
        The initial matrices; the coefficients start at 0.
    """

    def __init__(self, problem: Problem, W0: torch.Tensor) -> None:
        X, Z = problem.X, problem.Z
        R, n, T = X.shape[0], X.shape[-3], X.shape[-2]
        shared = X.stride(0) == 0 and Z.stride(0) == 0  # one data set for every run: one kernel for all
        kernel = logit_kernel(X[0], Z[0]) if shared else logit_kernel(X, Z)  # ([R,] nT, nT) in (i, t) order
        # coefficients in (t, i) order, as the token-first logits (ScoreGaps) are laid out per run; symmetric
        lead = kernel.shape[:-2]
        self.kernel = (
            kernel.reshape(lead + (n, T, n, T)).movedim((-4, -2), (-3, -1)).reshape(lead + (T * n, T * n)).contiguous()
        )
        self.problem, self.W0, self.shape = problem, W0, (R, T, n)
        self.gaps = score_gaps(token_scores(X, problem.y, problem.v))
        # spec ngd §2: s = x^T W_0 z, then moved by K; token-first, (T, R, n)
        self.logits = attention_logits(X, W0, Z).movedim(-1, 0).contiguous()
        self.omega = torch.zeros(R, T * n, dtype=W0.dtype, device=W0.device)  # per run (t, i) order, as the kernel
        self.spare: tuple[torch.Tensor, torch.Tensor] | None = None
        self.moved: tuple[torch.Tensor, torch.Tensor] | None = None  # (u, K u) of the last gradient

    def _apply_kernel(self, u: torch.Tensor) -> torch.Tensor:
        """``K u`` per run, shape (R, Tn): one (1, Tn) x (Tn, Tn) row product per run (K is symmetric; the row form
        is ~3x faster than the column one in MKL), or one GEMM when the runs share K."""
        if self.kernel.dim() == 2:
            return u @ self.kernel
        return torch.bmm(u[:, None, :], self.kernel)[:, 0]

    def W(self) -> torch.Tensor:  # noqa: N802
        """The current matrix of every run, ``W_0 + sum_it omega_it x_it z_i^T``.

        Returns
        -------
        torch.Tensor, shape (R, d, d)
        """
        return self.W0 + self.matrix(self.omega)

    def matrix(self, u: torch.Tensor) -> torch.Tensor:
        """The matrix ``sum_it u_it x_it z_i^T`` of some coefficients.

        Parameters
        ----------
        u : torch.Tensor, shape (R, T n)
            Coefficients per run, in (t, i) order (as :attr:`omega` and the gradient's mantissa).

        Returns
        -------
        torch.Tensor, shape (R, d, d)
        """
        return outer_sum(self.problem.X, self.problem.Z, u.view(*self.shape).transpose(1, 2))

    def params(self) -> dict[str, torch.Tensor]:
        """The current matrix as the combined parametrisation's one tensor.

        Returns
        -------
        dict of str to torch.Tensor
            ``{"W": W}``, shape (R, d, d).
        """
        return {"W": self.W()}

    def gradient(self, risk: bool = True) -> Gradient:
        """The gradient at the current coefficients, as coefficients: ``dL/dW = sum_it u_it x_it z_i^T``.

        Parameters
        ----------
        risk : bool, default=True
            Also compute ``log L`` per run (None when False).

        Returns
        -------
        Gradient
            One mantissa ``u``, shape (R, T n) in (t, i) order; ``K u`` is kept for :meth:`norms` and :meth:`apply`.
        """
        derivatives = logit_derivatives(self.logits, self.gaps, self.problem.loss, risk=risk)
        weights = derivatives.scaled()  # spec ngd §3.1: dL/ds = mantissa e^{log_scale}, (T, R, n)
        u = weights.mantissa.transpose(0, 1).reshape(self.shape[0], -1)  # (R, Tn), one copy
        self.moved = (u, self._apply_kernel(u))
        return Gradient([u], weights.log_scale, derivatives.log_risk)

    def norms(
        self, tensors: Sequence[torch.Tensor], blocks: Sequence[Hashable] | None, ord: float
    ) -> list[torch.Tensor]:
        """Frobenius norm of the matrix of some coefficients, per run: ``sqrt(u^T K u)``.

        Parameters
        ----------
        tensors : sequence of one torch.Tensor, shape (R, T n)
            Coefficients ``u``.
        blocks : sequence of hashable, optional
            Ignored: the space has one tensor, hence one block.
        ord : float
            Must be 2.

        Returns
        -------
        list of one torch.Tensor, shape (R,)

        Raises
        ------
        ValidationError
            When ``ord`` is not 2.
        """
        if ord != 2.0:
            raise ValidationError(f"the kernel space has Frobenius norms only, got ord={ord}")
        (u,) = tensors
        Ku = self.moved[1] if self.moved is not None and u is self.moved[0] else self._apply_kernel(u)
        return [
            torch.sqrt((u * Ku).sum(dim=-1).clamp_(min=0.0))
        ]  # ||outer_sum(u)||_F^2 = u^T K u (>= 0 up to rounding)

    def apply(self, rule: Rule, step: Step) -> None:
        """Move the coefficients and the logits of every run by ``step``: ``omega -= c u``, logits ``-= c K u``.

        Parameters
        ----------
        rule : Rule
            The coefficient-only rule that built ``step`` (:func:`~attnlab.training.kernel_applies`); the move
            itself reads only ``step``.
        step : Step
            One direction ``u``, shape (R, T n), with its per-run coefficient.
        """
        (u,) = step.direction
        Ku = self.moved[1] if self.moved is not None and u is self.moved[0] else self._apply_kernel(u)
        coef = -(torch.exp(step.log_coef[0]) * step.factor[0])[:, None]  # (R, 1): broadcasts on both layouts
        Ku = Ku.view(*self.shape).transpose(0, 1)  # (T, R, n), as the logits
        if self.spare is None:
            new = (torch.addcmul(self.omega, coef, u), torch.addcmul(self.logits, coef, Ku))
        else:
            new = (
                torch.addcmul(self.omega, coef, u, out=self.spare[0]),
                torch.addcmul(self.logits, coef, Ku, out=self.spare[1]),
            )  # spec ngd §2: logits move by -c K u
        self.spare, (self.omega, self.logits) = (self.omega, self.logits), new

    def keep(self, runs: torch.Tensor) -> None:
        """Put some runs back to their coefficients and logits before the last step.

        Parameters
        ----------
        runs : torch.Tensor, shape (R,), bool
        """
        self.omega[runs] = self.spare[0][runs]
        self.logits[:, runs] = self.spare[1][:, runs]
