"""Isotropic Gaussian-mixture target ``p_0`` with its closed-form noisy density, denoiser and score.

Spec: softmax-ntk-diffusion §9 (diffusion experiment, ground-truth denoiser), §7.4 (Tweedie's formula).
"""

from __future__ import annotations

import math

import torch

from attnlab._validation import ValidationError, check_scalar, check_tensor
from attnlab.ntk._checks import check_generator
from attnlab.ntk.forward_process import ForwardProcess, check_process, check_times

__all__ = ["MAX_REDRAWS", "GaussianMixture", "circle_mixture"]

MAX_REDRAWS = 1000
"""Rounds of redraws :meth:`GaussianMixture.sample` makes for the points outside ``max_norm`` before it gives up
(each round redraws every point still outside)."""


class GaussianMixture:
    """``p_0 = sum_k pi_k N(mu_k, s_k^2 I)``; under the forward process ``p_t = sum_k pi_k N(alpha mu_k, v_k I)``
    with ``v_k = alpha^2 s_k^2 + h``.

    Parameters
    ----------
    means : array-like, shape (K, d)
    stds : array-like, shape (K,)
        Positive.
    weights : array-like, shape (K,)
        Nonnegative, summing to 1.
    """

    def __init__(self, means: object, stds: object, weights: object) -> None:
        sizes: dict[str, int] = {}
        self.means = check_tensor("means", means, "Kd", sizes)
        self.stds = check_tensor("stds", stds, "K", sizes)
        self.weights = check_tensor("weights", weights, "K", sizes)
        if not bool((self.stds > 0).all()):
            raise ValidationError(f"stds must be positive, got {self.stds.tolist()}")
        if bool((self.weights < 0).any()) or abs(float(self.weights.sum()) - 1.0) > 1e-9:
            raise ValidationError(
                f"weights must be nonnegative and sum to 1, got {self.weights.tolist()}; normalize them"
            )

    @property
    def dim(self) -> int:
        """Dimension ``d`` of the points."""
        return self.means.shape[1]

    def sample(self, n: int, generator: torch.Generator, max_norm: float | None = None) -> torch.Tensor:
        """Draw ``n`` points of ``p_0``.

        Parameters
        ----------
        n : int
            Number of points, >= 1.
        generator : torch.Generator
            The only source of randomness (required: ``None`` would draw from torch's global RNG).
        max_norm : float, optional
            Redraw points of larger Euclidean norm until none is left (spec §9: data on a bounded set), > 0; None
            keeps every draw. At most ``MAX_REDRAWS`` rounds of redraws.

        Returns
        -------
        torch.Tensor, shape (n, d), float64

        Raises
        ------
        ValidationError
            When ``n`` is not an int >= 1, ``generator`` is not a ``torch.Generator``, ``max_norm`` is not > 0, or
            points still lie outside ``max_norm`` after ``MAX_REDRAWS`` rounds (the mixture puts too little mass
            within it).
        """
        check_scalar("n", n, kind=int, low=1)
        check_generator("generator", generator)
        if max_norm is not None:
            check_scalar("max_norm", max_norm, low=0.0, low_inclusive=False)
        x = self._draw(n, generator)
        if max_norm is None:
            return x
        pending = torch.nonzero(x.norm(dim=1) > max_norm).flatten()  # rows still to redraw, in order
        for _ in range(MAX_REDRAWS):
            if not pending.numel():
                return x
            fresh = self._draw(pending.numel(), generator)
            outside = fresh.norm(dim=1) > max_norm
            x[pending[~outside]] = fresh[~outside]
            pending = pending[outside]
        if not pending.numel():
            return x
        raise ValidationError(
            f"max_norm == {max_norm!r}: {pending.numel()} of {n} points still lie outside it after {MAX_REDRAWS} "
            f"rounds of redraws, so the mixture puts little mass within it (its means have norms up to "
            f"{float(self.means.norm(dim=1).max()):.3g}, its stds up to {float(self.stds.max()):.3g}); raise "
            "max_norm, or pass None to keep every draw"
        )

    def _draw(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` independent draws of ``p_0``: a component, then a Gaussian around its mean."""
        comp = torch.multinomial(self.weights, n, replacement=True, generator=generator)
        return self.means[comp] + self.stds[comp, None] * torch.randn(
            n, self.dim, generator=generator, dtype=torch.float64
        )

    def _posterior(self, x: torch.Tensor, t: torch.Tensor, process: ForwardProcess):
        check_process("process", process)
        x = check_tensor("x", x, "nd", {"d": self.dim})
        t = check_times("t", t, x.shape[0])
        alpha, h = process.alpha(t)[:, None], process.h(t)[:, None]  # (n, 1)
        var = alpha**2 * self.stds**2 + h  # (n, K): spec §9: alpha^2 s_k^2 + h
        centred = x[:, None, :] - alpha[:, :, None] * self.means  # (n, K, d): x - alpha mu_k
        log_joint = (
            torch.log(self.weights) - 0.5 * centred.pow(2).sum(-1) / var - 0.5 * self.dim * torch.log(2 * math.pi * var)
        )  # (n, K): log pi_k N(x; alpha mu_k, v_k I)
        return x, alpha, var, centred, log_joint

    def log_density(self, x: torch.Tensor, t: torch.Tensor, process: ForwardProcess) -> torch.Tensor:
        """``log p_t(x)``, the log density of the noised mixture.

        Parameters
        ----------
        x : array_like, shape (n, d)
            Points.
        t : float or array_like, shape (n,)
            Times, >= 0: one for every point, or one per point.
        process : ForwardProcess
            The forward process that gives ``alpha(t)`` and ``h(t)``.

        Returns
        -------
        torch.Tensor, shape (n,), float64

        Raises
        ------
        ValidationError
            When ``x`` is not a finite array of shape (n, d), or ``t`` not finite times >= 0 of shape () or (n,).
        """
        *_, log_joint = self._posterior(x, t, process)
        return torch.logsumexp(log_joint, dim=1)

    def denoiser(self, x: torch.Tensor, t: torch.Tensor, process: ForwardProcess) -> torch.Tensor:
        """``E[X_0 | X_t = x]`` (spec §9).

        ``sum_k w_k(x) [mu_k + alpha s_k^2 / v_k (x - alpha mu_k)]`` with posterior weights ``w_k(x)``.

        Parameters
        ----------
        x : array_like, shape (n, d)
            Points.
        t : float or array_like, shape (n,)
            Times, >= 0: one for every point, or one per point.
        process : ForwardProcess
            The forward process that gives ``alpha(t)`` and ``h(t)``.

        Returns
        -------
        torch.Tensor, shape (n, d), float64

        Raises
        ------
        ValidationError
            When ``x`` is not a finite array of shape (n, d), or ``t`` not finite times >= 0 of shape () or (n,).
        """
        x, alpha, var, centred, log_joint = self._posterior(x, t, process)
        w = torch.softmax(log_joint, dim=1)  # (n, K): spec §9 w_k(x)
        gain = alpha * self.stds**2 / var  # (n, K)
        return (w[:, :, None] * (self.means + gain[:, :, None] * centred)).sum(1)  # spec §9

    def score(self, x: torch.Tensor, t: torch.Tensor, process: ForwardProcess) -> torch.Tensor:
        """``grad_x log p_t(x) = -sum_k w_k(x) (x - alpha mu_k) / v_k``; finite at ``t = 0``.

        Parameters
        ----------
        x : array_like, shape (n, d)
            Points.
        t : float or array_like, shape (n,)
            Times, >= 0: one for every point, or one per point.
        process : ForwardProcess
            The forward process that gives ``alpha(t)`` and ``h(t)``.

        Returns
        -------
        torch.Tensor, shape (n, d), float64

        Raises
        ------
        ValidationError
            When ``x`` is not a finite array of shape (n, d), or ``t`` not finite times >= 0 of shape () or (n,).
        """
        x, alpha, var, centred, log_joint = self._posterior(x, t, process)
        w = torch.softmax(log_joint, dim=1)
        return -(w[:, :, None] * centred / var[:, :, None]).sum(1)


def circle_mixture(modes: int = 4, radius: float = 0.5, std: float = 0.05) -> GaussianMixture:
    """Equal-weight mixture of ``modes`` Gaussians with means on a circle of ``radius`` in the plane (spec §9).

    Parameters
    ----------
    modes : int, default=4
        Number of components, >= 1; their means are equally spaced in angle, the first at angle 0.
    radius : float, default=0.5
        Radius of the circle of means, >= 0.
    std : float, default=0.05
        Standard deviation of every component, > 0.

    Returns
    -------
    GaussianMixture
        In dimension 2.

    Raises
    ------
    ValidationError
        When an argument is out of the ranges above.
    """
    check_scalar("modes", modes, kind=int, low=1)
    check_scalar("radius", radius, low=0.0)
    check_scalar("std", std, low=0.0, low_inclusive=False)
    angles = 2 * math.pi * torch.arange(modes, dtype=torch.float64) / modes
    means = radius * torch.stack([torch.cos(angles), torch.sin(angles)], dim=1)
    return GaussianMixture(means, torch.full((modes,), std, dtype=torch.float64), torch.full((modes,), 1.0 / modes))
