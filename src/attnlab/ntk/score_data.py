"""Denoising training sets for score estimation, and the input map ``u = (t / T, x_t) / rho``.

Spec: softmax-ntk-diffusion §7.5 (training set, normalization default), §7.4 (noisy vs true labels).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlab._validation import check_in, check_scalar, check_tensor
from attnlab.ntk.forward_process import ForwardProcess

__all__ = ["DenoisingSet", "InputMap", "denoising_set", "fit_input_map"]


@dataclass(frozen=True)
class DenoisingSet:
    """Triples ``(t_j, x_{0,j}, x_{t_j})`` of spec §7.5; the label is the clean sample ``x_0`` (noisy label).

    Attributes
    ----------
    t : torch.Tensor, shape (n,)
    x0 : torch.Tensor, shape (n, d)
    x_t : torch.Tensor, shape (n, d)
    """

    t: torch.Tensor
    x0: torch.Tensor
    x_t: torch.Tensor


TIMES = ("uniform", "log-uniform")


def denoising_set(
    x0: torch.Tensor, process: ForwardProcess, T0: float, T: float, seed: int, times: str = "uniform"
) -> DenoisingSet:
    """Draw a time ``t_j`` and ``x_{t_j} = alpha x_{0,j} + sqrt(h) xi_j`` for each clean sample (spec §7.5).

    Parameters
    ----------
    x0 : torch.Tensor, shape (n, d)
        Samples of ``p_0``.
    process : ForwardProcess
    T0, T : float
        Early-stopping and final diffusion times, ``0 < T0 < T``.
    seed : int
    times : {"uniform", "log-uniform"}, default="uniform"
        ``t_j ~ Unif[T0, T]`` (spec §7.5), or ``log t_j ~ Unif[log T0, log T]`` (ours: as many draws per decade
        of ``t``, so that the small times where the mixture's modes live are not ~5% of the set).

    Returns
    -------
    DenoisingSet
    """
    x0 = check_tensor("x0", x0, "nd")
    check_in("times", times, TIMES)
    check_scalar("T0", T0, low=0.0, low_inclusive=False)
    check_scalar("T", T, low=T0, low_inclusive=False)
    gen = torch.Generator().manual_seed(seed)
    u = torch.rand(x0.shape[0], generator=gen, dtype=torch.float64)
    t = T0 + (T - T0) * u if times == "uniform" else T0 * (T / T0) ** u  # spec §7.5: t_j ~ U[T0, T]; or log-uniform
    x_t, _ = process.sample(x0, t, gen)  # spec §7.5: x_t = alpha x0 + sqrt(h) xi
    return DenoisingSet(t, x0, x_t)


@dataclass(frozen=True)
class InputMap:
    """``u(t, x) = (t / T, x / c(t)) / rho`` in R^{d+1}: the network input, fixed on the training set.

    ``c(t) = sqrt(alpha(t)^2 v0 + h(t))`` is the per-coordinate scale of ``X_t`` (``v0`` the mean squared
    coordinate of ``X_0``), so that small-``t`` inputs are not crushed by the heavy noise of large ``t`` when
    everything is divided by ``rho``.

    Notes
    -----
    Spec §7.5 leaves the normalization open [U] and proposes ``u = (t / T, x_t) / rho``. With it, the inputs at
    small ``t`` (where the denoiser has its structure) have norm ~ ``0.14`` after division by ``rho ~ 3.5``, the
    kernel is nearly linear there, and the learned sampler covered no mode in our runs; the noise-level scale
    ``1 / c(t)`` (as in the EDM preconditioning of Karras et al. 2022) is our change.

    With ``skip=True`` (also ours) the denoiser is ``k(t) x + F(W, u)`` with the Gaussian (linear) denoiser gain
    ``k(t) = alpha v0 / (alpha^2 v0 + h)``, so the network learns the residual ``E[X_0 | X_t] - k(t) X_t``:
    regression on the shifted labels ``x_0 - k(t) x_t``, which leaves the theory unchanged (a known function of
    the input is subtracted from the target). ``skip=False`` is the plain parametrization of spec §7.4.

    Attributes
    ----------
    process : ForwardProcess
    T : float
        Final diffusion time.
    v0 : float
        Mean squared coordinate of ``X_0`` on the training set.
    rho : float
        Divisor; ``max_j ||(t_j / T, x_{t_j} / c(t_j))||`` on the training set (training inputs in the unit ball).
    skip : bool
        Whether the denoiser adds the linear part ``k(t) x``.
    """

    process: ForwardProcess
    T: float
    v0: float
    rho: float
    skip: bool = True

    def skip_gain(self, t: torch.Tensor) -> torch.Tensor:
        """``k(t) = alpha v0 / (alpha^2 v0 + h)`` (zero without ``skip``), same shape as ``t``."""
        if not self.skip:
            return torch.zeros_like(t)
        alpha = self.process.alpha(t)
        return alpha * self.v0 / (alpha**2 * self.v0 + self.process.h(t))  # E[X0|Xt] for X0 ~ N(0, v0 I)

    def __call__(self, t: torch.Tensor | float, x: torch.Tensor) -> torch.Tensor:
        """``u``, shape (n, d + 1), from ``t`` (n,) or a float and ``x`` (n, d)."""
        t = torch.as_tensor(t, dtype=torch.float64).expand(x.shape[0])
        c = (self.process.alpha(t) ** 2 * self.v0 + self.process.h(t)).sqrt()  # per-coordinate std of X_t
        return torch.cat([t[:, None] / self.T, x / c[:, None]], dim=1) / self.rho  # spec §7.5 (scaled, ours)


def fit_input_map(data: DenoisingSet, process: ForwardProcess, T: float, skip: bool = True) -> InputMap:
    """The :class:`InputMap` fitted on ``data``: ``v0`` from its clean samples, ``rho`` its largest raw norm."""
    check_scalar("T", T, low=0.0, low_inclusive=False)
    v0 = float(data.x0.pow(2).mean())
    raw = InputMap(process, float(T), v0, 1.0, skip)(data.t, data.x_t)
    return InputMap(process, float(T), v0, float(raw.norm(dim=1).max()), skip)  # spec §7.5: rho >= max ||u_j||
