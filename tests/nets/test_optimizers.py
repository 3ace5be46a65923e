"""Tests of optimizer names: parsing, the classes built, and l_2 mirror descent equal to SGD on a real model."""

import pytest
import torch
import torch.nn.functional as F

from attnlab._validation import ValidationError
from attnlab.nets.optimizers import make_optimizer, parse_optimizer
from attnlab.nets.vit import ViT
from attnlab.optim import MirrorDescent, NormalizedGD, PolyakStep


def test_parse_optimizer_reads_the_mirror_descent_exponent():
    assert parse_optimizer("md-1.1") == ("md", 1.1)
    assert parse_optimizer("sps") == ("sps", None)


@pytest.mark.parametrize("name", ["md", "md-1", "md-x", "sgd-2", "lbfgs"])
def test_parse_optimizer_refuses_unknown_names(name):
    with pytest.raises(ValidationError, match="'md-<p>' with p > 1"):
        parse_optimizer(name)


def test_make_optimizer_builds_the_named_classes_with_their_settings():
    params = [torch.nn.Parameter(torch.zeros(2))]
    assert isinstance(make_optimizer("sgd", params, 0.1), torch.optim.SGD)
    assert isinstance(make_optimizer("adam", params, 0.1), torch.optim.Adam)
    sngd = make_optimizer("sngd", params, 0.1, sngd_cap=2.0)
    assert isinstance(sngd, NormalizedGD) and sngd.param_groups[0]["max_step"] == 2.0
    sps = make_optimizer("sps", params, 0.7, sps_c=0.5)
    assert isinstance(sps, PolyakStep) and sps.param_groups[0]["max_lr"] == 0.7 and sps.param_groups[0]["c"] == 0.5
    md = make_optimizer("md-3", params, 0.1)
    assert isinstance(md, MirrorDescent) and md.param_groups[0]["p"] == 3.0 and not md.param_groups[0]["normalized"]


def test_l2_mirror_descent_takes_the_sgd_step_on_a_vit():
    images = torch.rand(8, 1, 8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    labels = torch.arange(8) % 10
    models = [ViT(dim=8, depth=1, mlp_dim=8, seed=0, dtype=torch.float64) for _ in range(2)]
    for model, name in zip(models, ("sgd", "md-2")):
        optimizer = make_optimizer(name, model.parameters(), 0.3)
        for _ in range(3):
            optimizer.zero_grad()
            F.cross_entropy(model(images), labels).backward()
            optimizer.step()
    for a, b in zip(*(m.parameters() for m in models)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)  # float64; sign(w)|w|^1 is w up to rounding
