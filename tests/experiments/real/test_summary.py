"""Tests of the per-optimizer summary and the paper checks on a hand-made comparison."""

import pandas as pd
import pytest

from attnlab.experiments.real.summary import paper_checks
from attnlab.nets import Comparison, summary_table


def _comparison():
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
    summary = summary_table(_comparison()).set_index("optimizer")
    assert summary.loc["sgd", "test_accuracy_mean"] == pytest.approx(0.91)  # (0.90 + 0.92) / 2
    assert summary.loc["sgd", "test_accuracy_std"] == pytest.approx(0.01)
    assert summary.loc["sngd", "train_loss_mean"] == pytest.approx(0.4)
    assert summary.loc["sngd", "train_loss_area"] == pytest.approx(0.4)  # epochs >= 1 only
    assert summary.loc["sngd", "norm_growth"] == pytest.approx(1.5)  # both layers x1.5: total 7.5 / 5
    assert (
        summary.loc["md:1.1,normalized=false", "qkv_hoyer"] == pytest.approx(1.0)
        and summary.loc["md:2,normalized=false", "qkv_hoyer"] == 0.0
    )


def test_paper_checks_state_each_claim_with_its_outcome():
    comparison = _comparison()
    checks = {
        c.claim: c
        for c in paper_checks(comparison, summary_table(comparison), chance=0.75, language=False, test_size=10000)
    }
    rule = "learns: mean final test accuracy exceeds the majority-class rate by 3 binomial standard errors"
    learns = checks[f"sgd {rule}"]
    assert learns.passed and learns.kind == "property"  # sgd 0.91 > 0.75 + 3 * 0.0043
    assert learns.predicted == ">= 0.76299"  # 0.75 + 3 sqrt(0.75 * 0.25 / 10000)
    sngd = checks[f"sngd {rule}"]
    assert not sngd.passed and sngd.kind == "property"  # 0.71: an optimizer that does not learn fails the run
    finite = checks["no run diverges: every mini-batch loss is finite (runs that diverged)"]
    assert finite.passed and finite.kind == "property" and finite.tolerance == "0 of 8"  # 4 optimizers x 2 seeds
    same = checks["l_2 mirror descent is SGD: same training loss at the same lr (max relative gap)"]
    assert same.passed and same.kind == "property"
    sparse = checks[
        "paper: l_1.1-MD gives sparser key/query/value weights than l_2-MD (MD paper E4 histograms; "
        "Hoyer sparsity, nan at init)"
    ]
    assert sparse.passed and sparse.kind == "observation" and sparse.measured == 1.0  # one entry of four vs four equal
    slower = checks[
        "paper: SNGD trains slower than SGD on a ViT (NGD paper fig. 6, 7; area under the training-loss "
        "curve, SNGD / SGD)"
    ]
    assert slower.passed and slower.measured == pytest.approx(2.0)  # epoch-1 losses 0.4 and 0.2
    growth = checks[
        "paper: every layer's parameter norm grows under SGD (NGD paper fig. 7, CIFAR-10 ViT; min over "
        "layers of last / initial norm)"
    ]
    assert growth.measured == 2.0 and growth.kind == "observation"
    assert {c.kind for c in checks.values() if c.claim.startswith("paper:")} == {"observation"}
    assert {c.kind for c in checks.values() if not c.claim.startswith("paper:")} == {"property"}
    language = paper_checks(comparison, summary_table(comparison), chance=0.75, language=True, test_size=10000)
    faster = next(c for c in language if c.claim.startswith("paper: SNGD trains faster than SGD on text"))
    assert not faster.passed and faster.kind == "observation" and faster.predicted == "< 1"
    generalises = next(c for c in language if c.claim.startswith("paper: l_1.1-MD generalises"))
    assert not generalises.passed and generalises.measured == pytest.approx(0.81)  # 0.81 < 0.91 of l_2-MD


def test_a_diverged_run_fails_the_finite_loss_check():
    comparison = _comparison()
    comparison.frame.loc[comparison.frame.index[-1], "diverged"] = True  # l_1.1-MD, seed 1, last epoch
    checks = paper_checks(comparison, summary_table(comparison), chance=0.5, language=True, test_size=10000)
    finite = next(c for c in checks if c.claim.startswith("no run diverges"))
    assert not finite.passed and finite.measured == 1
