"""The engine loop's own contracts: what it returns is an ordinary tensor, and skipping the loss on the steps that
do not read it changes nothing."""

from __future__ import annotations

import math

import pytest
import torch

import attnlab as al
from attnlab.data import example1
from attnlab.models.functional import logit_derivatives, score_gaps, token_scores
from attnlab.training import batched


def test_what_batched_train_returns_works_with_autograd_and_in_place():
    data = example1(n=4, T=3, d=8, seed=0)
    res = batched.train(data.X, data.Z, data.y, data.v, None, optimizer="ngd", lr=0.1, steps=5, keep_iterates=True)
    for tensor in (res.W, res.iterates["W"]):
        assert not tensor.is_inference()
    W = res.W.clone().requires_grad_(True)
    (W**2).sum().backward()  # an inference tensor would refuse requires_grad outside inference mode
    res.W.add_(1.0)  # and in-place updates


def test_al_train_leaves_the_model_and_optimizer_usable_outside_the_engine():
    data = example1(n=4, T=3, d=8, seed=0)
    model = al.models.Combined(8)
    opt = al.optim.NormalizedGD(model.parameters(), lr=0.1, momentum=0.5)
    al.train(model, opt, data, steps=5, record_every=5)
    assert not model.W.is_inference()

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = model.loss(data, "exp").sum()
        loss.backward()  # the trained parameters take part in autograd
        return loss

    before = model.W.detach().clone()
    opt.step(closure)  # and the optimizer's state, built in the engine, in its own step
    assert not torch.equal(before, model.W.detach())


@pytest.mark.parametrize("loss", ["exp", "logistic"])
def test_the_loss_is_skipped_only_when_not_asked_for(loss):
    data = example1(n=5, T=4, d=6, seed=1)
    logits = torch.randn(4, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    gaps = score_gaps(token_scores(data.X, data.y, data.v))
    full, lean = logit_derivatives(logits, gaps, loss), logit_derivatives(logits, gaps, loss, risk=False)
    assert lean.log_risk is None and torch.isfinite(full.log_risk)
    for a, b in zip(full[:4], lean[:4]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # the gradient's scale tells a non-finite loss without it: NaN for NaN or infinite logits
    bad = logits.clone()
    bad[1, 2] = math.inf
    assert torch.isnan(logit_derivatives(bad, gaps, loss, risk=False).scaled().log_scale)
    # and is 0 (no step) where every weight is 0: all scores equal
    equal = score_gaps(torch.ones(5, 4, dtype=torch.float64))
    assert logit_derivatives(logits, equal, loss).scaled().log_scale == 0.0


def test_recorded_losses_match_the_loss_computed_at_the_recorded_iterates():
    data = example1(n=4, T=3, d=8, seed=0)
    res = batched.train(
        data.X, data.Z, data.y, data.v, None, optimizer="ngd", lr=0.1, steps=30, record_every=7, keep_iterates=True
    )
    W = res.iterates["W"][:, 0]  # (S, d, d)
    direct = torch.stack([al.models.functional.attention_loss(data.X, data.Z, data.y, data.v, w) for w in W])
    torch.testing.assert_close(torch.tensor(res.frame["loss"].to_numpy()), direct, rtol=1e-13, atol=0)


def test_momentum_state_from_the_kernel_path_continues_on_the_parameters():
    # n T^2 = 36 <= d^2 = 64: the first call trains the kernel coefficients; its momentum buffer comes back as a
    # matrix, and a second call (on W, since the state now holds a direction) continues the same trajectory
    data = example1(n=4, T=3, d=8, seed=0)

    def trained(chunks):
        model = al.models.Combined(8)
        opt = al.optim.NormalizedGD(model.parameters(), lr=0.1, momentum=0.5)
        for steps in chunks:
            al.train(model, opt, data, steps=steps, record_every=steps)
        return model.W.detach(), opt.state[model.W]["momentum_buffer"]

    (W_once, buffer_once), (W_twice, buffer_twice) = trained([10]), trained([5, 5])
    assert buffer_once.shape == buffer_twice.shape == (8, 8)
    torch.testing.assert_close(W_twice, W_once, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(buffer_twice, buffer_once, rtol=1e-10, atol=1e-300)


def test_every_named_reference_is_recorded_as_its_own_cosine():
    # two runs, three references of mixed shapes (one shared by both runs), recorded in one pass; each column is
    # the plain cosine of the recorded iterate with its reference, computed here one by one
    data = al.data.stack([example1(n=4, T=3, d=6, seed=s) for s in range(2)])
    g = torch.Generator().manual_seed(3)
    refs = {
        "a": torch.randn(2, 6, 6, generator=g, dtype=torch.float64),
        "shared": torch.randn(6, 6, generator=g, dtype=torch.float64),
        "b": torch.randn(2, 6, 6, generator=g, dtype=torch.float64),
    }
    W0 = 0.1 * torch.randn(2, 6, 6, generator=g, dtype=torch.float64)
    res = batched.train(
        data.X,
        data.Z,
        data.y,
        data.v,
        W0,
        optimizer="ngd",
        lr=0.2,
        steps=12,
        record_every=4,
        refs=refs,
        keep_iterates=True,
        bregman_p=3.0,
    )
    frame = res.frame.sort_values(["step", "run"])
    W = res.iterates["W"]  # (S, R, d, d)
    for name, ref in refs.items():
        expected = torch.stack(
            [
                torch.tensor([float((w * r).sum() / (w.norm() * r.norm())) for w, r in zip(Ws, ref.expand(2, 6, 6))])
                for Ws in W
            ]
        ).flatten()
        torch.testing.assert_close(torch.tensor(frame[f"alignment_{name}"].to_numpy()), expected, rtol=1e-13, atol=0)
        assert frame[f"bregman_{name}"].notna().all()


def test_references_without_a_runs_axis_serve_every_run():
    # the recorder is public: three (d, d) references for two runs must not be paired with the runs axis
    from attnlab.metrics import cosine
    from attnlab.training import Recorder

    g = torch.Generator().manual_seed(5)
    refs = {k: torch.randn(4, 4, generator=g, dtype=torch.float64) for k in ("a", "b")}
    W = torch.randn(2, 4, 4, generator=g, dtype=torch.float64)
    stacked = Recorder(refs=refs).stacked
    assert stacked.shape == (2, 1, 4, 4)
    torch.testing.assert_close(cosine(W, stacked)[1], cosine(W, refs["b"]), rtol=1e-15, atol=0)
