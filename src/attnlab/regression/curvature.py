"""The regularized objective ``f = L + mu R`` above its minimum, and its curvature at the manifold of minima M in
the whitened coordinates: the constants of Theorem 1.3 and the local rate of preconditioned GD.

Spec: preconditioned-regression §3.3-3.4 (closed forms), §4.2-4.4 (M, the whitened coordinates ``(A, C)``,
Theorem 1.3), §5.4 (preconditioned GD is plain GD on ``(A, C)``).
"""

from __future__ import annotations

import numpy as np
import torch

from attnlab._validation import ValidationError, check_scalar, check_seed
from attnlab.regression import population
from attnlab.regression._checks import check_batched
from attnlab.regression.data import RegressionProblem, check_problem
from attnlab.regression.manifold import _unwhiten, _whiten, manifold_point, projection, random_rotation
from attnlab.regression.regularizer import regularizer
from attnlab.regression.regularizer import value as regularizer_value

__all__ = [
    "normal_curvatures",
    "objective_excess",
    "segment_curvature",
    "whitened_hessian",
    "whitened_hessian_spectrum",
]


def _check_problem(problem: object, mu: object) -> None:
    check_problem(problem)
    check_scalar("mu", mu, low=0.0)


def objective_excess(problem: RegressionProblem, mu: float, V: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """``f - L_irr = (L - L_irr) + mu R`` with the closed-form population loss: zero on M.

    Spec: preconditioned-regression §3.3 (``L``), §3.4 (``R``), §4.2 (Theorem 1.2: ``f = L_irr`` on M).

    Parameters
    ----------
    problem : RegressionProblem
    mu : float
        Regularizer weight, >= 0.
    V : torch.Tensor, shape ([R,] k, d), float64
    Q : torch.Tensor, shape ([R,] d, d), float64

    Returns
    -------
    torch.Tensor, shape ([R])
    """
    _check_problem(problem, mu)
    loss = population.population_loss(V, Q, problem.Sigma, problem.W_star, problem.noise_std)  # spec §3.3
    return loss - problem.irreducible_loss + mu * regularizer(V, Q, problem.Sigma)  # spec §3.4: + mu R


def whitened_hessian(
    problem: RegressionProblem, mu: float, seed: int
) -> tuple[np.ndarray, np.ndarray, tuple[torch.Tensor, torch.Tensor]]:
    """The Hessian of f in the whitened coordinates ``(A, C)`` at a point ``theta_R`` of M: eigenvalues, eigenvectors
    and the point.

    Spec: preconditioned-regression §4.4 (Theorem 1.3's alpha and beta and the directions that attain them), §5.4.

    Parameters
    ----------
    problem : RegressionProblem
    mu : float
        Regularizer weight, >= 0.
    seed : int
        Seeds the rotation ``R`` in O(d) of the point ``theta_R`` (:func:`~attnlab.regression.random_rotation`).

    Returns
    -------
    eigenvalues : numpy.ndarray, shape (k d + d d,)
        Ascending, as :func:`whitened_hessian_spectrum`.
    eigenvectors : numpy.ndarray, shape (k d + d d, k d + d d)
        Unit eigenvectors as columns, in the coordinates ``concat(A.flatten(), C.flatten())``.
    point : tuple of torch.Tensor
        ``(A, C)`` of ``theta_R``, shapes (k, d) and (d, d).

    Notes
    -----
    Autograd of the closed-form values (spec §3.3, §3.4), independent of the gradient formulas.
    """
    _check_problem(problem, mu)
    check_seed("seed", seed)
    S, d = problem.Sigma, problem.d
    V, Q = manifold_point(random_rotation(d, seed=seed), problem.W_star, S)
    A, C = _whiten(V, Q, S, S)
    eigenvalues, eigenvectors = np.linalg.eigh(_hessians(problem, mu, A[None], C[None])[0].numpy())
    return eigenvalues, eigenvectors, (A, C)


def _hessians(problem: RegressionProblem, mu: float, A: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """The Hessian of f in the whitened coordinates at each of P points ``(A, C)``, shapes (P, k, d) and (P, d, d):
    (P, k d + d d, k d + d d), in the coordinates ``concat(A.flatten(), C.flatten())``. Autograd of the closed-form
    values (spec §3.3, §3.4), independent of the gradient formulas; one backward pass per coordinate serves every
    point (the points do not interact)."""
    S, sizes = problem.Sigma, (A[0].numel(), C[0].numel())
    x = torch.cat([A.flatten(-2), C.flatten(-2)], dim=-1).detach().requires_grad_(True)
    a, c = x.split(sizes, dim=-1)
    V, Q = _unwhiten(a.unflatten(-1, A.shape[-2:]), c.unflatten(-1, C.shape[-2:]), S, S)
    total = (population.excess(V, Q, S, S, problem.W_star) + mu * regularizer_value(V, Q, S, S)).sum()  # §3.3-3.4
    (gradient,) = torch.autograd.grad(total, x, create_graph=True)
    rows = [torch.autograd.grad(gradient[:, j].sum(), x, retain_graph=True)[0] for j in range(x.shape[-1])]
    return torch.stack(rows, dim=-2).detach()


def segment_curvature(
    problem: RegressionProblem, mu: float, V: torch.Tensor, Q: torch.Tensor, points: int = 9
) -> torch.Tensor:
    """The largest eigenvalue of f's whitened Hessian on the segment from ``theta``'s projection onto M to ``theta``:
    the smoothness constant of the descent lemma on that segment.

    Spec: preconditioned-regression §8 (L2: ``f(theta) - f* <= beta / 2 dist^2(theta, M)``), §4.3 (the projection
    ``theta_bar``), §4.4. With ``delta = theta - theta_bar`` in ``(A, C)``, ``f(theta_bar) = f*`` and
    ``grad f(theta_bar) = 0``, Taylor's formula with integral remainder gives ``f(theta) - f* = int_0^1 (1 - s)
    delta^T H(theta_bar + s delta) delta ds <= max_s lambda_max(H(theta_bar + s delta)) / 2 * |delta|^2``: the lemma
    holds with this ``beta``, which is the Hessian's at M only to second order in ``dist``.

    Parameters
    ----------
    problem : RegressionProblem
    mu : float
        Regularizer weight, >= 0.
    V : torch.Tensor, shape ([R,] k, d), float64
    Q : torch.Tensor, shape ([R,] d, d), float64
    points : int, default=9
        Equally spaced ``s`` in [0, 1] at which the Hessian is formed (the maximum is over these).

    Returns
    -------
    torch.Tensor, shape ([R])
    """
    _check_problem(problem, mu)
    check_scalar("points", points, kind=int, low=2)
    S, W = problem.Sigma, problem.W_star
    sizes = {"k": problem.W_star.shape[-2], "d": problem.d}
    V, Q = check_batched("V", V, "kd", sizes), check_batched("Q", Q, "dd", sizes)
    A, C = _whiten(V, Q, S, S)
    bar = projection(V, Q, W, S, S)
    A_bar, C_bar = _whiten(bar.V, bar.Q, S, S)
    steps = torch.linspace(0.0, 1.0, points, dtype=torch.float64)[:, None, None, None]  # (s, 1, 1, 1)
    on_segment = [(t0 + steps * (t - t0)).reshape((-1,) + t.shape[-2:]) for t, t0 in ((A, A_bar), (C, C_bar))]
    top = torch.linalg.eigvalsh(_hessians(problem, mu, *on_segment))[..., -1]  # (s * R,)
    return top.reshape((points,) + A.shape[:-2]).amax(dim=0)


def whitened_hessian_spectrum(problem: RegressionProblem, mu: float, seed: int) -> np.ndarray:
    """Eigenvalues of the Hessian of f in the whitened coordinates ``(A, C)`` at a point ``theta_R`` of M, ascending.

    Spec: preconditioned-regression §4.4 (Theorem 1.3's alpha and beta), §5.4 (the local rate of preconditioned GD).

    Parameters
    ----------
    problem : RegressionProblem
    mu : float
        Regularizer weight, >= 0.
    seed : int
        Seeds the rotation ``R`` in O(d) of the point ``theta_R``.

    Returns
    -------
    numpy.ndarray, shape (k d + d d,)
        Ascending. The first ``d (d - 1) / 2`` are the tangent directions of M (zero); the rest are the normal
        curvatures (:func:`normal_curvatures`): the smallest is the theorem's alpha, the largest its beta.

    Notes
    -----
    Autograd of the closed-form values (spec §3.3, §3.4), independent of the gradient formulas; the eigenvalues of
    :func:`whitened_hessian`.
    """
    return whitened_hessian(problem, mu, seed)[0]


def normal_curvatures(spectrum: np.ndarray, d: int) -> np.ndarray:
    """The normal part of a :func:`whitened_hessian_spectrum`: its tangent ``d (d - 1) / 2`` eigenvalues dropped.

    Spec: preconditioned-regression §4.4 (M has dimension ``d (d - 1) / 2``, that of O(d)).

    Parameters
    ----------
    spectrum : numpy.ndarray, shape (m,)
        Ascending eigenvalues.
    d : int
        Token width.

    Returns
    -------
    numpy.ndarray, shape (m - d (d - 1) / 2,)
    """
    d = check_scalar("d", d, kind=int, low=1)
    tangent = d * (d - 1) // 2  # spec §4.4: dim O(d)
    if len(spectrum) <= tangent:
        raise ValidationError(
            f"spectrum has {len(spectrum)} eigenvalues, needs more than d (d - 1) / 2 = {tangent}; pass the "
            "whitened_hessian_spectrum of a problem of width d"
        )
    return spectrum[tangent:]
