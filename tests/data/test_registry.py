"""GENERATORS: every named data model runs with its defaults and gives float64 token-selection data."""

import torch

from attnlab.data import GENERATORS, AlignedPairs, TokenSelectionData


def test_every_generator_runs_with_defaults():
    assert set(GENERATORS) == {"example1", "dm", "unit_gaussian", "joint_toy", "scores_equal", "aligned_pairs"}
    for name, func in GENERATORS.items():
        result = func()
        data = result.data if isinstance(result, AlignedPairs) else result
        assert isinstance(data, TokenSelectionData), name
        assert data.X.dtype == torch.float64, name
