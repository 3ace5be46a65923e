"""Projected l_p mirror descent against the closed-form minimiser of a linear function on the l_p ball."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.metrics import entrywise_norm
from attnlab.training.projected import projected_mirror_descent


@pytest.mark.parametrize("p", [1.5, 2.0, 3.0])
def test_a_linear_function_is_minimised_at_the_dual_pairing_point(p):
    """min <C, W> on ||W||_p <= R is -R sign(C) |C|^(q-1) / ||C||_q^(q-1) (Hoelder's equality case)."""
    q = p / (p - 1.0)
    C = torch.randn(4, 5, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    R = 2.5
    truth = -R * torch.sign(C) * C.abs() ** (q - 1) / entrywise_norm(C, q) ** (q - 1)
    W = projected_mirror_descent(lambda W: 7.0 * C, torch.zeros(4, 5), p=p, radius=R, steps=20000).W
    assert float(entrywise_norm(truth, p)) == pytest.approx(R, rel=1e-12)
    assert float(entrywise_norm(W, p)) <= R * (1 + 1e-12)
    assert float((C * W).sum()) == pytest.approx(float((C * truth).sum()), rel=1e-4)
    assert torch.allclose(W, truth, atol=0.05 * R)


def test_an_interior_minimiser_is_reached_without_touching_the_sphere():
    """min ||W - A||^2 / 2 with ||A||_2 < R: the projection never binds and the iterates approach A."""
    A = torch.tensor([[0.3, -0.2], [0.1, 0.4]], dtype=torch.float64)
    W = projected_mirror_descent(lambda W: W - A, torch.zeros(2, 2), p=2.0, radius=10.0, steps=4000).W
    assert torch.allclose(W, A, atol=0.2)
    assert float((W - A).norm()) < float(A.norm())


def test_arguments_are_checked_by_name():
    with pytest.raises(ValidationError, match="grad must be a callable"):
        projected_mirror_descent(None, torch.zeros(2, 2), p=2.0, radius=1.0, steps=1)
    with pytest.raises(ValidationError, match="radius"):
        projected_mirror_descent(lambda W: W, torch.zeros(2, 2), p=2.0, radius=-1.0, steps=1)
    with pytest.raises(ValidationError, match="steps"):
        projected_mirror_descent(lambda W: W, torch.zeros(2, 2), p=2.0, radius=1.0, steps=0)
    with pytest.raises(ValidationError, match=r"p == 1.0005, must be >= 1.001"):  # 1/(p-1) overflows the mirror map
        projected_mirror_descent(lambda W: W, torch.eye(2), p=1.0005, radius=1.0, steps=1)
    with pytest.raises(ValidationError, match="W0 has 1 non-finite"):
        projected_mirror_descent(lambda W: W, torch.tensor([[1.0, float("nan")]]), p=2.0, radius=1.0, steps=1)
    for shape in ((4,), (2, 2, 2)):  # the ball bounds a matrix's entrywise norm: a vector or a stack raised IndexError
        with pytest.raises(ValidationError, match=r"W0 has shape .* expected 2 axes"):
            projected_mirror_descent(lambda W: W, torch.zeros(shape), p=2.0, radius=1.0, steps=1)
    with pytest.raises(ValidationError, match=r"grad\(W\) returned \(3, 3\), not a tensor of W's shape \(2, 2\)"):
        projected_mirror_descent(lambda W: torch.zeros(3, 3), torch.zeros(2, 2), p=2.0, radius=1.0, steps=1)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"record_every": 0}, "record_every == 0, must be >= 1"),
        ({"record_every": -2}, "record_every == -2, must be >= 1"),
        ({"record_every": 2.5}, "record_every must be a int"),
        ({"progress": 3}, "progress == 3, must be a bool"),
    ],
)
def test_record_every_and_progress_are_checked_by_name(kwargs, match):
    # record_every=0 raised ZeroDivisionError inside the loop; -2 and 2.5 were accepted, and so was progress=3
    A = torch.tensor([[0.3, -0.2], [0.1, 0.4]], dtype=torch.float64)
    with pytest.raises(ValidationError, match=match):
        projected_mirror_descent(lambda W: W - A, torch.zeros(2, 2), p=1.5, radius=1.0, steps=6, **kwargs)
