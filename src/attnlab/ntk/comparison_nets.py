"""ReLU (coupled initialization) and exp networks, the baselines of Table 1.

Spec: softmax-ntk-diffusion §5.1 (reference models), §4.2 (their infinite-width kernels, derived the same way).

Both read ``F(x) = sigma(W^T x) a^T / sqrt(m)`` with the symmetric pairs of Algorithm A, so ``F(W(0), .) = 0``
like the softmax network; the Gram ``H = J J^T`` is O(1) (``kernel_scale = 1``).
"""

from __future__ import annotations

import math

import torch

from attnlab._numerics import exp_
from attnlab._validation import check_finite_result
from attnlab.ntk.network import TwoLayerNet

__all__ = ["ExpMLP", "ReluMLP"]


class ReluMLP(TwoLayerNet):
    """``F(x) = relu(W^T x) a^T / sqrt(m)`` with coupled pairs ``(w, a), (w, -a)`` ([97] in spec §5.1).

    Parameters
    ----------
    d_in : int
        Input dimension.
    d_out : int
        Output dimension.
    width : int
        Hidden neurons ``m``; even (symmetric pairs).
    sigma_w : float, default=1.0
        Init standard deviation of ``W``'s entries.
    seed : int, default=0
        Seed of the symmetric initialization.
    """

    @property
    def kernel_scale(self) -> float:
        return 1.0

    def output_from_logits(self, Z: torch.Tensor) -> torch.Tensor:
        return torch.relu(Z) @ self.a.T / math.sqrt(self.width)  # spec §5.1: (1/sqrt m) sum_r a_r max(w_r^T x, 0)

    def jacobian_factors(self, Z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        phi = (Z > 0).to(Z.dtype) / math.sqrt(self.width)  # d relu / dz
        return phi, Z.new_zeros(Z.shape[0], self.d_out)

    def output_and_factors(
        self, Z: torch.Tensor, *, overwrite: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if not overwrite:
            return super().output_and_factors(Z)
        F = Z.clamp_(min=0.0) @ self.a.T / math.sqrt(self.width)  # spec §5.1, relu in place
        phi = Z.gt_(0.0).div_(math.sqrt(self.width))  # d relu / dz, in the same storage
        return F, phi, Z.new_zeros(Z.shape[0], self.d_out)

    def limit_kernel(self, X: torch.Tensor) -> torch.Tensor:
        """``K_ij = <x_i, x_j> (pi - theta_ij) / (2 pi)``, theta the angle between ``x_i`` and ``x_j``.

        Independent of ``sigma_w`` (the ReLU derivative is scale-free).

        Parameters
        ----------
        X : torch.Tensor, shape (n, d_in)
            Inputs. A zero row has no angle, but ``<x_i, x_j> = 0`` there, so its row and column of ``K`` are 0
            (the expectation's value: ``1{w.x_i > 0} = 0`` for every ``w``).

        Returns
        -------
        torch.Tensor, shape (n, n), float64

        Raises
        ------
        ValidationError
            When ``X`` is not a finite array of shape (n, d_in) with n >= 1, or ``<x_i, x_j>`` overflows float64.
        """
        X = self._kernel_inputs(X)
        G = X @ X.T
        norms = X.norm(dim=1)
        denominator = norms[:, None] * norms[None, :]
        # a zero row: any angle will do, G is 0 on its row and column (0/0 would make K NaN there)
        cos = torch.where(denominator > 0, G / denominator, 0.0).clamp(-1.0, 1.0)
        K = G * (math.pi - torch.arccos(cos)) / (2 * math.pi)  # E[1{w.x_i>0} 1{w.x_j>0}] for Gaussian w
        return check_finite_result("limit_kernel(X)", K, self.overflow_cause)


_EXP_LIMIT_OVERFLOW = (
    "exp(sigma_w^2 ||x_i + x_j||^2 / 2) overflows float64: scale X into the unit ball (Assumption 6.1) or lower sigma_w"
)


class ExpMLP(TwoLayerNet):
    """``F(x) = exp(W^T x) a^T / sqrt(m)`` ([48] in spec §5.1, with the 1/sqrt(m) of an O(1) kernel).

    Parameters
    ----------
    d_in : int
        Input dimension.
    d_out : int
        Output dimension.
    width : int
        Hidden neurons ``m``; even (symmetric pairs).
    sigma_w : float, default=1.0
        Init standard deviation of ``W``'s entries.
    seed : int, default=0
        Seed of the symmetric initialization.

    Notes
    -----
    The spec draws the signs of ``a`` independently; we use the symmetric pairs of Algorithm A for all three
    activations so that every network starts from ``F = 0`` and the iteration counts compare like with like.
    """

    overflow_cause = "exp(w_r^T x) overflows float64: scale X into the unit ball (Assumption 6.1) or lower sigma_w"

    @property
    def kernel_scale(self) -> float:
        return 1.0

    def output_from_logits(self, Z: torch.Tensor) -> torch.Tensor:
        return torch.exp(Z) @ self.a.T / math.sqrt(self.width)  # spec §5.1: sum_r a_r exp(w_r^T x) / sqrt m

    def jacobian_factors(self, Z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.exp(Z) / math.sqrt(self.width), Z.new_zeros(Z.shape[0], self.d_out)

    def output_and_factors(
        self, Z: torch.Tensor, *, overwrite: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        phi = exp_(Z if overwrite else Z.clone()).div_(math.sqrt(self.width))  # one exp for both (spec §5.1)
        return phi @ self.a.T, phi, Z.new_zeros(Z.shape[0], self.d_out)  # F = sum_r a_r exp(w_r^T x) / sqrt m

    def limit_kernel(self, X: torch.Tensor) -> torch.Tensor:
        """``K_ij = <x_i, x_j> exp(sigma_w^2 ||x_i + x_j||^2 / 2)`` (Gaussian moment generating function).

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
            When ``X`` is not a finite array of shape (n, d_in) with n >= 1, or the exponential overflows float64.
        """
        X = self._kernel_inputs(X)
        G = X @ X.T
        sq = X.pow(2).sum(dim=1)
        K = G * torch.exp(self.sigma_w**2 * (sq[:, None] + sq[None, :] + 2 * G) / 2)  # E[e^{w.(x_i+x_j)}]
        return check_finite_result("limit_kernel(X)", K, _EXP_LIMIT_OVERFLOW)
