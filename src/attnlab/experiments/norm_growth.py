"""The constant of GD's logarithmic norm growth, read the same way by the flagship and by implicit-bias.rates.

Spec: implicit-bias-ngd §8.8 (Thm 6: plain GD's ``||W_t|| = Theta(log t)``; Lemma 1's tail fixes its constant: GD's
gradient is ``~ 1 - phi_opt ~ exp(-||W|| / ||W_mm||)``, so ``||W_t|| = ||W_mm|| ln t + r(t)``). Kept outside
:mod:`attnlab.experiments.implicit_bias` so that the flagship can use it without importing (and so registering) that
package's experiments.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from attnlab.verify import fit_slope

__all__ = ["LOG_GROWTH_TOLERANCE", "LOG_GROWTH_WINDOW", "LogGrowth", "log_growth"]

#: The window of :func:`log_growth`, as a :class:`~attnlab.verify.Reading` states it.
LOG_GROWTH_WINDOW = "every recorded step t >= T / decade (the last decade), T the last step"
#: The tolerance of :func:`log_growth`'s ratio and where it comes from, as a :class:`~attnlab.verify.Reading` states it.
LOG_GROWTH_TOLERANCE = (
    "1 +- 1/ln t_mid, t_mid the window's median step. GD's gradient is ~ 1 - phi_opt ~ "
    "exp(-||W|| / ||W_mm||) (Lemma 1), so ||W_t|| = ||W_mm|| ln t + r(t); an exponential-tailed loss's "
    "residual r grows at most like ln ln t (Soudry et al. 2018), whose slope on ln t is 1/ln t (its unit "
    "coefficient ours), and a bounded residual off W_mm's direction moves the ratio by 1 - corr(W_t, W_mm) ~ "
    "1/ln^2 t. A norm that levels off reads 0, a wrong exponent of ||grad|| (step ~ ||grad||^(1-p)) 1/(1-p)"
)


class LogGrowth(NamedTuple):
    """One run's slope of ``||W_t||`` on ``ln t`` over the last decade, against ``||W_mm||``.

    Attributes
    ----------
    ratio : float
        ``slope / w_mm``: 1 for Lemma 1's constant.
    tolerance : float
        ``1 / ln t_mid``, the largest slope a ``ln ln t`` residual adds at the window's median step.
    slope : float
        Least-squares slope of ``||W_t||`` on ``ln t`` over the window.
    w_mm : float
        ``||W_mm||_F``, the W-SVM's norm (margin 1).
    t_mid : float
        The window's median recorded step.
    first, last : int
        The window's first and last recorded steps.
    records : int
        Recorded steps in the window.
    """

    ratio: float
    tolerance: float
    slope: float
    w_mm: float
    t_mid: float
    first: int
    last: int
    records: int

    def spread(self) -> str:
        """The tolerance and the numbers behind the ratio, for a check's ``spread``.

        Returns
        -------
        str
        """
        return (
            f"1/ln t_mid = {self.tolerance:.3g} at the median step {self.t_mid:g}; slope {self.slope:.4g} over "
            f"||W_mm|| = {self.w_mm:.4g}, {self.records} records from t = {self.first} to T = {self.last}"
        )


def log_growth(steps: Any, norms: Any, w_mm: float, decade: float) -> LogGrowth:
    """Lemma 1's constant of a GD run's ``log t`` growth: the slope of ``||W_t||`` on ``ln t`` over the last decade.

    Parameters
    ----------
    steps : array-like, shape (S,)
        One run's recorded steps, increasing.
    norms : array-like, shape (S,)
        ``||W_t||_F`` at those steps.
    w_mm : float
        ``||W_mm||_F`` of the W-SVM of the run's data set (margin 1).
    decade : float
        The window is the recorded steps ``t >= T / decade``, ``T`` the last one.

    Returns
    -------
    LogGrowth
    """
    t, norm = np.asarray(steps, dtype=float), np.asarray(norms, dtype=float)
    window = t >= t[-1] / decade  # spec §8.8: the last decade
    t_mid = float(np.median(t[window]))
    slope, _ = fit_slope(t[window], norm[window], logy=False)
    tolerance = 1.0 / math.log(t_mid)  # spec §8.8: d(ln ln t) / d(ln t), the residual's largest slope
    first, last = int(t[window][0]), int(t[-1])
    return LogGrowth(slope / w_mm, tolerance, slope, w_mm, t_mid, first, last, int(window.sum()))
