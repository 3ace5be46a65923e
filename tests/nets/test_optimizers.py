"""Tests of optimizer names: parsing, the classes built, and l_2 mirror descent equal to SGD on a real model."""

import pytest
import torch
import torch.nn.functional as F

from attnlab._validation import ValidationError
from attnlab.nets.optimizers import make_optimizer, optimizer_kind, parse_optimizer
from attnlab.nets.vit import ViT
from attnlab.optim import GD, Adam, MirrorDescent, NormalizedGD, PolyakStep, SteepestDescent


def test_optimizer_kind_reads_the_papers_name_and_the_mirror_descent_exponent():
    assert optimizer_kind("md:1.1,normalized=false") == ("md", 1.1)
    assert optimizer_kind("sps") == ("sps", None)
    assert optimizer_kind("ngd:max_step=2") == ("sngd", None)
    assert optimizer_kind("sign") == ("sd", None)  # any registry name: its own name outside the papers' four
    with pytest.warns(DeprecationWarning, match="use attnlab.nets.optimizer_kind"):
        assert parse_optimizer("sps") == ("sps", None)  # the old name, one release


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("md:1", "p == 1, must be > 1.0"),
        ("sgd:2", "'2' is not key=value"),
        ("lbfgs", "unknown name 'lbfgs'"),
    ],
)
def test_optimizer_kind_refuses_bad_strings(name, message):
    with pytest.raises(ValidationError, match=message):
        optimizer_kind(name)


def test_make_optimizer_builds_the_registry_classes_with_their_settings():
    params = [torch.nn.Parameter(torch.zeros(2))]
    assert isinstance(make_optimizer("sgd", params, 0.1), GD)
    assert isinstance(make_optimizer("adam", params, 0.1), Adam)
    sngd = make_optimizer("sngd", params, 0.1, sngd_cap=2.0)
    assert isinstance(sngd, NormalizedGD) and sngd.param_groups[0]["max_step"] == 2.0
    sps = make_optimizer("sps:max_step=0.7", params, sps_c=0.5)
    assert isinstance(sps, PolyakStep) and sps.param_groups[0]["max_step"] == 0.7 and sps.param_groups[0]["c"] == 0.5
    md = make_optimizer("md:3,normalized=false", params, 0.1)
    assert isinstance(md, MirrorDescent) and md.param_groups[0]["p"] == 3.0 and not md.param_groups[0]["normalized"]
    assert isinstance(make_optimizer("sign:schedule=inv_sqrt", params, 0.1), SteepestDescent)


def test_lr_means_the_step_size_only():
    """One meaning: Polyak has no step size to set, so lr is refused there (its cap is written as max_step)."""
    params = [torch.nn.Parameter(torch.zeros(2))]
    with pytest.raises(ValidationError, match="takes no lr"):
        make_optimizer("sps", params, 0.7)


def test_gd_takes_torch_sgds_step_to_the_bit_on_a_float32_vit():
    images = torch.rand(8, 1, 8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float32)
    labels = torch.arange(8) % 10
    models = [ViT(dim=8, depth=1, mlp_dim=8, seed=0, dtype=torch.float32) for _ in range(2)]
    for model, build in zip(models, (lambda ps: make_optimizer("sgd", ps, 0.3), lambda ps: torch.optim.SGD(ps, 0.3))):
        optimizer = build(model.parameters())
        for _ in range(3):
            optimizer.zero_grad()
            F.cross_entropy(model(images), labels).backward()
            optimizer.step()
    for a, b in zip(*(m.parameters() for m in models)):
        assert torch.equal(a, b)  # the same float32 operation per step: x + (-lr) g


def test_adam_takes_torch_adams_steps_on_a_vit():
    images = torch.rand(8, 1, 8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    labels = torch.arange(8) % 10
    models = [ViT(dim=8, depth=1, mlp_dim=8, seed=0, dtype=torch.float64) for _ in range(2)]
    builds = (lambda ps: make_optimizer("adam", ps, 1e-3), lambda ps: torch.optim.Adam(ps, 1e-3))
    for model, build in zip(models, builds):
        optimizer = build(model.parameters())
        for _ in range(5):
            optimizer.zero_grad()
            F.cross_entropy(model(images), labels).backward()
            optimizer.step()
    for a, b in zip(*(m.parameters() for m in models)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-13)  # float64: one formula, two roundings


def test_l2_mirror_descent_takes_the_sgd_step_on_a_vit():
    images = torch.rand(8, 1, 8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    labels = torch.arange(8) % 10
    models = [ViT(dim=8, depth=1, mlp_dim=8, seed=0, dtype=torch.float64) for _ in range(2)]
    for model, name in zip(models, ("sgd", "md:2,normalized=false")):
        optimizer = make_optimizer(name, model.parameters(), 0.3)
        for _ in range(3):
            optimizer.zero_grad()
            F.cross_entropy(model(images), labels).backward()
            optimizer.step()
    for a, b in zip(*(m.parameters() for m in models)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)  # float64; sign(w)|w|^1 is w up to rounding


def test_sps_c_sets_the_constant_the_sps_alias_implies_but_not_one_the_string_writes():
    """sps_c was recorded by the real experiments' configs while "sps" always ran with its alias's 0.5."""
    params = [torch.nn.Parameter(torch.zeros(2))]
    assert make_optimizer("sps", params, sps_c=2.0).param_groups[0]["c"] == 2.0
    assert make_optimizer("sps", params).param_groups[0]["c"] == 0.5
    assert make_optimizer("sps:c=1", params, sps_c=2.0).param_groups[0]["c"] == 1.0
    with pytest.raises(ValidationError, match="c"):
        make_optimizer("sps", params, sps_c=-3.0)
