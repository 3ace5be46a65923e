"""Checkpoints: a run stopped mid-way and resumed from its last checkpoint ends bit-identical to an unbroken run."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.checkpoint import Checkpoint

STEPS = 37


class Stop(Exception):
    """Stands for a crash at a given step."""


def noisy_momentum_run(ckpt: Checkpoint | None, stop_at: int | None = None):
    """SGD with momentum on a least-squares loss with fresh random minibatch noise each step.

    Its next step depends on the weights, the momentum buffer and the generator: all three must be checkpointed.
    """
    w = torch.nn.Parameter(torch.zeros(4, dtype=torch.float64))
    opt = torch.optim.SGD([w], lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(0)
    losses: list[float] = []
    state = ckpt.load() if ckpt else None
    start = 0
    if state is not None:
        with torch.no_grad():
            w.copy_(state["w"])
        opt.load_state_dict(state["opt"])
        gen.set_state(state["gen"])
        losses, start = state["losses"], state["step"]
    for step in range(start, STEPS):
        if step == stop_at:
            raise Stop
        x = torch.randn(8, 4, generator=gen, dtype=torch.float64)
        loss = ((x @ w - x.sum(1)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if ckpt:
            ckpt.maybe_save(
                {
                    "step": step + 1,
                    "w": w.detach().clone(),
                    "opt": opt.state_dict(),
                    "gen": gen.get_state(),
                    "losses": losses,
                }
            )
    return w.detach(), losses


def test_resume_after_a_crash_is_bit_identical(tmp_path):
    w_ref, losses_ref = noisy_momentum_run(None)
    ckpt = Checkpoint(tmp_path / "ckpt.pt", every=10)
    with pytest.raises(Stop):
        noisy_momentum_run(ckpt, stop_at=25)
    assert ckpt.load()["step"] == 20  # the last multiple of 10 reached before the crash
    w, losses = noisy_momentum_run(ckpt)
    assert torch.equal(w, w_ref)  # bit-identical, not merely close
    assert losses == losses_ref


def test_maybe_save_only_on_multiples_and_clear(tmp_path):
    ckpt = Checkpoint(tmp_path / "c.pt", every=3)
    assert ckpt.load() is None
    assert not ckpt.maybe_save({"step": 2})
    assert ckpt.maybe_save({"step": 3})
    ckpt.clear()
    assert ckpt.load() is None


def test_errors_name_the_argument(tmp_path):
    with pytest.raises(ValidationError, match="every == 0, must be >= 1"):
        Checkpoint(tmp_path / "c.pt", every=0)
    with pytest.raises(ValidationError, match="integer 'step'"):
        Checkpoint(tmp_path / "c.pt", every=1).save({"w": 1})


def test_a_truncated_checkpoint_names_its_file_and_what_to_delete(tmp_path):
    ckpt = Checkpoint(tmp_path / "ckpt.pt", every=1)
    ckpt.save({"step": 3, "w": torch.ones(4)})
    ckpt.path.write_bytes(ckpt.path.read_bytes()[:64])
    match = rf"checkpoint '{ckpt.path}' cannot be loaded .*delete it to start the run over"
    with pytest.raises(ValidationError, match=match):
        ckpt.load()
