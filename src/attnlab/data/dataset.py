"""The token-selection data set: sequences of tokens, a query per sequence, labels, and an optional head.

Spec: implicit-bias-ngd §1, mirror-descent-lp §1, kq-nuclear-norm §1 (one notation for all three papers).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from attnlab._io import read_npz, save_npz
from attnlab._validation import ValidationError, check_labels, check_tensor
from attnlab.data.selection import Selection

__all__ = ["TokenSelectionData"]

_NPZ_KEYS = ("X", "Z", "y", "v", "select")


def _refuse_bool_labels(y: object) -> None:
    """Refuse boolean labels: they would convert to 1 and 0, so an all-True ``y`` would pass as every label +1."""
    dtype = getattr(y, "dtype", None)
    flat = isinstance(y, (list, tuple)) and len(y) > 0 and all(isinstance(v, bool) for v in y)
    if flat or dtype in (bool, torch.bool) or str(dtype) == "bool":
        raise ValidationError(
            "y is boolean; labels must be the numbers -1 and +1: write y = np.where(label, 1.0, -1.0) "
            "(True -> +1, False -> -1)"
        )


@dataclass(frozen=True, init=False)
class TokenSelectionData:
    """Tokens, queries, labels and an optional linear head, validated and stored as float64 tensors.

    Spec: implicit-bias-ngd §1-2 (model ``f(X) = v^T X^T softmax(X W z)``).

    Parameters
    ----------
    X : array-like, shape (n, T, d)
        Token matrices; row ``t`` of ``X[i]`` is token ``x_{i,t}``.
    Z : array-like, shape (n, d_q), optional
        Query vectors; default the first token of each sequence, ``Z = X[:, 0]`` (then ``d_q = d``). Queries of
        another width ``d_q`` are cross-attention (``kdim != embed_dim``): ``W`` is then ``(d, d_q)`` and the logit
        of token ``t`` is ``x_t^T W z`` (multi-token §8).
    y : array-like, shape (n,)
        Labels in {-1, +1}, as numbers: boolean labels are refused (``True`` alone would read as ``+1``).
    v : array-like, shape (d,), optional
        Linear head (the papers' ``u`` or ``v``); needed for token scores and the fixed-head models.
    select : array-like of int of shape (n,), or token sets, optional
        One selected token index per sequence (e.g. for an SVM over a chosen selection), or a set of tokens per
        sequence: a bool mask of shape (n, T) or n lists of indices (:func:`attnlab.data.token_sets.as_token_sets`;
        stored as the mask).

    Attributes
    ----------
    n, T, d : int
        Number of sequences, tokens per sequence, token (key) dimension.
    d_q : int
        Query dimension (``d`` unless the queries are cross-attention ones).

    Raises
    ------
    ValidationError
        On wrong shapes (the message names the argument: ``Z`` must have ``n`` rows, ``v`` width ``d``),
        non-finite or complex values, labels outside {-1, +1} or boolean ones, T < 2, a token or query width of
        0, or out-of-range ``select``.

    Examples
    --------
    >>> data = TokenSelectionData(torch.randn(3, 4, 2), y=[1, -1, 1], v=[1.0, 0.0])
    >>> (data.n, data.T, data.d)
    (3, 4, 2)
    """

    X: torch.Tensor
    Z: torch.Tensor
    y: torch.Tensor
    v: torch.Tensor | None
    select: torch.Tensor | None

    def __init__(self, X, Z=None, y=None, v=None, select=None) -> None:  # noqa: D107 (documented on the class)
        sizes: dict[str, int] = {}
        X_t = check_tensor("X", X, "nTd", sizes, min_size={"T": 2, "n": 1, "d": 1})
        # multi-token §8: queries of their own width d_q
        Z_t = X_t[:, 0].clone() if Z is None else check_tensor("Z", Z, "nq", sizes, min_size={"q": 1})
        if y is None:
            raise ValidationError("y is required: pass labels of shape (n,) with values in {-1, +1}")
        _refuse_bool_labels(y)
        y_t = check_labels("y", check_tensor("y", y, "n", sizes))
        v_t = None if v is None else check_tensor("v", v, "d", sizes)
        sel_t = None if select is None else Selection.parse(select, sizes["n"], sizes["T"]).value  # multi-token §2
        object.__setattr__(self, "X", X_t)
        object.__setattr__(self, "Z", Z_t)
        object.__setattr__(self, "y", y_t)
        object.__setattr__(self, "v", v_t)
        object.__setattr__(self, "select", sel_t)

    @property
    def n(self) -> int:
        """The number of sequences."""
        return int(self.X.shape[0])

    @property
    def T(self) -> int:  # noqa: N802 (the spec's symbol)
        """The number of tokens per sequence."""
        return int(self.X.shape[1])

    @property
    def d(self) -> int:
        """The token (key) width."""
        return int(self.X.shape[2])

    @property
    def d_q(self) -> int:
        """The query width (``d`` unless the queries are cross-attention ones; ``W`` has shape ``(d, d_q)``)."""
        return int(self.Z.shape[1])

    def require_head(self) -> torch.Tensor:
        """The head ``v``; raises a clear error when the data set has none.

        Returns
        -------
        torch.Tensor, shape (d,)
            The head.

        Raises
        ------
        ValidationError
            When the data set has no head.
        """
        if self.v is None:
            raise ValidationError(
                "this data set has no head v; pass v=(d,) array or use a model with a trainable head (on the command "
                "line: --v FILE.npy or --v KEY, or explain's --train-head)"
            )
        return self.v

    def token_scores(self) -> torch.Tensor:
        """Token scores ``gamma_{i,t} = y_i v^T x_{i,t}``, shape (n, T). Spec: implicit-bias-ngd §1 (Def. 1).

        Returns
        -------
        torch.Tensor, shape (n, T)
            The score of every token under the head ``v``.
        """
        return self.y[:, None] * (self.X @ self.require_head())  # spec §1: gamma = y v^T x

    def optimal_tokens(self) -> torch.Tensor:
        """``opt_i = argmax_t gamma_{i,t}``, shape (n,), int64. Spec: implicit-bias-ngd §1.

        Returns
        -------
        torch.Tensor of int64, shape (n,)
            The index of each sequence's highest-scoring token.
        """
        return self.token_scores().argmax(dim=1)

    def with_(self, **changes) -> TokenSelectionData:
        """A copy with some fields replaced: the new values are validated, the kept ones are not checked again.

        Parameters
        ----------
        **changes
            New values of fields by name (``X``, ``Z``, ``y``, ``v``, ``select``). New tokens ``X`` without ``Z``
            on data whose queries are their first tokens (``Z = X[:, 0]``, the default) bring their own first
            tokens as queries; other queries are kept.

        Returns
        -------
        TokenSelectionData
            The copy; this data set is unchanged.

        Raises
        ------
        ValidationError
            On a name that is not a field, or new values the constructor refuses.
        """
        fields = {"X": self.X, "Z": self.Z, "y": self.y, "v": self.v, "select": self.select}
        unknown = sorted(set(changes) - set(fields))
        if unknown:
            raise ValidationError(f"with_ got {unknown}, not fields of TokenSelectionData; fields: {', '.join(fields)}")
        if "X" in changes and "Z" not in changes and torch.equal(self.Z, self.X[:, 0]):
            changes = {**changes, "Z": None}  # self-attention queries follow the tokens (the constructor's default)
        if set(changes) != {"select"}:  # a token field changed: the sizes are checked together again
            return TokenSelectionData(**{**fields, **changes})
        select = changes["select"]
        copy = object.__new__(TokenSelectionData)
        for name, value in fields.items():
            object.__setattr__(copy, name, value)
        object.__setattr__(copy, "select", None if select is None else Selection.parse(select, self.n, self.T).value)
        return copy

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write an ``.npz`` with keys ``X, Z, y`` and, when present, ``v, select`` (no pickle), atomically.

        Parameters
        ----------
        path : str or os.PathLike
            The file to write.

        Returns
        -------
        pathlib.Path
            The file written.
        """
        arrays = {k: getattr(self, k).numpy() for k in _NPZ_KEYS if getattr(self, k) is not None}
        return save_npz(path, arrays)  # at path exactly: np.savez(path) would append .npz to a name without it

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TokenSelectionData:
        """Read an ``.npz`` written by :meth:`save` or by the user (keys ``X``, ``y`` required; ``Z, v, select`` optional).

        Parameters
        ----------
        path : str or os.PathLike
            An ``.npz`` file with ``X`` (n, T, d) and ``y`` (n,), optionally ``Z`` (n, d_q), ``v`` (d,), ``select`` (n,).

        Returns
        -------
        TokenSelectionData
            The data set, validated.
        """
        arrays = read_npz(path)
        missing = [k for k in ("X", "y") if k not in arrays]
        if missing:
            raise ValidationError(
                f"{path} lacks keys {missing}; an attnlab data file has X (n,T,d), y (n,) and optionally Z, v, select"
            )
        try:
            return cls(**{k: arrays[k] for k in _NPZ_KEYS if k in arrays})
        except ValidationError as err:
            raise ValidationError(f"data file {str(path)!r}: {err}") from None
