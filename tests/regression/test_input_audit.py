"""Bad input to the public functions of attnlab.regression is refused with a ValidationError naming the argument
(never a raw traceback, never a silently wrong result); valid input of another dtype or container gives the float64
result of the float64 tensor."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.regression import (
    MinibatchOracle,
    MonteCarloOracle,
    assumptions,
    empirical_covariance,
    empirical_loss,
    empirical_regularizer,
    make_problem,
    population_excess_loss,
    population_gradient,
    population_loss,
    sample,
    sample_covariates,
    sym_inv_sqrt,
    sym_sqrt,
    target_svd,
    token_matrix,
    unwhiten,
    whiten,
)

PROBLEM = make_problem(d=3, k=5, noise_std=0.1, seed=3)
X, Y = sample(PROBLEM, 6, seed=0)
V = torch.full((5, 3), 0.3, dtype=torch.float64)
Q = 0.5 * torch.eye(3, dtype=torch.float64)
I2, I3 = torch.eye(2, dtype=torch.float64), torch.eye(3, dtype=torch.float64)
S, W = PROBLEM.Sigma, PROBLEM.W_star
EMPTY = torch.ones(0, 0, dtype=torch.float64)

BAD = {
    # booleans are booleans only
    "empirical_loss include_self='no'": (lambda: empirical_loss(V, Q, X, Y, include_self="no"), "include_self"),
    "empirical_loss include_self=0": (lambda: empirical_loss(V, Q, X, Y, include_self=0), "include_self"),
    "MonteCarloOracle include_self='no'": (lambda: MonteCarloOracle(PROBLEM, 4, 1, include_self="no"), "include_self"),
    # the exported helpers check their matrices
    "sym_sqrt non-symmetric": (lambda: sym_sqrt(torch.tensor([[1.0, 5.0], [0.0, 1.0]])), "S is not symmetric"),
    "sym_sqrt negative definite": (lambda: sym_sqrt(-I2), "S is not positive semidefinite"),
    "sym_inv_sqrt singular": (lambda: sym_inv_sqrt(0 * I2), "S is not positive definite"),
    "sym_sqrt text": (lambda: sym_sqrt("S"), "S"),
    "sym_sqrt vector": (lambda: sym_sqrt(torch.ones(3)), "S"),
    "empirical_covariance no rows": (lambda: empirical_covariance(torch.ones(0, 2)), "X"),
    "empirical_covariance mismatched Y": (lambda: empirical_covariance(X, Y[:4]), "Y"),
    "whiten non-SPD Sigma": (lambda: whiten(V, Q, -I3, I3), "Sigma"),
    "whiten non-SPD Sigma_z": (lambda: whiten(V, Q, I3, -I3), "Sigma_z"),
    "whiten text V": (lambda: whiten("V", Q, I3, I3), "V"),
    "unwhiten non-SPD Sigma": (lambda: unwhiten(V, Q, -I3, I3), "Sigma"),
    "unwhiten mismatched C": (lambda: unwhiten(V, torch.ones(3, 2), I3, I3), "C"),
    "target_svd k < d": (lambda: target_svd(torch.ones(2, 3), I3), "W has k == 2 rows < d == 3"),
    "target_svd non-SPD Sigma": (lambda: target_svd(W, -I3), "Sigma"),
    "token_matrix mismatched Y": (lambda: token_matrix(X, Y[:3], "joint"), "Y"),
    "token_matrix text X": (lambda: token_matrix("x", Y, "joint"), "X"),
    "token_matrix runs axis on X only": (lambda: token_matrix(X[None], Y, "joint"), "X has shape"),
    "assumptions non-symmetric Sigma": (lambda: assumptions([[1.0, 2.0], [0.0, 1.0]], I2), "Sigma is not symmetric"),
    "assumptions empty Sigma": (lambda: assumptions(EMPTY, EMPTY), "Sigma"),
    # overflow of the closed forms names V and Q
    "population_loss at 1e200": (lambda: population_loss(V * 1e200, Q * 1e200, S, W, 0.1), "V or Q"),
    "population_excess_loss at 1e200": (lambda: population_excess_loss(V * 1e200, Q * 1e200, S, W), "V or Q"),
    "population_gradient at 1e200": (lambda: population_gradient(V * 1e200, Q * 1e200, S, W), "V or Q"),
    "empirical_loss at 1e200": (lambda: empirical_loss(V * 1e200, Q, X, Y), "V or Q"),
    # seeds, generators and problems
    "make_problem seed=1.5": (lambda: make_problem(seed=1.5), "seed"),
    "make_problem seed=-1": (lambda: make_problem(seed=-1), "seed"),
    "sample generator=5": (lambda: sample(PROBLEM, 3, generator=5), "generator"),
    "sample problem=None": (lambda: sample(None, 3, seed=0), "problem"),
    "sample_covariates problem='x'": (lambda: sample_covariates("x", 3, seed=0), "problem"),
    "MonteCarloOracle seed=-1": (lambda: MonteCarloOracle(PROBLEM, 4, 1, seed=-1), "seed"),
    "MinibatchOracle seed=-1": (lambda: MinibatchOracle(X[None], Y[None], 2, seed=-1), "seed"),
    # empty and one-dimensional arrays
    "population_loss of (0, 0) arrays": (lambda: population_loss(EMPTY, EMPTY, EMPTY, EMPTY, 0.1), "Sigma"),
    "population_loss without responses": (lambda: population_loss(V[:0], Q, S, W[:0], 0.1), "W_star"),
    "empirical_regularizer 1-d X": (lambda: empirical_regularizer(V, Q, torch.ones(3)), "X"),
    "empirical_regularizer n < d": (lambda: empirical_regularizer(V, Q, X[:2]), "X has too few rows"),
}


@pytest.mark.parametrize("call, match", BAD.values(), ids=BAD.keys())
def test_bad_input_is_refused_naming_the_argument(call, match):
    with pytest.raises(ValidationError, match=match):
        call()


CONVERTED = {
    "sym_sqrt": (sym_sqrt, (S,)),
    "sym_inv_sqrt": (sym_inv_sqrt, (S,)),
    "empirical_covariance": (empirical_covariance, (X, Y)),
    "token_matrix": (token_matrix, (X, Y, "joint")),
    "target_svd": (target_svd, (W, S)),
    "whiten": (whiten, (V, Q, S, S)),
}


@pytest.mark.parametrize("convert", [lambda a: a.float(), lambda a: a.numpy()], ids=["float32", "numpy"])
@pytest.mark.parametrize("function, args", CONVERTED.values(), ids=CONVERTED.keys())
def test_float32_and_numpy_input_is_read_as_float64(function, args, convert):
    expected = function(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    exact = convert(args[0]).dtype == np.float64  # numpy float64: the same numbers; float32: rounded
    got = function(*(convert(a) if isinstance(a, torch.Tensor) else a for a in args))
    for e, g in zip(expected, got if isinstance(got, tuple) else (got,), strict=True):
        assert g.dtype == torch.float64
        if exact:
            assert torch.equal(g, e)
        else:
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)


def test_the_root_of_a_singular_covariance_is_finite():
    """Round-off puts an eigenvalue of ``0.1 * ones(4, 4)`` at -4e-17: read as 0, not a NaN root."""
    singular = torch.full((4, 4), 0.1, dtype=torch.float64)
    root = sym_sqrt(singular)
    assert bool(torch.isfinite(root).all())
    torch.testing.assert_close(root @ root, singular, rtol=0.0, atol=1e-14)
