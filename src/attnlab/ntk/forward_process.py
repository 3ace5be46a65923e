"""The forward (noising) process ``dX_t = -g(t) X_t dt + sqrt(2 g(t)) dB_t`` and its Gaussian transition.

Spec: softmax-ntk-diffusion §7.1 (forward process), §7.6 (Assumption 6.3 on ``g``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from attnlab._numerics import all_finite
from attnlab._validation import ValidationError, as_float64_tensor, check_instance, check_scalar, check_tensor
from attnlab.ntk._checks import check_generator

__all__ = ["ForwardProcess", "check_process", "check_times"]

_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(64)  # Gauss-Legendre rule for int_0^t g (exact for deg <= 127)


def _times(t: object, name: str = "t") -> torch.Tensor:
    """``t`` as float64, refused unless real (not complex, text or booleans) and every time is finite and >= 0 (the
    process starts at 0, spec §7.1)."""
    if isinstance(t, (bool, np.bool_)) or getattr(t, "dtype", None) in (torch.bool, np.bool_):
        raise ValidationError(f"{name} holds booleans, not times; pass real numbers >= 0 (a float or a float tensor)")
    t = as_float64_tensor(name, t)
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
        On another shape, a non-finite or negative time, complex, text or boolean times, or a zero time with
        ``positive``.
    """
    t = _times(t, name)
    if t.dim() > 1 or (t.dim() == 1 and t.numel() not in (1, n)):
        raise ValidationError(
            f"{name} has shape {tuple(t.shape)}: pass one time for every point, or one per point (shape ({n},))"
        )
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

    Notes
    -----
    The process's time range is every finite ``t >= 0`` at which ``g`` is a finite positive rate on ``[0, t]``
    (Assumption 6.3). A callable ``g`` is checked where it is evaluated: at the times themselves (:meth:`g`) and at
    the quadrature nodes in ``[0, t]`` (:meth:`integral`, :meth:`alpha`, :meth:`h`); a time past which ``g`` turns
    zero, negative or non-finite (``g = 1 - 0.6 t`` at ``t = 5``) is refused, instead of an ``alpha > 1`` and a
    negative ``h``.

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
            Times, finite and >= 0; converted to float64.

        Returns
        -------
        torch.Tensor, shape of ``t``, float64

        Raises
        ------
        ValidationError
            When ``t`` is not real, finite and >= 0, or lies outside the process's time range (``g`` is not a
            finite positive rate there).
        """
        t = _times(t)
        return self._g(t) if self.constant is not None else self._rates(t, t)

    def integral(self, t: torch.Tensor) -> torch.Tensor:
        """``int_0^t g(s) ds`` (exact for a constant ``g``, else 64-point Gauss-Legendre quadrature).

        Parameters
        ----------
        t : array_like of float, any shape
            Times, finite and >= 0; converted to float64.

        Returns
        -------
        torch.Tensor, shape of ``t``, float64

        Raises
        ------
        ValidationError
            As :meth:`g`, at the quadrature nodes in ``[0, t]``.
        """
        t = _times(t)
        if self.constant is not None:
            return self.constant * t
        nodes = torch.as_tensor(_NODES, dtype=torch.float64)
        weights = torch.as_tensor(_WEIGHTS, dtype=torch.float64)
        points = t[..., None] * (nodes + 1) / 2  # map [-1, 1] to [0, t]
        return t * (self._rates(points, t[..., None]) * weights).sum(dim=-1) / 2

    def _rates(self, s: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """A callable ``g`` at the times ``s`` reached on the way to ``t`` (broadcast to ``s``), refused by name
        unless they are finite positive rates of ``s``'s shape (Assumption 6.3)."""
        rates = self._g(s)
        if not isinstance(rates, torch.Tensor) or rates.shape != s.shape:
            got = tuple(rates.shape) if isinstance(rates, torch.Tensor) else type(rates).__name__
            raise ValidationError(
                f"g returned {got} for times of shape {tuple(s.shape)}; g must map a float64 tensor of times to "
                "rates of the same shape (Assumption 6.3)"
            )
        if rates.numel() and not (bool(rates.amin() > 0) and all_finite(rates)):
            bad = ~((rates > 0) & torch.isfinite(rates))
            at, rate, time = s[bad][0], rates[bad][0], t.expand_as(s)[bad][0]
            raise ValidationError(
                f"t == {float(time):g} is outside this process's time range: g returned {float(rate):g} at time "
                f"{float(at):.4g} in [0, t], but Assumption 6.3 needs a finite rate g > 0 at every time the process "
                "reaches; pass times where g is positive, or a schedule g positive for all t >= 0"
            )
        return rates

    def alpha(self, t: torch.Tensor) -> torch.Tensor:
        """``alpha(t) = exp(-int_0^t g)``, the signal scale of ``X_t`` (spec §7.1).

        Parameters
        ----------
        t : array_like of float, any shape
            Times, finite and >= 0; converted to float64.

        Returns
        -------
        torch.Tensor, shape of ``t``, float64
            In (0, 1] (0.0 where ``int_0^t g`` passes about 745, float64's underflow).

        Raises
        ------
        ValidationError
            As :meth:`g`; and when a value leaves [0, 1] (a schedule ``g`` that is not a positive rate).
        """
        return _unit_interval("alpha(t)", torch.exp(-self.integral(t)))  # spec §7.1

    def h(self, t: torch.Tensor) -> torch.Tensor:
        """``h(t) = 1 - alpha(t)^2``, the noise variance (spec §7.1), computed without cancellation.

        Parameters
        ----------
        t : array_like of float, any shape
            Times, finite and >= 0; converted to float64.

        Returns
        -------
        torch.Tensor, shape of ``t``, float64
            In [0, 1) (1.0 where ``alpha^2`` falls below float64's rounding of 1, ``t > 18.7`` for ``g = 1``).

        Raises
        ------
        ValidationError
            As :meth:`alpha`.
        """
        return _unit_interval("h(t)", -torch.expm1(-2 * self.integral(t)))  # spec §7.1: h = 1 - alpha^2

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
            When ``x0`` or ``t`` is not finite or not of the shapes above, a time is negative or outside the
            process's time range (:meth:`alpha`), or ``generator`` is not a ``torch.Generator``.
        """
        sizes: dict[str, int] = {}
        x0 = check_tensor("x0", x0, "nd", sizes)
        t = check_tensor("t", t, "n", sizes)
        check_generator("generator", generator)
        xi = torch.randn(x0.shape, generator=generator, dtype=torch.float64)
        x_t = self.alpha(t)[:, None] * x0 + self.h(t).sqrt()[:, None] * xi  # spec §7.1
        return x_t, xi


def _unit_interval(name: str, value: torch.Tensor) -> torch.Tensor:
    """``value`` (``alpha(t)`` or ``h(t)``) when every entry lies in [0, 1], the range a positive rate ``g`` gives
    (its ends reached only by float64's rounding); a ValidationError naming ``g`` otherwise."""
    if value.numel() and not (bool(value.amin() >= 0) and bool(value.amax() <= 1)):
        bad = value[~((value >= 0) & (value <= 1))].flatten()[0]
        raise ValidationError(
            f"{name} == {float(bad):g} lies outside [0, 1]: the schedule g does not integrate to a positive rate "
            "(Assumption 6.3); pass a g that is a finite positive rate at every time used"
        )
    return value


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
