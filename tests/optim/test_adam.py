"""Adam with epsilon and AdamW's decoupled decay as a log-domain rule: the same steps as torch.optim.Adam and AdamW at
moderate gradients, the same steps through batched.train and al.train, and epsilon 0 equal to Adam without epsilon.

Spec: steepest-descent §5 (Kingma & Ba 2015, Algorithm 1; Loshchilov & Hutter 2019, Algorithm 2).
"""

import copy

import pytest
import torch

import attnlab as al
from attnlab import batched
from attnlab.data import TokenSelectionData, example1
from attnlab.optim import Adam

STEPS, LR = 50, 0.05


def _data(n=4, T=3, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, T, d, generator=g, dtype=torch.float64)
    y = torch.sign(torch.randn(n, generator=g, dtype=torch.float64))
    return TokenSelectionData(X, X[:, 0].clone(), y, torch.randn(d, generator=g, dtype=torch.float64))


def _gradient(data, W, scale):
    """``scale`` times dL/dW of the mean exponential loss, by autograd (spec implicit-bias-ngd §3)."""
    W = W.clone().requires_grad_()
    s = torch.softmax(torch.einsum("ntd,de,ne->nt", data.X, W, data.Z), dim=-1)
    f = torch.einsum("nt,ntd,d->n", s, data.X, data.v)
    torch.exp(-data.y * f).mean().backward()
    return scale * W.grad


@pytest.mark.parametrize("scale", [1.0, 1e-8], ids=["gradient 1", "gradient ~ eps"])
@pytest.mark.parametrize(
    "ours,theirs",
    [
        (dict(eps=1e-8), lambda ps: torch.optim.Adam(ps, lr=LR, eps=1e-8)),
        (dict(eps=1e-6, beta1=0.5, beta2=0.9), lambda ps: torch.optim.Adam(ps, lr=LR, betas=(0.5, 0.9), eps=1e-6)),
        (dict(eps=1e-8, weight_decay=0.1), lambda ps: torch.optim.AdamW(ps, lr=LR, eps=1e-8, weight_decay=0.1)),
    ],
    ids=["adam", "adam-betas", "adamw"],
)
def test_adam_takes_torchs_steps_at_moderate_gradients(ours, theirs, scale):
    """A plain loop, the same autograd gradients handed to both; at scale 1e-8 epsilon weighs as much as sqrt(v)."""
    data = _data()
    W0 = 0.1 * torch.randn(5, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    params = [torch.nn.Parameter(W0.clone()) for _ in range(2)]
    optimizers = [Adam([params[0]], lr=LR, **ours), theirs([params[1]])]
    for _ in range(STEPS):
        for W, optimizer in zip(params, optimizers):
            W.grad = _gradient(data, W.detach(), scale)
            optimizer.step()
    assert float((params[0].detach() - W0).abs().max()) > 0.1 * (1 if scale == 1.0 else 1e-3)  # it moved
    # one formula, two roundings (log-domain buffers against true units): 50 steps agree to 1e-10
    torch.testing.assert_close(params[0].detach(), params[1].detach(), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_the_string_through_batched_train_and_the_class_through_al_train_take_the_same_steps(weight_decay):
    """400 steps: without decay past the softmax's saturation, where the gradient falls far below epsilon."""
    data = example1(4, 3, 16, seed=0)
    text = f"adam:lr=0.1,weight_decay={weight_decay}"
    run = batched.train(data.X, data.Z, data.y, data.v, optimizer=text, steps=400, record_every=400)
    model = al.models.Combined(16)
    al.train(model, Adam(model.parameters(), lr=0.1, weight_decay=weight_decay), data, steps=400, record_every=400)
    if weight_decay == 0.0:
        assert float(run.frame["grad_norm"].iloc[-1]) < 1e-9  # below epsilon = 1e-8, where it weighs most
    torch.testing.assert_close(model.W.detach(), run.W[0], rtol=1e-10, atol=1e-12)


def test_epsilon_zero_is_adam_without_epsilon():
    data = example1(4, 3, 16, seed=1)
    runs = [
        batched.train(data.X, data.Z, data.y, data.v, optimizer=name, steps=200).W
        for name in ("adam:eps=0,lr=0.05", "adam-noeps:lr=0.05")
    ]
    assert torch.equal(runs[0], runs[1])  # one transform: epsilon 0 is its no-epsilon branch


@pytest.mark.parametrize("joins", ["first", "last", "group"])
def test_a_tensor_that_joins_later_keeps_the_others_moments_as_torch_adam_does(joins):
    # the step count and log-scale were read from the first tensor alone: one that joined later (unfrozen, a group
    # added) reset every other tensor's moments (first) or took another tensor's bias correction (last, group)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2)).double()
    twin = copy.deepcopy(net)
    x, y = torch.randn(16, 4, dtype=torch.float64), torch.randn(16, 2, dtype=torch.float64)
    late = net[0] if joins == "first" else net[2]
    ours_params = [p for m in (net[0], net[2]) if m is not late or joins != "group" for p in m.parameters()]
    theirs_params = [p for m in (twin[0], twin[2]) if m is not twin[2] or joins != "group" for p in m.parameters()]
    ours, theirs = Adam(ours_params, lr=0.05), torch.optim.Adam(theirs_params, lr=0.05)
    for step in range(6):
        if step == 3 and joins == "group":
            ours.add_param_group({"params": list(late.parameters())})
            theirs.add_param_group({"params": list(twin[2].parameters())})
        for model, optimizer, frozen in ((net, ours, late), (twin, theirs, twin[0] if joins == "first" else twin[2])):
            optimizer.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(model(x), y).backward()
            if step < 3:  # the late layer has no gradient for three steps
                for p in frozen.parameters():
                    p.grad = None
            optimizer.step()
    for a, b in zip(net.parameters(), twin.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)
