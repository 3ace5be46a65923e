"""The two-layer softmax network ``F(x) = m a softmax(W^T x)`` (Algorithm B).

Spec: softmax-ntk-diffusion §2 (model), §3.2 (gradient), §4.2 (infinite-width kernel).
"""

from __future__ import annotations

import torch

from attnlab._numerics import exp_
from attnlab._validation import check_finite_result
from attnlab.ntk.network import TwoLayerNet

__all__ = ["SoftmaxMLP", "softmax_factors", "softmax_output", "softmax_limit_kernel"]


_LIMIT_OVERFLOW = (
    "exp(sigma_w^2 <x_i, x_j>) overflows float64: scale X into the unit ball (Assumption 6.1) or lower sigma_w"
)


def softmax_output(Z: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """``F = m S a^T`` with ``S = softmax(Z)`` row-wise.

    Parameters
    ----------
    Z : torch.Tensor, shape (n, m)
        Logits ``X W``.
    a : torch.Tensor, shape (L, m)

    Returns
    -------
    torch.Tensor, shape (n, L)
    """
    S = torch.softmax(Z, dim=-1)  # spec §8 Alg. B: subtract row max, row-softmax
    return Z.shape[-1] * S @ a.T  # spec §2: F = m <a_l, S(x)>


def softmax_factors(Z: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Jacobian factors ``phi = m S`` (n, m) and ``b = S a^T`` (n, L) of the softmax network.

    With them ``dF_l(x)/dw_r = m S_r (a_{l,r} - <a_l, S>) x = m S_r <v_{l,r}, S> x`` (spec §3.2).
    """
    S = torch.softmax(Z, dim=-1)
    return Z.shape[-1] * S, S @ a.T  # spec §3.2: <v_{l,r}, S> = a_{l,r} - <a_l, S>


def softmax_limit_kernel(X: torch.Tensor, sigma_w: float) -> torch.Tensor:
    """``K_ij = <x_i, x_j> exp(sigma_w^2 <x_i, x_j>)``, shape (n, n) (spec §4.2)."""
    G = X @ X.T
    return G * torch.exp(sigma_w**2 * G)  # spec §4.2: H* -> I_d (x) K


class SoftmaxMLP(TwoLayerNet):
    """Two-layer softmax network ``F(W, x) = width * softmax(x^T W) a^T``; only ``W`` is trained.

    Spec: softmax-ntk-diffusion §2, Definition 3.7 (symmetric initialization), Algorithm B.

    Parameters
    ----------
    d_in : int
        Input dimension.
    d_out : int
        Output dimension.
    width : int
        Hidden neurons ``m``; even.
    sigma_w : float, default=1.0
        Init standard deviation of ``W``'s entries (the paper's sigma).
    seed : int, default=0
        Seed of the symmetric initialization.

    Attributes
    ----------
    W : torch.nn.Parameter, shape (d_in, width), float64
    a : torch.Tensor, shape (d_out, width), float64

    Notes
    -----
    The output carries the factor ``m`` (each ``S_r ~ 1/m``), so the Gram ``H = J J^T / m`` is O(1) and one
    GD step moves the outputs by about ``-lr m H (F - Y)`` (spec §4.1).

    Examples
    --------
    >>> net = SoftmaxMLP(3, 2, 8, seed=0)
    >>> float(net(torch.ones(4, 3) / 2).detach().abs().max())
    0.0
    """

    @property
    def kernel_scale(self) -> float:
        return float(self.width)

    def output_from_logits(self, Z: torch.Tensor) -> torch.Tensor:
        return softmax_output(Z, self.a)

    def jacobian_factors(self, Z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return softmax_factors(Z, self.a)

    def output_change(self, Z: torch.Tensor, dZ: torch.Tensor) -> torch.Tensor:
        # spec §2, F = m S a^T: with u = expm1(dZ) and q = <S, u> per row, S' - S = S (u - q) / (1 + q). Every term is
        # of the size of the change, so it keeps float64's relative accuracy (about 1e-15 against a long-double
        # reference at m = 16000, where the difference of two O(1) outputs loses 1e-9 of it)
        S = torch.softmax(Z, dim=-1)
        u = torch.expm1(dZ)
        q = (S * u).sum(dim=-1, keepdim=True)
        return Z.shape[-1] * (S * (u - q)) @ self.a.T / (1.0 + q)

    def output_and_factors(
        self, Z: torch.Tensor, *, overwrite: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if not overwrite:
            phi, b = softmax_factors(Z, self.a)
            return Z.shape[-1] * b, phi, b  # spec §2: F = m S a^T = m b, one softmax for the output and the factors
        m = Z.shape[-1]
        # the softmax in place: phi = m S (spec §3.2). Not torch.softmax: its exp is slower than exp_'s exp2 where the
        # rows sit in cache (diffusion.gmm's n = 4096, m = 512: 3.4 against 2.8 ms); it wins only on rows that stream
        # from memory (ntk.table1's m = 131072: 10.9 against 14.5 ms), a small share of the NTK runs
        phi = exp_(Z.sub_(Z.amax(dim=-1, keepdim=True)))
        phi.mul_(m / phi.sum(dim=-1, keepdim=True))
        F = phi @ self.a.T  # spec §2: F = m S a^T
        return F, phi, F / m  # b = S a^T

    def limit_kernel(self, X: torch.Tensor) -> torch.Tensor:
        K = softmax_limit_kernel(self._kernel_inputs(X), self.sigma_w)
        return check_finite_result("limit_kernel(X)", K, _LIMIT_OVERFLOW)
