"""Tests of the comparison driver: table shapes, probes of the first seed, and workers giving the same runs."""

import dataclasses
import warnings
from dataclasses import dataclass

import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.nets import Setup, ViT, compare_optimizers
from attnlab.nets.datasets import load_digits_split


@dataclass(frozen=True)
class TinyViT:
    dim: int = 8


def build_digits_vit(config: TinyViT, seed: int) -> Setup:
    """A one-layer ViT on the digits (module level: the worker processes import it)."""
    data = load_digits_split(seed=0)
    model = ViT(patch_size=2, dim=config.dim, depth=1, heads=2, mlp_dim=8, seed=seed)
    return Setup(model, data, probe_inputs=data.x_test[:2])


CONFIG = TinyViT()
MD = "md:1.1,normalized=false"


def _run(workers, checkpoint_dir=None, config=CONFIG):
    return compare_optimizers(
        build_digits_vit,
        config,
        ("sgd", MD),
        (0.3, 0.05),
        (0, 1),
        epochs=1,
        batch_size=256,
        workers=workers,
        checkpoint_dir=checkpoint_dir,
    )


def test_comparison_tables_cover_every_optimizer_and_seed(tmp_path):
    result = _run(1, tmp_path)
    assert len(result.frame) == 2 * 2 * 2  # optimizers x seeds x (epoch 0, epoch 1)
    assert set(result.entries["optimizer"]) == {"init", "sgd", MD}
    assert len(result.entries) == 3 * 3 * 8 * 8  # (init + 2 optimizers) x (k, q, v) x dim x dim
    assert set(result.attention["sample"]) == {0, 1}
    names = sorted(p.name.rsplit("-", 1)[0] for p in tmp_path.iterdir())  # <optimizer>-seed<seed>-<config hash>.pt
    assert names == ["md_1.1_normalized_false-seed0", "md_1.1_normalized_false-seed1", "sgd-seed0", "sgd-seed1"]
    again = _run(1, tmp_path)  # every checkpoint is finished: nothing retrains, the tables come back
    columns = [c for c in result.frame.columns if c != "seconds"]
    pd.testing.assert_frame_equal(result.frame[columns], again.frame[columns])
    assert len(list(tmp_path.iterdir())) == 4


def test_a_changed_config_does_not_resume_another_configs_checkpoints(tmp_path):
    first = _run(1, tmp_path)
    other = _run(1, tmp_path, config=dataclasses.replace(CONFIG, dim=12))
    assert len(list(tmp_path.iterdir())) == 8  # new trials, new checkpoints
    fresh = _run(1, None, config=dataclasses.replace(CONFIG, dim=12))
    columns = [c for c in first.frame.columns if c != "seconds"]
    pd.testing.assert_frame_equal(other.frame[columns], fresh.frame[columns])


@pytest.mark.slow
def test_two_worker_processes_give_the_same_runs_as_one():
    one, two = _run(1), _run(2)
    columns = [c for c in one.frame.columns if c != "seconds"]
    pd.testing.assert_frame_equal(one.frame[columns], two.frame[columns], check_exact=True)
    pd.testing.assert_frame_equal(one.entries, two.entries, check_exact=True)


def test_compare_needs_one_lr_per_optimizer():
    with pytest.raises(ValidationError, match="give one learning rate per optimizer"):
        compare_optimizers(build_digits_vit, CONFIG, ("sgd",), (), (0,), epochs=1, batch_size=8)


def test_the_grammars_spelling_trains_without_a_deprecation_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        result = compare_optimizers(build_digits_vit, CONFIG, (MD,), (0.05,), (0,), epochs=1, batch_size=256)
    assert set(result.frame["optimizer"]) == {MD}
