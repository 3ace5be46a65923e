"""NTK Gram matrix (spec §4.1), test kernel (§6.1), eigenvalues and infinite-width limit (§4.2)."""

import math

import numpy as np
import pytest
import torch

import attnlab.ntk.tangent_kernel as tangent_kernel
from attnlab._validation import ValidationError
from attnlab.ntk import (
    ExpMLP,
    ReluMLP,
    SoftmaxMLP,
    cross_kernel,
    extreme_eigenvalues,
    gram,
    gram_jacobian,
    infinite_width_gram,
    kernel_drift,
    lambda_max,
)

NETS = [SoftmaxMLP, ReluMLP, ExpMLP]
TOL = 1e-10  # float64 closed form vs torch.func: round-off only


def _unit_rows(n, d, seed):
    X = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return X / X.norm(dim=1, keepdim=True)


def _moved(cls, d_in=4, d_out=3, m=12, seed=0):
    net = cls(d_in, d_out, m, seed=seed)
    with torch.no_grad():
        net.W.add_(
            0.3 * torch.randn(net.W.shape, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
        )
    return net


@pytest.mark.parametrize("cls", NETS)
def test_closed_form_gram_matches_torch_func_jacobians(cls):
    net, X = _moved(cls), _unit_rows(5, 4, 1)
    H = gram(net, X)
    assert H.shape == (15, 15)
    assert torch.allclose(H, gram_jacobian(net, X), rtol=0, atol=TOL * float(H.abs().max()))


def test_gram_entries_follow_the_spec_formula_and_index_convention():
    net, X = _moved(SoftmaxMLP, d_in=3, d_out=2, m=6), _unit_rows(3, 3, 2)
    n, m = 3, 6
    with torch.no_grad():
        S = torch.softmax(X @ net.W, dim=1)
    H = gram(net, X)
    for l1 in range(2):
        for l2 in range(2):
            for i in range(n):
                for j in range(n):
                    total = 0.0
                    for r in range(m):  # spec §4.1: (1/m) x_i.x_j sum_r (m S_ir <v_{l1,r},S_i>)(m S_jr <v_{l2,r},S_j>)
                        vi = net.a[l1, r] - net.a[l1] @ S[i]
                        vj = net.a[l2, r] - net.a[l2] @ S[j]
                        total += float((m * S[i, r] * vi) * (m * S[j, r] * vj))
                    expected = float(X[i] @ X[j]) * total / m
                    assert abs(float(H[l1 * n + i, l2 * n + j]) - expected) < TOL


def test_gram_is_symmetric_psd_and_cross_kernel_reduces_to_it():
    net, X = _moved(SoftmaxMLP), _unit_rows(6, 4, 3)
    H = gram(net, X)
    assert torch.equal(cross_kernel(net, X, X), H)
    assert torch.allclose(H, H.T, rtol=0, atol=1e-12)
    lam_min, lam_max = extreme_eigenvalues(H)
    assert lam_min > -1e-10 and lam_max > lam_min  # PSD up to round-off


def test_gram_forms_the_jacobian_factors_once_and_equals_the_two_sided_kernel(monkeypatch):
    net, X = _moved(SoftmaxMLP), _unit_rows(6, 4, 3)
    two_sided = cross_kernel(net, X, X.clone())  # two inputs of equal values: each side's factors formed
    calls = []
    jacobian = net.jacobian
    monkeypatch.setattr(net, "jacobian", lambda x: calls.append(x) or jacobian(x))
    assert torch.equal(gram(net, X), two_sided)
    assert len(calls) == 1


def test_cross_kernel_rows_are_the_gram_rows_of_the_joint_set():
    net, X, Xt = _moved(SoftmaxMLP, d_out=2), _unit_rows(4, 4, 4), _unit_rows(3, 4, 5)
    joint = gram(net, torch.cat([Xt, X]))  # (2*7, 2*7); output l block rows l*7 + p
    K = cross_kernel(net, Xt, X)
    for l1 in range(2):
        for l2 in range(2):
            assert torch.allclose(
                K[l1 * 3 : l1 * 3 + 3, l2 * 4 : l2 * 4 + 4], joint[l1 * 7 : l1 * 7 + 3, l2 * 7 + 3 : l2 * 7 + 7]
            )


@pytest.mark.parametrize("cls", NETS)
def test_matrix_free_lambda_max_matches_dense(cls, monkeypatch):
    net, X = _moved(cls, m=40), _unit_rows(20, 4, 6)
    dense = lambda_max(net, X)
    monkeypatch.setattr(tangent_kernel, "_DENSE_MAX", 10)  # force the Lanczos path
    assert math.isclose(lambda_max(net, X), dense, rel_tol=1e-8)  # eigsh tol 1e-8


@pytest.mark.parametrize("cls", NETS)
def test_matrix_free_lambda_max_is_the_same_on_every_call(cls, monkeypatch):
    # the practical step is built on it: a value that moved in its last digits made every NTK run after it differ
    net, X = _moved(cls, m=40), _unit_rows(60, 4, 6)
    monkeypatch.setattr(tangent_kernel, "_DENSE_MAX", 10)  # force the Lanczos path
    values = {lambda_max(net, X) for _ in range(5)}
    assert len(values) == 1


def test_gram_approaches_the_infinite_width_kernel_like_inverse_sqrt_width():
    X = _unit_rows(8, 4, 0)
    widths = [500, 2000, 8000, 32000]
    errors = []
    for m in widths:
        errs = []
        for seed in range(4):
            net = SoftmaxMLP(4, 2, m, sigma_w=0.5, seed=seed)
            Hinf = infinite_width_gram(net, X)
            errs.append(float((gram(net, X) - Hinf).norm() / Hinf.norm()))
        errors.append(np.mean(errs))
    slope = np.polyfit(np.log(widths), np.log(errors), 1)[0]
    assert -0.7 < slope < -0.3  # spec §4.2 / P6: error ~ m^{-1/2}; 4 seeds x 4 widths leave ~0.2 slack
    assert errors[-1] < 0.02  # spec §4.2 quotes 0.012 at m = 2e4 (n=8, sigma_w=0.5)


@pytest.mark.parametrize("cls, tol", [(ReluMLP, 0.03), (ExpMLP, 0.05)])
def test_comparison_limit_kernels_match_wide_networks(cls, tol):
    X = _unit_rows(6, 3, 7)
    net = cls(3, 1, 200_000, sigma_w=0.5, seed=0)
    Hinf = infinite_width_gram(net, X)
    # Monte-Carlo over 1e5 neuron pairs: relative error ~ few / sqrt(1e5) ~ 1e-2
    assert float((gram(net, X) - Hinf).norm() / Hinf.norm()) < tol


def test_kernel_drift_is_frobenius_distance():
    A = torch.eye(3, dtype=torch.float64)
    assert kernel_drift(2 * A, A) == pytest.approx(math.sqrt(3))


def test_gram_refuses_inputs_of_the_wrong_width():
    with pytest.raises(ValidationError, match=r"X has shape \(2, 5\)"):
        gram(SoftmaxMLP(4, 2, 6), torch.zeros(2, 5))


def test_extreme_eigenvalues_refuse_a_matrix_that_is_not_square():
    with pytest.raises(ValidationError, match=r"H has shape \(3, 4\)"):
        extreme_eigenvalues(torch.zeros(3, 4, dtype=torch.float64))
