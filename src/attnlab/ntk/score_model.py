"""A softmax network as a diffusion score estimator: parametrization, training, weighted score error.

Spec: softmax-ntk-diffusion §7.3-7.5 (score matching, parametrization of [59], training set), §9 (metric),
§8 Algorithm E.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlab._validation import ValidationError, check_instance, check_scalar, check_seed, check_tensor
from attnlab.ntk.forward_process import ForwardProcess, check_process, check_times
from attnlab.ntk.gaussian_mixture import GaussianMixture
from attnlab.ntk.network import TwoLayerNet, check_net
from attnlab.ntk.score_data import InputMap, denoising_set

__all__ = ["ScoreModel", "denoiser_error_at", "score_from_denoiser", "weighted_score_error"]


def score_from_denoiser(
    process: ForwardProcess, x: torch.Tensor, t: torch.Tensor | float, denoised: torch.Tensor
) -> torch.Tensor:
    """Tweedie's formula ``grad log p_t(x) = (alpha(t) E[X_0 | X_t = x] - x) / h(t)`` (spec §7.4).

    Parameters
    ----------
    process : ForwardProcess
    x : torch.Tensor, shape (n, d)
    t : float or torch.Tensor, shape (n,)
        Diffusion times, > 0 (``h(0) = 0`` divides): one for every point, or one per point.
    denoised : torch.Tensor, shape (n, d)
        ``E[X_0 | X_t = x]`` or an estimate of it.

    Returns
    -------
    torch.Tensor, shape (n, d)

    Raises
    ------
    ValidationError
        When ``process`` is not a :class:`ForwardProcess`, ``x`` or ``denoised`` is not a finite (n, d) array
        (the same n and d), or ``t`` not finite times > 0 of shape () or (n,).
    """
    check_process("process", process)
    sizes: dict[str, int] = {}
    x = check_tensor("x", x, "nd", sizes)
    denoised = check_tensor("denoised", denoised, "nd", sizes)
    return _tweedie(process, x, check_times("t", t, x.shape[0], positive=True), denoised)


def _tweedie(process: ForwardProcess, x: torch.Tensor, t: torch.Tensor, denoised: torch.Tensor) -> torch.Tensor:
    """:func:`score_from_denoiser` on checked ``x`` (n, d), ``t`` (n,) and ``denoised`` (n, d)."""
    alpha, h = process.alpha(t)[:, None], process.h(t)[:, None]
    return (alpha * denoised - x) / h  # spec §7.4: s_W = (alpha F - x) / h


@dataclass
class ScoreModel:
    """``s_W(x, t) = (alpha(t) D(x, t) - x) / h(t)`` with the denoiser ``D = k(t) x + F(W, u(t, x))``.

    Spec: softmax-ntk-diffusion §7.4 (``k = 0`` there; ``k(t)`` is the optional linear skip of
    :class:`~attnlab.ntk.score_data.InputMap`).

    Attributes
    ----------
    net : TwoLayerNet
        ``d_in = d + 1``, ``d_out = d``.
    process : ForwardProcess
    inputs : InputMap
        Maps ``(t, x)`` with ``x`` of dimension ``d`` to the net's ``d + 1`` inputs.

    Raises
    ------
    ValidationError
        When ``net`` is not a float64 :class:`TwoLayerNet` with ``d_in = d_out + 1``, ``process`` not a
        :class:`ForwardProcess`, or ``inputs`` not an :class:`InputMap` (fitted on points of dimension ``d_out``).
    """

    net: TwoLayerNet
    process: ForwardProcess
    inputs: InputMap

    def __post_init__(self) -> None:
        check_net("net", self.net)
        check_process("process", self.process)
        check_instance("inputs", self.inputs, InputMap, "fit one with attnlab.ntk.fit_input_map(data, process, T)")
        d = self.net.d_out
        if self.net.d_in != d + 1:
            raise ValidationError(
                f"net has d_in = {self.net.d_in} and d_out = {d}, but a score model's net reads the input map's "
                f"u(t, x) of d + 1 = {d + 1} coordinates; build it with d_in = {d + 1}, e.g. SoftmaxMLP({d + 1}, {d}, "
                "width)"
            )
        if self.inputs.d is not None and self.inputs.d != d:
            raise ValidationError(
                f"inputs was fitted on points of dimension {self.inputs.d}, but net denoises points of dimension "
                f"{d} (net.d_out); fit the input map on the model's training set"
            )

    def denoiser(self, x: torch.Tensor, t: torch.Tensor | float) -> torch.Tensor:
        """Estimated ``E[X_0 | X_t = x]``: ``D(x, t) = k(t) x + F(W, u(t, x))``, without gradients.

        Parameters
        ----------
        x : torch.Tensor, shape (n, d), float64
            Noisy points, ``d = net.d_out``.
        t : float or torch.Tensor, shape (n,)
            Diffusion times, >= 0: one for every point, or one per point.

        Returns
        -------
        torch.Tensor, shape (n, d), float64

        Raises
        ------
        ValidationError
            When ``x`` is not a finite (n, d) array, or ``t`` not finite times >= 0 of shape () or (n,).
        """
        return self._denoise(*self._points(x, t, positive=False))

    def score(self, x: torch.Tensor, t: torch.Tensor | float) -> torch.Tensor:
        """Estimated ``grad log p_t(x)`` from the denoiser by Tweedie's formula (spec §7.4).

        Parameters
        ----------
        x : torch.Tensor, shape (n, d), float64
            Noisy points, ``d = net.d_out``.
        t : float or torch.Tensor, shape (n,)
            Diffusion times, > 0 (``h(0) = 0`` divides): one for every point, or one per point.

        Returns
        -------
        torch.Tensor, shape (n, d), float64

        Raises
        ------
        ValidationError
            When ``x`` is not a finite (n, d) array, or ``t`` not finite times > 0 of shape () or (n,).
        """
        x, t = self._points(x, t, positive=True)
        return _tweedie(self.process, x, t, self._denoise(x, t))  # checked once: the sampler calls it every step

    def _points(self, x: object, t: object, positive: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` (n, d) with ``d = net.d_out`` and ``t`` as (n,) times, refused by name when they are not."""
        x = check_tensor("x", x, "nd", {"d": self.net.d_out})
        return x, check_times("t", t, x.shape[0], positive=positive)

    def _denoise(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """:meth:`denoiser` on checked ``x`` (n, d) and ``t`` (n,)."""
        with torch.no_grad():
            F = self.net.output_from_logits(self.inputs._unchecked(t, x) @ self.net.W)
        return self.inputs.skip_gain(t)[:, None] * x + F


def _check_target(model: ScoreModel, target: GaussianMixture) -> None:
    """Refuse a ``model`` that is not a :class:`ScoreModel`, or a ``target`` that is not a mixture of its dimension."""
    check_instance("model", model, ScoreModel, "train one with attnlab.training.ntk.train_score_model")
    check_instance("target", target, GaussianMixture, "e.g. attnlab.ntk.circle_mixture()")
    if target.dim != model.net.d_out:
        raise ValidationError(
            f"target has points of dimension {target.dim}, but the model denoises points of dimension "
            f"{model.net.d_out} (net.d_out); pass the mixture the model was trained on"
        )


def _denoiser_error(model: ScoreModel, target: GaussianMixture, x_t: torch.Tensor, t: torch.Tensor) -> float:
    """Mean of ``||D_W(x_t, t) - E[X_0 | X_t = x_t]||^2`` over the rows of ``x_t`` (n, d), ``t`` (n,)."""
    truth = target.denoiser(x_t, t, model.process)  # spec §9: closed-form E[X0 | Xt]
    return float((model.denoiser(x_t, t) - truth).pow(2).sum(dim=1).mean())


def weighted_score_error(
    model: ScoreModel, target: GaussianMixture, T0: float, T: float, n: int = 10_000, seed: int = 0
) -> float:
    """``(1 / (T - T0)) int_{T0}^T E ||F(W, u(t, X_t)) - E[X_0 | X_t]||^2 dt`` by Monte-Carlo on ``n`` fresh draws.

    Spec: softmax-ntk-diffusion §9 (= Theorem 6.6's weighted score error with ``lambda(t) = h^2 / alpha^2``).

    Parameters
    ----------
    model : ScoreModel
        The trained model; its denoiser ``D_W`` (``F`` plus the skip, if any) is compared.
    target : GaussianMixture
        The data distribution ``p_0``, whose denoiser is known in closed form.
    T0, T : float
        The time window, ``0 < T0 < T``; ``t`` is drawn uniformly in it.
    n : int, default=10_000
        Monte-Carlo draws of ``(t, X_0, X_t)``, >= 1.
    seed : int, default=0
        Seeds the draws (``seed`` for ``X_0``, ``seed + 1`` for the times and the noise).

    Returns
    -------
    float
        The mean squared denoiser error over the draws.

    Raises
    ------
    ValidationError
        When ``n < 1``, the times are not ``0 < T0 < T``, ``seed`` (or ``seed + 1``) is not a seed, or ``target``
        is not a :class:`GaussianMixture` of the model's dimension.
    """
    check_scalar("n", n, kind=int, low=1)
    _check_target(model, target)
    gen = torch.Generator().manual_seed(check_seed("seed", seed))
    fresh = denoising_set(target.sample(n, gen), model.process, T0, T, seed + 1)
    return _denoiser_error(model, target, fresh.x_t, fresh.t)


def denoiser_error_at(model: ScoreModel, target: GaussianMixture, t: float, n: int = 10_000, seed: int = 0) -> float:
    """``E ||D_W(X_t, t) - E[X_0 | X_t]||^2`` at one diffusion time ``t``, by Monte-Carlo on ``n`` fresh draws.

    The integrand of :func:`weighted_score_error` at ``t`` (spec §9); at ``t = T0`` it is the error of the final
    denoising step that maps reverse-SDE samples to ``p_0``.

    Parameters
    ----------
    model : ScoreModel
        The trained model; its denoiser ``D_W`` is compared.
    target : GaussianMixture
        The data distribution ``p_0``, whose denoiser is known in closed form.
    t : float
        The diffusion time, > 0.
    n : int, default=10_000
        Monte-Carlo draws of ``(X_0, X_t)``, >= 1.
    seed : int, default=0
        Seeds the draws.

    Returns
    -------
    float
        The mean squared denoiser error over the draws.

    Raises
    ------
    ValidationError
        When ``n < 1``, ``t <= 0``, ``seed`` is not a seed, or ``target`` is not a :class:`GaussianMixture` of the
        model's dimension.
    """
    check_scalar("n", n, kind=int, low=1)
    check_scalar("t", t, low=0.0, low_inclusive=False)
    _check_target(model, target)
    gen = torch.Generator().manual_seed(check_seed("seed", seed))
    x0 = target.sample(n, gen)
    times = torch.full((n,), float(t), dtype=torch.float64)
    x_t, _ = model.process.sample(x0, times, gen)  # spec §7.1
    return _denoiser_error(model, target, x_t, times)
