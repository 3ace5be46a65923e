"""Recorded steps for rate-shape fits: every decade weighted alike, snapped to the recorded rows."""

import numpy as np
import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.verify import at_steps, geometric_steps


def test_geometric_steps_weight_every_decade_alike_and_snap_to_the_recorded_rows():
    steps = geometric_steps(1000, first=1, per_decade=8)
    assert steps[0] == 1 and steps[-1] == 1000
    per_decade = [int(((steps >= 10**k) & (steps < 10 ** (k + 1))).sum()) for k in range(3)]
    assert per_decade[1:] == [8, 8] and per_decade[0] >= 6  # integer rounding merges a few steps below 10
    rows = pd.DataFrame({"step": np.arange(0, 1001, 10), "value": 1.0})  # recorded every 10 steps
    assert at_steps(rows, np.array([1, 12, 14, 96]))["step"].tolist() == [0, 10, 100]  # nearest, once each


def test_bad_arguments_are_refused():
    with pytest.raises(ValidationError, match="steps"):
        geometric_steps(0)
    with pytest.raises(ValidationError, match="'step' column"):
        at_steps(pd.DataFrame({"value": [1.0]}), np.array([1]))
