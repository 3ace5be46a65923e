"""The explorer names the SVM each parametrisation and optimizer is known to converge to, on small data sets."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import TokenSelectionData, example1, scores_equal
from attnlab.explain import explain
from attnlab.metrics import cosine, directional_bregman
from attnlab.models import ReluHead
from attnlab.svm import attention_svm


@pytest.fixture(scope="module")
def example():
    return example1(n=3, T=3, d=8, seed=0)


def test_combined_W_with_ngd_names_the_frobenius_svm(example):
    # spec implicit-bias-ngd §8.3: NGD on W converges in direction to the W-SVM of the optimal tokens
    result = explain(example, "W", "ngd", steps=300, lr=0.3)
    assert result.closest == "fro"
    table = result.table.set_index("candidate")
    assert table.at["fro", "one_minus_cos"] < 1e-3  # 300 NGD steps of length 0.3 reach 1 - corr ~ 7e-5
    assert table["closest"].sum() == 1 and table.at["fro", "closest"]
    assert {"fro", "nuc", "l1-diag", "l2-diag"} <= set(table.index)


def test_diagonal_parametrisation_names_l1_diag_over_l2_diag():
    # spec kq-nuclear-norm §7.2: diagonal K, Q from a small init -> l1-SVM, not the l2 one of training beta directly
    data = scores_equal(n=2, T=3, d=8, seed=0)
    result = explain(data, "diag", "ngd", steps=800, lr=0.3)
    table = result.table.set_index("candidate")
    assert result.closest == "l1-diag"
    assert table.at["l1-diag", "one_minus_cos"] < 0.1 * table.at["l2-diag", "one_minus_cos"]  # 2e-4 vs 0.3


def test_md_reports_the_directional_bregman_divergence_of_every_candidate(example):
    result = explain(example, "W", "md:3", steps=300, lr=0.3)
    assert result.closest == "l3"  # spec mirror-descent-lp §8.2: l_p-AttGD -> l_p-AttSVM
    table = result.table.set_index("candidate")
    assert not table["bregman"].isna().any()
    for candidate in ("l3", "fro"):  # the table's numbers are the metrics of the returned final W (second method)
        W_c = attention_svm(example, 3.0 if candidate == "l3" else "fro").W
        expected = float(directional_bregman(W_c, result.W, 3.0))
        assert table.at[candidate, "bregman"] == pytest.approx(expected, rel=1e-6)  # solver round-off only
        assert table.at[candidate, "one_minus_cos"] == pytest.approx(1 - float(cosine(result.W, W_c)), abs=1e-9)


def test_trajectory_has_one_row_per_step_and_candidate(example):
    result = explain(example, "KQ", "gd", steps=20, lr=0.5, record_every=5)
    steps = sorted(set(result.trajectory["step"]))
    assert steps == [0, 5, 10, 15, 20]
    assert len(result.trajectory) == len(steps) * len(result.table)


def test_data_without_a_head_is_refused():
    data = example1(n=3, T=3, d=8, seed=0)
    with pytest.raises(ValidationError, match="no head"):
        explain(TokenSelectionData(data.X, data.Z, data.y), "W", "ngd", steps=5)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lbfgs", r"optimizer 'lbfgs': unknown name 'lbfgs'; the form is name\[:options\]"),
        ("ngd,lr=0.5", r"optimizer 'ngd,lr=0.5': the options follow a colon, not a comma; write 'ngd:lr=0.5'"),
        ("md:1", r"optimizer 'md:1': p == 1, must be > 1.0"),
        ("md:x", r"optimizer 'md:x': p must be a Real, got 'x'"),
        ("md:inf", r"optimizer 'md:inf': p == inf has no l_p mirror map; pass a finite p > 1, or 'sd:inf'"),
        ("ngd:2", r"optimizer 'ngd:2': '2' is not key=value; only md and sd take a positional argument"),
        ("lbfgs", r"optimizer 'lbfgs': unknown name 'lbfgs'; the form is"),
    ],
)
def test_bad_opt_strings_are_refused_naming_the_bad_part(example, text, message):
    with pytest.raises(ValidationError, match=message):
        explain(example, "W", text, steps=5)


def test_lr_as_polyaks_cap_is_refused_naming_max_step(example):
    with pytest.raises(ValidationError, match="takes no lr.*max_step"):
        explain(example, "W", "polyak", steps=20, lr=0.3, record_every=5)


def test_bad_param_and_sizes_name_the_argument(example):
    with pytest.raises(ValidationError, match="param"):
        explain(example, "K", "ngd")
    with pytest.raises(ValidationError, match="steps"):
        explain(example, "W", "ngd", steps=0)
    with pytest.raises(ValidationError, match="lr"):
        explain(example, "W", "ngd", lr=-1.0)
    with pytest.raises(ValidationError, match=r"^max_selections == 0, must be >= 1"):  # not max_candidates
        explain(example, "W", "ngd", steps=5, max_selections=0)


def test_infeasible_candidates_are_skipped_with_the_reason():
    # d = 2 < n (T - 1) = 6: no diagonal W separates the tokens, a full W does (seed chosen so)
    g = torch.Generator().manual_seed(2)
    X, v = torch.randn(3, 3, 2, generator=g, dtype=torch.float64), torch.randn(2, generator=g, dtype=torch.float64)
    data = TokenSelectionData(X, y=[1, -1, 1], v=v)
    result = explain(data, "W", "ngd", steps=50, lr=0.3, max_selections=4)
    assert "l1-diag" not in set(result.table["candidate"])
    assert any(reason.startswith("l1-diag: infeasible") for reason in result.skipped)
    assert result.nearest in set(result.table["candidate"])


def test_a_diverged_run_names_no_svm(example):
    # gd with lr = 1.7e308 overflows W at its first step: the loss is no longer finite and nothing may be named
    with pytest.raises(ValidationError, match="diverged.*no SVM is named"):
        explain(example, "W", "gd", steps=5, lr=1.7e308)


def test_a_head_that_ties_every_token_is_refused(example):
    tied = TokenSelectionData(example.X, example.Z, example.y, torch.zeros_like(example.v))
    with pytest.raises(ValidationError, match="every token ties"):
        explain(tied, "W", "ngd", steps=5)


def test_training_is_one_run_and_every_candidate_is_measured_on_its_iterates(example, monkeypatch):
    import attnlab.explain as module

    calls = []
    real = module.batched_train

    def spy(X, *args, **kwargs):
        run = real(X, *args, **kwargs)
        calls.append(run)
        return run

    monkeypatch.setattr(module, "batched_train", spy)
    result = explain(example, "W", "ngd", steps=20, lr=0.3, record_every=5)
    assert len(calls) == 1 and result.W.shape == (example.d, example.d)
    W = calls[0].iterates["W"][:, 0]
    for candidate, rows in result.trajectory.groupby("candidate"):  # the plain cosine of each kept iterate
        W_c = result_svm(example, result, candidate)
        expected = [1 - float(cosine(w, W_c)) for w in W]
        assert rows["one_minus_cos"].to_numpy() == pytest.approx(expected, abs=1e-12)


def result_svm(data, result, candidate):
    row = result.table.set_index("candidate").loc[candidate]
    select = [int(t) for t in row["select"].split(",")]
    norm = {"fro": "fro", "nuc": "nuc", "l1-diag": "l1-diag"}.get(candidate)
    if candidate == "l2-diag":
        from attnlab.svm import diagonal_svm

        return diagonal_svm(data, 2.0, select=select).W
    return attention_svm(data, norm or "fro", select=select).W


def test_fifty_steps_are_not_converged_in_direction_and_name_no_candidate(example):
    result = explain(example, "W", "ngd", steps=50, lr=0.1)
    assert not result.converged and result.closest is None and not result.table["closest"].any()
    assert result.verdict.startswith("not converged in direction: the nearest candidate fro is at 1 - cos")
    gap = 1 - float(cosine(result.W, attention_svm(example, "fro").W))
    assert gap > 1e-2 and result.table.set_index("candidate").at["fro", "one_minus_cos"] == pytest.approx(gap)


def test_a_huge_step_that_saturates_the_softmax_at_once_is_not_converged(example):
    # gd with lr = 1e300 saturates the softmax in one step, after which its steps vanish: the direction is the first
    # gradient's, far from every SVM
    result = explain(example, "W", "gd", steps=50, lr=1e300)
    assert not result.converged and result.closest is None
    assert "not converged in direction" in result.verdict


def test_the_attended_selection_is_a_candidate_beyond_the_search_budget():
    # T^n = 4^5 = 1024 selections > max_selections = 4: from this initialisation NGD converges to the SVM of a
    # selection outside the search budget (token 2 in sequence 0), which the model's own attention names
    from attnlab.data import unit_gaussian

    data = unit_gaussian(n=5, T=4, d=6, seed=3)
    result = explain(data, "W", "ngd", steps=300, lr=0.5, init_scale=2.0, seed=3, max_selections=4)
    assert result.converged and result.closest == "fro[2,0,0,0,0]"
    table = result.table.set_index("candidate")
    assert table.at["fro[2,0,0,0,0]", "attended"]
    W_c = attention_svm(data, "fro", select=[2, 0, 0, 0, 0]).W
    assert table.at["fro[2,0,0,0,0]", "one_minus_cos"] == pytest.approx(1 - float(cosine(result.W, W_c)), abs=1e-9)
    assert table.at["fro[2,0,0,0,0]", "one_minus_cos"] < 1e-2 < table.at["fro", "one_minus_cos"]


def test_sign_descent_is_explained_by_the_linf_svm():
    """opt="sign" adds the l_inf SVM (steepest descent in l_inf, an LP) to the candidates, and it is the one found."""
    result = explain(example1(n=4, T=3, d=16, seed=0), opt="sign:lr=0.01", steps=1500)
    assert "linf" in result.table["candidate"].tolist()
    assert result.closest == "linf"


@pytest.mark.parametrize(
    "opt,family",
    [
        ("sign:lr=0.01", {"linf", "l8", "l4"}),
        ("adam-noeps", {"linf", "l8", "l4"}),
        ("sd:3", {"l3"}),
        ("md:1.5", {"l1.5"}),
    ],
)
def test_an_optimizer_of_a_norm_family_adds_that_familys_svms(opt, family):
    """The registry entry's family: l_p for sd:<p> and md:<p>, l_inf and nearby l_p for sign descent and Adam."""
    result = explain(example1(n=4, T=3, d=8, seed=0), opt=opt, steps=20)
    candidates = set(result.table["candidate"])
    assert family <= candidates
    assert not {"linf", "l8", "l4", "l3", "l1.5"} - family & candidates  # no other family's


def test_token_sets_rank_the_direction_program_and_the_equivalence_direction_for_a_relu_head():
    # multi-token §1-3: a ReLU head (the TF-as-SVM setting, draw 32) keeps mass on tokens 0 and 3 of sequence 0
    from attnlab.data.multi_token import multi_token
    from attnlab.models import ReluHead
    from attnlab.models.functional import attention_probabilities

    draw = multi_token(3, 4, 4, seed=32)
    sets = [[0, 3], [3], [2]]
    result = explain(
        draw.data, "W", "ngd", steps=2000, lr=0.1, loss="logistic", head=ReluHead(draw.V, draw.v), select=sets
    )
    kept = attention_probabilities(draw.data.X, result.W, draw.data.Z) > 1e-3
    assert kept.tolist() == [[True, False, False, True], [False, False, False, True], [False, False, True, False]]
    table = result.table.set_index("candidate")
    assert {"sets-fro", "sets-nuc", "equivalence", "fro[0,3,2]"} <= set(table.index)
    assert table.at["sets-fro", "select"] == "{0,3};{3};{2}"
    assert result.nearest == "equivalence"
    one_token = table.at["fro[0,3,2]", "one_minus_cos"]  # the one-token SVM of the attended (arg-max) tokens
    assert table.at["equivalence", "one_minus_cos"] < table.at["sets-fro", "one_minus_cos"] < one_token / 2
    assert "locally optimal selections: training has no linear head v" in result.skipped


def test_a_nonlinear_head_without_a_one_token_selection_has_only_set_candidates():
    from attnlab.data.multi_token import multi_token
    from attnlab.models import ReluHead

    draw = multi_token(3, 4, 4, seed=32)
    data = draw.data.with_(v=None)
    result = explain(data, "W", "ngd", steps=50, lr=0.1, head=ReluHead(draw.V, draw.v), select=[[0, 3], [3], [2]])
    assert "fro" not in set(result.table["candidate"])
    with pytest.raises(ValidationError, match="no head v"):
        explain(data, "W", "ngd", steps=5, select=[[0, 3], [3], [2]])


def test_a_head_trained_from_zero_gives_the_candidates_of_the_trained_head():
    """train_head=True on data without v: v moves from 0, and the one-token SVMs are those of the trained head's
    optimal tokens (checked here from the returned v by the definition argmax_t y_i v^T x_it)."""
    full = example1(n=4, T=3, d=6, seed=0)
    data = TokenSelectionData(full.X, y=full.y)  # no head
    result = explain(data, train_head=True, steps=300)
    assert result.v is not None and float(result.v.abs().max()) > 0
    optimal = (data.y[:, None] * (data.X @ result.v)).argmax(dim=-1)
    fro = result.table.set_index("candidate").at["fro", "select"]
    assert fro == ",".join(map(str, optimal.tolist()))
    with pytest.raises(ValidationError, match="train_head=True trains a linear head"):
        explain(data, train_head=True, head=ReluHead(torch.eye(6), torch.ones(6)), select=[0, 0, 0, 0])
