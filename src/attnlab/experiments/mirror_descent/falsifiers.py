"""Wrong mechanisms under which the mirror-descent theory rows must fail (tests/experiments/test_falsifiers.py).

Each changes the algorithm (l_p-AttGD), the model's gradient or the divergence a lemma is about, where the
experiment looks it up, never a check's arithmetic. The training falsifiers patch the batched trainer that
:func:`~attnlab.experiments.mirror_descent.common.md_path` calls; the others patch one function of one experiment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from attnlab.models.functional import attention_logits
from attnlab.optim import parse_optimizer
from attnlab.optim import transforms as tx
from attnlab.optim.mirror_descent import FLOAT64_EPS, md_rule
from attnlab.verify import Falsifier

__all__ = [
    "BREGMAN_EXPONENT_OFF",
    "DENOMINATOR_DROPPED",
    "EXPONENT_OFF",
    "EXPONENT_SHIFT",
    "GRADIENT_TRANSPOSED",
    "LOGITS_TRANSPOSED",
    "MIRROR_SIGN_DROPPED",
    "RISK_PENALISED",
    "WEIGHT_DECAY",
    "gradient_transposed",
]

_TARGET = "attnlab.experiments.mirror_descent.common:batched_train"
_NEXT = {1.75: 2.0, 2.0: 3.0, 3.0: 1.75}  # the default ps, each mapped to the next one, cyclically
DECAY = 1e-3  # weight decay of WEIGHT_DECAY: lambda ||W|| ~ 1e-2 at the start, the size of the gradient there
PENALTY = 1e-3  # lam of RISK_PENALISED: lam ||W||_F = 0.1 at the sweep's largest norm, 0.01 a decade below


def _with(**change: Any):
    """The trainer with keyword ``lr`` or an option of the optimizer (``p``) changed by ``change[key](value)``."""

    def wrap(train):
        def wrong(*args: Any, **kwargs: Any) -> Any:
            spec = parse_optimizer(kwargs["optimizer"])
            for key, mend in change.items():
                if key == "lr":
                    kwargs[key] = mend(kwargs[key])
                else:
                    spec = spec.replace(**{key: mend(spec.get(key))})
            return train(*args, **{**kwargs, "optimizer": spec})

        return wrong

    return wrap


EXPONENT_SHIFT = Falsifier(
    "mirror-exponent-off-by-one",
    "the mirror map's exponent taken from the next entry of ps (1.75 -> 2 -> 3 -> 1.75; others p + 0.3)",
    _TARGET,
    _with(p=lambda p: _NEXT.get(float(p), float(p) + 0.3)),
    kind="mechanism",
)


EXPONENT_OFF = Falsifier(
    "mirror-exponent-off-0.1",
    "the mirror map's exponent p + 0.1 while every SVM keeps p: a slip the grid of ps (0.25 apart and more) does not "
    "resolve, its SVMs being 1e-3 away from p's in dB_p",
    _TARGET,
    _with(p=lambda p: float(p) + 0.1),
    kind="mechanism",
)


def _transposed_training(train):
    """Train under the logits ``z^T W x`` (the transposed convention): the true model's run on ``W^T``."""

    def wrong(X, Z, y, v, W0, **kwargs):
        run = train(X, Z, y, v, W0.mT.contiguous(), **kwargs)
        W = run.W.mT.contiguous()
        iterates = {**run.iterates, "W": run.iterates["W"].mT.contiguous()}
        return dataclasses.replace(run, params={**run.params, "W": W}, extra={**run.extra, "W": W}, iterates=iterates)

    return wrong


LOGITS_TRANSPOSED = Falsifier(
    "logits-transposed",
    "l_p-AttGD trains the model with the transposed logit convention z_i^T W x_it (the gradient is grad L(W^T)^T), "
    "while every quantity is measured in the model x_it^T W z_i of the lemmas",
    _TARGET,
    _transposed_training,
    kind="mechanism",
)


def _decay_transform(decay: float) -> tx.Transform:
    """Weight decay: the step's direction becomes ``grad L + decay W`` (on the gradient's mantissa scale)."""

    def update(step: tx.Step, state: None, ctx: tx.Context) -> tuple[tx.Step, None]:
        out = []
        for m, W in zip(step.direction, ctx.params):
            scale = torch.exp(-step.log_scale).reshape(step.log_scale.shape + (1,) * (W.dim() - ctx.run_dims))
            out.append(m + decay * W * scale)  # mantissa of grad L + decay W, the true gradient being m e^log_scale
        return tx.Step(out, step.log_scale, step.log_coef, step.factor), state

    return tx.Transform("weight_decay", lambda params: None, update, coefficient_only=False, scale_invariant=False)


def _weight_decay(train):
    """Plain l_p mirror descent with a weight decay ``DECAY`` added to the gradient (as ``SGD(weight_decay=)``)."""

    def wrong(X, Z, y, v, W0, **kwargs):
        spec = parse_optimizer(kwargs.pop("optimizer"))
        lr, p, normalized = kwargs.pop("lr"), spec.get("p"), spec.get("normalized")
        plain = md_rule([lr], [p], [normalized], [spec.get("eps", FLOAT64_EPS)])
        rule = tx.Rule((_decay_transform(DECAY), *plain.transforms), mirror_p=plain.mirror_p)
        return train(X, Z, y, v, W0, **{**kwargs, "optimizer": rule})

    return wrong


WEIGHT_DECAY = Falsifier(
    "weight-decay",
    f"l_p-AttGD with a weight decay {DECAY:g} W added to the gradient (an optimizer default a real run could "
    "carry): the norm settles where the decay balances the vanishing gradient",
    _TARGET,
    _weight_decay,
    kind="mechanism",
)


def gradient_transposed(direction):
    """``gradient_direction`` of the model with the transposed logits ``z^T W x``: ``grad L(W^T)^T``."""

    def wrong(X, Z, y, v, W, loss="exp"):
        d, log_norm, log_risk = direction(X, Z, y, v, W.mT, loss)
        return d.mT, log_norm, log_risk

    return wrong


GRADIENT_TRANSPOSED = Falsifier(
    "gradient-logits-transposed",
    "the gradient whose correlation Lemma 20 reads is that of the transposed logit convention z_i^T W x_it",
    "attnlab.experiments.mirror_descent.e1:gradient_direction",
    gradient_transposed,
    kind="mechanism",
)


def _in_bounds(name: str, mechanism: str, function: str, patch: Callable[[Any], Any]) -> Falsifier:
    """A mechanism falsifier that patches ``function`` of the bounds experiment (where it looks the function up)."""
    return Falsifier(name, mechanism, f"attnlab.experiments.mirror_descent.bounds:{function}", patch, kind="mechanism")


def _unnormalised(probabilities):
    """Attention weights ``exp(X W z)`` without the softmax's denominator."""
    return lambda X, W, Z: torch.exp(attention_logits(X, W, Z))


DENOMINATOR_DROPPED = _in_bounds(
    "softmax-denominator-dropped",
    "the attention weights are exp(X W z) without the softmax's denominator (unnormalised exponential attention)",
    "attention_probabilities",
    _unnormalised,
)


def _sign_dropped(bregman):
    """``D(A, B)`` with ``|B|^(p-1)`` in place of ``grad psi(B) = sign(B) |B|^(p-1)`` in the linear term."""

    def wrong(A, B, p):
        dims = (-2, -1)
        linear = (B.abs() ** (p - 1) * (A - B)).sum(dims)
        return (A.abs() ** p).sum(dims) / p - (B.abs() ** p).sum(dims) / p - linear

    return wrong


MIRROR_SIGN_DROPPED = _in_bounds(
    "mirror-map-sign-dropped",
    "the Bregman divergence linearises psi with |B|^(p-1) instead of grad psi(B) = sign(B) |B|^(p-1)",
    "bregman_divergence",
    _sign_dropped,
)


def _bregman_shifted(bregman):
    """``D(A, B)`` of the potential ``||.||_(p+0.1)^(p+0.1) / (p+0.1)``; the sphere and the distance keep ``p``."""
    return lambda A, B, p: bregman(A, B, p + 0.1)


BREGMAN_EXPONENT_OFF = _in_bounds(
    "bregman-potential-p+0.1",
    "the Bregman divergence of the potential ||.||_(p+0.1)^(p+0.1) / (p+0.1) while the sphere and the distance keep "
    "p: an exponent slip the grid of ps does not resolve (its power at small distances is p + 0.1 where it is p)",
    "bregman_divergence",
    _bregman_shifted,
)


def _penalised(risk_and_gradient):
    """The risk plus ``PENALTY ||W||_F^2 / 2`` and its gradient plus ``PENALTY W``."""

    def wrong(batch, W, loss):
        risk, grad = risk_and_gradient(batch, W, loss)
        return risk + PENALTY / 2 * (W**2).sum((-2, -1)), grad + PENALTY * W

    return wrong


RISK_PENALISED = _in_bounds(
    "risk-l2-1e-3",
    f"the risk carries a penalty {PENALTY:g} ||W||_F^2 / 2 (weight decay folded into the objective): its gradient "
    "grows like ||W||, without bound, yet stays under the proof's constant up to ||W||_F = 100",
    "_risk_and_gradient",
    _penalised,
)
