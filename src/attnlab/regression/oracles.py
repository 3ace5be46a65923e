"""Gradient oracles of Algorithm 1: population (exact), Monte-Carlo (fresh batches), minibatch (Algorithm 1-S).

Spec: preconditioned-regression §6.2 (oracle form and its implementable substitutes), §6.3 (minibatch, context option).
Each oracle is called as ``oracle(V, Q) -> (grad_V, grad_Q)`` on batched iterates ``V`` (R, k, p), ``Q`` (R, p, d)
and returns the gradient of the (expected) loss only; the regularizer is added by :func:`attnlab.training.regression.fit`.
"""

from __future__ import annotations

import torch

from attnlab._validation import ValidationError, check_bool, check_in, check_scalar, check_seed, check_tensor
from attnlab.regression import empirical, population
from attnlab.regression._checks import check_tokens
from attnlab.regression.data import RegressionProblem, _token_matrix, check_problem, draw

__all__ = ["CONTEXTS", "MinibatchOracle", "MonteCarloOracle", "PopulationOracle", "smallest_first"]

CONTEXTS = ("minibatch", "all")
"""Context of a minibatch query (spec §6.3 [R]): the minibatch itself (default) or all n training tokens."""


def smallest_first(u: torch.Tensor, k: int) -> torch.Tensor:
    """``u.argsort(-1)[..., :k]``: the indices of the ``k`` smallest entries of each row, smallest first.

    ``topk`` finds them in time linear in the row (a sort is ``n log n``: 6x slower at ``n = 10^4``, ``k = 256``).
    Among distinct values the order is unique, so both give the same indices; where two of the ``k + 1`` smallest
    values tie (uniform float32 draws do, in about one row of 30 at that size), the order of the ties is
    ``argsort``'s own, so those rows are sorted by it: a minibatch oracle draws the same minibatches as with
    ``argsort``, to the bit.

    Parameters
    ----------
    u : torch.Tensor, shape (..., n)
    k : int
        ``1 <= k <= n``.

    Returns
    -------
    torch.Tensor of int64, shape (..., k)
    """
    values, idx = u.topk(min(k + 1, u.shape[-1]), dim=-1, largest=False, sorted=True)
    idx = idx[..., :k]
    tied = (values[..., 1:] == values[..., :-1]).any(dim=-1)  # a tie decides the order or the k-th entry
    if bool(tied.any()):
        idx[tied] = u[tied].argsort(-1)[..., :k]  # those rows as argsort orders them
    return idx


class PopulationOracle:
    """Exact gradient of the closed-form population loss (spec §5.1): the ``n -> infinity`` idealisation.

    Parameters
    ----------
    problem : RegressionProblem
    tokens : {"covariates", "joint"}, default="covariates"

    Raises
    ------
    ValidationError
        A ``problem`` that is not a RegressionProblem, or unknown ``tokens``.
    """

    def __init__(self, problem: RegressionProblem, *, tokens: str = "covariates") -> None:
        check_problem(problem)
        check_tokens(tokens)
        self.problem = problem
        self.Sigma_z = problem.token_covariance(tokens)

    def __call__(self, V: torch.Tensor, Q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        p = self.problem
        return population._gradient(V, Q, p.Sigma, self.Sigma_z, p.W_star)  # spec §6.2 (i)


class MonteCarloOracle:
    """Average of the in-sample gradient over ``batches`` freshly simulated samples of size ``n`` (spec §6.2 (ii)).

    Bias O(1/n), variance O(1/(n batches)).

    Parameters
    ----------
    problem : RegressionProblem
    n : int
        Size of each simulated sample (context length).
    batches : int
        Number of fresh samples averaged per call.
    tokens : {"covariates", "joint"}, default="covariates"
    include_self : bool, default=True
    seed : int, default=0
        Pass an int to get the same sequence of samples every time.

    Raises
    ------
    ValidationError
        At construction, a ``problem`` that is not a RegressionProblem, ``n < 2`` or ``batches < 1``, bad
        ``tokens``, a non-bool ``include_self`` or a bad ``seed``; at a call, iterates without the runs axis (``V``
        must be (R, k, p) and ``Q`` (R, p, d)).
    """

    def __init__(
        self,
        problem: RegressionProblem,
        n: int,
        batches: int,
        *,
        tokens: str = "covariates",
        include_self: bool = True,
        seed: int = 0,
    ) -> None:
        check_problem(problem)
        check_scalar("n", n, kind=int, low=2)
        check_scalar("batches", batches, kind=int, low=1)
        self.tokens = check_tokens(tokens)
        self.problem, self.n, self.batches = problem, n, batches
        self.include_self = check_bool("include_self", include_self)
        self.generator = torch.Generator().manual_seed(check_seed("seed", seed))

    def __call__(self, V: torch.Tensor, Q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        _check_batched_iterates(V, Q)
        runs = V.shape[0]
        grad_V, grad_Q = torch.zeros_like(V), torch.zeros_like(Q)
        per_chunk = max(1, _CHUNK_ENTRIES // (runs * self.n * self.n))  # bounds the (b, R, n, n) softmax in memory
        for start in range(0, self.batches, per_chunk):
            b = min(per_chunk, self.batches - start)
            X, Y = draw(self.problem, (b * runs, self.n), self.generator)  # sample() without its checks
            X, Y = X.unflatten(0, (b, runs)), Y.unflatten(0, (b, runs))  # (b, R, n, d), (b, R, n, k)
            Z = _token_matrix(X, Y, self.tokens)
            _, gV, gQ = empirical.loss_and_gradient(V, Q, X, Y, Z, self.include_self)  # spec §5.3
            grad_V += gV.sum(0) / self.batches  # spec §6.2 (ii): the mean over the fresh samples
            grad_Q += gQ.sum(0) / self.batches
        return grad_V, grad_Q


_CHUNK_ENTRIES = 2**24  # softmax entries per chunk of fresh samples (128 MiB in float64)


def _check_batched_iterates(V: torch.Tensor, Q: torch.Tensor) -> None:
    """Refuse iterates without the leading runs axis: the oracles take ``V`` (R, k, p) and ``Q`` (R, p, d)."""
    if V.dim() != 3 or Q.dim() != 3 or V.shape[0] != Q.shape[0]:
        raise ValidationError(
            f"the oracles take batched iterates V (R, k, p) and Q (R, p, d), got V of shape {tuple(V.shape)} and Q "
            f"of shape {tuple(Q.shape)}; add the leading runs axis, e.g. oracle(V[None], Q[None]) for one run"
        )


def _all_but_self(
    V: torch.Tensor, Q: torch.Tensor, Xb: torch.Tensor, Yb: torch.Tensor, Z: torch.Tensor, idx: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient of the minibatch queries ``Xb = X[idx]`` with all n tokens but their own as context.

    Spec §6.3 (context = all n) with the §3.1 option (no self-term). ``empirical.loss_and_gradient`` masks the self
    term only when the context is the queries' own tokens, so each query is a batch of one whose context is the
    n - 1 other tokens; chunked over queries to bound the (R, c, n - 1, p + p^2) context moments in memory.
    """
    R, n, p = Z.shape
    b = idx.shape[-1]
    others = torch.arange(n).expand(R, b, n) != idx.unsqueeze(-1)  # (R, b, n): every token but the query's own
    grad_V, grad_Q = torch.zeros_like(V), torch.zeros_like(Q)
    per_chunk = max(1, _CHUNK_ENTRIES // (R * n * p * (p + 1)))
    for start in range(0, b, per_chunk):
        mask = others[:, start : start + per_chunk]
        c = mask.shape[1]
        context = Z.unsqueeze(1).expand(R, c, n, p)[mask].view(R, c, n - 1, p)  # (R, c, n - 1, p)
        queries, responses = Xb[:, start : start + c, None], Yb[:, start : start + c, None]  # (R, c, 1, d/k)
        _, gV, gQ = empirical.loss_and_gradient(V.unsqueeze(1), Q.unsqueeze(1), queries, responses, context)
        grad_V += gV.sum(1) / b  # the mean over the b queries, as one batch of b gives it
        grad_Q += gQ.sum(1) / b
    return grad_V, grad_Q


class MinibatchOracle:
    """In-sample gradient on ``batch_size`` samples drawn without replacement from the training set (spec §6.3).

    Parameters
    ----------
    X : array-like, shape (R, n, d), float64
        Training covariates, one sample per run.
    Y : array-like, shape (R, n, k), float64
    batch_size : int
        Minibatch size b <= n.
    context : {"minibatch", "all"}, default="minibatch"
        Context of each query: the minibatch (the literal in-sample loss of a size-b sample) or all n tokens.
    tokens : {"covariates", "joint"}, default="covariates"
    include_self : bool, default=True
        Whether a query is part of its own context, with either ``context``.
    seed : int, default=0
        Seeds the minibatch draws; two oracles with the same seed draw the same minibatches.

    Raises
    ------
    ValidationError
        Mismatched or non-finite ``X``/``Y``, ``batch_size`` not in ``[1, n]``, bad ``context``/``tokens``,
        a non-bool ``include_self``, ``include_self=False`` with a context of a single token, or a bad ``seed``.
    """

    def __init__(
        self,
        X: object,
        Y: object,
        batch_size: int,
        *,
        context: str = "minibatch",
        tokens: str = "covariates",
        include_self: bool = True,
        seed: int = 0,
    ) -> None:
        sizes: dict[str, int] = {}
        self.X = check_tensor("X", X, "Rnd", sizes)
        self.Y = check_tensor("Y", Y, "Rnk", sizes)
        check_scalar("batch_size", batch_size, kind=int, low=1, high=sizes["n"])
        self.context = str(check_in("context", context, CONTEXTS))
        self.tokens = check_tokens(tokens)
        self.batch_size, self.include_self = batch_size, check_bool("include_self", include_self)
        if not include_self and (batch_size if self.context == "minibatch" else sizes["n"]) < 2:
            raise ValidationError(
                f"include_self=False with context={self.context!r} leaves a query no token to attend to "
                f"(batch_size == {batch_size}, n == {sizes['n']}); use a context of at least 2 tokens or include_self=True"
            )
        self.Z = _token_matrix(self.X, self.Y, tokens)
        self.generator = torch.Generator().manual_seed(check_seed("seed", seed))

    def __call__(self, V: torch.Tensor, Q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        R, n = self.X.shape[:2]
        idx = smallest_first(torch.rand(R, n, generator=self.generator), self.batch_size)  # without replacement
        Xb = self.X.gather(1, idx.unsqueeze(-1).expand(-1, -1, self.X.shape[-1]))  # (R, b, d)
        Yb = self.Y.gather(1, idx.unsqueeze(-1).expand(-1, -1, self.Y.shape[-1]))  # (R, b, k)
        if self.context == "minibatch":
            _, gV, gQ = empirical.loss_and_gradient(V, Q, Xb, Yb, _token_matrix(Xb, Yb, self.tokens), self.include_self)
        elif self.include_self:
            _, gV, gQ = empirical.loss_and_gradient(V, Q, Xb, Yb, self.Z)  # spec §6.3 option: context = all n
        else:
            gV, gQ = _all_but_self(V, Q, Xb, Yb, self.Z, idx)  # context = the n - 1 other tokens
        return gV, gQ
