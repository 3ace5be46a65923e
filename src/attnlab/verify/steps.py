"""Which recorded steps a rate-shape fit uses: about as many per decade, so every decade weighs alike.

A fit on uniformly recorded steps spends nine tenths of its points on the last decade; rate shapes (``log t``
against ``t^a``, :func:`~attnlab.verify.check_rate_shape`) need every decade weighted alike.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from attnlab._validation import ValidationError, check_scalar

__all__ = ["at_steps", "geometric_steps"]


def geometric_steps(steps: int, first: int = 1, per_decade: int = 8) -> np.ndarray:
    """About ``per_decade`` distinct steps per decade from ``first`` to ``steps``, ascending.

    Parameters
    ----------
    steps : int
        The last step, >= ``first``.
    first : int, default=1
        The first step, >= 1.
    per_decade : int, default=8
        Points per decade before rounding to whole steps (repeats are dropped).

    Returns
    -------
    numpy.ndarray of int, shape (m,)
        Distinct steps, ``first`` and ``steps`` included.

    Examples
    --------
    >>> geometric_steps(100, per_decade=2).tolist()
    [1, 3, 10, 32, 100]
    """
    first = check_scalar("first", first, kind=int, low=1)
    steps = check_scalar("steps", steps, kind=int, low=first)
    check_scalar("per_decade", per_decade, kind=int, low=1)
    decades = math.log10(steps / first)
    grid = np.logspace(math.log10(first), math.log10(steps), max(2, round(per_decade * decades) + 1))
    return np.unique(np.round(grid).astype(int))


def at_steps(rows: pd.DataFrame, steps: np.ndarray) -> pd.DataFrame:
    """The rows of one run recorded nearest to each of ``steps``, each row once, in step order.

    Parameters
    ----------
    rows : pandas.DataFrame
        One run's records, with a ``step`` column.
    steps : numpy.ndarray of int, shape (m,)
        Wanted steps (:func:`geometric_steps`).

    Returns
    -------
    pandas.DataFrame
        At most m rows of ``rows``.
    """
    if "step" not in rows.columns or rows.empty:
        raise ValidationError("rows must be a non-empty frame with a 'step' column; pass one run's trajectory")
    recorded = np.sort(rows["step"].unique())
    nearest = np.unique(recorded[np.abs(recorded[None, :] - np.asarray(steps)[:, None]).argmin(axis=1)])
    return rows[rows["step"].isin(nearest)].sort_values("step")
