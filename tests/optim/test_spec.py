"""The optimizer grammar (optim/spec.py): forms, aliases, retired spellings, and errors that name the bad part."""

import math

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.optim import (
    GD,
    Adam,
    MirrorDescent,
    NormalizedGD,
    OptimizerSpec,
    PolyakStep,
    parse_optimizer,
    polyak_step_size,
    registry,
)
from attnlab.optim.transforms import Rule


@pytest.mark.parametrize(
    ("text", "name", "options"),
    [
        ("gd", "gd", {}),
        ("NGD", "ngd", {}),
        ("ngd:momentum=0.9", "ngd", {"momentum": 0.9}),
        (
            "ngd: max_step = 5 , momentum_variant=normalized_buffer",
            "ngd",
            {"max_step": 5.0, "momentum_variant": "normalized_buffer"},
        ),
        ("polyak:max_step=inf,optimal_loss=0", "polyak", {"max_step": math.inf, "optimal_loss": 0.0}),
        ("md:1.5", "md", {"p": 1.5}),
        ("md:3,normalized=false,lr=0.01", "md", {"p": 3.0, "normalized": False, "lr": 0.01}),
        ("joint:alpha=0,normalizer=block_grad_norm", "joint", {"alpha": 0.0, "normalizer": "block_grad_norm"}),
        ("sgd", "gd", {}),
        ("sngd", "ngd", {}),
        ("sps", "polyak", {"c": 0.5, "optimal_loss": 0.0}),
        ("adam:lr=0.001", "adam", {"lr": 0.001}),
    ],
)
def test_forms_parse_into_a_name_and_checked_options(text, name, options):
    spec = parse_optimizer(text)
    assert spec.name == name and dict(spec.options) == options
    assert parse_optimizer(str(spec)) == spec  # the canonical spelling parses back to the same spec


def test_the_canonical_spelling_writes_md_p_first():
    assert str(parse_optimizer("md:normalized=false,p=1.1")) == "md:1.1,normalized=false"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "lbfgs",
            r"optimizer 'lbfgs': unknown name 'lbfgs'; the form is name\[:options\], the options comma-separated",
        ),
        ("ngd,lr=0.5", "the options follow a colon, not a comma; write 'ngd:lr=0.5'"),
        ("md,1.5", "the options follow a colon, not a comma; write 'md:1.5'"),
        ("sgd,", "the options follow a colon, not a comma; write 'sgd'$"),
        ("ngd:momentm=0.9", "unknown option 'momentm' for ngd; ngd takes lr, max_step, momentum, momentum_variant"),
        ("ngd:momentum=1", r"optimizer 'ngd:momentum=1': momentum == 1, must be < 1.0"),
        ("ngd:momentum_variant=nesterov", "momentum_variant == 'nesterov', must be one of 'heavy_ball'"),
        ("polyak:lr=0.1", "polyak takes no lr, its step size is"),
        ("gd:0.5", "'0.5' is not key=value; only md and sd take a positional argument"),
        ("md:1.5,p=2", "p is given twice"),
        ("ngd:max_step=0", "max_step == 0, must be > 0"),
    ],
)
def test_errors_name_the_bad_part_and_what_is_accepted(text, message):
    with pytest.raises(ValidationError, match=message):
        parse_optimizer(text)


def test_an_option_given_twice_is_refused():
    with pytest.raises(ValidationError, match=r"'ngd:momentum=0.9' already sets \['momentum'\]"):
        parse_optimizer("ngd:momentum=0.9").with_options(momentum=0.5)
    with pytest.raises(ValidationError, match="sets lr, and lr is given again"):
        parse_optimizer("ngd:lr=0.2").rule(["W"], lr=0.1)


def test_retired_spellings_are_refused_by_name():
    with pytest.raises(ValidationError, match="unknown name 'md-1.1'"):
        parse_optimizer("md-1.1")
    with pytest.raises(ValidationError, match="unknown option 'max_lr' for polyak"):
        parse_optimizer("polyak:max_lr=2")


def test_every_name_has_an_engine_rule_and_a_torch_class_of_the_same_chain():
    params = [torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))]
    for name in registry.names():
        spec = parse_optimizer(name).with_options(**({"optimal_loss": 0.0} if name == "polyak" else {}))
        assert isinstance(spec.rule(["W"]), Rule)
        assert isinstance(spec.build(params), registry.get(name).optimizer_class())
    assert isinstance(parse_optimizer("adam").build(params), Adam)  # log-domain Adam with eps, not torch's


def test_build_carries_every_option_to_the_class():
    params = [torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))]
    ngd = parse_optimizer("ngd:lr=0.2,max_step=3,momentum=0.5,normalization=tensor").build(params)
    assert isinstance(ngd, NormalizedGD)
    group = ngd.param_groups[0]
    assert (group["lr"], group["max_step"], group["momentum"], group["normalization"]) == (0.2, 3.0, 0.5, "tensor")
    md = parse_optimizer("md:1.5").build(params)
    assert isinstance(md, MirrorDescent) and md.param_groups[0]["p"] == 1.5 and md.param_groups[0]["normalized"]
    sps = parse_optimizer("sps:max_step=4").build(params)
    assert isinstance(sps, PolyakStep) and sps.param_groups[0]["max_step"] == 4.0 and sps.optimal_loss == 0.0
    gd = OptimizerSpec.parse("sgd:momentum=0.9").build(params)
    assert isinstance(gd, GD) and gd.param_groups[0]["momentum"] == 0.9  # the registry's class of gd's chain


def test_the_former_name_of_polyaks_cap_is_refused():
    w = [torch.nn.Parameter(torch.tensor([3.0], dtype=torch.float64))]
    with pytest.raises(ValidationError, match=r"PolyakStep takes no \['max_lr'\]; its arguments are params and"):
        PolyakStep(w, max_lr=0.25)
    with pytest.raises(ValidationError, match=r"sets \['max_lr'\], which PolyakStep does not take"):
        PolyakStep([{"params": w, "max_lr": 0.5}])
    size = polyak_step_size(1.0, 0.0, torch.tensor(0.25, dtype=torch.float64), max_step=2.0)
    assert float(size) == 2.0  # (1 - 0) / 0.25 = 4, capped at 2
