"""Gaussian in-context regression data: the problem (Sigma, W_star, noise), samples, tokens, assumptions A1-A3.

Spec: preconditioned-regression §2 (model), §7 (assumptions), §9.2 (default generator), §10.1 (token readings).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlab._validation import ValidationError, check_instance, check_scalar, check_seed, check_tensor
from attnlab.regression._checks import check_batched, check_definite, check_joint, check_spd, check_tokens
from attnlab.regression.linalg import _sym_sqrt

__all__ = [
    "RegressionAssumptions",
    "RegressionProblem",
    "assumptions",
    "make_problem",
    "sample",
    "sample_covariates",
    "token_covariance",
    "token_matrix",
]


@dataclass(frozen=True)
class RegressionAssumptions:
    """Measured quantities behind assumptions A1-A3 (spec §7) and whether each holds.

    Attributes
    ----------
    lambda_min : float
        Smallest eigenvalue of Sigma (A1 needs > 0).
    k, d : int
        Response and covariate dimensions (A2 needs k >= d).
    sigma_min : float
        sigma_d(W_star Sigma^{1/2}) (A2 needs > 0; enters every rate).
    sigma_max : float
        ||W_star Sigma^{1/2}||_op (A3 needs <= c3).
    c3 : float
        The A3 constant used (spec §7 default 1/4).
    """

    lambda_min: float
    k: int
    d: int
    sigma_min: float
    sigma_max: float
    c3: float

    @property
    def a1(self) -> bool:
        """A1: ``Sigma`` is positive definite (``lambda_min > 0``)."""
        return self.lambda_min > 0.0

    @property
    def a2(self) -> bool:
        """A2: ``k >= d`` and ``M* = W* Sigma^{1/2}`` has full column rank (``sigma_min > 0``)."""
        return self.k >= self.d and self.sigma_min > 0.0

    @property
    def a3(self) -> bool:
        """A3: ``||M*||_op <= c3``, up to a relative round-off of 1e-12."""
        return self.sigma_max <= self.c3 * (1.0 + 1e-12)  # round-off of the normalisation in make_problem

    @property
    def holds(self) -> bool:
        """Whether A1, A2 and A3 all hold."""
        return self.a1 and self.a2 and self.a3

    def describe(self) -> str:
        """One line per assumption, with the measured number.

        Returns
        -------
        str
            Three lines (A1, A2, A3), each ending in ``True`` or ``False``.
        """
        return "\n".join(
            [
                f"A1 lambda_min(Sigma) = {self.lambda_min:.4g} > 0: {self.a1}",
                f"A2 k = {self.k} >= d = {self.d} and sigma_d(W* Sigma^1/2) = {self.sigma_min:.4g} > 0: {self.a2}",
                f"A3 ||W* Sigma^1/2||_op = {self.sigma_max:.4g} <= c3 = {self.c3:g}: {self.a3}",
            ]
        )


def assumptions(Sigma: object, W_star: object, *, c3: float = 0.25) -> RegressionAssumptions:
    """Measure assumptions A1-A3 of spec §7 for ``(Sigma, W_star)``.

    Parameters
    ----------
    Sigma : array-like, shape (d, d), float64
        Covariance of the covariates (must be symmetric, to a relative 1e-10; positivity is measured, not required).
    W_star : array-like, shape (k, d), float64
        True regression matrix.
    c3 : float, default=0.25
        A3 constant (spec §7; the paper's value is lost).

    Returns
    -------
    RegressionAssumptions

    Raises
    ------
    ValidationError
        A non-symmetric or empty ``Sigma``, mismatched shapes, non-finite entries, ``c3 <= 0``.
    """
    sizes: dict[str, int] = {}
    Sigma = check_definite("Sigma", check_tensor("Sigma", Sigma, "dd", sizes, min_size={"d": 1}), "symmetric")
    W_star = check_tensor("W_star", W_star, "kd", sizes)
    check_scalar("c3", c3, low=0.0, low_inclusive=False)
    eig = torch.linalg.eigvalsh((Sigma + Sigma.T) / 2)
    lam = float(eig.min())
    if lam > 0:
        sv = torch.linalg.svdvals(W_star @ _sym_sqrt(Sigma))  # spec §1: M* = W* Sigma^{1/2}
        smin, smax = float(sv[-1]) if sizes["k"] >= sizes["d"] else 0.0, float(sv[0])
    else:
        smin = smax = float("nan")
    return RegressionAssumptions(lam, sizes["k"], sizes["d"], smin, smax, float(c3))


@dataclass(frozen=True)
class RegressionProblem:
    """A linear-regression law ``x ~ N(0, Sigma)``, ``y = W_star x + eps``, ``eps ~ N(0, noise_std^2 I_k)``.

    Spec: preconditioned-regression §2, §9.2.

    Attributes
    ----------
    Sigma : torch.Tensor, shape (d, d), float64
    W_star : torch.Tensor, shape (k, d), float64
    noise_std : float
    """

    Sigma: torch.Tensor
    W_star: torch.Tensor
    noise_std: float

    def __post_init__(self) -> None:
        sizes: dict[str, int] = {}
        object.__setattr__(self, "Sigma", check_spd("Sigma", self.Sigma, sizes))
        object.__setattr__(self, "W_star", check_tensor("W_star", self.W_star, "kd", sizes))
        check_scalar("noise_std", self.noise_std, low=0.0)

    @property
    def d(self) -> int:
        """Covariate dimension."""
        return int(self.Sigma.shape[0])

    @property
    def k(self) -> int:
        """Response dimension."""
        return int(self.W_star.shape[0])

    @property
    def irreducible_loss(self) -> float:
        """``k sigma^2`` (spec §1)."""
        return self.k * float(self.noise_std) ** 2  # spec §1: L_irr = k sigma^2

    @property
    def target(self) -> torch.Tensor:
        """``M* = W* Sigma^{1/2}``, shape (k, d) (spec §1)."""
        return self.W_star @ _sym_sqrt(self.Sigma)  # spec §1: M* = W* Sigma^{1/2}

    def assumptions(self, c3: float = 0.25) -> RegressionAssumptions:
        """A1-A3 measured on this problem (spec §7); see :func:`assumptions`.

        Parameters
        ----------
        c3 : float, default=0.25
            A3 constant, > 0.

        Returns
        -------
        RegressionAssumptions
        """
        return assumptions(self.Sigma, self.W_star, c3=c3)

    def token_covariance(self, tokens: str = "covariates") -> torch.Tensor:
        """Covariance of one token (spec §10.1); see :func:`token_covariance`.

        Parameters
        ----------
        tokens : {"covariates", "joint"}, default="covariates"
            The token reading: ``x`` alone (p = d) or ``(x; y)`` (p = d + k; needs ``noise_std > 0``).

        Returns
        -------
        torch.Tensor, shape (p, p), float64
        """
        return token_covariance(self.Sigma, self.W_star, self.noise_std, tokens=tokens)


def check_problem(problem: object) -> None:
    """Refuse a ``problem`` that is not a :class:`RegressionProblem`, naming the fix."""
    if not isinstance(problem, RegressionProblem):
        raise ValidationError(
            f"problem must be a RegressionProblem, got {type(problem).__name__}; build one with make_problem"
        )


def make_problem(
    d: int = 4,
    k: int = 8,
    *,
    noise_std: float = 0.1,
    c3: float = 0.25,
    singular_values: tuple[float, ...] | None = None,
    seed: int = 0,
) -> RegressionProblem:
    """Draw ``Sigma`` and ``W_star`` that satisfy A1-A3 (spec §9.2 defaults).

    ``Sigma = G1 G1^T / d + I_d`` and ``W_star = c3 G2 / ||G2 Sigma^{1/2}||_op`` with Gaussian ``G1`` (d, d),
    ``G2`` (k, d). With ``singular_values`` the target ``M* = W* Sigma^{1/2}`` gets exactly those singular values
    (random singular vectors), which fixes its conditioning (used by the theory checks).

    Parameters
    ----------
    d, k : int
        Covariate and response dimensions, ``k >= d`` (A2).
    noise_std : float, default=0.1
    c3 : float, default=0.25
        Operator norm given to ``M*`` (A3).
    singular_values : tuple of d floats, optional
        Prescribed singular values of ``M*`` (then ``c3`` is not used).
    seed : int, default=0
        Pass an int to get the same problem every time.

    Returns
    -------
    RegressionProblem

    Raises
    ------
    ValidationError
        ``k < d`` (A2 needs ``k >= d``), a bad ``noise_std``/``c3``, ``singular_values`` of the wrong length, or a
        ``seed`` that is not a whole number in ``[0, 2**63 - 1]``.
    """
    check_scalar("d", d, kind=int, low=1)
    check_scalar("k", k, kind=int, low=1)
    if k < d:
        raise ValidationError(
            f"k == {k} < d == {d}: assumption A2 (covariate tokens) needs k >= d; raise k to at least {d}"
        )
    check_scalar("noise_std", noise_std, low=0.0)
    check_scalar("c3", c3, low=0.0, low_inclusive=False)
    gen = torch.Generator().manual_seed(check_seed("seed", seed))
    G1 = torch.randn(d, d, generator=gen, dtype=torch.float64)
    G2 = torch.randn(k, d, generator=gen, dtype=torch.float64)
    Sigma = G1 @ G1.T / d + torch.eye(d, dtype=torch.float64)  # spec §9.2
    root = _sym_sqrt(Sigma)
    if singular_values is None:
        W_star = c3 * G2 / torch.linalg.matrix_norm(G2 @ root, ord=2)  # spec §9.2: ||W* Sigma^1/2||_op = c3
    else:
        s = check_tensor("singular_values", list(singular_values), "d", {"d": d})
        if bool((s <= 0).any()):
            raise ValidationError(f"singular_values == {tuple(singular_values)}, must all be > 0 (A2)")
        U, _, Vh = torch.linalg.svd(G2, full_matrices=False)  # random orthonormal U (k, d), Vh (d, d)
        W_star = (U * s) @ Vh @ torch.linalg.inv(root)  # M* = U diag(s) Vh, W* = M* Sigma^{-1/2}
    return RegressionProblem(Sigma=Sigma, W_star=W_star, noise_std=float(noise_std))


def _sampling(
    problem: object, n: int, runs: int | None, generator: torch.Generator | None, seed: int | None
) -> tuple[tuple[int, ...], torch.Generator]:
    """The leading shape ``([R,] n)`` and the generator of a draw, after checking ``problem``, ``n``, ``runs``, then
    the source."""
    check_problem(problem)
    check_scalar("n", n, kind=int, low=1)
    if runs is not None:
        check_scalar("runs", runs, kind=int, low=1)
    if (generator is None) == (seed is None):
        raise ValidationError("pass exactly one of generator= and seed= (an int seed gives the same sample every time)")
    if generator is None:
        generator = torch.Generator().manual_seed(check_seed("seed", seed))
    fix = "pass a torch.Generator, or an int as seed="
    return (n,) if runs is None else (runs, n), check_instance("generator", generator, torch.Generator, fix)


def _covariates(problem: RegressionProblem, lead: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """``x ~ N(0, Sigma)`` of shape ``lead + (d,)``, drawn from ``gen`` (spec §2)."""
    return torch.randn(*lead, problem.d, generator=gen, dtype=torch.float64) @ _sym_sqrt(problem.Sigma)


def sample_covariates(
    problem: RegressionProblem,
    n: int,
    *,
    runs: int | None = None,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> torch.Tensor:
    """Draw the covariates of ``n`` samples alone: the ``X`` that :func:`sample` draws from the same generator state
    (it draws them first), without the responses, for a reading that needs no ``Y``.

    Parameters
    ----------
    problem : RegressionProblem
    n : int
        Number of samples.
    runs : int, optional
        Leading runs axis R; None gives an unbatched tensor.
    generator : torch.Generator, optional
        Source of randomness; exactly one of ``generator`` and ``seed``.
    seed : int, optional
        Pass an int to get the same sample every time.

    Returns
    -------
    X : torch.Tensor, shape ([R,] n, d), float64

    Raises
    ------
    ValidationError
        As :func:`sample`.
    """
    return _covariates(problem, *_sampling(problem, n, runs, generator, seed))


def sample(
    problem: RegressionProblem,
    n: int,
    *,
    runs: int | None = None,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``n`` samples ``(x_i, y_i)`` (spec §2), optionally for ``runs`` independent runs.

    Parameters
    ----------
    problem : RegressionProblem
    n : int
        Number of samples.
    runs : int, optional
        Leading runs axis R; None gives unbatched tensors.
    generator : torch.Generator, optional
        Source of randomness; exactly one of ``generator`` and ``seed``.
    seed : int, optional
        Pass an int to get the same sample every time.

    Returns
    -------
    X : torch.Tensor, shape ([R,] n, d), float64
    Y : torch.Tensor, shape ([R,] n, k), float64

    Raises
    ------
    ValidationError
        When ``problem`` is not a :class:`RegressionProblem`, ``n`` or ``runs`` is not an int ``>= 1``, both or
        neither of ``generator`` and ``seed`` are given, ``generator`` is not a ``torch.Generator``, or ``seed`` is
        not a whole number in ``[0, 2**63 - 1]``.
    """
    return draw(problem, *_sampling(problem, n, runs, generator, seed))


def draw(problem: RegressionProblem, lead: tuple[int, ...], gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`sample` without checks: ``(X, Y)`` of shapes ``lead + (d,)``, ``lead + (k,)`` drawn from ``gen``."""
    X = _covariates(problem, lead, gen)  # x ~ N(0, Sigma), drawn first
    noise = problem.noise_std * torch.randn(*lead, problem.k, generator=gen, dtype=torch.float64)
    Y = X @ problem.W_star.T + noise  # spec §2: y = W* x + eps
    return X, Y


def _token_matrix(X: torch.Tensor, Y: torch.Tensor, tokens: str) -> torch.Tensor:
    """:func:`token_matrix` without checks."""
    return X if tokens == "covariates" else torch.cat([X, Y], dim=-1)


def token_matrix(X: object, Y: object, tokens: str = "covariates") -> torch.Tensor:
    """The context tokens: ``X`` (covariate reading) or ``[X, Y]`` (joint reading), shape ([R,] n, p).

    Spec: preconditioned-regression §0, §10.1.

    Parameters
    ----------
    X : array-like, shape ([R,] n, d), float64
        Covariates.
    Y : array-like, shape ([R,] n, k), float64
        Responses, checked against ``X``; read only by the joint reading, which needs the runs axis R on both or
        neither.
    tokens : {"covariates", "joint"}, default="covariates"
        The token reading.

    Returns
    -------
    torch.Tensor, shape ([R,] n, p), float64
        A copy of ``X`` (p = d) or ``[X, Y]`` (p = d + k).

    Raises
    ------
    ValidationError
        When ``tokens`` is not one of the two readings, or ``X`` and ``Y`` have mismatched shapes or non-finite
        entries.
    """
    check_tokens(tokens)
    sizes: dict[str, int] = {}
    X, Y = check_batched("X", X, "nd", sizes), check_batched("Y", Y, "nk", sizes)
    check_joint(X, Y, tokens)
    return _token_matrix(X, Y, tokens)


def token_covariance(Sigma: object, W_star: object, noise_std: float, *, tokens: str = "covariates") -> torch.Tensor:
    """Covariance ``Sigma_z`` of one token, shape ([R,] p, p), with p = d or d + k.

    Spec: preconditioned-regression §10.1:
    ``Sigma_z = [[Sigma, Sigma W*^T], [W* Sigma, W* Sigma W*^T + sigma^2 I_k]]`` for joint tokens, ``Sigma`` otherwise.

    Parameters
    ----------
    Sigma : array_like, shape ([R,] d, d), float64
        Covariance of the covariates; symmetric positive definite.
    W_star : array_like, shape (k, d), float64
        True regression matrix; read only by the joint reading.
    noise_std : float
        Noise standard deviation ``sigma``; > 0 for the joint reading (else ``Sigma_z`` is singular), not read
        otherwise.
    tokens : {"covariates", "joint"}, default="covariates"
        The token reading.

    Returns
    -------
    torch.Tensor, shape ([R,] p, p), float64
        ``Sigma`` itself (p = d), or the joint covariance (p = d + k).

    Raises
    ------
    ValidationError
        When ``tokens`` is unknown, ``Sigma`` is not symmetric positive definite, or (joint) ``W_star`` does not
        have d columns or ``noise_std <= 0``.
    """
    check_tokens(tokens)
    sizes: dict[str, int] = {}
    Sigma = check_spd("Sigma", Sigma, sizes)
    if tokens == "covariates":
        return Sigma
    W_star = check_tensor("W_star", W_star, "kd", sizes)
    check_scalar("noise_std", noise_std, low=0.0, low_inclusive=False)
    cross = W_star @ Sigma  # (..., k, d)
    eye = torch.eye(sizes["k"], dtype=torch.float64)
    top = torch.cat([Sigma, cross.transpose(-1, -2)], dim=-1)
    bottom = torch.cat([cross, cross @ W_star.T + noise_std**2 * eye], dim=-1)
    return torch.cat([top, bottom], dim=-2)  # spec §10.1
