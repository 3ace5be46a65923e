"""The error floor of Algorithm 1 under the Monte-Carlo oracle, split into the oracle's noise and its bias.

Spec: preconditioned-regression §6.2 (the oracle), §8 T2 (the ``O(1/n)`` floor). Theorem 2 assumes the exact
expected empirical gradient ``E grad L_n``, which has no closed form; the Monte-Carlo oracle averages ``B`` fresh
samples of size n per step. Its noise adds ``~ v / B`` to the floor and its bias a ``b`` that does not depend on
``B``, so running at ``B`` and ``B / 2`` separates them (Richardson in 1/B): ``noise = F(B/2) - F(B)``,
``bias = 2 F(B) - F(B/2)``. The preconditioner and the regularizer use the true Sigma, whose sample versions would
add an error of their own (Lemma 3, Theorem 5).
"""

from __future__ import annotations

import pandas as pd

__all__ = ["noise_and_bias"]


def noise_and_bias(floors: pd.DataFrame, batches: int) -> pd.DataFrame:
    """Per (n, run): ``F(B)``, the oracle's ``noise = F(B/2) - F(B)`` and the ``bias = 2 F(B) - F(B/2)``.

    Parameters
    ----------
    floors : pandas.DataFrame
        The ``floors`` of :func:`attnlab.training.regression.oracle_floors`.
    batches : int
        The ``B`` it was run with.

    Returns
    -------
    pandas.DataFrame
        Columns n, run, floor, noise, bias.
    """
    wide = floors.pivot_table(index=["n", "run"], columns="batches", values="floor", dropna=False)
    full, half = wide[batches], wide[batches // 2]  # spec §8 T2: Richardson in 1/B
    return pd.DataFrame({"floor": full, "noise": half - full, "bias": 2 * full - half}).reset_index()
