"""A ViT that timm builds from a config (random init) trains one epoch under every optimizer, unchanged.

timm imports torchvision when it is imported. PyPI's torchvision wheels are built against CUDA PyTorch and fail
to load beside the CPU wheel torch==2.13.0 of `.venv` (``RuntimeError: operator torchvision::nms does not exist``,
after ``libc10_cuda.so: cannot open shared object file``). So these tests carry the ``timm`` marker: `make test`
deselects them and `make test-timm` (run by CI) runs them in `.venv-timm`, with torch 2.14.1 + torchvision 0.29.1,
where a missing timm is an error, never a skip.
"""

import pytest
import torch

from attnlab.experiments.real.harness import fit
from attnlab.experiments.real.optimizers import make_optimizer
from attnlab.experiments.real.split import train_test_split

pytestmark = pytest.mark.timm

OPTIMIZERS = [("sgd", 0.1), ("sngd", 0.1), ("sps", 0.5), ("adam", 1e-3), ("md-1.1", 0.05), ("md-2", 0.1),
              ("md-3", 1e-2)]


@pytest.mark.parametrize("name, lr", OPTIMIZERS)
def test_timm_vit_trains_one_epoch_under_each_optimizer(name, lr):
    from timm.models import vision_transformer  # imported here: `make test` collects this file without timm

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # timm initialises from the global RNG; fork_rng restores it afterwards
        model = vision_transformer.VisionTransformer(img_size=8, patch_size=2, in_chans=1, num_classes=10,
                                                     embed_dim=16, depth=1, num_heads=2, mlp_ratio=2.0).float()
    g = torch.Generator().manual_seed(0)
    data = train_test_split(torch.rand(64, 1, 8, 8, generator=g, dtype=torch.float32),
                            torch.randint(0, 10, (64,), generator=g), test_fraction=0.25, seed=0)
    before = [p.detach().clone() for p in model.parameters()]
    history = fit(model, make_optimizer(name, model.parameters(), lr, sngd_cap=1.0), data, epochs=1,
                  batch_size=16, seed=0)
    assert history.frame["step"].iloc[-1] == 3 and not history.frame["diverged"].any()
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
