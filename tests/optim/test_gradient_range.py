"""The torch.optim classes step on true gradients: a normalised or Polyak step must not depend on how far the
gradient lies from 1. Below about 1e-154 (late in a run on separable data) or above 1e154, the plain sum of g^2
leaves float64's normal range; the norms are then rescued (Context.block_norms), never silently wrong."""

import pytest
import torch

from attnlab.optim import NormalizedGD, PolyakStep

SCALES = [1e-160, 1e-170, 1e-300, 1e160, 1e200]


def _step(make, scale: float) -> list[torch.Tensor]:
    """The displacement of one step from a fixed point whose gradient (and loss) are multiplied by ``scale``."""
    torch.manual_seed(0)
    start = [torch.randn(6, 6, dtype=torch.float64), torch.randn(6, dtype=torch.float64)]
    grads = [torch.randn_like(x) * scale for x in start]
    params = [x.clone().requires_grad_(True) for x in start]
    optimizer = make(params)

    def closure():
        for p, g in zip(params, grads):
            p.grad = g.clone()
        return torch.tensor(0.7 * scale, dtype=torch.float64)  # the loss scales with the gradient (exp loss)

    optimizer.step(closure)
    return [a - b.detach() for a, b in zip(start, params)]


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: NormalizedGD(ps, lr=0.1),
        lambda ps: NormalizedGD(ps, lr=0.1, normalization="tensor"),
        lambda ps: PolyakStep(ps),
    ],
    ids=["ngd", "ngd-per-tensor", "polyak"],
)
@pytest.mark.parametrize("scale", SCALES)
def test_a_scale_free_step_is_the_same_at_any_gradient_size(make, scale):
    """NGD's step g/||g|| and Polyak's L g/||g||^2 are unchanged when g and L are multiplied by one constant; before
    the rescue, a gradient of 1e-160 moved them by 1e-6 to 3e-5 (subnormal g^2) and one of 1e-170 or 1e160 took no
    step at all (||g|| 0 or inf)."""
    reference = _step(make, 1.0)
    scaled = _step(make, scale)
    for a, b in zip(reference, scaled):
        assert torch.allclose(b, a, rtol=1e-12, atol=0.0), (scale, float((a - b).abs().max()))
