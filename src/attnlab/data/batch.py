"""Data sets of equal shapes stacked along a leading runs axis, for batched sweeps over seeds or data models.

Spec: implicit-bias-ngd §2 (batched shapes); DESIGN.md (one batched program per sweep).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from attnlab._validation import ValidationError
from attnlab.data.dataset import TokenSelectionData

__all__ = ["StackedData", "stack"]


@dataclass(frozen=True)
class StackedData:
    """R data sets of one shape as batched tensors.

    Attributes
    ----------
    X : torch.Tensor, shape (R, n, T, d), float64
    Z : torch.Tensor, shape (R, n, d_q), float64
    y : torch.Tensor, shape (R, n), float64
    v : torch.Tensor, shape (R, d), float64, or None
        None unless every data set has a head.
    select : torch.Tensor, shape (R, n), int64, or None
        None unless every data set has a selection.
    """

    X: torch.Tensor
    Z: torch.Tensor
    y: torch.Tensor
    v: torch.Tensor | None
    select: torch.Tensor | None

    @property
    def R(self) -> int:  # noqa: N802 (the axis letter)
        """Number of runs (data sets)."""
        return int(self.X.shape[0])


def stack(datasets: Sequence[TokenSelectionData]) -> StackedData:
    """Stack data sets of equal (n, T, d) along a new leading runs axis.

    Spec: DESIGN.md "A leading runs axis where it pays".

    Parameters
    ----------
    datasets : sequence of TokenSelectionData
        At least one; all with the same ``n``, ``T`` and ``d``.

    Returns
    -------
    StackedData
        ``X`` (R, n, T, d), ``Z`` (R, n, d_q), ``y`` (R, n), ``v`` (R, d) or None, ``select`` (R, n) or None.

    Raises
    ------
    ValidationError
        On an empty sequence, a non-``TokenSelectionData`` entry, or unequal shapes.

    Examples
    --------
    >>> from attnlab.data import example1
    >>> batch = stack([example1(n=4, T=3, d=8, seed=s) for s in range(5)])
    >>> tuple(batch.X.shape), tuple(batch.v.shape)
    ((5, 4, 3, 8), (5, 8))
    """
    datasets = list(datasets)
    if not datasets:
        raise ValidationError("datasets is empty; pass at least one TokenSelectionData")
    for r, data in enumerate(datasets):
        if not isinstance(data, TokenSelectionData):
            raise ValidationError(f"datasets[{r}] is a {type(data).__name__}, expected a TokenSelectionData")
    shapes = [(data.n, data.T, data.d, data.d_q) for data in datasets]
    if len(set(shapes)) > 1:
        raise ValidationError(
            f"datasets must share (n, T, d, d_q) to be stacked, got {sorted(set(shapes))}; regenerate them with "
            "equal sizes"
        )
    heads = [data.v for data in datasets]
    selects = [data.select for data in datasets]
    return StackedData(
        X=torch.stack([data.X for data in datasets]),  # (R, n, T, d)
        Z=torch.stack([data.Z for data in datasets]),  # (R, n, d_q)
        y=torch.stack([data.y for data in datasets]),  # (R, n)
        v=None if any(h is None for h in heads) else torch.stack(heads),  # (R, d)
        select=None if any(s is None for s in selects) else torch.stack(selects),  # (R, n)
    )
