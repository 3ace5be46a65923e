"""Lemma 6 and Theorem 7's lower step-length bound of the implicit-bias paper (001) as inequalities of the loss
landscape, checked at random ``W`` of Example-1 data against autograd on a plain re-implementation of the model.

Both hold at *every* ``W`` for every decreasing loss, positive head scale and softmax temperature of their class
(docs/theory/implicit-bias-ngd.md §8 items 2 and 7; with Assumption 2's equal non-optimal scores the gradient is
``-grad L = (1/n) sum_i |l'_i| sum_{t != opt} phi_opt phi_t Delta_it (x_opt - x_t) z_i^T``):

- Lemma 6: each ``(x_opt - x_t) z^T`` has ``<., W_mm> >= 1`` and norm ``<= 2 B^2``, so
  ``<-grad L, W_mm_bar> >= ||grad L|| / (2 B^2 ||W_mm||)``;
- Thm 7's lower bound [D]: ``l_i - l(gamma_opt) >= |l'(gamma_opt)| (1 - phi_opt) Delta_i`` (convexity) and
  ``|l'(z_i)| <= e^Delta_i |l'(gamma_opt)|``, so ``(L - L_*) / ||grad L|| >= e^(-Delta_max) / (2 B^2)``.

No wrong mechanism of the landscape within these hypotheses fails them (a temperature, a head's scale, the logistic
loss, the logits transposed), so they are not rows of ``implicit-bias.rates`` (retired 2026-11-30: the rows
``lemma6`` and ``polyak-lower`` failed only under ``optimal-score-shifted``, a broken hypothesis). The spec asks
"every W": 500 random ``W`` with norms log-spaced from 1e-2 to 1e2, at the quick and full sizes of the rates data.
"""

import math

import pytest
import torch

from attnlab.data import example1
from attnlab.svm import attention_svm

SIZES = {"quick": (3, 3, 16), "full": (4, 4, 64)}  # (n, T, d) of implicit-bias.rates' Example-1 data
CLASS = [  # (loss, head scale, temperature): members of each lemma's class
    ("exp", 1.0, 1.0), ("exp", 1.3, 1.0), ("exp", 1.0, 1.3), ("exp", 0.5, 0.5), ("logistic", 1.0, 1.0),
]  # fmt: skip


def _loss(margins: torch.Tensor, loss: str) -> torch.Tensor:
    return torch.exp(-margins) if loss == "exp" else torch.nn.functional.softplus(-margins)


def _setting(size: str, head: float, temperature: float):
    data = example1(*SIZES[size], 1.0, 2.0, seed=0)
    X, y, v = data.X, data.y, head * data.v  # (n, T, d), (n,), (d,)
    Z = temperature * data.Z  # a temperature 1/c: the logits x^T W (c z)
    scores = y[:, None] * (X @ v)  # gamma_it
    gap = float((scores[:, 0] - scores[:, 1:].amax(-1)).amax())  # Delta_max (the optimal token first)
    B = float(torch.linalg.vector_norm(X, dim=-1).amax())
    return data, X, Z, y, v, scores, gap, B


def _random_w(d: int, count: int = 500, seed: int = 11) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    G = torch.randn(count, d, d, generator=gen, dtype=torch.float64)
    norms = torch.logspace(-2, 2, count, dtype=torch.float64)  # spec: every W; 1e-2 to 1e2
    return norms[:, None, None] * G / torch.linalg.matrix_norm(G)[:, None, None]


def _risk_and_gradient(X, Z, y, v, W, loss):
    """``L(W)`` and ``grad L(W)`` by autograd on the plain model ``f = v^T X^T softmax(X W z)`` (spec §2-3)."""
    W = W.clone().requires_grad_(True)
    phi = torch.softmax(torch.einsum("ntd,rde,ne->rnt", X, W, Z), dim=-1)  # (R, n, T)
    margins = y * torch.einsum("ntd,rnt,d->rn", X, phi, v)  # z_i = y_i f(X_i)
    risk = _loss(margins, loss).mean(-1)  # (R,)
    (grad,) = torch.autograd.grad(risk.sum(), W)
    return risk.detach(), grad


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize(("loss", "head", "temperature"), CLASS)
def test_lemma6_holds_at_every_random_w_for_its_class(size, loss, head, temperature):
    data, X, Z, y, v, _, _, B = _setting(size, head, temperature)
    W_mm = attention_svm(data, norm="fro").W  # the W-SVM's constraints do not depend on the head's scale
    _, grad = _risk_and_gradient(X, Z, y, v, _random_w(data.X.shape[-1]), loss)
    norm = torch.linalg.matrix_norm(grad)
    assert bool((norm > 0).all())
    # spec §8 item 2: <-grad L, W_mm_bar> 2 B^2 ||W_mm|| / ||grad L|| >= 1; a query scaled by c scales both the
    # constraint values <(x_opt - x_t)(c z)^T, W_mm> >= c and the norms <= 2 B (c B), so B^2 stays the keys'
    ratio = (-grad * W_mm / W_mm.norm()).sum((-2, -1)) * 2 * B**2 * float(W_mm.norm()) / norm
    assert float(ratio.min()) >= 1.0, float(ratio.min())


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize(("loss", "head", "temperature"), CLASS)
def test_polyak_lower_step_bound_holds_at_every_random_w_for_its_class(size, loss, head, temperature):
    data, X, Z, y, v, scores, gap, B = _setting(size, head, temperature)
    risk, grad = _risk_and_gradient(X, Z, y, v, _random_w(data.X.shape[-1], seed=12), loss)
    L_star = float(_loss(scores[:, 0], loss).mean())  # spec §3: all attention on the optimal tokens
    length = (risk - L_star) / torch.linalg.matrix_norm(grad)  # spec §8 item 7: the uncapped Polyak step's length
    bound = math.exp(-gap) / (2 * B * (B * temperature))  # spec §8 item 7 [D]; the queries' bound is c B
    assert bool((risk > L_star).all())
    assert float(length.min()) >= bound, (float(length.min()), bound)
