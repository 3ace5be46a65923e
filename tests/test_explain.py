"""The explorer names the SVM each parametrisation and optimizer is known to converge to, on small data sets."""

import math

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import TokenSelectionData, example1, scores_equal
from attnlab.explain import explain, parse_opt
from attnlab.metrics import cosine, directional_bregman
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
    data = scores_equal(n=2, L=3, d=8, seed=0)
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


@pytest.mark.parametrize("text", ["adam", "md", "md:1", "md:x", "md:inf", "ngd:2"])
def test_bad_opt_strings_are_refused_with_the_accepted_forms(text):
    with pytest.raises(ValidationError, match=r'opt must be "gd", "ngd", "polyak" or "md:<p>"'):
        parse_opt(text)


def test_parse_opt_reads_the_exponent():
    assert parse_opt("md:1.5") == ("md", 1.5)
    assert parse_opt("polyak") == ("polyak", None)
    assert math.isclose(parse_opt("md:2")[1], 2.0)


def test_bad_param_and_sizes_name_the_argument(example):
    with pytest.raises(ValidationError, match="param"):
        explain(example, "K", "ngd")
    with pytest.raises(ValidationError, match="steps"):
        explain(example, "W", "ngd", steps=0)
    with pytest.raises(ValidationError, match="lr"):
        explain(example, "W", "ngd", lr=-1.0)


def test_infeasible_candidates_are_skipped_with_the_reason():
    # d = 2 < n (T - 1) = 6: no diagonal W separates the tokens, a full W does (seed chosen so)
    g = torch.Generator().manual_seed(2)
    X, v = torch.randn(3, 3, 2, generator=g, dtype=torch.float64), torch.randn(2, generator=g, dtype=torch.float64)
    data = TokenSelectionData(X, y=[1, -1, 1], v=v)
    result = explain(data, "W", "ngd", steps=50, lr=0.3, max_selections=4)
    assert "l1-diag" not in set(result.table["candidate"])
    assert any(reason.startswith("l1-diag: infeasible") for reason in result.skipped)
    assert result.closest in set(result.table["candidate"])


def test_a_diverged_run_names_no_svm(example):
    # gd with lr = 1.7e308 overflows W at its first step: the loss is no longer finite and nothing may be named
    with pytest.raises(ValidationError, match="diverged.*no SVM is named"):
        explain(example, "W", "gd", steps=5, lr=1.7e308)


def test_a_head_that_ties_every_token_is_refused(example):
    tied = TokenSelectionData(example.X, example.Z, example.y, torch.zeros_like(example.v))
    with pytest.raises(ValidationError, match="every token ties"):
        explain(tied, "W", "ngd", steps=5)


def test_training_is_one_run_recording_every_candidate(example, monkeypatch):
    import attnlab.explain as module

    calls = []
    real = module.batched_train

    def spy(X, *args, **kwargs):
        calls.append(kwargs.get("refs"))
        return real(X, *args, **kwargs)

    monkeypatch.setattr(module, "batched_train", spy)
    result = explain(example, "W", "ngd", steps=20, lr=0.3)
    assert len(calls) == 1 and set(calls[0]) == set(result.table["candidate"])
    assert result.W.shape == (example.d, example.d)
