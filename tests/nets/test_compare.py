"""Tests of the comparison driver: table shapes, probes of the first seed, and workers giving the same runs."""

import dataclasses
import warnings
from dataclasses import dataclass

import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.nets import Comparison, ComparisonConfig, Setup, ViT, compare_optimizers, summary_table
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
        code=None if checkpoint_dir is None else "test-code",
    )


def test_comparison_tables_cover_every_optimizer_and_seed(tmp_path):
    result = _run(1, tmp_path)
    assert len(result.frame) == 2 * 2 * 2  # optimizers x seeds x (epoch 0, epoch 1)
    assert set(result.entries["optimizer"]) == {"init", "sgd", MD}
    assert len(result.entries) == 3 * 3 * 8 * 8  # (init + 2 optimizers) x (k, q, v) x dim x dim
    assert set(result.attention["sample"]) == {0, 1}
    names = [p.name for p in tmp_path.iterdir()]  # one worker: one stack, runs-<hash of its config and trials>.pt
    assert len(names) == 1 and names[0].startswith("runs-")
    again = _run(1, tmp_path)  # the checkpoint is finished: nothing retrains, the tables come back
    columns = [c for c in result.frame.columns if c != "seconds"]
    pd.testing.assert_frame_equal(result.frame[columns], again.frame[columns])
    assert len(list(tmp_path.iterdir())) == 1


def test_a_changed_config_does_not_resume_another_configs_checkpoints(tmp_path):
    first = _run(1, tmp_path)
    other = _run(1, tmp_path, config=dataclasses.replace(CONFIG, dim=12))
    assert len(list(tmp_path.iterdir())) == 2  # a new stack, a new checkpoint
    fresh = _run(1, None, config=dataclasses.replace(CONFIG, dim=12))
    columns = [c for c in first.frame.columns if c != "seconds"]
    pd.testing.assert_frame_equal(other.frame[columns], fresh.frame[columns])


@dataclass(frozen=True)
class TinyComparison(ComparisonConfig):
    dim: int = 8


def test_a_configs_compare_trains_its_own_optimizers_rates_and_seeds(tmp_path):
    config = TinyComparison(
        optimizers=("sgd", MD), lrs=(0.3, 0.05), tune_epochs=0, seeds=2, epochs=1, batch_size=256, workers=1
    )
    result = config.compare(build_digits_vit, checkpoint_dir=tmp_path, code="test-code")
    want = _run(1)  # the same trials through compare_optimizers, named one by one
    columns = [c for c in want.frame.columns if c != "seconds"]
    pd.testing.assert_frame_equal(result.frame[columns], want.frame[columns])
    assert sorted(set(result.frame["seed"])) == [0, 1] and len(list(tmp_path.iterdir())) == 1
    assert result.tuning.empty  # the rates were given


def test_a_tuned_comparison_trains_every_optimizer_at_the_rate_it_won(tmp_path):
    config = TinyComparison(
        optimizers=("sgd", MD),
        lrs=(1.0, 1.0),  # not used: the rates are tuned
        lr_grids=((1e-4, 0.3), (1e-4, 0.05)),
        tied_lrs=(),
        tune_epochs=1,
        seeds=2,
        epochs=1,
        batch_size=256,
    )
    result = config.compare(build_digits_vit, checkpoint_dir=tmp_path, code="test-code")
    chosen = result.tuning[result.tuning["chosen"]].set_index("optimizer")["lr"]
    assert set(result.tuning["optimizer"]) == {"sgd", MD} and len(result.tuning) == 4
    for name, lr in chosen.items():
        assert set(result.frame[result.frame["optimizer"] == name]["lr"]) == {lr}
    want = _run(1)  # what compare_optimizers trains at those rates
    columns = [c for c in want.frame.columns if c != "seconds"]
    assert tuple(chosen[["sgd", MD]]) == (0.3, 0.05)
    pd.testing.assert_frame_equal(result.frame[columns], want.frame[columns])
    assert list(result.sparsity.columns[:2]) == ["optimizer", "seed"] and len(result.sparsity) == 4


@dataclass(frozen=True)
class BudgetComparison(TinyComparison):
    def optimizer_epochs(self) -> dict[str, int]:
        return {MD: 2}


def test_an_optimizer_with_its_own_budget_tunes_and_trains_that_long_and_the_rest_as_before(tmp_path):
    fields = {"optimizers": ("sgd", MD), "lrs": (1.0, 1.0), "tied_lrs": (), "seeds": 2, "epochs": 1}
    fields |= {"lr_grids": ((1e-4, 0.3), (1e-4, 0.05)), "tune_epochs": 1, "batch_size": 256}
    result = BudgetComparison(**fields).compare(build_digits_vit, checkpoint_dir=tmp_path, code="test-code")
    last = result.frame.groupby("optimizer")["epoch"].max()
    assert last["sgd"] == 1 and last[MD] == 2
    assert len(list(tmp_path.iterdir())) == 4  # tuning and comparison: one stack per budget each
    # the references: each optimizer alone through compare_optimizers at its rate and budget
    sgd = compare_optimizers(
        build_digits_vit, BudgetComparison(**fields), ("sgd",), (0.3,), (0, 1), epochs=1, batch_size=256
    )
    md = compare_optimizers(
        build_digits_vit, BudgetComparison(**fields), (MD,), (0.05,), (0, 1), epochs=2, batch_size=256
    )
    columns = [c for c in sgd.frame.columns if c != "seconds"]
    for name, want in (("sgd", sgd), (MD, md)):
        got = result.frame[result.frame["optimizer"] == name].reset_index(drop=True)
        pd.testing.assert_frame_equal(got[columns], want.frame[columns])
    tuned = result.tuning.set_index(["optimizer", "lr"])
    assert tuned.loc[("sgd", 0.3), "chosen"] and tuned.loc[(MD, 0.05), "chosen"]


def test_train_trials_refuses_a_budget_below_one():
    with pytest.raises(ValidationError, match="epochs_of"):
        compare_optimizers(build_digits_vit, CONFIG, (MD,), (0.05,), (0,), epochs=1, batch_size=8, epochs_of={MD: 0})


@pytest.mark.slow
def test_two_worker_processes_give_the_same_runs_as_one():
    one, two = _run(1), _run(2)
    columns = [c for c in one.frame.columns if c != "seconds"]
    pd.testing.assert_frame_equal(one.frame[columns], two.frame[columns], check_exact=True)
    pd.testing.assert_frame_equal(one.entries, two.entries, check_exact=True)


def test_compare_needs_one_lr_per_optimizer():
    with pytest.raises(ValidationError, match="give one learning rate per optimizer"):
        compare_optimizers(build_digits_vit, CONFIG, ("sgd",), (), (0,), epochs=1, batch_size=8)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"lrs": (0.3,)}, "give one lr per optimizer"),
        ({"optimizers": (), "lrs": ()}, "give one lr per optimizer"),
        ({"lrs": (0.3, 0.2, 1.0, 1e-3, 0.05, 0.3, 0.0)}, "lrs"),
        ({"sngd_cap": 0.0}, "sngd_cap"),
        ({"sps_c": -1.0}, "sps_c"),
        ({"seeds": 0}, "seeds"),
        ({"epochs": 0}, "epochs"),
        ({"batch_size": 0}, "batch_size"),
        ({"workers": 0}, "workers"),
        ({"probes": 0}, "probes"),
        ({"seed": -1}, "seed"),
        ({"tune_epochs": -1}, "tune_epochs"),
        ({"tune_seeds": 0}, "tune_seeds"),
        ({"validation_fraction": 1.0}, "validation_fraction"),
        ({"lr_grids": ((0.1,),), "tune_epochs": 1}, "give one grid per optimizer"),
    ],
)
def test_comparison_config_names_the_field_it_rejects(change, message):
    ComparisonConfig()  # the defaults are valid
    with pytest.raises(ValidationError, match=message):
        ComparisonConfig(**change)


def test_comparison_config_rejects_an_unknown_optimizer():
    with pytest.raises(ValidationError):
        ComparisonConfig(optimizers=("sgd", "nope"), lrs=(0.1, 0.1))


def test_the_grammars_spelling_trains_without_a_deprecation_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        result = compare_optimizers(build_digits_vit, CONFIG, (MD,), (0.05,), (0,), epochs=1, batch_size=256)
    assert set(result.frame["optimizer"]) == {MD}


def hand_made_comparison():
    """Four optimizers, two seeds, epochs 0 and 1, two layers: numbers whose summary is known by hand."""
    rows, norms = [], []
    for name, lr, losses, accs, grow in (
        ("sgd", 0.1, (1.0, 0.2), (0.5, 0.9), 2.0),
        ("sngd", 0.2, (1.0, 0.4), (0.5, 0.7), 1.5),
        ("md:2,normalized=false", 0.1, (1.0, 0.2), (0.5, 0.9), 2.0),
        ("md:1.1,normalized=false", 0.05, (1.0, 0.3), (0.5, 0.8), 1.0),
    ):
        for seed in (0, 1):
            for epoch in (0, 1):
                rows.append(
                    {
                        "optimizer": name,
                        "lr": lr,
                        "seed": seed,
                        "epoch": epoch,
                        "train_loss": losses[epoch],
                        "test_accuracy": accs[epoch] + 0.02 * seed,
                        "diverged": False,
                        "seconds": 1.0 * epoch,
                    }
                )
                for layer in ("a", "b"):  # two layers of norm 3 and 4: total 5 at epoch 0
                    base = 3.0 if layer == "a" else 4.0
                    norms.append(
                        {
                            "optimizer": name,
                            "seed": seed,
                            "epoch": epoch,
                            "layer": layer,
                            "norm": base * (grow if epoch else 1.0),
                        }
                    )
    entries = pd.DataFrame(
        {
            "optimizer": ["md:1.1,normalized=false"] * 4 + ["md:2,normalized=false"] * 4,
            "layer": 0,
            "projection": "key",
            "value": [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0],
        }
    )
    return Comparison(pd.DataFrame(rows), pd.DataFrame(norms), entries, pd.DataFrame())


def test_summary_table_averages_the_last_epoch_over_seeds():
    summary = summary_table(hand_made_comparison()).set_index("optimizer")
    assert summary.loc["sgd", "test_accuracy_mean"] == pytest.approx(0.91)  # (0.90 + 0.92) / 2
    assert summary.loc["sgd", "test_accuracy_std"] == pytest.approx(0.01)
    assert summary.loc["sngd", "train_loss_mean"] == pytest.approx(0.4)
    assert summary.loc["sngd", "train_loss_area"] == pytest.approx(0.4)  # epochs >= 1 only
    assert summary.loc["sngd", "norm_growth"] == pytest.approx(1.5)  # both layers x1.5: total 7.5 / 5
    assert (
        summary.loc["md:1.1,normalized=false", "qkv_hoyer"] == pytest.approx(1.0)
        and summary.loc["md:2,normalized=false", "qkv_hoyer"] == 0.0
    )


def test_summary_table_needs_a_comparison():
    with pytest.raises(ValidationError, match="pass what compare_optimizers returns"):
        summary_table(pd.DataFrame())
