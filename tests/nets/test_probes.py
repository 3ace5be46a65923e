"""Tests of the probes: Hoyer sparsity against its closed form, entry tables, first-token attention."""

import pytest
import torch

from attnlab.nets.probes import first_token_attention, hoyer_sparsity, projection_entries
from attnlab.nets.vit import ViT


def test_hoyer_sparsity_closed_form_cases():
    assert hoyer_sparsity(torch.tensor([0.0, 0.0, -2.0, 0.0])) == pytest.approx(1.0)
    assert hoyer_sparsity(torch.tensor([1.0, -1.0, 1.0, 1.0])) == pytest.approx(0.0, abs=1e-15)
    # two equal entries out of four: (2 - sqrt 2) / (2 - 1)
    assert hoyer_sparsity(torch.tensor([3.0, 0.0, 3.0, 0.0])) == pytest.approx(2 - 2**0.5, rel=1e-12)
    assert hoyer_sparsity(torch.tensor([3.0, 0.0, 3.0, 0.0]) * 1e-4) == pytest.approx(2 - 2**0.5, rel=1e-12)


def test_projection_entries_hold_every_key_query_value_weight():
    model = ViT(dim=8, depth=2, mlp_dim=8, seed=0)
    entries = projection_entries(model)
    assert len(entries) == 2 * 3 * 8 * 8
    keys = entries[(entries["layer"] == 1) & (entries["projection"] == "key")]["value"].to_numpy()
    assert torch.equal(torch.tensor(keys), model.encoder.blocks[1].attn.k.weight.detach().double().flatten())


def test_first_token_attention_is_the_head_mean_of_the_last_layers_first_row():
    model = ViT(dim=8, depth=2, heads=2, mlp_dim=8, seed=0, dtype=torch.float64)
    images = torch.rand(3, 1, 8, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    weights = first_token_attention(model, images)
    last = model.attention(images)[-1]
    torch.testing.assert_close(weights, 0.5 * (last[:, 0, 0] + last[:, 1, 0]), rtol=1e-14, atol=1e-15)
    torch.testing.assert_close(weights.sum(1), torch.ones(3, dtype=torch.float64))
