"""What we read off a trained model: key/query/value weight entries, their sparsity, first-token attention.

Spec: mirror-descent-lp §9 E4 (histograms of the K, Q, V projection entries; first-token attention maps, last
layer, averaged over heads) and §8.6 (smaller p gives a few large entries and sharper attention).
"""

from __future__ import annotations

import pandas as pd
import torch
from torch import nn

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
    """
    parts = []
    attentions = [sub for sub in model.modules() if isinstance(sub, SelfAttention)]
    for layer, attention in enumerate(attentions):
        for projection, linear in (("key", attention.k), ("query", attention.q), ("value", attention.v)):
            values = linear.weight.detach().double().flatten().numpy()
            parts.append(pd.DataFrame({"layer": layer, "projection": projection, "value": values}))
    return pd.concat(parts, ignore_index=True)


def hoyer_sparsity(values: torch.Tensor) -> float:
    """Hoyer's sparsity of a set of entries: 0 when all have equal magnitude, 1 when one is non-zero.

    .. math:: s(w) = \\frac{\\sqrt m - \\|w\\|_1 / \\|w\\|_2}{\\sqrt m - 1}

    for ``m`` entries (Hoyer 2004). Scale-free, so weights of different norms compare.

    Parameters
    ----------
    values : array_like
        The entries, of any shape (flattened, in float64); at least two, not all zero (otherwise the result is
        ``nan``).

    Returns
    -------
    float
        The sparsity, in [0, 1].

    Examples
    --------
    >>> hoyer_sparsity(torch.tensor([0.0, 0.0, 3.0, 0.0]))
    1.0
    >>> hoyer_sparsity(torch.tensor([1.0, -1.0, 1.0, 1.0]))
    0.0
    """
    w = torch.as_tensor(values, dtype=torch.float64).flatten()
    m = w.numel()
    ratio = w.abs().sum() / torch.linalg.vector_norm(w)
    return float((m**0.5 - ratio) / (m**0.5 - 1))


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
