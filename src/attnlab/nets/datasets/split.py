"""A labelled data set cut into a training and a test part, the input of :func:`attnlab.nets.fit_classifier`."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlab._validation import ValidationError, check_scalar, check_seed

__all__ = ["Split", "train_test_split"]


@dataclass(frozen=True)
class Split:
    """Training and test inputs with integer class labels.

    Parameters
    ----------
    x_train : torch.Tensor, shape (n_train, ...)
        Inputs, any dtype the model takes (float images, int64 token ids).
    y_train : torch.Tensor, shape (n_train,), int64
        Class labels in ``0 .. num_classes - 1``.
    x_test : torch.Tensor, shape (n_test, ...)
    y_test : torch.Tensor, shape (n_test,), int64

    Raises
    ------
    ValidationError
        When inputs and labels disagree in length, labels are not int64 vectors of labels >= 0, or a part is
        empty.
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor

    def __post_init__(self) -> None:
        for part in ("train", "test"):
            x, y = getattr(self, f"x_{part}"), getattr(self, f"y_{part}")
            if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
                raise ValidationError(
                    f"x_{part} and y_{part} must be torch.Tensors, got {type(x).__name__}, {type(y).__name__}"
                )
            if y.dim() != 1 or y.dtype != torch.int64:
                raise ValidationError(
                    f"y_{part} has shape {tuple(y.shape)} and dtype {y.dtype}, expected an int64 vector of class "
                    f"labels; pass y.long()"
                )
            if len(x) != len(y) or len(y) == 0:
                raise ValidationError(
                    f"x_{part} has {len(x)} rows and y_{part} {len(y)}; they must be equal and non-zero"
                )
            if bool((y < 0).any()):
                raise ValidationError(f"y_{part} holds negative labels ({int(y.min())}); class labels are 0, 1, ...")

    @property
    def num_classes(self) -> int:
        """``1 + the largest label`` over both parts."""
        return int(max(self.y_train.max(), self.y_test.max())) + 1


def train_test_split(x: torch.Tensor, y: torch.Tensor, *, test_fraction: float, seed: int) -> Split:
    """Shuffle ``(x, y)`` with a seeded generator and put the last ``test_fraction`` of it into the test part.

    Parameters
    ----------
    x : torch.Tensor, shape (n, ...)
    y : torch.Tensor, shape (n,), int64
    test_fraction : float in (0, 1)
        Share of the samples held out; the test part gets ``round(test_fraction * n)`` of them (at least 1).
    seed : int
        Seeds the shuffle; the same seed gives the same split.

    Returns
    -------
    Split
    """
    check_scalar("test_fraction", test_fraction, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    check_seed("seed", seed)
    n = len(y)
    n_test = max(1, round(test_fraction * n))
    if n_test >= n:
        raise ValidationError(f"test_fraction == {test_fraction} leaves no training samples out of n == {n}")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    train, test = order[: n - n_test], order[n - n_test :]
    return Split(x[train], y[train], x[test], y[test])
