"""The multi-token data model: unit tokens and queries, ||V||_F = 1, v = 1, labels in {-1, +1}, seeded."""

import torch

from attnlab.data import multi_token


def test_draw_has_the_stated_norms_and_is_seeded():
    draw = multi_token(n=3, T=4, d=8, seed=3)
    data = draw.data
    assert data.X.shape == (3, 4, 8) and data.Z.shape == (3, 8) and draw.V.shape == (8, 8)
    torch.testing.assert_close(data.X.norm(dim=-1), torch.ones(3, 4, dtype=torch.float64), rtol=0, atol=1e-15)
    torch.testing.assert_close(data.Z.norm(dim=-1), torch.ones(3, dtype=torch.float64), rtol=0, atol=1e-15)
    assert abs(float(torch.linalg.matrix_norm(draw.V)) - 1.0) < 1e-15
    assert bool((draw.v == 1).all()) and set(data.y.tolist()) <= {-1.0, 1.0}
    again = multi_token(n=3, T=4, d=8, seed=3)
    assert torch.equal(again.data.X, data.X) and torch.equal(again.V, draw.V)
    assert not torch.equal(multi_token(n=3, T=4, d=8, seed=4).data.X, data.X)
