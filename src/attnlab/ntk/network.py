"""Two-layer networks trained in the first layer only: the shared structure of softmax, ReLU and exp.

Spec: softmax-ntk-diffusion §3.2 (gradient), §4.1 (Gram), §5.1 (comparison networks).

Every network here has ``F(x) = f(W^T x, a)`` with ``a`` fixed, and its Jacobian factors as

    dF_l(x_i) / dw_r = C[i, l, r] x_i,    C[i, l, r] = phi[i, r] * (a[l, r] - b[i, l]),

with ``phi`` of shape (n, m) and ``b`` of shape (n, d_out) depending on the activation: softmax has
``phi = m S`` and ``b = S a^T`` (spec §3.2), ReLU and exp have ``phi = sigma'(W^T x) / sqrt(m)`` and ``b = 0``.
The gradient, the Jacobian-vector product and the Gram matrix are written once, in terms of ``(phi, b)``; a
network only supplies its output and its factors. Axis letters: ``n`` samples, ``m`` hidden units,
``L`` outputs (``d_out``), ``k`` input coordinates (``d_in``).
"""

from __future__ import annotations

import torch
from torch import nn

from attnlab._validation import ValidationError, check_finite_result, check_tensor
from attnlab.ntk.init import symmetric_init

__all__ = ["TwoLayerNet", "check_net", "jacobian_coefficients", "output_tangent", "weight_gradient"]


def jacobian_coefficients(phi: torch.Tensor, b: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """The scalar factors ``C`` with ``dF_l(x_i)/dw_r = C[i, l, r] x_i``.

    Parameters
    ----------
    phi : torch.Tensor, shape (n, m)
    b : torch.Tensor, shape (n, L)
    a : torch.Tensor, shape (L, m)

    Returns
    -------
    torch.Tensor, shape (n, L, m)
    """
    return phi[:, None, :] * (a[None, :, :] - b[:, :, None])  # spec §3.2: m S_r <v_{l,r}, S> for softmax


def weight_gradient(
    X: torch.Tensor,
    R: torch.Tensor,
    phi: torch.Tensor,
    b: torch.Tensor,
    a: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    work: torch.Tensor | None = None,
) -> torch.Tensor:
    """``J^T R``: the gradient of ``0.5 ||F - Y||_F^2`` with respect to ``W`` when ``R = F - Y``.

    Parameters
    ----------
    X : torch.Tensor, shape (n, d_in)
    R : torch.Tensor, shape (n, L)
        Residuals ``F - Y`` (or any output-space vector).
    phi, b, a : Jacobian factors, see :func:`jacobian_coefficients`.
    out : torch.Tensor, shape (d_in, m), optional
        Written with the gradient and returned.
    work : torch.Tensor, shape (n, m), optional
        Scratch space for the coefficients. A loop that passes the same ``out`` and ``work`` every step allocates
        nothing of size ``m``: at ``n m`` in the millions, fresh allocations (page faults) cost more than the math.

    Returns
    -------
    torch.Tensor, shape (d_in, m)
    """
    c = (R * b).sum(dim=1, keepdim=True)  # (n, 1): rowsum(R o S a^T), 0 where b = 0 (ReLU, exp)
    if R.shape[1] == 1 and not bool(c.any()):
        # one output and no b term: coef = phi o (R a) factors as diag(R) phi diag(a), so Delta W = ((R o X)^T phi) o a,
        # one product with phi and no (n, m) coefficient matrix (the general path's two extra passes over n m)
        return torch.mm((X * R).T, phi, out=out).mul_(a)  # spec §3.2: Delta W = X coef
    coef = torch.addmm(c.neg_(), R, a, out=work)  # R a - rowsum(R o S a^T), spec §3.2
    coef.mul_(phi)  # spec §3.2: coef = m S o (R a - rowsum(R o S a^T))
    return torch.mm(X.T, coef, out=out)  # spec §3.2: Delta W = X coef


def output_tangent(
    X: torch.Tensor, U: torch.Tensor, phi: torch.Tensor, b: torch.Tensor, a: torch.Tensor
) -> torch.Tensor:
    """``J U``: the change of the outputs along a weight direction ``U`` (a Jacobian-vector product).

    Parameters
    ----------
    X : torch.Tensor, shape (n, d_in)
    U : torch.Tensor, shape (d_in, m)
    phi, b, a : Jacobian factors, see :func:`jacobian_coefficients`.

    Returns
    -------
    torch.Tensor, shape (n, L)
    """
    pq = phi * (X @ U)  # (n, m): phi[i, r] <x_i, u_r>
    return pq @ a.T - b * pq.sum(dim=1, keepdim=True)  # spec §3.2: sum_r C[i, l, r] <x_i, u_r>


class TwoLayerNet(nn.Module):
    """Base class: ``F(x) = f(W^T x, a)`` with trainable ``W`` and a fixed second layer ``a``.

    Subclasses define :meth:`output_from_logits`, :meth:`jacobian_factors`, :meth:`limit_kernel` and
    :attr:`kernel_scale`; the gradient, tangent and Gram follow from the factors.

    Parameters
    ----------
    d_in : int
        Input dimension.
    d_out : int
        Output dimension.
    width : int
        Hidden neurons ``m`` (even: symmetric initialization, spec §2.1).
    sigma_w : float, default=1.0
        Standard deviation of the entries of ``W`` at initialization.
    seed : int, default=0
        Seed of the initialization.

    Attributes
    ----------
    W : torch.nn.Parameter, shape (d_in, width), float64
    a : torch.Tensor, shape (d_out, width), float64
        Entries in {-1, +1}; a buffer, never trained.
    overflow_cause : str
        Why an output, gradient or Gram of finite inputs overflows float64, and the fix (the errors say it).
    """

    W: nn.Parameter
    a: torch.Tensor
    overflow_cause = (
        "the products X W or X X^T overflow float64: scale X into the unit ball (Assumption 6.1) or lower sigma_w"
    )

    def __init__(self, d_in: int, d_out: int, width: int, sigma_w: float = 1.0, seed: int = 0) -> None:
        super().__init__()
        W, a = symmetric_init(d_in, d_out, width, sigma_w, seed)
        self.W = nn.Parameter(W)
        self.register_buffer("a", a)
        self.sigma_w = float(sigma_w)

    @property
    def d_in(self) -> int:
        """Input dimension (rows of ``W``)."""
        return self.W.shape[0]

    @property
    def d_out(self) -> int:
        """Output dimension (rows of ``a``)."""
        return self.a.shape[0]

    @property
    def width(self) -> int:
        """Hidden neurons ``m`` (columns of ``W``)."""
        return self.W.shape[1]

    @property
    def kernel_scale(self) -> float:
        """``s`` with ``H = J J^T / s`` of order one; one GD step moves the outputs by ``-lr s H R``."""
        raise NotImplementedError

    def output_from_logits(self, Z: torch.Tensor) -> torch.Tensor:
        """Outputs from the logits ``Z = X W``.

        Parameters
        ----------
        Z : torch.Tensor, shape (n, m)
            Logits ``X W`` of the n inputs.

        Returns
        -------
        torch.Tensor, shape (n, d_out)
        """
        raise NotImplementedError

    def output_change(self, Z: torch.Tensor, dZ: torch.Tensor) -> torch.Tensor:
        """``F(Z + dZ) - F(Z)``: how the outputs move when the logits move by ``dZ`` (one GD step's ``-eta X G``).

        This default subtracts two outputs, which loses the relative accuracy of a small change to the outputs'
        round-off; a subclass with a closed form for the change overrides it (:class:`~attnlab.ntk.SoftmaxMLP`).

        Parameters
        ----------
        Z : torch.Tensor, shape (n, m)
            Logits ``X W``.
        dZ : torch.Tensor, shape (n, m)
            Their change.

        Returns
        -------
        torch.Tensor, shape (n, d_out)
        """
        return self.output_from_logits(Z + dZ) - self.output_from_logits(Z)

    def jacobian_factors(self, Z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The Jacobian factors at the logits ``Z`` (see the module docstring).

        Parameters
        ----------
        Z : torch.Tensor, shape (n, m)
            Logits ``X W``.

        Returns
        -------
        phi : torch.Tensor, shape (n, m)
        b : torch.Tensor, shape (n, d_out)
            With them ``dF_l(x_i)/dw_r = phi[i, r] (a[l, r] - b[i, l]) x_i``.
        """
        raise NotImplementedError

    def output_and_factors(
        self, Z: torch.Tensor, *, overwrite: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Outputs and Jacobian factors at the logits ``Z`` in one pass.

        A GD step needs all three; a subclass overrides this when they share work.

        Parameters
        ----------
        Z : torch.Tensor, shape (n, m)
            Logits ``X W``.
        overwrite : bool, default=False
            Let the network compute ``phi`` in ``Z``'s storage (``Z`` is then lost): a GD loop saves an (n, m)
            allocation per step.

        Returns
        -------
        F : torch.Tensor, shape (n, d_out)
            The outputs, as :meth:`output_from_logits`.
        phi : torch.Tensor, shape (n, m)
        b : torch.Tensor, shape (n, d_out)
            The factors, as :meth:`jacobian_factors`.
        """
        return (self.output_from_logits(Z), *self.jacobian_factors(Z))

    def limit_kernel(self, X: torch.Tensor) -> torch.Tensor:
        """Infinite-width kernel ``K`` with ``H* -> I_{d_out} (x) K`` under this initialization (spec §4.2).

        Parameters
        ----------
        X : torch.Tensor, shape (n, d_in)
            Inputs.

        Returns
        -------
        torch.Tensor, shape (n, n), float64

        Raises
        ------
        ValidationError
            When ``X`` is not a finite array of shape (n, d_in) with n >= 1, or ``K`` overflows float64 (inputs
            far outside the unit ball).
        """
        raise NotImplementedError

    def _inputs(self, X: object, name: str = "X") -> torch.Tensor:
        _check_float64("the network", self)
        return check_tensor(name, X, "nk", {"k": self.d_in})

    def _kernel_inputs(self, X: object) -> torch.Tensor:
        """``X`` of :meth:`limit_kernel`: a finite (n, d_in) array with a row, as :func:`~attnlab.ntk.gram` takes."""
        return check_tensor("X", X, "nk", {"k": self.d_in}, min_size={"n": 1})

    def _finite(self, name: str, value: torch.Tensor) -> torch.Tensor:
        """``value`` (the result ``name`` of finite inputs) when finite; else a ValidationError with the cause."""
        return check_finite_result(name, value, self.overflow_cause)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        """Network output.

        Parameters
        ----------
        X : torch.Tensor, shape (n, d_in)

        Returns
        -------
        torch.Tensor, shape (n, d_out), float64

        Raises
        ------
        ValidationError
            When ``X`` is not a finite array of shape (n, d_in), the network's weights are not float64, or the
            output overflows float64 (:attr:`overflow_cause`).
        """
        return self._finite("net(X)", self.output_from_logits(self._inputs(X) @ self.W))  # spec §8 Alg. B: Z = X^T W

    def jacobian(self, X: torch.Tensor) -> torch.Tensor:
        """Closed-form Jacobian factors at the current ``W`` (:func:`jacobian_coefficients`).

        Parameters
        ----------
        X : torch.Tensor, shape (n, d_in)
            Inputs.

        Returns
        -------
        torch.Tensor, shape (n, d_out, m), float64
            ``C`` with ``dF_l(x_i)/dw_r = C[i, l, r] x_i``.

        Raises
        ------
        ValidationError
            When ``X`` is not a finite array of shape (n, d_in), the network's weights are not float64, or the
            factors overflow float64 (:attr:`overflow_cause`).
        """
        X = self._inputs(X)
        with torch.no_grad():
            phi, b = self.jacobian_factors(X @ self.W)
            return self._finite("the Jacobian of net at X", jacobian_coefficients(phi, b, self.a))

    def loss_gradient(self, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
        """Closed-form gradient of ``0.5 ||F(X) - Y||_F^2`` in ``W`` (spec §3.2), at the current ``W``.

        Parameters
        ----------
        X : torch.Tensor, shape (n, d_in)
            Inputs.
        Y : torch.Tensor, shape (n, d_out)
            Targets.

        Returns
        -------
        torch.Tensor, shape (d_in, m), float64

        Raises
        ------
        ValidationError
            When ``X`` or ``Y`` is not finite or not of the shape above, the network's weights are not float64, or
            the gradient overflows float64 (:attr:`overflow_cause`).
        """
        X = self._inputs(X)
        Y = check_tensor("Y", Y, "nL", {"n": X.shape[0], "L": self.d_out})
        with torch.no_grad():
            F, phi, b = self.output_and_factors(X @ self.W)
            return self._finite("net.loss_gradient(X, Y)", weight_gradient(X, F - Y, phi, b, self.a))


def check_net(name: str, net: object) -> TwoLayerNet:
    """Refuse anything but a :class:`TwoLayerNet` holding float64 weights.

    Raises
    ------
    ValidationError
        Naming ``name``: not a TwoLayerNet (``None``, a ``torch.nn.Linear``), or weights of another dtype.
    """
    if not isinstance(net, TwoLayerNet):
        raise ValidationError(
            f"{name} must be a TwoLayerNet (SoftmaxMLP, ReluMLP or ExpMLP), got {type(net).__name__}; build one, "
            "e.g. attnlab.ntk.SoftmaxMLP(d_in, d_out, width)"
        )
    _check_float64(name, net)
    return net


def _check_float64(name: str, net: TwoLayerNet) -> None:
    """Refuse a network whose ``W`` or ``a`` is not float64 (``net.float()``): its inputs are float64."""
    for tensor in (net.W, net.a):
        if tensor.dtype != torch.float64:
            raise ValidationError(
                f"{name} holds {tensor.dtype} weights, but the NTK networks compute in float64; convert it with "
                ".double() (or build it anew)"
            )
