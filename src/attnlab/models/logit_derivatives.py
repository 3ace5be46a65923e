"""The empirical risk's derivative in each logit, in the log domain: the cancellation-free centred scores and the
per-token weights of the gradient, with one scale per run.

Spec: implicit-bias-ngd §3.1 (cancellation-free gradient, log-domain weights), kq-nuclear-norm §2 (numerics) and
§3.1 (the integrand of ``phi``).

``c_{it} = sum_tau phi_{i tau} (gamma_{it} - gamma_{i tau})`` is formed from the pairwise score gaps (no ``1 - phi``
cancellation), and ``dL/ds_{it} = -(|l'_i| / n) phi_{it} c_{it}`` is kept as log-magnitudes with signs, shifted by
their largest value (:class:`LogScaled`), so normalised directions stay exact long after the non-selected softmax
probabilities underflow. :mod:`attnlab.models.functional` builds the gradients in ``W`` and ``v`` from these.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from attnlab._numerics import exp, exp_, logsumexp
from attnlab.losses import _log_abs_loss_derivative, _log_mean_loss

__all__ = [
    "LogScaled",
    "LogitDerivatives",
    "ScoreGaps",
    "centred_scores",
    "logit_derivatives",
    "score_gaps",
]


class LogScaled(NamedTuple):
    """A tensor stored as ``mantissa * exp(log_scale)``; ``log_scale`` has the runs shape ``(...)``.

    The largest weight behind ``mantissa`` is 1, so its norm is O(1) however small the true value is.
    """

    mantissa: torch.Tensor
    log_scale: torch.Tensor

    def value(self) -> torch.Tensor:
        """The plain tensor ``mantissa * exp(log_scale)``.

        Returns
        -------
        torch.Tensor
            The mantissa's shape; it may underflow to 0 where the true value is below 1e-308 (keep the log-scaled
            form for anything that must survive saturation).
        """
        extra = self.mantissa.dim() - self.log_scale.dim()
        return self.mantissa * torch.exp(self.log_scale).reshape(self.log_scale.shape + (1,) * extra)


class ScoreGaps(NamedTuple):
    """Token scores and their pairwise gaps in the log domain; they depend on ``X, y, v`` only, not on ``W``.

    Token-first layout: every per-token tensor of the gradient's inner loop carries its token axes *first*, so a
    sum, maximum or softmax over the tokens combines ``T`` contiguous slabs (vectorised over the sequences) instead
    of reducing ``R n`` rows of length ``T`` (at the papers' ``T = 6`` such row reductions cost 5-10x more).

    Attributes
    ----------
    gamma : torch.Tensor, shape (T, [R,] n)
        Token scores, token axis first.
    log_gap : torch.Tensor, shape (T, T, [R,] n)
        ``log |gamma_t - gamma_tau|`` at ``[tau, t, ..., i]``; ``-inf`` where the scores are equal.
    sign : torch.Tensor, shape (T, T, [R,] n)
        ``sign(gamma_t - gamma_tau)`` in {-1, 0, +1}.
    """

    gamma: torch.Tensor
    log_gap: torch.Tensor
    sign: torch.Tensor


def score_gaps(gamma: torch.Tensor) -> ScoreGaps:
    """The ``W``-independent part of :func:`centred_scores`, to compute once per data set rather than per step.

    Parameters
    ----------
    gamma : torch.Tensor, shape ([R,] n, T)
        Token scores (:func:`~attnlab.models.functional.token_scores`).

    Returns
    -------
    ScoreGaps
        In the token-first layout.
    """
    first = gamma.movedim(-1, 0).contiguous()  # (T, ..., n)
    diff = first[None] - first[:, None]  # (tau, t, ..., n): gamma_t - gamma_tau
    return ScoreGaps(first, torch.log(diff.abs()), torch.sign(diff))  # log 0 = -inf where the scores tie


def _after_tokens(x: torch.Tensor, tokens: int, extra: int) -> torch.Tensor:
    """``x`` with ``extra`` singleton axes inserted after its ``tokens`` leading token axes: data without the runs
    axis broadcast against logits that carry it."""
    return x.reshape(x.shape[:tokens] + (1,) * extra + x.shape[tokens:]) if extra > 0 else x


# exp(x) for x below this is < 1e-304, nothing next to the largest term (exp(0) = 1) of the same sum; clamping there
# keeps exp off its slow subnormal path without changing any sum
_EXP_FLOOR = -700.0


def _centred_first(log_phi: torch.Tensor, gaps: ScoreGaps) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`centred_scores` in the token-first layout: ``log_phi`` and the results have shape ``(T, [R,] n)``."""
    extra = log_phi.dim() - gaps.gamma.dim()  # a runs axis that only W carries: the gaps broadcast over it
    log_gap, sign = _after_tokens(gaps.log_gap, 2, extra), _after_tokens(gaps.sign, 2, extra)
    terms = log_gap + log_phi.unsqueeze(1)  # (tau, t, ..., n): log(phi_tau |gamma_t - gamma_tau|)
    top = terms.amax(dim=0)
    top = top.nan_to_num_(neginf=0.0)  # no term at all (every score equal): c = 0
    total = exp_(terms.sub_(top).clamp_min_(_EXP_FLOOR)).mul_(sign).sum(dim=0)  # spec ngd §3.1: c e^{-top}
    return top.add_(torch.log(total.abs())), torch.sign(total)


def centred_scores(log_phi: torch.Tensor, gamma: torch.Tensor | ScoreGaps) -> tuple[torch.Tensor, torch.Tensor]:
    """``log |c_{it}|`` and ``sign(c_{it})`` for ``c_{it} = sum_tau phi_{i tau} (gamma_{it} - gamma_{i tau})``.

    Spec: implicit-bias-ngd §3.1 (cancellation-free form), kq-nuclear-norm §2 (numerics).

    Each term ``phi_tau |gamma_t - gamma_tau|`` is formed in the log domain and the signed sum is taken after a
    shift by its largest term (one log-sum-exp with signs); no ``1 - phi`` is formed.

    Parameters
    ----------
    log_phi : torch.Tensor, shape ([R,] n, T)
    gamma : torch.Tensor, shape ([R,] n, T), or ScoreGaps
        Token scores, or their :func:`score_gaps` computed beforehand (same result, less work per call).

    Returns
    -------
    log_abs, sign : torch.Tensor, shape ([R,] n, T)
        ``log |c|`` (``-inf`` where ``c = 0``) and ``sign(c)`` in {-1, 0, +1}.
    """
    gaps = gamma if isinstance(gamma, ScoreGaps) else score_gaps(gamma)
    log_abs, sign = _centred_first(log_phi.movedim(-1, 0).contiguous(), gaps)
    return log_abs.movedim(0, -1), sign.movedim(0, -1)


class LogitDerivatives(NamedTuple):
    """``dL/ds_{it}``, the derivative of the empirical risk in each logit, in the log domain; see
    :func:`logit_derivatives`. Per-token fields are token-first (:class:`ScoreGaps`).

    The per-sample factor ``log |l'_i| / n`` (of size ``|y_i f_i|``, up to 1e300) is kept apart from the per-token
    terms ``log(phi_it |c_it|)`` (of order one): adding the two in float64 would round the token terms away once
    the margins pass about 1e13. :meth:`scaled` normalises the per-sample factors first.

    Attributes
    ----------
    log_token : torch.Tensor, shape (T, [R,] n)
        ``log(phi_it |c_it|)`` (``-inf`` where it is 0).
    sign : torch.Tensor, shape (T, [R,] n)
        ``sign(dL/ds_it)``.
    log_phi : torch.Tensor, shape (T, [R,] n)
        Log-softmax of the logits.
    log_dl : torch.Tensor, shape ([R,] n)
        ``log |l'(y_i f_i)| - log n``.
    log_risk : torch.Tensor, shape ([R,]), or None
        ``log L`` (None when :func:`logit_derivatives` was called with ``risk=False``).
    """

    log_token: torch.Tensor
    sign: torch.Tensor
    log_phi: torch.Tensor
    log_dl: torch.Tensor
    log_risk: torch.Tensor | None

    @property
    def log_abs(self) -> torch.Tensor:
        """``log |dL/ds_it|``, shape (T, [R,] n) (``-inf`` where it is 0); as a value, not for directions at huge
        margins (see the class notes)."""
        return self.log_token + self.log_dl

    def per_sample(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log_dl - top, top)``: the per-sample factors relative to their largest, ``top`` of shape ``([R,])``.

        The relative factors are exact where it matters (0 for the samples that lead), so nothing of size
        ``|y_i f_i|`` meets an order-one term before the samples are normalised.
        """
        top = self.log_dl.amax(dim=-1).nan_to_num_(nan=math.nan, posinf=math.inf, neginf=0.0)  # no l' at all: 0
        return self.log_dl - top.unsqueeze(-1), top

    def scaled(self, floor: torch.Tensor | None = None) -> LogScaled:
        """``dL/ds`` as mantissa (largest entry 1 in size; shape (T, [R,] n)) times ``exp(log_scale)``, one scale
        per run.

        ``floor`` (shape ``([R,])``, relative to the ``top`` of :meth:`per_sample`) raises the scale to at least
        that log value, so other quantities of one run can share it (the head's gradient in
        :func:`~attnlab.models.functional.loss_gradients`).

        ``log_scale`` is finite exactly where the run's loss is finite (non-finite logits give NaN), so it also
        tells a diverged run without the loss.
        """
        mantissa, _, log_scale = self.scaled_parts(floor)
        return LogScaled(mantissa, log_scale)

    def scaled_parts(
        self, floor: torch.Tensor | None = None, per_sample: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`scaled` as ``(mantissa, shift, log_scale)`` with ``log_scale = shift + top`` (``top`` of
        :meth:`per_sample`): ``shift`` is of order one, so quantities relative to ``top`` (the head's weights) can
        be scaled by it without cancellation. ``per_sample``: the result of :meth:`per_sample` when the caller has
        it already (not computed twice)."""
        # spec ngd §3.1: normalise the samples' |l'_i| first, then add log phi |c|
        relative, top = self.per_sample() if per_sample is None else per_sample
        log_rel = self.log_token + relative
        raw = log_rel.amax(dim=(0, -1))
        raw = raw if floor is None else torch.maximum(raw, floor)
        # raw = -inf: every weight 0 (all scores equal), no step, scale 1; top is then finite, so raw + top is -inf
        shift = raw.nan_to_num(nan=math.nan, posinf=math.inf, neginf=0.0)
        log_scale = (raw + top).nan_to_num_(nan=math.nan, posinf=math.inf, neginf=0.0)
        return exp_(log_rel.sub_(shift.unsqueeze(-1))).mul_(self.sign), shift, log_scale


def logit_derivatives(
    logits: torch.Tensor,
    gaps: ScoreGaps,
    loss: str = "exp",
    *,
    risk: bool = True,
    margin: torch.Tensor | None = None,
) -> LogitDerivatives:
    """Derivative of the empirical risk in every logit, ``dL/ds_it = -(|l'_i| / n) phi_it c_it``, in the log domain.

    Spec: implicit-bias-ngd §3.1 (``w_it = l_i phi_it c_it`` with cancellation-free ``c``), kq-nuclear-norm §3.1
    (the integrand of ``phi``).

    Parameters
    ----------
    logits : torch.Tensor, shape (T, [R,] n)
        :func:`~attnlab.models.functional.attention_logits`, token axis first (``logits.movedim(-1, 0)``; contiguous is fastest).
    gaps : ScoreGaps
        :func:`score_gaps` of the token scores.
    loss : {"exp", "logistic"}
    risk : bool, default=True
        Also compute ``log L`` (a training step that neither records nor reads the loss skips it).
    margin : torch.Tensor, shape ([R,] n), optional
        The margins ``y_i f(X_i)``; default ``sum_t phi_it gamma_it`` (the linear head's). A nonlinear head passes
        ``y_i h(u_i)``, with ``gamma`` its gradient's token scores (multi-token §1).

    Returns
    -------
    LogitDerivatives
        Token-first.

    Notes
    -----
    ``grad_W L = sum_it (dL/ds_it) x_it z_i^T`` (:func:`~attnlab.models.functional.outer_sum`); both losses have ``l' < 0``.
    """
    log_phi = torch.log_softmax(logits, dim=0)
    gamma = _after_tokens(gaps.gamma, 1, log_phi.dim() - gaps.gamma.dim())
    # margins y_i f_i: for a linear head a convex combination of the scores
    z = exp(log_phi).mul_(gamma).sum(dim=0) if margin is None else margin
    log_n = math.log(logits.shape[-1])
    if loss == "exp":  # l' = -l: log |l'_i| / n = -z_i - log n, and log L = logsumexp of the same terms
        log_dl = torch.sub(-log_n, z)
        log_risk = logsumexp(log_dl, dim=-1) if risk else None
    else:
        log_dl = _log_abs_loss_derivative(z, loss) - log_n  # log |l'_i| / n
        log_risk = _log_mean_loss(z, loss) if risk else None
    log_c, sign_c = _centred_first(log_phi, gaps)
    log_token = log_c.add_(log_phi)  # spec ngd §3.1: |w_it| = (|l'_i| / n) phi_it |c_it|, the sample factor apart
    return LogitDerivatives(log_token, sign_c.neg_(), log_phi, log_dl, log_risk)
