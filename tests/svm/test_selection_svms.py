"""SelectionSVMs: each data set's SVM for its own selection, against one attention_svm per data set."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import unit_gaussian
from attnlab.svm import SelectionSVMs, attention_svm, is_locally_optimal


@pytest.fixture(scope="module")
def datasets():
    return [unit_gaussian(3, 4, 4, seed=s) for s in range(3)]


def _optimal(datasets):
    return torch.stack([d.optimal_tokens() for d in datasets])


@pytest.mark.parametrize("norm", [2.0, 1.5, "nuc"])
def test_directions_match_one_program_per_data_set(datasets, norm):
    select = _optimal(datasets)
    got = SelectionSVMs(datasets).directions(select, norm)
    for r, data in enumerate(datasets):
        want = attention_svm(data, norm, select=select[r]).W
        assert torch.allclose(got[r], want, atol=1e-5 * float(want.norm())), r  # the solvers' accuracy (cf. 2 vs "fro")


def test_norm_two_is_the_exact_frobenius_program(datasets):
    select = _optimal(datasets)
    svms = SelectionSVMs(datasets)
    assert torch.equal(svms.directions(select, 2.0), svms.directions(select, "fro"))


def test_each_program_is_solved_once(datasets, monkeypatch):
    import attnlab.svm.selection_svms as module

    calls = []
    real = module.solve_attention_svm
    monkeypatch.setattr(module, "solve_attention_svm", lambda *a, **k: calls.append(a) or real(*a, **k))
    svms, select = SelectionSVMs(datasets), _optimal(datasets)
    first = svms.directions(select, 1.5)
    assert torch.equal(svms.directions(select, 1.5), first)
    assert len(calls) == len(datasets)
    other = select.clone()
    other[0, 0] = (other[0, 0] + 1) % 4  # a new selection of data set 0 only: one more program
    try:
        svms.directions(other, 1.5)
    except Exception:  # that selection may be infeasible; the count is what is tested
        pass
    assert len(calls) == len(datasets) + 1


@pytest.fixture
def compilations(monkeypatch):
    """How many times cvxpy canonicalises a problem (its solving chain's ``apply``; a re-solve of a problem whose
    Parameters changed skips it: cvxpy's DPP fast path)."""
    from cvxpy.reductions.solvers.solving_chain import SolvingChain

    count = []
    real = SolvingChain.apply
    monkeypatch.setattr(SolvingChain, "apply", lambda self, *a, **k: count.append(1) or real(self, *a, **k))
    return count


@pytest.mark.parametrize("norm", [1.5, float("inf"), "fro"])
def test_programs_of_one_shape_are_compiled_once_and_agree_with_a_fresh_solve(norm, compilations):
    datasets = [unit_gaussian(3, 4, 4, seed=s) for s in range(6)]
    select = _optimal(datasets)
    got = SelectionSVMs(datasets).directions(select, norm)
    # six programs, one shape (the reduced "fro" programs live on the spans of the differences and the queries:
    # ranks 4 and 3 for every data set here), one canonicalisation
    assert len(compilations) == 1, len(compilations)
    for r, data in enumerate(datasets):
        fresh = attention_svm(data, norm, select=select[r]).W  # a new cvxpy problem of constants
        # Clarabel at gap 1e-10: two canonical forms of one program agree to ~1e-8 relative (power cones ~1e-6)
        assert torch.allclose(got[r], fresh, rtol=0, atol=1e-6 * float(fresh.norm())), r
    assert len(compilations) == 1 + len(datasets)  # each fresh problem is canonicalised on its own


def test_locally_optimal_matches_the_per_data_set_test_and_keeps_its_svm(datasets):
    select = _optimal(datasets)
    svms = SelectionSVMs(datasets)
    holds = svms.locally_optimal(select, 2.0)
    assert holds.dtype == torch.bool and holds.shape == (3,)
    for r, data in enumerate(datasets):
        assert bool(holds[r]) == is_locally_optimal(data, select=select[r], p="fro").holds
    assert len(svms._solved) == 3
    svms.directions(select, 2.0)
    assert len(svms._solved) == 3  # the SVMs of the test were reused


@pytest.mark.parametrize(
    ("select", "message"),
    [
        (torch.zeros(3, dtype=torch.int64), r"shape \(R, n\)"),
        (torch.zeros(2, 3, dtype=torch.int64), "shape"),
        (torch.full((3, 3), 4), r"outside \[0, 3\]"),
        (torch.zeros(3, 3), "integer"),
    ],
)
def test_bad_selections_name_the_argument(datasets, select, message):
    with pytest.raises(ValidationError, match=message):
        SelectionSVMs(datasets).directions(select)


def test_bad_datasets_are_refused(datasets):
    with pytest.raises(ValidationError, match="non-empty list"):
        SelectionSVMs([])
    with pytest.raises(ValidationError, match="non-empty list"):
        SelectionSVMs(datasets[0])
    with pytest.raises(ValidationError, match="same"):
        SelectionSVMs([datasets[0], unit_gaussian(4, 4, 4, seed=0)])
    with pytest.raises(ValidationError, match="TokenSelectionData"):
        SelectionSVMs([(1, 2, 3, 4)])
