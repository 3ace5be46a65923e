"""Tests of the per-optimizer summary and the paper checks on a hand-made comparison."""

import pytest

from attnlab.experiments.real.summary import paper_checks
from attnlab.nets import summary_table
from tests.nets.test_compare import hand_made_comparison


def test_paper_checks_state_each_claim_with_its_outcome():
    comparison = hand_made_comparison()
    checks = {
        c.claim: c
        for c in paper_checks(comparison, summary_table(comparison), chance=0.75, language=False, test_size=10000)
    }
    rule = "learns: mean final test accuracy exceeds the majority-class rate by 3 binomial standard errors"
    learns = checks[f"sgd (lr 0.1) {rule}"]  # each row names the rate its optimizer trained at
    assert learns.passed and learns.kind == "property"  # sgd 0.91 > 0.75 + 3 * 0.0043
    assert learns.predicted == ">= 0.76299"  # 0.75 + 3 sqrt(0.75 * 0.25 / 10000)
    sngd = checks[f"sngd (lr 0.2) {rule}"]
    assert not sngd.passed and sngd.kind == "property"  # 0.71: an optimizer that does not learn fails the run
    every = "learns on every seed: the lowest final test accuracy over seeds exceeds the majority-class rate by 3"
    assert checks[f"sgd (lr 0.1) {every} binomial standard errors"].measured == pytest.approx(0.9)  # seeds 0.9, 0.92
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
    comparison = hand_made_comparison()
    comparison.frame.loc[comparison.frame.index[-1], "diverged"] = True  # l_1.1-MD, seed 1, last epoch
    checks = paper_checks(comparison, summary_table(comparison), chance=0.5, language=True, test_size=10000)
    finite = next(c for c in checks if c.claim.startswith("no run diverges"))
    assert not finite.passed and finite.measured == 1


def test_a_seed_left_at_chance_fails_its_optimizer_even_when_the_mean_passes():
    comparison = hand_made_comparison()
    frame = comparison.frame
    stuck = (frame["optimizer"] == "sgd") & (frame["seed"] == 1) & (frame["epoch"] == 1)
    frame.loc[stuck, "test_accuracy"] = 0.75  # at the majority rate: a setup defect, never an observation
    checks = paper_checks(comparison, summary_table(comparison), chance=0.75, language=True, test_size=10000)
    learns = next(c for c in checks if c.claim.startswith("sgd (lr 0.1) learns: mean"))
    every = next(c for c in checks if c.claim.startswith("sgd (lr 0.1) learns on every seed"))
    assert learns.passed and learns.measured == pytest.approx(0.825)  # the mean over seeds hides the stuck seed
    assert not every.passed and every.measured == pytest.approx(0.75) and every.kind == "property"
