"""The forward (noising) process ``dX_t = -g(t) X_t dt + sqrt(2 g(t)) dB_t`` and its Gaussian transition.

Spec: softmax-ntk-diffusion §7.1 (forward process), §7.6 (Assumption 6.3 on ``g``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from attnlab._validation import ValidationError, as_float64_tensor, check_instance, check_scalar, check_tensor
from attnlab.ntk._checks import check_generator

__all__ = ["ForwardProcess", "check_process", "check_times"]

_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(64)  # Gauss-Legendre rule for int_0^t g (exact for deg <= 127)


def _times(t: object, name: str = "t") -> torch.Tensor:
    """``t`` as float64, refused unless every time is finite and >= 0 (the process starts at 0, spec §7.1)."""
    t = torch.as_tensor(t, dtype=torch.float64)
    if not bool(torch.isfinite(t).all()) or bool((t < 0).any()):
        bad = t[~torch.isfinite(t) | (t < 0)].flatten()[0]
        raise ValidationError(f"{name} must hold finite times >= 0 (the process starts at t = 0); got {float(bad):g}")
    return t


def check_times(name: str, t: object, n: int, *, positive: bool = False) -> torch.Tensor:
    """Diffusion times for ``n`` points: one for every point (a float, shape ()) or one per point (shape (n,)).

    Parameters
    ----------
    name : str
        Argument name used in error messages.
    t : float or array_like, shape () or (n,)
        Finite times, >= 0 (> 0 with ``positive``).
    n : int
        Number of points.
    positive : bool, default=False
        Refuse ``t = 0`` too (where ``h(0) = 0`` divides, as in Tweedie's formula).

    Returns
    -------
    torch.Tensor, shape (n,), float64

    Raises
    ------
    ValidationError
        On another shape, a non-finite or negative time, or a zero time with ``positive``.
    """
    t = as_float64_tensor(name, t)
    if t.dim() > 1 or (t.dim() == 1 and t.numel() not in (1, n)):
        raise ValidationError(
            f"{name} has shape {tuple(t.shape)}: pass one time for every point, or one per point (shape ({n},))"
        )
    t = _times(t, name)
    if positive and bool((t == 0).any()):
        raise ValidationError(f"{name} must hold times > 0 (h(0) = 0 divides in Tweedie's formula); got 0")
    return t.expand(n)


class ForwardProcess:
    """Forward SDE with schedule ``g``; ``X_t = alpha(t) X_0 + sqrt(h(t)) xi``.

    Spec: softmax-ntk-diffusion §7.1. ``g = 1`` is the Ornstein-Uhlenbeck process (``alpha = e^{-t}``).

    Parameters
    ----------
    g : float or callable, default=1.0
        A positive constant, or a function mapping a float64 tensor of times to positive rates of the same shape
        (Assumption 6.3: bounded, a.e. continuous; integrated by 64-point Gauss-Legendre quadrature).

    Examples
    --------
    >>> process = ForwardProcess(1.0)
    >>> round(float(process.alpha(torch.tensor(1.0))), 6)
    0.367879
    """

    def __init__(self, g: float | Callable[[torch.Tensor], torch.Tensor] = 1.0) -> None:
        if callable(g):
            probe = g(torch.linspace(0.0, 1.0, 5, dtype=torch.float64))
            if not isinstance(probe, torch.Tensor) or probe.shape != (5,) or not bool((probe > 0).all()):
                raise ValidationError(
                    "g must map a float64 tensor of times to a tensor of positive rates of the same shape "
                    "(Assumption 6.3); e.g. g=lambda t: 1 + t"
                )
            self._g = g
            self.constant: float | None = None
        else:
            self.constant = float(check_scalar("g", g, low=0.0, low_inclusive=False))
            self._g = lambda t: torch.full_like(t, self.constant)

    def g(self, t: torch.Tensor) -> torch.Tensor:
        """The rate ``g(t)``.

        Parameters
        ----------
        t : array_like of float, any shape
            Times, finite and >= 0 (a ValidationError otherwise); converted to float64.

        Returns
        -------
        torch.Tensor, shape of ``t``, float64
        """
        return self._g(_times(t))

    def integral(self, t: torch.Tensor) -> torch.Tensor:
        """``int_0^t g(s) ds`` (exact for a constant ``g``, else 64-point Gauss-Legendre quadrature).

        Parameters
        ----------
        t : array_like of float, any shape
            Times, finite and >= 0 (a ValidationError otherwise); converted to float64.

        Returns
        -------
        torch.Tensor, shape of ``t``, float64
        """
        t = _times(t)
        if self.constant is not None:
            return self.constant * t
        nodes = torch.as_tensor(_NODES, dtype=torch.float64)
        weights = torch.as_tensor(_WEIGHTS, dtype=torch.float64)
        points = t[..., None] * (nodes + 1) / 2  # map [-1, 1] to [0, t]
        return t * (self._g(points) * weights).sum(dim=-1) / 2

    def alpha(self, t: torch.Tensor) -> torch.Tensor:
        """``alpha(t) = exp(-int_0^t g)``, the signal scale of ``X_t`` (spec §7.1).

        Parameters
        ----------
        t : array_like of float, any shape
            Times, finite and >= 0 (a ValidationError otherwise); converted to float64.

        Returns
        -------
        torch.Tensor, shape of ``t``, float64
            In (0, 1].
        """
        return torch.exp(-self.integral(t))  # spec §7.1

    def h(self, t: torch.Tensor) -> torch.Tensor:
        """``h(t) = 1 - alpha(t)^2``, the noise variance (spec §7.1), computed without cancellation.

        Parameters
        ----------
        t : array_like of float, any shape
            Times, finite and >= 0 (a ValidationError otherwise); converted to float64.

        Returns
        -------
        torch.Tensor, shape of ``t``, float64
            In [0, 1).
        """
        return -torch.expm1(-2 * self.integral(t))  # spec §7.1: h = 1 - alpha^2

    def sample(
        self, x0: torch.Tensor, t: torch.Tensor, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw ``X_t | X_0 = x0``.

        Parameters
        ----------
        x0 : torch.Tensor, shape (n, d)
        t : torch.Tensor, shape (n,)
        generator : torch.Generator
            The only source of randomness (required: ``None`` would draw from torch's global RNG).

        Returns
        -------
        x_t : torch.Tensor, shape (n, d)
        xi : torch.Tensor, shape (n, d)
            The standard normal noise used.

        Raises
        ------
        ValidationError
            When ``x0`` or ``t`` is not finite or not of the shapes above, a time is negative, or ``generator`` is
            not a ``torch.Generator``.
        """
        sizes: dict[str, int] = {}
        x0 = check_tensor("x0", x0, "nd", sizes)
        t = check_tensor("t", t, "n", sizes)
        check_generator("generator", generator)
        xi = torch.randn(x0.shape, generator=generator, dtype=torch.float64)
        x_t = self.alpha(t)[:, None] * x0 + self.h(t).sqrt()[:, None] * xi  # spec §7.1
        return x_t, xi


def check_process(name: str, process: object) -> ForwardProcess:
    """Refuse anything but a :class:`ForwardProcess`.

    Raises
    ------
    ValidationError
        Naming ``name`` and the fix.
    """
    return check_instance(
        name, process, ForwardProcess, "pass e.g. ForwardProcess(1.0) (the Ornstein-Uhlenbeck process)"
    )
