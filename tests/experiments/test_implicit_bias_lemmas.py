"""Lemmas 3 and 15 of the implicit-bias paper (001) as inequalities of the loss landscape, checked at points of DM
data against autograd on a plain re-implementation of the model (not attnlab's cancellation-free gradients).

Both lemmas bound the loss's derivatives by the loss itself, at every point where Lemma 13 (iii) holds; their
constants were lost, so the bounds below are ours [D] (docs/theory/implicit-bias-ngd.md §8.13):

- the gradient lower bound (Lemma 3's PL-like bullet, Lemma 15's eq. 52): with the exponential loss,
  ``||grad_u L|| >= <-grad_u L, u_mm / ||u_mm||> >= L min_i y_i u_mm^T X_i^T phi_i / ||u_mm||
  >= L (phi_min - (1 - phi_min) beta) / ||u_mm||``, ``beta = max_i |u_mm^T x_i2|``;
- the Hessian upper bound (Lemma 3's second-order self-boundedness, Lemma 15's Hessian bound): with
  ``z_i = y_i f(X_i)``, ``grad^2 L = (1/n) sum_i l_i (grad z_i grad z_i^T - grad^2 z_i)``, so
  ``||grad^2 L|| <= L max_i (||grad z_i||^2 + ||grad^2 z_i||)``, a constant that depends on ``(u, W)`` only through
  their size, while ``L`` itself falls by decades.
"""

import pytest
import torch

from attnlab.data import dm
from attnlab.svm import attention_svm, head_svm

DATA = dm(n=4, d=6, sigma_opt=2.0, sigma_oth=1.0, seed=3)
X, y = DATA.X, DATA.y  # (n, 2, d), (n,)
U_MM, W_MM = head_svm(DATA, p=2.0).v, attention_svm(DATA, norm="fro").W


def _phi(W: torch.Tensor) -> torch.Tensor:
    return torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, X[:, 0]), dim=-1)  # the query is the first token


def _margins(u: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    return y * torch.einsum("ntd,nt,d->n", X, _phi(W), u)  # z_i = y_i u^T X_i^T phi_i


def _risk(theta: torch.Tensor) -> torch.Tensor:
    d = X.shape[-1]
    return torch.exp(-_margins(theta[:d], theta[d:].reshape(d, d))).mean()


def _points(count: int, seed: int = 0):
    """Random (u, W) around the max-margin pair at growing scales: phi_opt >= 1/2 on every sample."""
    gen = torch.Generator().manual_seed(seed)
    for k in range(count):
        s = 0.5 * 2.0 ** (k % 5)
        u = s * U_MM + 0.3 * torch.randn(U_MM.shape, generator=gen, dtype=torch.float64)
        W = s * W_MM + 0.3 * torch.randn(W_MM.shape, generator=gen, dtype=torch.float64)
        if bool((_phi(W)[:, 0] >= 0.5).all()):
            yield u, W


def test_gradient_lower_bound_of_lemmas_3_and_15_holds_where_lemma_13_iii_does():
    beta = float((X[:, 1] @ U_MM).abs().max())
    checked = 0
    for u, W in _points(20):
        theta = torch.cat([u, W.reshape(-1)]).requires_grad_(True)
        loss = _risk(theta)
        (grad,) = torch.autograd.grad(loss, theta)
        loss = float(loss.detach())
        grad_u = grad[: u.numel()]
        phi = _phi(W)
        separation = (y * torch.einsum("ntd,nt,d->n", X, phi, U_MM)).min()  # Lemma 14's quantity
        phi_min = float(phi[:, 0].min())
        norm = float(U_MM.norm())
        # 1e-12: rounding of the autograd gradient against the products on the right
        assert float(grad_u.norm()) >= float(-grad_u @ U_MM) / norm * (1 - 1e-12)
        assert float(-grad_u @ U_MM) >= loss * float(separation) * (1 - 1e-12)
        assert float(separation) >= phi_min - (1 - phi_min) * beta - 1e-12
        checked += 1
    assert checked >= 10  # the points must satisfy the lemma's hypothesis, or the test tests nothing


def _per_sample_bound(theta: torch.Tensor) -> float:
    """``max_i (||grad z_i||^2 + ||grad^2 z_i||_2)`` by autograd, sample by sample."""
    d = X.shape[-1]
    worst = 0.0
    for i in range(X.shape[0]):

        def z_i(t, i=i):
            return _margins(t[:d], t[d:].reshape(d, d))[i]

        grad = torch.autograd.functional.jacobian(z_i, theta)
        hess = torch.autograd.functional.hessian(z_i, theta)
        worst = max(worst, float(grad @ grad) + float(torch.linalg.matrix_norm(hess, ord=2)))
    return worst


@pytest.mark.parametrize("scale", [1.0, 4.0, 16.0])
def test_hessian_of_the_loss_is_bounded_by_the_loss_itself(scale):
    theta = scale * torch.cat([U_MM, W_MM.reshape(-1)])  # along the max-margin ray: L falls like e^{-scale^2 ...}
    loss = float(_risk(theta))
    hessian = torch.autograd.functional.hessian(_risk, theta)
    top = float(torch.linalg.matrix_norm(hessian, ord=2))
    assert top <= loss * _per_sample_bound(theta) * (1 + 1e-10)  # 1e-10: eigen-solver rounding


def test_the_self_bounded_ratio_stays_finite_while_the_loss_vanishes():
    losses, ratios = [], []
    for scale in (1.0, 2.0, 4.0, 8.0, 16.0):
        theta = scale * torch.cat([U_MM, W_MM.reshape(-1)])
        loss = float(_risk(theta))
        losses.append(loss)
        ratios.append(float(torch.linalg.matrix_norm(torch.autograd.functional.hessian(_risk, theta), ord=2)) / loss)
    assert losses[-1] < 1e-6 * losses[0]  # the loss falls by more than six decades along the ray ...
    assert max(ratios) < 4 * min(ratios)  # ... and ||grad^2 L|| / L moves by less than 4x (ours: C(||u||) was lost)
