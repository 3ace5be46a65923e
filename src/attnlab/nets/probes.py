"""What we read off a trained model: key/query/value weight entries, their sparsity, first-token attention.

Spec: mirror-descent-lp §9 E4 (histograms of the K, Q, V projection entries; first-token attention maps, last
layer, averaged over heads) and §8.6 (smaller p gives a few large entries and sharper attention).
"""

from __future__ import annotations

import pandas as pd
import torch
from torch import nn

from attnlab._validation import ValidationError, check_instance, check_tensor
from attnlab.nets.encoder import SelfAttention

__all__ = ["first_token_attention", "hoyer_sparsity", "projection_entries"]


def projection_entries(model: nn.Module) -> pd.DataFrame:
    """Every entry of the query, key and value weights of every :class:`SelfAttention` in ``model``.

    Parameters
    ----------
    model : torch.nn.Module
        A model holding at least one :class:`SelfAttention` (our :class:`ViT` and :class:`TextEncoder`).

    Returns
    -------
    pandas.DataFrame
        Columns ``layer`` (0-based order of the attention modules), ``projection`` ("key", "query" or "value")
        and ``value``.

    Raises
    ------
    ValidationError
        When ``model`` is not an ``nn.Module`` or holds no :class:`SelfAttention`.
    """
    check_instance("model", model, nn.Module, "pass a model built of attnlab.nets layers (ViT, TextEncoder, Encoder)")
    parts = []
    attentions = [sub for sub in model.modules() if isinstance(sub, SelfAttention)]
    if not attentions:
        raise ValidationError(
            f"model ({type(model).__name__}) holds no attnlab.nets.SelfAttention, so it has no key, query or value "
            "projections to read; pass a model built of attnlab.nets layers (ViT, TextEncoder, Encoder)"
        )
    for layer, attention in enumerate(attentions):
        for projection, linear in (("key", attention.k), ("query", attention.q), ("value", attention.v)):
            values = linear.weight.detach().double().flatten().numpy()
            parts.append(pd.DataFrame({"layer": layer, "projection": projection, "value": values}))
    return pd.concat(parts, ignore_index=True)


def hoyer_sparsity(values: torch.Tensor) -> float:
    """Hoyer's sparsity of a set of entries: 0 when all have equal magnitude, 1 when one is non-zero.

    .. math:: s(w) = \\frac{\\sqrt m - \\|w\\|_1 / \\|w\\|_2}{\\sqrt m - 1}

    for ``m`` entries (Hoyer 2004). Scale-free, so weights of different norms compare. Entries whose largest
    magnitude lies outside ``[2^-500, 2^500 / sqrt(m)]`` are divided by it first, so that ``\\|w\\|_2`` neither
    overflows nor underflows; the others are used as they are (the ratio is unchanged by the scaling, up to
    rounding).

    Parameters
    ----------
    values : array_like
        The entries, of any shape (flattened, in float64): real and finite, at least two, not all zero.

    Returns
    -------
    float
        The sparsity, in [0, 1].

    Raises
    ------
    ValidationError
        When ``values`` is complex or not numbers, has NaN or inf entries, fewer than two entries, or only zeros (the
        sparsity of each is 0/0).

    Examples
    --------
    >>> hoyer_sparsity(torch.tensor([0.0, 0.0, 3.0, 0.0]))
    1.0
    >>> hoyer_sparsity(torch.tensor([1.0, -1.0, 1.0, 1.0]))
    0.0
    """
    w = check_tensor("values", values).flatten()
    m = w.numel()
    if m < 2:
        raise ValidationError(
            f"values has {m} entries, needs at least 2: Hoyer sparsity (sqrt m - |w|_1/|w|_2) / (sqrt m - 1) is 0/0 "
            "for fewer; pass the entries of a whole weight matrix"
        )
    largest = float(w.abs().max())
    if largest == 0:
        raise ValidationError(
            f"values is all zeros ({m} entries): Hoyer sparsity |w|_1 / |w|_2 is 0/0; pass weights with a non-zero entry"
        )
    if not _SAFE_LOW <= largest <= _SAFE_HIGH / m**0.5:  # |w|_2 could overflow or underflow: largest entry to 1
        w = w / largest
    ratio = w.abs().sum() / torch.linalg.vector_norm(w)
    return float((m**0.5 - ratio) / (m**0.5 - 1))


# A largest magnitude in [2^-500, 2^500 / sqrt(m)] keeps |w|_2^2 in [2^-1000, 2^1000], inside float64's normal range:
# the entries are then used as they are, and a weight matrix's sparsity keeps every bit it had.
_SAFE_LOW, _SAFE_HIGH = 2.0**-500, 2.0**500


@torch.no_grad()
def first_token_attention(model: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """Attention of the first token (CLS) over all tokens in the last layer, averaged over heads.

    Spec: mirror-descent-lp §9 E4 (first-token attention maps, last layer, head average).

    Parameters
    ----------
    model : nn.Module
        A model with ``attention(inputs) -> list of (n, h, T, T)`` (our :class:`ViT` and :class:`TextEncoder`).
    inputs : torch.Tensor, shape (n, ...)

    Returns
    -------
    torch.Tensor, shape (n, T)
        Rows sum to 1; column 0 is the first token itself.
    """
    was_training = model.training
    model.eval()
    weights = model.attention(inputs)[-1]  # (n, h, T, T)
    model.train(was_training)
    return weights[:, :, 0, :].mean(dim=1)
