"""The 8x8 handwritten digits that ship with scikit-learn (no download), as images for the ViT.

Spec: implicit-bias-ngd §9 fig. 6 (MNIST with a small ViT); the 1,797 8x8 digits of
``sklearn.datasets.load_digits`` stand in for MNIST so that the comparison runs on two CPU cores.
"""

from __future__ import annotations

import torch

from attnlab.nets.datasets.split import Split, train_test_split

__all__ = ["load_digits_split"]


def load_digits_split(*, test_fraction: float = 0.2, seed: int = 0, dtype: torch.dtype = torch.float32) -> Split:
    """scikit-learn's digits as images ``(n, 1, 8, 8)`` scaled to [0, 1], split into train and test.

    Parameters
    ----------
    test_fraction : float, default=0.2
        Share of the 1,797 images held out for testing.
    seed : int, default=0
        Seeds the shuffle before the split.
    dtype : torch.dtype, default=torch.float32
        Dtype of the images.

    Returns
    -------
    Split
        ``x_*``: ``(n, 1, 8, 8)`` images, pixel values / 16; ``y_*``: digit labels 0-9.

    Examples
    --------
    >>> split = load_digits_split(seed=0)
    >>> split.x_train.shape, split.x_test.shape
    (torch.Size([1438, 1, 8, 8]), torch.Size([359, 1, 8, 8]))
    """
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = torch.as_tensor(bunch.images, dtype=dtype)[:, None] / 16.0  # (n, 1, 8, 8); raw pixels are 0..16
    labels = torch.as_tensor(bunch.target, dtype=torch.int64)
    return train_test_split(images, labels, test_fraction=test_fraction, seed=seed)
