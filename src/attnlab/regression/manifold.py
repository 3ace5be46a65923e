"""Extended-covariance geometry, the manifold of global minima and the Procrustes projection onto it.

Spec: preconditioned-regression §4.1 (metric: the Frobenius norm of the whitened pair ``A = V Sigma_z^{1/2}``,
``C = Sigma_z^{1/2} Q Sigma^{1/2}``), §4.2 (manifold ``theta_R``), §4.3 (projection, Lemma 1), §10.1 (joint tokens:
``R`` has orthonormal columns).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlab._validation import ValidationError, check_scalar, check_seed
from attnlab.regression._checks import check_batched, check_covariances, check_factor, check_orthonormal, check_spd
from attnlab.regression.data import RegressionProblem
from attnlab.regression.linalg import _sym_inv_sqrt, _sym_sqrt

__all__ = [
    "near_manifold_point",
    "perturbed_manifold_point",
    "Projection",
    "extended_inner",
    "manifold_point",
    "project",
    "projection",
    "random_rotation",
    "target_svd",
    "unwhiten",
    "whiten",
]


def _whiten(
    V: torch.Tensor, Q: torch.Tensor, Sigma: torch.Tensor, Sigma_z: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`whiten` without checks."""
    root_z = _sym_sqrt(Sigma_z)
    return V @ root_z, root_z @ Q @ _sym_sqrt(Sigma)  # spec §1: A = V Sigma^{1/2}, C = Sigma^{1/2} Q Sigma^{1/2}


def _unwhiten(
    A: torch.Tensor, C: torch.Tensor, Sigma: torch.Tensor, Sigma_z: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`unwhiten` without checks."""
    inv_z = _sym_inv_sqrt(Sigma_z)
    return A @ inv_z, inv_z @ C @ _sym_inv_sqrt(Sigma)


def whiten(V: object, Q: object, Sigma: object, Sigma_z: object) -> tuple[torch.Tensor, torch.Tensor]:
    """Whitened factors ``A = V Sigma_z^{1/2}``, ``C = Sigma_z^{1/2} Q Sigma^{1/2}`` (spec §1, §4.1).

    Parameters
    ----------
    V : array-like, shape ([R,] k, p), float64
        Value matrix; a tensor that requires grad stays in its autograd graph.
    Q : array-like, shape ([R,] p, d), float64
        Preconditioner (key-query) matrix; likewise.
    Sigma : array-like, shape ([R,] d, d), float64
        SPD covariance of the covariates.
    Sigma_z : array-like, shape ([R,] p, p), float64
        SPD covariance of one token (``Sigma`` itself for covariate tokens).

    Returns
    -------
    A : torch.Tensor, shape ([R,] k, p)
    C : torch.Tensor, shape ([R,] p, d)
        The pair whose Frobenius norm is the Sigma~ norm of ``(V, Q)``.

    Raises
    ------
    ValidationError
        A non-SPD covariance, mismatched shapes, non-finite entries.
    """
    Sigma, Sigma_z, sizes = check_covariances(Sigma, Sigma_z)
    return _whiten(check_factor("V", V, "kp", sizes), check_factor("Q", Q, "pd", sizes), Sigma, Sigma_z)


def unwhiten(A: object, C: object, Sigma: object, Sigma_z: object) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse of :func:`whiten`: ``V = A Sigma_z^{-1/2}``, ``Q = Sigma_z^{-1/2} C Sigma^{-1/2}``.

    Parameters
    ----------
    A : array-like, shape ([R,] k, p), float64
    C : array-like, shape ([R,] p, d), float64
        Whitened factors; a tensor that requires grad stays in its autograd graph.
    Sigma : array-like, shape ([R,] d, d), float64
        SPD covariance of the covariates.
    Sigma_z : array-like, shape ([R,] p, p), float64
        SPD covariance of one token (``Sigma`` itself for covariate tokens).

    Returns
    -------
    V : torch.Tensor, shape ([R,] k, p)
    Q : torch.Tensor, shape ([R,] p, d)

    Raises
    ------
    ValidationError
        A non-SPD covariance, mismatched shapes, non-finite entries.
    """
    Sigma, Sigma_z, sizes = check_covariances(Sigma, Sigma_z)
    return _unwhiten(check_factor("A", A, "kp", sizes), check_factor("C", C, "pd", sizes), Sigma, Sigma_z)


def extended_inner(
    V1: torch.Tensor, Q1: torch.Tensor, V2: torch.Tensor, Q2: torch.Tensor, Sigma: torch.Tensor, Sigma_z: torch.Tensor
) -> torch.Tensor:
    """``<theta1, theta2>_Sigma~ = tr(V1 Sigma_z V2^T) + tr(Sigma_z Q1 Sigma Q2^T)`` (spec §4.1).

    Parameters
    ----------
    V1, V2 : torch.Tensor, shape ([R,] k, p), float64
        Value matrices of the two points.
    Q1, Q2 : torch.Tensor, shape ([R,] p, d), float64
        Preconditioner matrices of the two points.
    Sigma : torch.Tensor, shape ([R,] d, d), float64
        SPD covariance of the covariates.
    Sigma_z : torch.Tensor, shape ([R,] p, p), float64
        SPD covariance of one token (``Sigma`` itself for covariate tokens).

    Returns
    -------
    torch.Tensor, shape ([R,])
        The extended-covariance inner product, one per run.
    """
    return (V1 @ Sigma_z * V2).sum((-2, -1)) + (Sigma_z @ Q1 @ Sigma * Q2).sum((-2, -1))  # spec §4.1


def _target_svd(W: torch.Tensor, Sigma: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`target_svd` without checks."""
    U, S, Vh = torch.linalg.svd(W @ _sym_sqrt(Sigma), full_matrices=False)  # spec §1: M* = U S V_M^T
    return U, S, Vh.transpose(-1, -2)


def target_svd(W: object, Sigma: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Thin SVD of ``M = W Sigma^{1/2}`` (spec §1: ``M* = U S V_M^T``).

    Parameters
    ----------
    W : array-like, shape ([R,] k, d), float64
        Regression matrix (``W*``), ``k >= d``.
    Sigma : array-like, shape ([R,] d, d), float64
        SPD covariance.

    Returns
    -------
    U : torch.Tensor, shape ([R,] k, d)
        Left singular vectors (orthonormal columns).
    S : torch.Tensor, shape ([R,] d)
        Singular values, in decreasing order.
    V_M : torch.Tensor, shape ([R,] d, d)
        Right singular vectors, as columns: ``M = U diag(S) V_M^T``.

    Raises
    ------
    ValidationError
        A non-SPD ``Sigma``, mismatched shapes, non-finite entries, ``k < d`` (A2 needs ``k >= d``).
    """
    sizes: dict[str, int] = {}
    Sigma = check_spd("Sigma", Sigma, sizes)
    W = check_batched("W", W, "kd", sizes)
    _check_a2("W", sizes)
    return _target_svd(W, Sigma)


def manifold_point(
    R: object, W: object, Sigma: object, Sigma_z: object | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The point ``theta_R`` of the manifold of minima built from ``(W, Sigma)``.

    Spec: preconditioned-regression §4.2:
    ``V_R = U S^{1/2} R^T Sigma_z^{-1/2}``, ``Q_R = Sigma_z^{-1/2} R S^{1/2} V_M^T Sigma^{-1/2}``.

    Parameters
    ----------
    R : array-like, shape ([R,] p, d), float64
        Orthonormal columns (``R^T R = I_d``); square orthogonal for covariate tokens.
    W : array-like, shape ([R,] k, d), float64
        Regression matrix (``W*``, or the OLS estimate for the spectral start).
    Sigma : array-like, shape ([R,] d, d), float64
        SPD covariance.
    Sigma_z : array-like, shape ([R,] p, p), float64, optional
        Token covariance; default ``Sigma``.

    Returns
    -------
    V : torch.Tensor, shape ([R,] k, p), float64
    Q : torch.Tensor, shape ([R,] p, d), float64

    Raises
    ------
    ValidationError
        Mismatched shapes, a non-SPD covariance, ``R`` without orthonormal columns, ``k < d`` (A2 needs ``k >= d``).
    """
    Sigma, Sigma_z, sizes = check_covariances(Sigma, Sigma_z)
    W = check_batched("W", W, "kd", sizes)
    _check_a2("W", sizes)
    R = check_orthonormal("R", R, sizes)
    return _point(R, W, Sigma, Sigma_z)


def _check_a2(name: str, sizes: dict[str, int]) -> None:
    """Refuse ``k < d``: the manifold of minima (spec §4.2) is built from the thin SVD of a ``k x d`` matrix of rank d."""
    k, d = sizes["k"], sizes["d"]
    if k < d:
        raise ValidationError(
            f"{name} has k == {k} rows < d == {d} columns: the manifold of minima needs k >= d (assumption A2); "
            f"pass a {name} with at least {d} rows"
        )


def _point(
    R: torch.Tensor, W: torch.Tensor, Sigma: torch.Tensor, Sigma_z: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    U, S, V_M = _target_svd(W, Sigma)
    root_S = S.sqrt().unsqueeze(-2)  # (..., 1, d)
    A = (U * root_S) @ R.transpose(-1, -2)  # spec §4.2: A_R = U S^{1/2} R^T
    C = (R * root_S) @ V_M.transpose(-1, -2)  # spec §4.2: C_R = R S^{1/2} V_M^T
    return _unwhiten(A, C, Sigma, Sigma_z)


@dataclass(frozen=True)
class Projection:
    """The Sigma~-projection of ``theta`` onto the manifold of minima (spec §4.3).

    Attributes
    ----------
    V, Q : torch.Tensor, shapes ([R,] k, p), ([R,] p, d)
        The projected point ``theta_bar``.
    R : torch.Tensor, shape ([R,] p, d)
        The optimal rotation ``R* = P O^T``.
    distance : torch.Tensor, shape ([R])
        ``dist(theta, M)`` in the Sigma~ norm.
    """

    V: torch.Tensor
    Q: torch.Tensor
    R: torch.Tensor
    distance: torch.Tensor


def project(V: object, Q: object, W_star: object, Sigma: object, Sigma_z: object | None = None) -> Projection:
    """Project ``theta = (V, Q)`` onto the manifold of minima in the Sigma~ norm (orthogonal Procrustes).

    Spec: preconditioned-regression §4.3: ``N = A^T U S^{1/2} + C V_M S^{1/2}``, ``N = P Lambda O^T``,
    ``R* = P O^T``.

    Parameters
    ----------
    V : array-like, shape ([R,] k, p), float64
    Q : array-like, shape ([R,] p, d), float64
    W_star : array-like, shape ([R,] k, d), float64
    Sigma : array-like, shape ([R,] d, d), float64
    Sigma_z : array-like, shape ([R,] p, p), float64, optional
        Default ``Sigma`` (covariate tokens).

    Returns
    -------
    Projection

    Raises
    ------
    ValidationError
        Mismatched shapes, a non-SPD covariance, non-finite entries, ``k < d`` (A2 needs ``k >= d``).
    """
    Sigma, Sigma_z, sizes = check_covariances(Sigma, Sigma_z)
    W_star = check_batched("W_star", W_star, "kd", sizes)
    _check_a2("W_star", sizes)
    V = check_batched("V", V, "kp", sizes)
    Q = check_batched("Q", Q, "pd", sizes)
    return projection(V, Q, W_star, Sigma, Sigma_z)


def projection(
    V: torch.Tensor, Q: torch.Tensor, W_star: torch.Tensor, Sigma: torch.Tensor, Sigma_z: torch.Tensor
) -> Projection:
    """:func:`project` without checks."""
    A, C = _whiten(V, Q, Sigma, Sigma_z)
    U, S, V_M = _target_svd(W_star, Sigma)
    root_S = S.sqrt().unsqueeze(-2)
    N = A.transpose(-1, -2) @ (U * root_S) + C @ (V_M * root_S)  # spec §4.3: N = A^T U S^1/2 + C V_M S^1/2, (p, d)
    P, _, Oh = torch.linalg.svd(N, full_matrices=False)
    R = P @ Oh  # spec §4.3: R* = P O^T
    V_bar, Q_bar = _point(R, W_star, Sigma, Sigma_z)
    A_bar, C_bar = _whiten(V_bar, Q_bar, Sigma, Sigma_z)
    dist2 = ((A - A_bar) ** 2).sum((-2, -1)) + ((C - C_bar) ** 2).sum((-2, -1))  # spec §4.3: dist^2
    return Projection(V_bar, Q_bar, R, dist2.sqrt())


def random_rotation(d: int, p: int | None = None, *, runs: int | None = None, seed: int = 0) -> torch.Tensor:
    """Haar-random matrix with orthonormal columns (p = d: a random element of O(d)).

    Parameters
    ----------
    d : int
        Number of columns.
    p : int, optional
        Number of rows, >= d; default ``d``.
    runs : int, optional
        Leading runs axis R, one independent draw per run; None gives an unbatched matrix.
    seed : int, default=0
        Pass an int to get the same matrix every time.

    Returns
    -------
    torch.Tensor, shape ([R,] p, d), float64
        ``R^T R = I_d``.

    Raises
    ------
    ValidationError
        When ``d`` is not an int ``>= 1``, ``p`` not an int ``>= d``, ``runs`` not an int ``>= 1``, or ``seed`` not
        a valid seed.
    """
    check_scalar("d", d, kind=int, low=1)
    if p is not None:
        check_scalar("p", p, kind=int, low=d)
    if runs is not None:
        check_scalar("runs", runs, kind=int, low=1)
    gen = torch.Generator().manual_seed(check_seed("seed", seed))
    lead = () if runs is None else (int(runs),)
    G = torch.randn(*lead, int(d if p is None else p), int(d), generator=gen, dtype=torch.float64)
    Qf, Rf = torch.linalg.qr(G)
    return Qf * torch.sign(torch.diagonal(Rf, dim1=-2, dim2=-1)).unsqueeze(-2)  # sign fix makes it Haar


def perturbed_manifold_point(
    problem: RegressionProblem, runs: int, scale: float, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``theta_R`` for ``runs`` Haar-random ``R`` in O(d), plus i.i.d. ``N(0, scale^2)`` raw entries.

    Spec: preconditioned-regression §4.2 (``theta_R``), §9.3 (the perturbed-manifold start). The entries are not
    whitened, so the distance to M is not set: at ``scale = 0.05`` on the theory instance it is 3.5-5 rho (the
    experiments' points until 2026-11-30); :func:`near_manifold_point` sets it.

    Parameters
    ----------
    problem : RegressionProblem
        Its ``W_star`` and ``Sigma`` build the manifold (covariate tokens).
    runs : int
        Leading runs axis R, one rotation and one perturbation per run.
    scale : float
        Standard deviation of the perturbation of each entry; 0 gives points on M.
    seed : int, default=0
        Seeds the rotations, and ``seed + 1`` the perturbations.

    Returns
    -------
    V : torch.Tensor, shape (R, k, d), float64
    Q : torch.Tensor, shape (R, d, d), float64
    """
    check_scalar("runs", runs, kind=int, low=1)
    check_scalar("scale", scale, low=0.0)
    check_seed("seed", seed)
    V, Q = manifold_point(random_rotation(problem.d, runs=runs, seed=seed), problem.W_star, problem.Sigma)
    gen = torch.Generator().manual_seed(seed + 1)
    # drawn in float32 (the draw every recorded run used), then widened to float64 by the sum
    return V + scale * torch.randn(V.shape, generator=gen), Q + scale * torch.randn(Q.shape, generator=gen)


def near_manifold_point(
    problem: RegressionProblem, runs: int, distance: float, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Points at ``dist(theta, M) == distance`` exactly: for ``runs`` Haar-random ``R`` in O(d), a point of M near
    ``theta_R`` moved along a random direction normal to M there.

    Spec: preconditioned-regression §4.1 (the Sigma~ norm: Frobenius of the whitened ``(A, C)``), §4.3 (Lemma 1: the
    residual ``theta - theta_bar`` of a projection is normal to M at ``theta_bar``, so ``theta_bar + t (theta -
    theta_bar)`` projects onto ``theta_bar`` and lies at ``t dist``). An i.i.d. N(0, 1) direction in the whitened
    coordinates, scaled to ``distance``, is added to ``theta_R``; the point is then moved along its own residual to
    the projection so that its distance is ``distance``, and the distance is checked by :func:`projection`.

    Parameters
    ----------
    problem : RegressionProblem
        Its ``W_star`` and ``Sigma`` build the manifold (covariate tokens).
    runs : int
        Leading runs axis R, one rotation and one direction per run.
    distance : float
        ``dist(theta, M)`` in the Sigma~ norm; 0 gives points on M.
    seed : int, default=0
        Seeds the rotations, and ``seed + 1`` the directions.

    Returns
    -------
    V : torch.Tensor, shape (R, k, d), float64
    Q : torch.Tensor, shape (R, d, d), float64

    Raises
    ------
    ValidationError
        ``runs`` not an int >= 1, ``distance`` not finite and >= 0, a bad ``seed``; or a ``distance`` so large that
        the moved point projects elsewhere (its distance is then not ``distance``).
    """
    check_scalar("runs", runs, kind=int, low=1)
    check_scalar("distance", distance, low=0.0)
    check_seed("seed", seed)
    W, Sigma = problem.W_star, problem.Sigma
    V, Q = manifold_point(random_rotation(problem.d, runs=runs, seed=seed), W, Sigma)
    if distance == 0:
        return V, Q
    A, C = _whiten(V, Q, Sigma, Sigma)
    gen = torch.Generator().manual_seed(seed + 1)
    dA = torch.randn(A.shape, generator=gen, dtype=torch.float64)
    dC = torch.randn(C.shape, generator=gen, dtype=torch.float64)
    size = (dA.square().sum((-2, -1)) + dC.square().sum((-2, -1))).sqrt()[:, None, None]
    A, C = A + distance * dA / size, C + distance * dC / size  # spec §4.1: whitened norm `distance`
    off = projection(*_unwhiten(A, C, Sigma, Sigma), W, Sigma, Sigma)
    if not bool((off.distance > 0).all()):
        raise ValidationError(f"seed == {seed}: a drawn step lies along M (no normal part); pass another seed")
    A_bar, C_bar = _whiten(off.V, off.Q, Sigma, Sigma)  # a point of M near theta_R: itself a theta_R' (spec §4.2)
    t = distance / off.distance[:, None, None]  # spec §4.3: the residual is normal at theta_bar (Lemma 1)
    V, Q = _unwhiten(A_bar + t * (A - A_bar), C_bar + t * (C - C_bar), Sigma, Sigma)
    reached = projection(V, Q, W, Sigma, Sigma).distance
    if not torch.allclose(reached, torch.full_like(reached, float(distance)), rtol=1e-9, atol=0.0):
        raise ValidationError(
            f"distance == {distance} is too far from M for a step along the normal: the moved points lie at "
            f"{reached.tolist()}; pass a smaller distance (the local region is rho = 0.25 sigma_d^{{1/2}})"
        )
    return V, Q
