"""The l_p regularisation path: the cancellation-free risk against the library's risk and finite differences, and
SLSQP against a second solver (projected l_p mirror descent)."""

import math

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import unit_gaussian
from attnlab.losses import mean_loss
from attnlab.metrics import directional_bregman, entrywise_norm
from attnlab.models.functional import loss_gradients, margins, token_scores
from attnlab.svm import SelectionSVMs, constrained_erm, constrained_stationarity, log_excess_risk_and_gradient
from attnlab.training.projected import projected_mirror_descent


def _risk_gradient(data):
    """The library's cancellation-free risk gradient (its mantissa), the second solver's input."""
    return lambda W: loss_gradients(data.X, data.Z, data.y, data.v, W, "logistic", risk=False)[0].mantissa


def _seed_one():
    data = unit_gaussian(seed=1)
    return data, token_scores(data.X, data.y, data.v).argmax(dim=-1)


def test_log_excess_risk_is_the_risk_above_its_infimum_with_the_gradient_of_finite_differences():
    """Against the library's risk (where L - L_opt is far above rounding) and central differences."""
    data, select = _seed_one()
    gen = torch.Generator().manual_seed(0)
    W = torch.randn(10, 10, generator=gen, dtype=torch.float64)
    value, grad = log_excess_risk_and_gradient(data, W, select)
    gamma = token_scores(data.X, data.y, data.v)
    floor = mean_loss(gamma.gather(-1, select[:, None]).squeeze(-1), "logistic")  # all attention on the opt tokens
    risk = mean_loss(margins(data.X, data.Z, data.y, data.v, W), "logistic")
    assert value == pytest.approx(math.log(float(risk - floor)), rel=1e-12)
    E = torch.randn(10, 10, generator=gen, dtype=torch.float64)
    h = 1e-6
    numeric = (
        log_excess_risk_and_gradient(data, W + h * E, select)[0]
        - log_excess_risk_and_gradient(data, W - h * E, select)[0]
    ) / (2 * h)
    assert float((grad * E).sum()) == pytest.approx(numeric, rel=1e-7)


def test_log_excess_risk_stays_resolved_where_the_risk_rounds_to_its_infimum():
    data, select = _seed_one()
    W = 200.0 * torch.eye(10, dtype=torch.float64)
    value, grad = log_excess_risk_and_gradient(data, 2 * W, select)
    assert (
        math.isfinite(value) and value < log_excess_risk_and_gradient(data, W, select)[0] and torch.isfinite(grad).all()
    )


@pytest.mark.parametrize("p", [1.75, 3.0])
def test_the_two_solvers_of_the_constrained_risk_agree_on_the_sphere(p):
    """SLSQP and projected l_p mirror descent from the same start: same point, on the sphere, stationary."""
    data, select = _seed_one()
    R = 20.0
    start = torch.full((10, 10), R / 100 ** (1 / p), dtype=torch.float64)  # ||start||_p = R

    W = constrained_erm(data, p, R, start, select)
    W_md = projected_mirror_descent(_risk_gradient(data), start, p=p, radius=R, steps=2000).W
    assert float(entrywise_norm(W, p)) == pytest.approx(R, rel=1e-5)
    assert float(entrywise_norm(W_md, p)) <= R * (1 + 1e-12)
    assert constrained_stationarity(data, p, W, select) < 1e-10
    assert (
        log_excess_risk_and_gradient(data, W_md, select)[0] >= log_excess_risk_and_gradient(data, W, select)[0] - 1e-9
    )  # no better than W_R
    assert float(directional_bregman(W, W_md, p)) < 1e-6  # dB_p is quadratic: the points agree to ~0.1%


def test_stationarity_is_the_angle_between_autograd_risk_gradient_and_the_ball_normal():
    """At a random point, against autograd on the library's risk (log of the excess only rescales the gradient)."""
    data, select = _seed_one()
    p = 3.0
    W = torch.randn(10, 10, generator=torch.Generator().manual_seed(2), dtype=torch.float64).requires_grad_()
    mean_loss(margins(data.X, data.Z, data.y, data.v, W), "logistic").backward()
    normal = W.detach().abs() ** (p - 1) * torch.sign(W.detach())  # grad of ||W||_p^p / p
    cos = float((-W.grad * normal).sum() / (W.grad.norm() * normal.norm()))
    assert constrained_stationarity(data, p, W.detach(), select) == pytest.approx(1.0 - cos, rel=1e-9)


def test_arguments_are_checked_by_name():
    data, select = _seed_one()
    W = torch.zeros(10, 10, dtype=torch.float64)
    with pytest.raises(ValidationError, match=r"W has shape \(3, 3\)"):
        log_excess_risk_and_gradient(data, torch.zeros(3, 3), select)
    with pytest.raises(ValidationError, match=r"select holds indices outside \[0, 7\]"):
        log_excess_risk_and_gradient(data, W, select + 8)
    with pytest.raises(ValidationError, match="p"):
        constrained_erm(data, 1.0, 1.0, W, select)
    with pytest.raises(ValidationError, match="R"):
        constrained_erm(data, 2.0, 0.0, W, select)
    with pytest.raises(ValidationError, match="must be a TokenSelectionData"):
        constrained_stationarity((data.X, data.Z), 2.0, W, select)


def test_the_formula_is_the_models_one_and_the_old_name_warns():
    """One definition: the value is attnlab.models.log_excess_risk's (logistic loss); the svm name is an alias."""
    from attnlab.models import log_excess_risk

    data, select = _seed_one()
    W = 0.3 * torch.randn(10, 10, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    value, _ = log_excess_risk_and_gradient(data, W, select)
    assert value == float(log_excess_risk(data.X, data.Z, data.y, data.v, W, "logistic"))
    with pytest.warns(DeprecationWarning, match="log_excess_risk_and_gradient"):
        from attnlab.svm import log_excess_risk as old
    assert old is log_excess_risk_and_gradient
    other = select.clone()
    other[0] = (other[0] + 1) % data.T
    with pytest.raises(ValidationError, match="select must be the optimal tokens"):
        log_excess_risk_and_gradient(data, W, other)


def test_stationarity_refuses_a_zero_w_and_a_risk_without_direction():
    # both gave NaN (0/0), which the regularization path's max(kkt, ...) then dropped without a word
    data, select = _seed_one()
    W = torch.randn(10, 10, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with pytest.raises(ValidationError, match="W is zero"):
        constrained_stationarity(data, 2.0, torch.zeros(10, 10, dtype=torch.float64), select)
    headless = data.with_(v=torch.zeros_like(data.v))  # v = 0: every margin 0, the risk flat in W
    with pytest.raises(ValidationError, match="the risk has no direction at W"):
        constrained_stationarity(headless, 2.0, W, select)


def test_a_smaller_mirror_step_stays_in_the_basin_of_its_start():
    """At first_seed 4, from p's SVM ray at R = 8 ||W^mm||_p: at step scale 1 the first steps cross the ball and
    projected MD ends on a plateau (log excess risk -4.5); at 0.3 it reaches SLSQP's W_R from the same start."""
    data = unit_gaussian(6, 8, 10, seed=4)
    select = token_scores(data.X, data.y, data.v).argmax(dim=-1)
    p = 1.75
    ray = 8.0 * SelectionSVMs([data]).directions(select[None], p)[0]
    R = float(entrywise_norm(ray, p))

    W = constrained_erm(data, p, R, ray, select)
    ends = {
        c: projected_mirror_descent(_risk_gradient(data), ray, p=p, radius=R, steps=1000, step_scale=c).W
        for c in (1.0, 0.3)
    }
    assert (
        log_excess_risk_and_gradient(data, ends[1.0], select)[0]
        > -5.0
        > log_excess_risk_and_gradient(data, W, select)[0]
    )
    assert float(directional_bregman(W, ends[0.3], p)) < 1e-12
    with pytest.raises(ValidationError, match="step_scale"):
        projected_mirror_descent(_risk_gradient(data), ray, p=p, radius=R, steps=1, step_scale=0.0)
