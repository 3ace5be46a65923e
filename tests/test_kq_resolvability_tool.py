"""tools/findings/kq_l1_resolvability.py: the two numbers of an l1 program that say whether a finite K,Q run can
reach its solution (docs/findings.md), checked against the program's own structure."""

import pytest

from attnlab.data import scores_equal
from attnlab.svm import attention_svm
from attnlab.training.flow import constraint_vectors


@pytest.fixture
def tool(load_script):
    return load_script("tools/findings/kq_l1_resolvability.py")


def test_delta_is_the_rise_to_the_vertex_without_one_support_entry(tool):
    """Seed 8: the solution is (-0.508, 0, 0, 0, 0.233, 0, 0, 0); without entry 5 the best point uses entry 1 alone
    (every non-optimal row has the same sign there), at 1 / min |B_il,1| where the smallest entry binds, so delta is
    known in closed form; the zero entries' rate is the reading's."""
    kappa, delta = tool.program_gaps(8, 3.0)
    data = scores_equal(2, 3, 8, 3.0, seed=8)
    optimum = float(attention_svm(data, norm="l1-diag").beta.abs().sum())
    B = constraint_vectors(data.X, data.Z, data.select)
    alone = 1 / float(B[:, 1:, 0].abs().min())  # entry 1 alone must reach margin 1 in every non-optimal row
    assert delta == pytest.approx((alone - optimum) / optimum, rel=1e-4)
    assert delta < 0.01 and kappa == pytest.approx(0.1132, abs=1e-4)


def test_a_well_separated_program_is_resolvable(tool):
    kappa, delta = tool.program_gaps(0, 3.0)  # the default draw, whose rows pass
    assert kappa == pytest.approx(0.2139, abs=1e-4) and delta > 0.1
