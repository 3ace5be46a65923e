"""Reviews in the standard ``aclImdb`` folder layout, a plain tokenizer, and a vocabulary of the training split.

Spec: mirror-descent-lp §9 E4 (IMDb sentiment). The layout is the one of the Large Movie Review Dataset::

    root/train/pos/*.txt   root/train/neg/*.txt   root/test/pos/*.txt   root/test/neg/*.txt

one review per file. Nothing is downloaded: pass the folder you have.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from attnlab._validation import ValidationError, check_scalar
from attnlab.nets.datasets.split import Split

__all__ = ["TextSplit", "Vocabulary", "load_aclimdb", "read_aclimdb", "tokenize"]

PAD, CLS, UNK = "<pad>", "<cls>", "<unk>"
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[!?]")
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)


def tokenize(text: str) -> list[str]:
    """Lower-case words (with an apostrophe part such as ``don't``) and ``!``/``?``; HTML line breaks dropped.

    Examples
    --------
    >>> tokenize("A GREAT film!<br /><br />Don't miss it.")
    ['a', 'great', 'film', '!', "don't", 'miss', 'it']
    """
    return _WORD.findall(_BREAK.sub(" ", text).lower())


@dataclass(frozen=True)
class Vocabulary:
    """Token strings and their ids; id 0 is padding, 1 the [CLS] token, 2 unknown words.

    Parameters
    ----------
    tokens : tuple of str
        All tokens in id order, starting with ``("<pad>", "<cls>", "<unk>")``.
    """

    tokens: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.tokens[:3] != (PAD, CLS, UNK):
            raise ValidationError(f"tokens must start with {(PAD, CLS, UNK)}, got {self.tokens[:3]}")
        object.__setattr__(self, "_ids", {token: i for i, token in enumerate(self.tokens)})

    @classmethod
    def build(cls, documents: Iterable[Sequence[str]], *, max_size: int, min_count: int = 1) -> Vocabulary:
        """The ``max_size - 3`` most frequent tokens seen at least ``min_count`` times (ties by first sight).

        Parameters
        ----------
        documents : iterable of token lists
            Build from the training split only, so that test words never leak into the vocabulary.
        max_size : int
            Vocabulary size, the three special tokens included.
        min_count : int, default=1
        """
        check_scalar("max_size", max_size, kind=int, low=4)
        check_scalar("min_count", min_count, kind=int, low=1)
        counts: Counter[str] = Counter()
        for document in documents:
            counts.update(document)
        kept = [token for token, count in counts.most_common(max_size - 3) if count >= min_count]
        return cls((PAD, CLS, UNK, *kept))

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, documents: Sequence[Sequence[str]], max_len: int) -> torch.Tensor:
        """Token lists -> ids ``(n, max_len)`` int64: [CLS] first, then the first ``max_len - 1`` tokens, padded."""
        check_scalar("max_len", max_len, kind=int, low=2)
        ids = torch.zeros(len(documents), max_len, dtype=torch.int64)  # 0 = <pad>
        unk = self._ids[UNK]  # type: ignore[attr-defined]
        for row, document in enumerate(documents):
            body = [self._ids.get(token, unk) for token in document[: max_len - 1]]  # type: ignore[attr-defined]
            ids[row, : len(body) + 1] = torch.tensor([self._ids[CLS], *body])  # type: ignore[attr-defined]
        return ids


@dataclass(frozen=True)
class TextSplit:
    """Encoded reviews and the vocabulary that encoded them.

    Attributes
    ----------
    split : Split
        ``x_*``: ids ``(n, max_len)`` int64; ``y_*``: 0 negative, 1 positive.
    vocabulary : Vocabulary
    """

    split: Split
    vocabulary: Vocabulary


def read_aclimdb(root: str | Path, part: str) -> tuple[list[str], list[int]]:
    """Texts and labels (1 = ``pos``, 0 = ``neg``) of ``root/part``, files in sorted name order, neg first.

    Raises
    ------
    ValidationError
        When ``root/part/pos`` or ``root/part/neg`` is missing or holds no ``.txt`` file.
    """
    texts, labels = [], []
    for label, polarity in ((0, "neg"), (1, "pos")):
        folder = Path(root) / part / polarity
        files = sorted(folder.glob("*.txt")) if folder.is_dir() else []
        if not files:
            raise ValidationError(
                f"no reviews in {folder}; root must be an aclImdb folder with train/pos, train/neg, test/pos and "
                f"test/neg, one review per .txt file"
            )
        texts += [f.read_text(encoding="utf-8", errors="replace") for f in files]
        labels += [label] * len(files)
    return texts, labels


def _subsample(texts: list[str], labels: list[int], limit: int | None, generator: torch.Generator):
    if limit is None or limit >= len(texts):
        return texts, labels
    keep = torch.randperm(len(texts), generator=generator)[:limit].sort().values.tolist()
    return [texts[i] for i in keep], [labels[i] for i in keep]


def load_aclimdb(
    root: str | Path,
    *,
    max_len: int = 128,
    vocab_size: int = 5000,
    min_count: int = 2,
    max_per_split: int | None = None,
    seed: int = 0,
) -> TextSplit:
    """Read, tokenize and encode an ``aclImdb`` folder; the vocabulary comes from the training split only.

    Spec: mirror-descent-lp §9 E4 (IMDb; the paper encodes up to 512 tokens).

    Parameters
    ----------
    root : path
        The ``aclImdb`` folder (holding ``train/`` and ``test/``).
    max_len : int, default=128
        Encoded length, [CLS] included; longer reviews are cut.
    vocab_size : int, default=5000
        Vocabulary size, special tokens included.
    min_count : int, default=2
        Drop words seen fewer times in the training reviews.
    max_per_split : int, optional
        Keep a random subset of this many reviews per split (to scale the task down to a CPU).
    seed : int, default=0
        Seeds that subset.

    Returns
    -------
    TextSplit
    """
    if max_per_split is not None:
        check_scalar("max_per_split", max_per_split, kind=int, low=2)
    generator = torch.Generator().manual_seed(seed)
    train_texts, train_labels = _subsample(*read_aclimdb(root, "train"), max_per_split, generator)
    test_texts, test_labels = _subsample(*read_aclimdb(root, "test"), max_per_split, generator)
    train_tokens = [tokenize(t) for t in train_texts]
    vocabulary = Vocabulary.build(train_tokens, max_size=vocab_size, min_count=min_count)
    split = Split(
        vocabulary.encode(train_tokens, max_len),
        torch.tensor(train_labels, dtype=torch.int64),
        vocabulary.encode([tokenize(t) for t in test_texts], max_len),
        torch.tensor(test_labels, dtype=torch.int64),
    )
    return TextSplit(split, vocabulary)
