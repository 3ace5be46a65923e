"""docs/tutorial/your-model.md, section "An optimizer of your own": its Python blocks run and do what its text says."""

import re
from pathlib import Path

import pytest

import attnlab as al
from attnlab.data import example1

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = (ROOT / "docs" / "tutorial" / "your-model.md").read_text(encoding="utf-8")
SECTION = TUTORIAL.split("## An optimizer of your own", 1)[1].split("\n## ", 1)[0]
BLOCKS = re.findall(r"```python\n(.*?)```", SECTION, re.S)


def _run(block: str) -> dict:
    namespace: dict = {"__name__": "tutorial"}
    exec(compile(block, "your-model.md", "exec"), namespace)
    return namespace


def test_the_section_defines_scale_invariance_once_and_holds_two_blocks():
    assert len(BLOCKS) == 2
    assert TUTORIAL.count("is **scale-invariant** when") == 1  # the one place the docs define it


def test_the_users_transform_keeps_stepping_after_the_gradient_underflows():
    ns = _run(BLOCKS[0])
    W = ns["run"].W[0]
    # sign steps of 0.01 on the larger entries, 3000 of them: the largest entry moved every step
    assert float(W.abs().max()) == pytest.approx(30.0, rel=1e-9)


def test_a_declared_torch_sign_optimizer_steps_past_the_underflow_as_the_builtin_and_an_undeclared_one_stalls():
    ns = _run(BLOCKS[1])
    declared = ns["model"].W.detach()
    assert float(declared.abs().max()) == pytest.approx(25.0, rel=1e-12)  # the comment's 25.0
    data = example1(n=4, T=3, d=16, seed=0)
    builtin = al.models.Combined(16)
    al.train(builtin, "sign:lr=0.01", data, steps=2500)
    assert float((builtin.W.detach() - declared).abs().max()) <= 1e-9  # the same steps (sums of 0.01s)

    class Undeclared(ns["MySign"]):
        scale_invariant = False

    stalled = al.models.Combined(16)
    al.train(stalled, Undeclared(stalled.parameters(), lr=0.01), data, steps=2500)
    # the text's 20.32: the true gradient is exactly 0 from step 2033 on, and sign(0) = 0 takes no step
    assert float(stalled.W.detach().abs().max()) == pytest.approx(20.32, rel=1e-9)
