"""Reverse-SDE sampling with an Euler-Maruyama integrator.

Spec: softmax-ntk-diffusion §7.2 (backward process), §8 Algorithm E step 4.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from attnlab._numerics import all_finite
from attnlab._validation import ValidationError, check_scalar, check_seed, check_tensor
from attnlab.ntk.forward_process import ForwardProcess, check_process

__all__ = ["euler_maruyama", "reverse_sde_sample"]

Drift = Callable[[torch.Tensor, float], torch.Tensor]


def euler_maruyama(
    drift: Drift, diffusion: Callable[[float], float], y0: torch.Tensor, times: torch.Tensor, seed: int
) -> torch.Tensor:
    """Integrate ``dY = drift(Y, s) ds + diffusion(s) dB`` on the grid ``times``.

    Parameters
    ----------
    drift : callable
        ``drift(y, s)``: (n, d), float -> (n, d).
    diffusion : callable
        ``diffusion(s)``: scalar noise amplitude.
    y0 : torch.Tensor, shape (n, d)
    times : torch.Tensor, shape (K + 1,)
        Strictly increasing grid, ``times[0]`` the start.
    seed : int

    Returns
    -------
    torch.Tensor, shape (n, d)
        ``Y`` at ``times[-1]``.

    Raises
    ------
    ValidationError
        When ``y0`` is not a finite (n, d) array, ``times`` not a finite, strictly increasing grid of at least two
        times, ``seed`` not a seed, ``drift`` returns a value of another shape than ``y0``, ``diffusion`` returns
        anything but a finite real number, or the state turns non-finite (a drift that returns NaN or inf, or
        explodes): the message names the step and its time.
    """
    y = check_tensor("y0", y0, "nd").clone()
    times = check_tensor("times", times, "K", min_size={"K": 2})
    if not bool((times[1:] > times[:-1]).all()):
        raise ValidationError(
            f"times must be strictly increasing (a negative step has no sqrt(ds)), got {times.tolist()[:8]}; "
            "sort the grid, e.g. torch.linspace(0.0, T, K + 1)"
        )
    gen = torch.Generator().manual_seed(check_seed("seed", seed))
    steps = times.numel() - 1
    for k, (s, s_next) in enumerate(zip(times[:-1].tolist(), times[1:].tolist())):
        ds = s_next - s
        noise = torch.randn(y.shape, generator=gen, dtype=torch.float64)
        move = _like(y, drift(y, s), "drift(y, s)")
        amplitude = _amplitude(diffusion(s), k + 1, s)
        y = y + move * ds + amplitude * ds**0.5 * noise  # Euler-Maruyama step
        if not all_finite(y):
            what = "returned non-finite values" if not all_finite(move) else "moved the state past float64's range"
            raise ValidationError(
                f"drift {what} at step {k + 1} of {steps} (time s = {s:.6g}): the samples are no longer finite; "
                "check the drift (or the score it is built on) at this time, or take smaller steps"
            )
    return y


def _amplitude(value: object, step: int, s: float) -> float:
    """``diffusion(s)``'s value when it is one finite real number (a 0-d tensor is read as one); a ValidationError
    naming ``diffusion`` otherwise (a tensor of points' shape would broadcast, one of another shape fail)."""
    if isinstance(value, torch.Tensor) and value.dim() > 0:
        raise ValidationError(
            f"diffusion(s) returned a tensor of shape {tuple(value.shape)} at step {step} (time s = {s:.6g}); "
            "diffusion must return one real noise amplitude per time, e.g. diffusion=lambda s: 1.0"
        )
    return check_scalar("diffusion(s)", value)


def _like(y: torch.Tensor, value: object, what: str) -> torch.Tensor:
    """``value`` when it is a tensor of ``y``'s shape; a named error otherwise (a wrong shape broadcasts)."""
    if not isinstance(value, torch.Tensor) or value.shape != y.shape:
        shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise ValidationError(
            f"{what} returned {shape}, expected a tensor of the points' shape {tuple(y.shape)} (n, d)"
        )
    return value


def reverse_sde_sample(
    score: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    process: ForwardProcess,
    y0: torch.Tensor,
    T0: float,
    T: float,
    steps: int,
    seed: int,
    denoiser: Callable[[torch.Tensor, float], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Run the backward SDE of spec §7.2 from ``t = T`` down to ``t = T0`` with a given score.

    ``dY = (g(T - s) Y + 2 g(T - s) score(Y, T - s)) ds + sqrt(2 g(T - s)) dB``, ``s`` from 0 to ``T - T0``.

    Parameters
    ----------
    score : callable
        ``score(x, t)`` with ``x`` (n, d), ``t`` a float -> (n, d).
    process : ForwardProcess
    y0 : torch.Tensor, shape (n, d)
        Start; usually ``N(0, I)`` draws (the ``p_T`` stand-in of §7.2).
    T0, T : float
    steps : int
        Number of uniform Euler-Maruyama steps.
    seed : int
    denoiser : callable, optional
        ``denoiser(x, t)`` -> (n, d), the estimate of ``E[X_0 | X_t = x]`` belonging to ``score``; when given, the
        final denoising step maps each sample at ``T0`` to it. At ``T0 = 0.01`` the marginal ``p_T0`` still carries
        noise of std ``sqrt(h(T0)) ~ 0.14`` per coordinate, about three times a mode's std in spec §9's mixture.

    Returns
    -------
    torch.Tensor, shape (n, d)
        Samples approximately from ``p_{T0}`` (from ``p_0`` with ``denoiser``).

    Raises
    ------
    ValidationError
        When ``process`` is not a :class:`ForwardProcess`, ``y0`` is not a finite (n, d) array, the times are not
        ``0 <= T0 < T``, ``steps < 1``, ``seed`` is not a seed, ``score`` returns another shape than ``y0`` or
        non-finite values (the message names the step and the time ``t``), or the samples turn non-finite.
    """
    check_process("process", process)
    check_scalar("steps", steps, kind=int, low=1)
    check_scalar("T0", T0, low=0.0)
    check_scalar("T", T, low=T0, low_inclusive=False)
    check_seed("seed", seed)

    def g(s: float) -> float:
        return float(process.g(torch.tensor(T - s, dtype=torch.float64)))

    times = torch.linspace(0.0, T - T0, steps + 1, dtype=torch.float64)
    step_at = {s: k + 1 for k, s in enumerate(times.tolist())}  # the grid times euler_maruyama passes, exactly

    def drift(y: torch.Tensor, s: float) -> torch.Tensor:
        grad = _like(y, score(y, T - s), "score(x, t)")
        if not all_finite(grad):
            raise ValidationError(
                f"score(x, t) returned non-finite values at step {step_at[s]} of {steps} (t = {T - s:.6g}); check the "
                "score model at this time (a NaN in its weights, or inputs it overflows on)"
            )
        return g(s) * y + 2 * g(s) * grad  # spec §7.2: g Y + 2 g grad log p

    y = euler_maruyama(drift, lambda s: (2 * g(s)) ** 0.5, y0, times, seed)  # spec §7.2: sqrt(2 g)
    return y if denoiser is None else denoiser(y, T0)  # final denoising step E[X_0 | X_T0]
