"""A ViT that timm builds from a config (random init) trains one epoch under every optimizer, unchanged.

timm imports torchvision when it is imported. PyPI's torchvision wheels are built against CUDA PyTorch and fail
to load beside the CPU wheel torch==2.13.0 of `.venv` (``RuntimeError: operator torchvision::nms does not exist``,
after ``libc10_cuda.so: cannot open shared object file``). So these tests carry the ``timm`` marker: `make test`
deselects them and `make test-timm` (run by CI) runs them in `.venv-timm`, with torch 2.14.1 + torchvision 0.29.1,
where a missing timm is an error, never a skip.
"""

import pytest
import torch

from attnlab.nets.classifier import fit_classifier
from attnlab.nets.datasets.split import train_test_split
from attnlab.nets.optimizers import make_optimizer

pytestmark = pytest.mark.timm

OPTIMIZERS = [
    ("sgd", 0.1),
    ("sngd", 0.1),
    ("sps:max_step=0.5", None),  # Polyak takes no lr: its cap is an option
    ("adam", 1e-3),
    ("md:1.1,normalized=false", 0.05),
    ("md:2,normalized=false", 0.1),
    ("md:3,normalized=false", 1e-2),
]


@pytest.mark.parametrize("name, lr", OPTIMIZERS)
def test_timm_vit_trains_one_epoch_under_each_optimizer(name, lr):
    from timm.models import vision_transformer  # imported here: `make test` collects this file without timm

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # timm initialises from the global RNG; fork_rng restores it afterwards
        model = vision_transformer.VisionTransformer(
            img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=16, depth=1, num_heads=2, mlp_ratio=2.0
        ).float()
    g = torch.Generator().manual_seed(0)
    data = train_test_split(
        torch.rand(64, 1, 8, 8, generator=g, dtype=torch.float32),
        torch.randint(0, 10, (64,), generator=g),
        test_fraction=0.25,
        seed=0,
    )
    before = [p.detach().clone() for p in model.parameters()]
    history = fit_classifier(
        model, make_optimizer(name, model.parameters(), lr, sngd_cap=1.0), data, epochs=1, batch_size=16, seed=0
    )
    assert history.frame["step"].iloc[-1] == 3 and history.status == ["completed"]
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def _timm_attention(qkv_bias, qk_norm=False):
    from timm.layers.attention import Attention

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # timm initialises from the global RNG; fork_rng restores it afterwards
        module = (
            Attention(
                6, num_heads=3, qkv_bias=qkv_bias, qk_norm=qk_norm, norm_layer=torch.nn.LayerNorm if qk_norm else None
            )
            .double()
            .eval()
        )
        if qkv_bias:
            torch.nn.init.normal_(module.qkv.bias)  # timm starts biases at 0: make them matter
    module.fused_attn = False  # the explicit softmax, whose weights attn_drop receives
    return module


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_timm_head_W_reproduces_its_attention_weights(qkv_bias):
    """attnlab.probe.head_W against timm's own softmax weights (read at attn_drop's input), float64."""
    from attnlab.probe import capture, head_W

    module = _timm_attention(qkv_bias)
    x = torch.randn(3, 5, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    seen = []
    handle = module.attn_drop.register_forward_hook(lambda m, args, out: seen.append(args[0].detach()))
    with torch.no_grad():
        module(x)
    handle.remove()
    own = seen[0]  # (n, heads, L, T)
    for head in range(3):
        for query in range(5):
            data = capture(module, module, x, query=query)
            logits = torch.einsum("ntk,kq,nq->nt", data.X, head_W(module, head), data.Z)
            torch.testing.assert_close(
                torch.softmax(logits, -1), own[:, head, query], rtol=0, atol=1e-10
            )  # float64 round-off
    assert head_W(module, 0).shape == ((7, 7) if qkv_bias else (6, 6))


def test_timm_qk_norm_is_refused():
    from attnlab._validation import ValidationError
    from attnlab.probe import head_W

    with pytest.raises(ValidationError, match="qk_norm=True normalises q and k"):
        head_W(_timm_attention(False, qk_norm=True), 0)
