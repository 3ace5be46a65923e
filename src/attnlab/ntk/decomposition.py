"""One gradient step's change of the loss, split as Lemma E.1 splits it: first-order, second-order and output terms.

Spec: softmax-ntk-diffusion §5 (Lemma E.1 and its terms C_0 ... C_3, Lemmas E.3-E.4, Claims E.6-E.7), §3.2
(gradient), §4.1 (Gram).

Lemma E.1 writes ``||F(t+1) - Y||^2 = ||F(t) - Y||^2 + C_0 + C_1 + C_2 + C_3`` with ``C_3 = ||F(t+1) - F(t)||^2``
(Fact A.3 on ``F(t+1) - Y = (F(t) - Y) + (F(t+1) - F(t))``), ``C_0`` and ``C_1`` first order in the step and ``C_2``
second order. The definitions of ``C_0 ... C_2`` are lost; we reconstruct them from the step ``W(t+1) = W(t) - eta G``
actually taken (``G`` the closed-form gradient of Claim 3.4) and the Jacobian's split into the softmax numerator and
denominator, ``dF_l(x_i)/dw_r = phi_{ir} (a_{lr} - b_{il}) x_i = J_a - J_b`` with ``b = S a^T``:

- ``C_1 = -2 eta <J_a^T R, G>``, the numerator part ``phi a`` (with the true gradient a positive semi-definite form
  that "always makes progress", Lemma E.4);
- ``C_0 = -2 eta <(J - J_a)^T R, G>``, the first-order term the denominator ``b`` creates (Lemma E.3); so
  ``C_0 + C_1 = -2 eta <J^T R, G>`` is the step's first-order term, ``-2 eta s R^T H R`` when ``G = J^T R``;
- ``C_2 = 2 <R, F(t+1) - F(t)> - (C_0 + C_1)``, the remainder of the cross term, second order in ``eta``.

``J^T R`` and ``J_a^T R`` are computed from the Jacobian factors, independently of the gradient ``G`` that takes the
step, and ``-2 eta s R^T H R`` from the closed-form Gram (:func:`~attnlab.ntk.gram`): a step with a wrong gradient
shows as a first-order term that is not the NTK progress.

``F(t+1) - F(t)`` comes from the network's ``output_change`` (for the softmax network a closed form without
cancellation): the difference of two O(1) outputs carries their round-off, which near the end of a run is larger
than ``C_2`` itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlab._validation import check_scalar, check_tensor
from attnlab.ntk.network import TwoLayerNet, check_net, jacobian_coefficients
from attnlab.ntk.tangent_kernel import gram

__all__ = ["StepTerms", "step_terms"]


@dataclass(frozen=True)
class StepTerms:
    """The terms of one GD step's loss change (Lemma E.1), as floats.

    Attributes
    ----------
    sq_error : float
        ``||F(t) - Y||_F^2`` before the step.
    sq_error_next : float
        ``||F(t+1) - Y||_F^2`` after it, computed directly.
    C0 : float
        First-order term the softmax denominator creates.
    C1 : float
        First-order progress term of the numerator part, ``<= 0``.
    C2 : float
        Second-order remainder of the cross term ``2 <R, F(t+1) - F(t)>``.
    C3 : float
        ``||F(t+1) - F(t)||_F^2``, ``>= 0``.
    ntk_progress : float
        ``-2 eta s R^T H(t) R`` with ``H(t)`` the Gram before the step (``s = m`` for softmax): what ``C_0 + C_1``
        is when the step takes the true gradient.
    """

    sq_error: float
    sq_error_next: float
    C0: float
    C1: float
    C2: float
    C3: float
    ntk_progress: float

    @property
    def first_order(self) -> float:
        """``C_0 + C_1``, the step's first-order term."""
        return self.C0 + self.C1


def step_terms(
    net: TwoLayerNet, X: torch.Tensor, Y: torch.Tensor, lr: float, H: torch.Tensor | None = None
) -> StepTerms:
    """Take one GD step from the net's current weights (the net is left as it was) and split the loss change.

    Spec: softmax-ntk-diffusion §5 (Lemma E.1): ``||F(t+1) - Y||^2 = ||F(t) - Y||^2 + C_0 + C_1 + C_2 + C_3``.

    Parameters
    ----------
    net : TwoLayerNet
        At the weights ``W(t)``.
    X : torch.Tensor, shape (n, d_in)
    Y : torch.Tensor, shape (n, d_out)
    lr : float
        The step ``eta``, > 0.
    H : torch.Tensor, shape (n * d_out, n * d_out), optional
        The Gram ``gram(net, X)`` at the current weights, when the caller has it already.

    Returns
    -------
    StepTerms

    Raises
    ------
    ValidationError
        When ``net`` is not a float64 :class:`TwoLayerNet`, ``X`` or ``Y`` has the wrong shape or is not finite,
        ``lr <= 0``, or the gradient or the Gram overflows float64 (``net.overflow_cause``).
    """
    X = check_tensor("X", X, "nk", {"k": check_net("net", net).d_in})
    Y = check_tensor("Y", Y, "nL", {"n": X.shape[0], "L": net.d_out})
    check_scalar("lr", lr, low=0.0, low_inclusive=False)
    if H is not None:
        size = X.shape[0] * net.d_out
        H = check_tensor("H", H, "NM", {"N": size, "M": size})
    with torch.no_grad():
        W, a = net.W.detach(), net.a.detach()
        Z = X @ W  # spec §2: the logits at W(t), shared by the outputs and their change
        F, phi, b = net.output_and_factors(Z)
        R = F - Y
        step = net.loss_gradient(X, Y)  # G: the closed-form gradient (Claim 3.4) the step takes, spec §3.2
        # F(t+1) - F(t) for the step -eta G the first-order terms take, without cancellation where the net has a
        # closed form for it (two outputs' difference loses the change's accuracy to their round-off: C_2 and C_3)
        dF = net.output_change(Z, -lr * (X @ step))
        true = torch.einsum("il,ilr,ik->kr", R, jacobian_coefficients(phi, b, a), X)  # J^T R, shape (d_in, m)
        numerator = torch.einsum("il,ilr,ik->kr", R, jacobian_coefficients(phi, torch.zeros_like(b), a), X)
        r = R.T.reshape(-1)  # index l * n + i, as the Gram's rows
        progress = float(r @ ((gram(net, X) if H is None else H) @ r))  # R^T H R
        first = -2.0 * lr * float((true * step).sum())  # C_0 + C_1 = -2 eta <J^T R, G>
        C1 = -2.0 * lr * float((numerator * step).sum())  # Lemma E.4's progress term (our reconstruction)
        cross = 2.0 * float((R * dF).sum())  # Fact A.3: ||R + dF||^2 = ||R||^2 + 2 <R, dF> + ||dF||^2
        sq_error = float(R.pow(2).sum())
        return StepTerms(
            sq_error=sq_error,
            # spec §3.3: W(t+1) = W(t) - eta Delta W, its outputs evaluated directly (not from dF)
            sq_error_next=float((net.output_from_logits(X @ (W - lr * step)) - Y).pow(2).sum()),
            C0=first - C1,
            C1=C1,
            C2=cross - first,
            C3=float(dF.pow(2).sum()),
            ntk_progress=-2.0 * lr * net.kernel_scale * progress,  # spec §5 Lemma E.1: -2 eta m R^T H R
        )
