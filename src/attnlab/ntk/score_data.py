"""Denoising training sets for score estimation, and the network's input map ``u(t, x)``.

Spec: softmax-ntk-diffusion §7.5 (training set, normalization default), §7.4 (noisy vs true labels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from attnlab._validation import (
    ValidationError,
    check_bool,
    check_in,
    check_instance,
    check_scalar,
    check_seed,
    check_tensor,
)
from attnlab.ntk.forward_process import ForwardProcess, check_process, check_times

__all__ = ["INPUT_MAPS", "DenoisingSet", "InputMap", "check_denoising_set", "denoising_set", "fit_input_map"]


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


def check_denoising_set(name: str, data: object) -> DenoisingSet:
    """Refuse anything but a :class:`DenoisingSet`.

    Raises
    ------
    ValidationError
        Naming ``name`` and the fix.
    """
    return check_instance(name, data, DenoisingSet, "build it with denoising_set(x0, process, T0, T, seed)")


def denoising_set(
    x0: torch.Tensor,
    process: ForwardProcess,
    T0: float,
    T: float,
    seed: int,
    times: str = "uniform",
    power: float = 1.0,
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
    power : float, default=1.0
        With ``times="log-uniform"``: ``t_j = T0 (T / T0)^(U^power)``, ``U ~ Unif[0, 1]``; ``power > 1`` puts more
        draws at small ``t`` (ours; with ``T / T0 = 200``, ``power = 3`` puts 59% of them in ``[T0, 3 T0]``
        against 21% for ``power = 1``). Ignored for uniform times.

    Returns
    -------
    DenoisingSet

    Raises
    ------
    ValidationError
        When ``x0`` is not a finite (n, d) array with n >= 1, ``process`` is not a :class:`ForwardProcess`, the
        times are not ``0 < T0 < T``, ``seed`` is not a seed (:func:`~attnlab._validation.check_seed`), ``times`` is
        unknown or ``power <= 0``.
    """
    x0 = check_tensor("x0", x0, "nd", min_size={"n": 1})
    check_process("process", process)
    check_in("times", times, TIMES)
    check_scalar("T0", T0, low=0.0, low_inclusive=False)
    check_scalar("T", T, low=T0, low_inclusive=False)
    check_scalar("power", power, low=0.0, low_inclusive=False)
    gen = torch.Generator().manual_seed(check_seed("seed", seed))
    u = torch.rand(x0.shape[0], generator=gen, dtype=torch.float64)
    t = T0 + (T - T0) * u if times == "uniform" else T0 * (T / T0) ** u**power  # spec §7.5: U[T0, T]; or ours
    x_t, _ = process.sample(x0, t, gen)  # spec §7.5: x_t = alpha x0 + sqrt(h) xi
    return DenoisingSet(t, x0, x_t)


INPUT_MAPS = ("spec", "scaled", "sphere")


@dataclass(frozen=True)
class InputMap:
    """The network input ``u(t, x)`` in the unit ball of ``R^{d+1}``, fixed on the training set (spec §7.5).

    Three maps (``kind``); ``c(t) = sqrt(alpha(t)^2 v0 + h(t))`` is the per-coordinate scale of ``X_t`` (``v0``
    the mean squared coordinate of ``X_0``):

    - ``"spec"``: ``u = (t / T, x) / rho``, the default proposed by spec §7.5.
    - ``"scaled"`` (ours): ``u = (t / T, x / c(t)) / rho``, the noise-level scaling of EDM (Karras et al. 2022), so
      that small-``t`` inputs are not crushed by the heavy noise of large ``t`` when everything is divided by ``rho``.
    - ``"sphere"`` (ours): ``u = r(t) P(x / c(t))`` with ``P`` the inverse stereographic projection of ``R^d`` onto
      the unit sphere of ``R^{d+1}`` and the radius ``r(t) = 1 - decay * log(t / T0) / log(T / T0)``, which falls
      from 1 at ``T0`` to ``1 - decay`` at ``T``. Every input, training or test, lies in the unit ball without a
      fitted divisor (``rho = 1``), closing the gap that unbounded Gaussian noise leaves in Assumption 6.1.

    Notes
    -----
    Why ``"sphere"``: the limit kernel ``<u, u'> exp(sigma_w^2 <u, u'>)`` (spec §4.2) resolves directions to an
    angle of about ``1 / (sigma_w |u|)``. With ``"spec"`` and ``"scaled"`` the small-``t`` inputs, where the mixture's
    modes live, have norm 0.14-0.4, so the kernel is nearly linear there and cannot separate four modes; on the
    sphere they have norm 1 and four modes on a circle sit about 85 degrees apart. The radius ``r(t)`` makes the
    kernel smooth at large ``t``, where the denoiser is nearly linear and the labels ``x_0`` are nearly pure noise,
    so that fitting those labels does not disturb the small-``t`` fit.

    With ``skip=True`` (ours) the denoiser is ``k(t) x + F(W, u)`` with the Gaussian (linear) denoiser gain
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
        Divisor of ``"spec"`` and ``"scaled"``: ``max_j`` of the raw input norm on the training set (training
        inputs in the unit ball); 1 for ``"sphere"``.
    skip : bool
        Whether the denoiser adds the linear part ``k(t) x``.
    kind : {"spec", "scaled", "sphere"}
    T0 : float, optional
        Smallest diffusion time, where ``r = 1``; required by ``"sphere"``, in ``(0, T)``.
    decay : float
        ``"sphere"``: ``1 - r(T)``, in ``[0, 1)``.
    d : int, optional
        Dimension of the points ``x`` the map was fitted on (:func:`fit_input_map` sets it); when given, a call
        with points of another dimension is refused.

    Raises
    ------
    ValidationError
        ``process`` not a :class:`ForwardProcess`; ``T`` or ``rho`` not > 0, ``v0`` negative, ``skip`` not a bool;
        unknown ``kind``; ``"sphere"`` without ``T0`` or with ``T0`` or ``decay`` out of range.
    """

    process: ForwardProcess
    T: float
    v0: float
    rho: float
    skip: bool = True
    kind: str = "spec"
    T0: float | None = None
    decay: float = 0.9
    d: int | None = None

    def __post_init__(self) -> None:
        check_process("process", self.process)
        check_scalar("T", self.T, low=0.0, low_inclusive=False)
        check_scalar("v0", self.v0, low=0.0)  # a mean square; the "scaled" and "sphere" maps divide by c(t)
        check_scalar("rho", self.rho, low=0.0, low_inclusive=False)  # the divisor that puts u in the unit ball
        check_bool("skip", self.skip)
        check_in("kind", self.kind, INPUT_MAPS)
        if self.d is not None:
            check_scalar("d", self.d, kind=int, low=1)
        if self.kind != "sphere":
            return
        if self.T0 is None:
            raise ValidationError(
                "the sphere input map needs T0, the smallest diffusion time, where its radius is 1; "
                "pass T0= (e.g. T0=0.01)"
            )
        check_scalar("T0", self.T0, low=0.0, high=self.T, low_inclusive=False, high_inclusive=False)
        check_scalar("decay", self.decay, low=0.0, high=1.0, high_inclusive=False)

    def skip_gain(self, t: torch.Tensor) -> torch.Tensor:
        """The linear skip gain ``k(t) = alpha v0 / (alpha^2 v0 + h)``, ``E[X_0 | X_t]`` for ``X_0 ~ N(0, v0 I)``.

        Parameters
        ----------
        t : torch.Tensor, any shape, float64
            Diffusion times, >= 0.

        Returns
        -------
        torch.Tensor, shape of ``t``, float64
            The gain, >= 0; all zero when :attr:`skip` is False.
        """
        if not self.skip:
            return torch.zeros_like(t)
        alpha = self.process.alpha(t)
        return alpha * self.v0 / (alpha**2 * self.v0 + self.process.h(t))  # E[X0|Xt] for X0 ~ N(0, v0 I)

    def radius(self, t: torch.Tensor) -> torch.Tensor:
        """The input radius of the ``"sphere"`` map, ``r(t) = 1 - decay * log(t / T0) / log(T / T0)``.

        Parameters
        ----------
        t : torch.Tensor, any shape, float64
            Diffusion times, > 0; the fraction ``log(t / T0) / log(T / T0)`` is clamped to [0, 1].

        Returns
        -------
        torch.Tensor, shape of ``t``, float64
            In ``[1 - decay, 1]``: 1 at ``t <= T0``, ``1 - decay`` at ``t >= T``. Meaningful for ``"sphere"`` only
            (the other maps have no ``T0``).
        """
        frac = (torch.log(t / self.T0) / math.log(self.T / self.T0)).clamp(0.0, 1.0)
        return 1.0 - self.decay * frac

    def __call__(self, t: torch.Tensor | float, x: torch.Tensor) -> torch.Tensor:
        """``u``, shape (n, d + 1), from ``t`` (n,) or a float and ``x`` (n, d).

        Raises
        ------
        ValidationError
            When ``x`` is not a finite (n, d) array (``d`` the fitted dimension, when known), or ``t`` not finite
            times >= 0 of shape () or (n,).
        """
        x = check_tensor("x", x, "nd", {} if self.d is None else {"d": self.d})
        return self._unchecked(check_times("t", t, x.shape[0]), x)

    def _unchecked(self, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """:meth:`__call__` on ``t`` (n,) and ``x`` (n, d) already checked (a :class:`ScoreModel`'s, once per call)."""
        if self.kind == "spec":
            return torch.cat([t[:, None] / self.T, x], dim=1) / self.rho  # spec §7.5: u = (t/T, x_t) / rho_u
        z = x / (self.process.alpha(t) ** 2 * self.v0 + self.process.h(t)).sqrt()[:, None]  # x / c(t)
        if self.kind == "scaled":
            return torch.cat([t[:, None] / self.T, z], dim=1) / self.rho  # spec §7.5, scaled (ours)
        sq = z.pow(2).sum(dim=1, keepdim=True)
        on_sphere = torch.cat([2 * z, 1 - sq], dim=1) / (1 + sq)  # inverse stereographic projection R^d -> S^d
        return self.radius(t)[:, None] * on_sphere  # ours: |u| = r(t) <= 1


def fit_input_map(
    data: DenoisingSet,
    process: ForwardProcess,
    T: float,
    skip: bool = True,
    kind: str = "spec",
    T0: float | None = None,
    decay: float = 0.9,
) -> InputMap:
    """The :class:`InputMap` fitted on ``data``: ``v0`` from its clean samples, ``rho`` its largest raw norm.

    Parameters
    ----------
    data : DenoisingSet
        Training triples.
    process : ForwardProcess
    T : float
        Final diffusion time.
    skip : bool, default=True
        Learn the residual over the linear denoiser (ours).
    kind : {"spec", "scaled", "sphere"}, default="spec"
        See :class:`InputMap`; ``"spec"`` is spec §7.5's proposal.
    T0 : float, optional
        Smallest diffusion time; required for ``kind="sphere"``.
    decay : float, default=0.9
        ``"sphere"`` only: the radius falls from 1 at ``T0`` to ``1 - decay`` at ``T`` (ours).

    Returns
    -------
    InputMap
        Fitted on the dimension of ``data``'s points.

    Raises
    ------
    ValidationError
        When ``data`` is not a :class:`DenoisingSet`, ``process`` not a :class:`ForwardProcess`, ``T <= 0``,
        ``skip`` not a bool, or the map's own arguments are out of range (:class:`InputMap`).
    """
    check_denoising_set("data", data)
    check_process("process", process)
    check_scalar("T", T, low=0.0, low_inclusive=False)
    v0, d = float(data.x0.pow(2).mean()), data.x0.shape[1]
    unscaled = InputMap(process, float(T), v0, 1.0, skip, kind, T0, decay, d)  # validates kind, T0 and decay
    if kind == "sphere":
        return unscaled  # |u| = r(t) <= 1 for every input: no divisor
    rho = float(unscaled(data.t, data.x_t).norm(dim=1).max())  # spec §7.5: rho >= max ||u_j||
    return InputMap(process, float(T), v0, rho, skip, kind, d=d)
