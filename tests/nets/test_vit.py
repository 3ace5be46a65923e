"""Tests of our ViT: patches cut the image as written, tokens and attention shapes, seeding, errors."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.nets.vit import ViT


def test_patches_are_the_image_blocks_in_row_major_order():
    model = ViT(image_size=4, patch_size=2, channels=2, dim=8, depth=1, seed=0)
    images = torch.arange(2 * 2 * 4 * 4, dtype=torch.float32).reshape(2, 2, 4, 4)
    patches = model.patches(images)
    assert patches.shape == (2, 4, 8)
    for i in range(2):
        for j in range(2):
            block = images[:, :, 2 * i : 2 * i + 2, 2 * j : 2 * j + 2].reshape(2, -1)  # (n, C * 2 * 2)
            assert torch.equal(patches[:, 2 * i + j], block)


def test_vit_reads_the_class_token_and_its_attention_rows_sum_to_one():
    model = ViT(seed=0, dtype=torch.float64)
    images = torch.rand(3, 1, 8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert model(images).shape == (3, 10)
    attention = model.attention(images)
    assert len(attention) == 2 and attention[-1].shape == (3, 2, 17, 17)  # 16 patches + class token
    torch.testing.assert_close(attention[-1].sum(-1), torch.ones(3, 2, 17, dtype=torch.float64))


def test_vit_seed_fixes_the_weights():
    a, b, c = ViT(seed=3), ViT(seed=3), ViT(seed=4)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.patch_embed.weight, c.patch_embed.weight)


def test_vit_refuses_images_without_a_channel_axis():
    with pytest.raises(ValidationError, match=r"images\[:, None\]"):
        ViT(seed=0)(torch.zeros(2, 8, 8))


def test_vit_refuses_a_patch_size_that_does_not_divide_the_image():
    with pytest.raises(ValidationError, match="patch_size == 3 does not divide image_size == 8"):
        ViT(patch_size=3)


@pytest.mark.parametrize("sizes", [{"patch_size": 2, "dim": 32, "depth": 2}, {"patch_size": 4, "dim": 16, "depth": 1}])
def test_eval_logits_read_the_class_token_alone_and_equal_the_full_pass(sizes):
    # real.digits-vit's full and quick sizes, float32: the eval path (encode_first) gives the full pass's values,
    # to the bit with this machine's MKL; a product over fewer rows may round differently on another BLAS, so the test
    # allows for that
    model = ViT(seed=1, mlp_dim=2 * sizes["dim"], **sizes).eval()
    images = torch.rand(37, 1, 8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float32)
    with torch.no_grad():
        states, attention = model.encode(images)
        torch.testing.assert_close(model(images), model.head(model.norm(states[:, 0])), rtol=1e-6, atol=1e-6)
        assert all(torch.equal(a, b) for a, b in zip(model.attention(images), attention))


def test_images_of_another_dtype_and_a_bad_dtype_or_width_are_refused():
    model = ViT(image_size=8, patch_size=4, seed=0)
    with pytest.raises(ValidationError, match=r"images are torch.float64 and the model's weights torch.float32"):
        model(torch.zeros(2, 1, 8, 8, dtype=torch.float64))
    with pytest.raises(ValidationError, match="dtype == 'float64', must be a floating torch.dtype"):
        ViT(image_size=8, patch_size=4, dtype="float64")
    with pytest.raises(ValidationError, match="dim == 30 is not divisible by heads == 4"):
        ViT(image_size=8, patch_size=4, dim=30, heads=4)
