"""A text task the project makes itself: one keyword anywhere in a sequence decides the label.

Spec: implicit-bias-ngd §6 and mirror-descent-lp §6 (token selection: one optimal token per sequence decides
the label). This is the same idea on token ids, learned end to end by a transformer from its first token.

The generator, exactly:

- ids ``0`` and ``1`` are reserved for padding and [CLS]; ``keywords`` positive keyword ids follow, then
  ``keywords`` negative ones, then ``vocab_size - 2 - 2 * keywords`` neutral filler ids;
- each sequence is [CLS] followed by ``length`` tokens: fillers drawn uniformly, except one position (uniform)
  that holds a keyword drawn uniformly from the positive keywords (label 1) or the negative ones (label 0);
- labels are balanced in expectation (each is drawn with probability 1/2).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlab._validation import ValidationError, check_scalar
from attnlab.nets.datasets.split import Split

__all__ = ["KeywordTask", "keyword_task"]


@dataclass(frozen=True)
class KeywordTask:
    """The keyword data set and where each sequence's decisive token sits.

    Attributes
    ----------
    split : Split
        ``x_*``: ids ``(n, length + 1)`` int64, [CLS] first; ``y_*``: 1 positive keyword, 0 negative.
    keyword_position_train, keyword_position_test : torch.Tensor, shape (n,), int64
        Index (in the encoded sequence, [CLS] = 0) of the keyword that decides the label.
    vocab_size : int
    """

    split: Split
    keyword_position_train: torch.Tensor
    keyword_position_test: torch.Tensor
    vocab_size: int


def _sample(n: int, length: int, vocab_size: int, keywords: int, generator: torch.Generator):
    first_filler = 2 + 2 * keywords
    tokens = torch.randint(first_filler, vocab_size, (n, length), generator=generator)
    labels = torch.randint(0, 2, (n,), generator=generator)
    keyword = 2 + torch.randint(0, keywords, (n,), generator=generator) + keywords * (1 - labels)
    position = torch.randint(0, length, (n,), generator=generator)
    tokens[torch.arange(n), position] = keyword
    ids = torch.cat([torch.ones(n, 1, dtype=torch.int64), tokens], dim=1)  # (n, length + 1), [CLS] = 1
    return ids, labels, position + 1


def keyword_task(
    *,
    n_train: int = 2000,
    n_test: int = 500,
    length: int = 16,
    vocab_size: int = 64,
    keywords: int = 4,
    seed: int = 0,
) -> KeywordTask:
    """Sample the keyword task (see the module docstring for the exact generator).

    Parameters
    ----------
    n_train, n_test : int, default=2000, 500
    length : int, default=16
        Tokens per sequence after [CLS].
    vocab_size : int, default=64
        Ids in use, padding and [CLS] included.
    keywords : int, default=4
        Number of positive keyword ids (and, equally, of negative ones).
    seed : int, default=0
        Seeds the whole draw (train first, then test).

    Returns
    -------
    KeywordTask

    Examples
    --------
    >>> task = keyword_task(n_train=4, n_test=2, length=5, seed=0)
    >>> task.split.x_train.shape
    torch.Size([4, 6])
    """
    for name, value, low in (
        ("n_train", n_train, 1),
        ("n_test", n_test, 1),
        ("length", length, 1),
        ("keywords", keywords, 1),
        ("seed", seed, 0),
    ):
        check_scalar(name, value, kind=int, low=low)
    check_scalar("vocab_size", vocab_size, kind=int, low=1)
    if vocab_size < 3 + 2 * keywords:
        raise ValidationError(
            f"vocab_size == {vocab_size} leaves no filler ids beside 2 special and 2 * {keywords} keyword ids; "
            f"pass vocab_size >= {3 + 2 * keywords}"
        )
    generator = torch.Generator().manual_seed(seed)
    x_train, y_train, pos_train = _sample(n_train, length, vocab_size, keywords, generator)
    x_test, y_test, pos_test = _sample(n_test, length, vocab_size, keywords, generator)
    return KeywordTask(Split(x_train, y_train, x_test, y_test), pos_train, pos_test, vocab_size)
