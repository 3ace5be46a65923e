"""Input audit of the NTK and diffusion modules: each bad input is refused with a ValidationError that names it,
never a silently wrong (NaN, inf, out-of-range) result or a bare Python/torch error; valid input is unchanged."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from attnlab._validation import ValidationError
from attnlab.ntk import (
    ExpMLP,
    ForwardProcess,
    InputMap,
    ReluMLP,
    ScoreModel,
    SoftmaxMLP,
    contraction_bound,
    coupling_bound,
    cross_kernel,
    denoising_set,
    empirical_ntk,
    euler_maruyama,
    fit_input_map,
    gram,
    infinite_width_gram,
    kernel_regression_limit,
    lambda_max,
    mode_coverage,
    perturbed_kernels,
    practical_step,
    reverse_sde_sample,
    stability_limit,
    step_terms,
    theorem_B,
    theorem_log10_width,
    to_unit_ball,
)

X = torch.randn(5, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
Y = torch.randn(5, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
DECAYING = ForwardProcess(lambda t: 1 - 0.6 * t)  # a positive rate only for t < 5/3
GRID = torch.linspace(0.0, 1.0, 3, dtype=torch.float64)
EXP_OVERFLOW = r"exp\(w_r\^T x\) overflows float64: scale X into the unit ball \(Assumption 6\.1\) or lower sigma_w"


def _gen():
    return torch.Generator().manual_seed(0)


class _NegativeIntegral(ForwardProcess):
    """A process whose integral of g is negative: alpha > 1 and h < 0 unless its results are checked."""

    def integral(self, t):
        return -super().integral(t)


# ---- 1. the forward process: times outside its range, alpha and h outside (0, 1] and [0, 1) -------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda: DECAYING.alpha(5.0),  # was 12.18
        lambda: DECAYING.h(5.0),  # was -147.4
        lambda: DECAYING.g(torch.tensor([0.5, 5.0], dtype=torch.float64)),  # was -2 at t = 5
        lambda: DECAYING.integral(5.0),
        lambda: DECAYING.sample(torch.zeros(2, 2), torch.full((2,), 5.0), _gen()),  # was NaN
    ],
    ids=["alpha", "h", "g", "integral", "sample"],
)
def test_times_past_the_schedules_positive_range_are_refused(call):
    with pytest.raises(ValidationError, match=r"t == 5 is outside this process's time range: g returned"):
        call()


@pytest.mark.parametrize("method", ["alpha", "h"])
def test_alpha_and_h_outside_the_unit_interval_are_refused_naming_g(method):
    with pytest.raises(ValidationError, match=rf"{method}\(t\) == .* lies outside \[0, 1\]: the schedule g"):
        getattr(_NegativeIntegral(1.0), method)(1.0)


@pytest.mark.parametrize("t", [1 + 2j, "1", True, np.array([True, False]), torch.tensor([1j])])
@pytest.mark.parametrize("method", ["alpha", "h", "g", "integral"])
def test_times_that_are_not_real_numbers_are_refused(method, t):
    with pytest.raises(ValidationError, match=r"^t (is complex|holds)"):
        getattr(ForwardProcess(), method)(t)


def test_times_where_the_schedule_is_positive_are_unchanged_and_the_first_time_past_it_refused():
    t = torch.tensor([0.0, 0.5, 1.5], dtype=torch.float64)
    integral = t - 0.3 * t**2  # exact: Gauss-Legendre integrates the degree-1 rate exactly
    assert torch.allclose(DECAYING.alpha(t), torch.exp(-integral), rtol=1e-14, atol=0)
    ou = torch.tensor([0.0, 0.5, 20.0, 800.0], dtype=torch.float64)  # h rounds to 1, alpha underflows: not refused
    assert torch.equal(ForwardProcess().alpha(ou), torch.exp(-ou))
    assert torch.equal(ForwardProcess().h(ou), -torch.expm1(-2 * ou))
    with pytest.raises(ValidationError, match=r"t == 2 is outside this process's time range"):
        DECAYING.alpha(torch.tensor([0.5, 2.0]))  # g(t) < 0 past t = 5/3: int_0^2 g is still > 0, alpha < 1


# ---- 2. results of finite inputs that overflow float64 ---------------------------------------------------------
@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: ExpMLP(3, 2, 8)(X * 1000), EXP_OVERFLOW),
        (lambda: ExpMLP(3, 2, 8).loss_gradient(X * 1000, Y), EXP_OVERFLOW),
        (lambda: ExpMLP(3, 2, 8).jacobian(X * 1000), EXP_OVERFLOW),
        (lambda: gram(ExpMLP(3, 2, 8), X * 1000), EXP_OVERFLOW),
        (lambda: cross_kernel(ExpMLP(3, 2, 8), X, X * 1000), EXP_OVERFLOW),
        (lambda: ExpMLP(3, 2, 8).limit_kernel(X * 100), r"exp\(sigma_w\^2 \|\|x_i \+ x_j\|\|\^2 / 2\) overflows"),
        (lambda: SoftmaxMLP(3, 2, 8).limit_kernel(X * 30), r"exp\(sigma_w\^2 <x_i, x_j>\) overflows float64"),
        (lambda: infinite_width_gram(SoftmaxMLP(3, 2, 8), X * 100), r"exp\(sigma_w\^2 <x_i, x_j>\) overflows"),
        (lambda: ReluMLP(3, 2, 8).limit_kernel(X * 1e160), "overflow float64: scale X into the unit ball"),
        (lambda: SoftmaxMLP(3, 2, 8, sigma_w=1e10)(X * 1e300), "overflow float64: scale X into the unit ball"),
    ],
    ids=["forward", "loss_gradient", "jacobian", "gram", "cross_kernel", "exp-limit", "softmax-limit",
         "infinite_width_gram", "relu-limit", "softmax-forward"],
)  # fmt: skip
def test_overflowing_results_are_refused_with_the_cause(call, match):
    with pytest.raises(ValidationError, match=match):
        call()


@pytest.mark.parametrize("function", [lambda_max, stability_limit, practical_step])
@pytest.mark.parametrize("n", [5, 300], ids=["dense", "lanczos"])
def test_the_step_helpers_name_the_overflow_not_a_gram_the_caller_never_passed(function, n):
    inputs = torch.randn(n, 3, generator=_gen(), dtype=torch.float64) * 1000
    with pytest.raises(ValidationError, match=EXP_OVERFLOW) as caught:
        function(ExpMLP(3, 2, 8), inputs)
    assert not str(caught.value).startswith("H has")


# ---- 3. samplers whose state turns non-finite --------------------------------------------------------------------
@pytest.mark.parametrize(
    "drift, diffusion, y0, match",
    [
        (lambda y, s: y * math.nan, lambda s: 1.0, 0.0, r"drift returned non-finite values at step 1 of 2 \(time s = 0\)"),
        (lambda y, s: (y + 1) * 1e300, lambda s: 1.0, 0.0, r"drift returned non-finite values at step 2 of 2"),
        (lambda y, s: y, lambda s: 0.0, 1.5e308, r"drift moved the state past float64's range at step 1 of 2"),
        (lambda y, s: y, lambda s: torch.ones(3), 0.0, r"diffusion\(s\) returned a tensor of shape \(3,\) at step 1"),
        (lambda y, s: y, lambda s: torch.ones(2, 2), 0.0, r"diffusion\(s\) returned a tensor of shape \(2, 2\)"),
        (lambda y, s: y, lambda s: math.nan, 0.0, r"diffusion\(s\) == nan, must be a finite number"),
    ],
    ids=["nan-drift", "exploding-drift", "overflowing-state", "diffusion-shape", "diffusion-points", "nan-diffusion"],
)  # fmt: skip
def test_euler_maruyama_refuses_a_non_finite_state_naming_its_cause(drift, diffusion, y0, match):
    with pytest.raises(ValidationError, match=match):
        euler_maruyama(drift, diffusion, torch.full((2, 2), y0, dtype=torch.float64), GRID, 0)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_reverse_sde_sample_refuses_a_non_finite_score_naming_step_and_time(bad):
    with pytest.raises(ValidationError, match=r"score\(x, t\) returned non-finite values at step 2 of 3 \(t = 0\.67"):
        reverse_sde_sample(
            lambda x, t: -x if t > 0.9 else x * bad, ForwardProcess(), torch.ones(2, 2), 0.01, 1.0, 3, seed=0
        )


def test_the_samplers_are_unchanged_on_finite_states_and_refuse_a_per_point_amplitude():
    y = euler_maruyama(lambda y, s: -y, lambda s: torch.tensor(0.5, dtype=torch.float64), torch.ones(2, 2), GRID, 0)
    gen = torch.Generator().manual_seed(0)
    expected = torch.ones(2, 2, dtype=torch.float64)
    for _ in range(2):  # the Euler-Maruyama recursion written out, the same draws
        expected = expected + (-expected) * 0.5 + 0.5 * 0.5**0.5 * torch.randn(2, 2, generator=gen, dtype=torch.float64)
    assert torch.equal(y, expected)
    with pytest.raises(ValidationError, match=r"diffusion\(s\) returned a tensor of shape \(2, 1\)"):
        euler_maruyama(lambda y, s: -y, lambda s: torch.ones(2, 1), torch.ones(2, 2), GRID, 0)  # broadcast silently


# ---- 4. the theory helpers ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: coupling_bound(math.inf, 3, 3, 0.0, 1.0), r"coupling_bound\(eps_H=inf, .*y_norm=0\.0.* == nan"),
        (lambda: coupling_bound(1e300, 3, 3, 1e300, 1.0), r"coupling_bound\(eps_H=1e\+300.* == inf"),
        (lambda: contraction_bound(1e308, 1e308, 1.0), r"contraction_bound\(lr=1e\+308, scale=1e\+308.* == -inf"),
        (lambda: theorem_B(1e308, 10, 3), r"theorem_B\(sigma_w=1e\+308.* == inf"),
        (lambda: theorem_log10_width(1.0, 3, 3, 1e308), r"theorem_log10_width\(.*B=1e\+308.* == inf"),
    ],
    ids=["coupling-nan", "coupling-overflow", "contraction", "theorem_B", "log10_width"],
)
def test_theory_helpers_refuse_non_finite_results_naming_the_inputs(call, match):
    with pytest.raises(ValidationError, match=match):
        call()


def test_a_diverged_runs_infinite_drift_bounds_nothing_unless_the_targets_are_zero():
    assert coupling_bound(math.inf, 3, 3, 1.0, 1.0) == math.inf  # documented: eps_H = inf gives an inf bound
    with pytest.raises(ValidationError, match=r"eps_H=inf.*y_norm=0\.0.*an infinite input times a zero one"):
        coupling_bound(math.inf, 3, 3, 0.0, 1.0)


# ---- 5. kernel regression and the infinite-width Gram without training points, a non-symmetric H --------------
@pytest.mark.parametrize(
    "H, K_test, Y_train, match",
    [
        (torch.ones(0, 0), torch.ones(3, 0), torch.ones(0, 1), r"Y has 0 entries along axis 'n'"),
        (torch.tensor([[2.0, 1.0], [0.0, 2.0]]), torch.ones(1, 2), torch.ones(2, 1), r"H is not symmetric"),
        (torch.tensor([[2.0, 1e-9], [0.0, 2.0]]), torch.ones(1, 2), torch.ones(2, 1), r"H is not symmetric"),
    ],
    ids=["no-training-point", "asymmetric", "slightly-asymmetric"],
)
def test_kernel_regression_limit_refuses_an_empty_training_set_and_an_asymmetric_gram(H, K_test, Y_train, match):
    with pytest.raises(ValidationError, match=match):
        kernel_regression_limit(H, K_test, Y_train)


def test_kernel_regression_limit_accepts_rounding_asymmetry_and_refuses_more():
    H = torch.tensor([[2.0, 1.0], [1.0 + 1e-15, 2.0]], dtype=torch.float64)
    out = kernel_regression_limit(H, H, torch.tensor([[3.0], [3.0]], dtype=torch.float64))
    assert torch.allclose(out, torch.full((2, 1), 3.0, dtype=torch.float64), rtol=1e-14, atol=0)  # K = H: Y itself
    with pytest.raises(ValidationError, match=r"H is not symmetric: max \|H - H\^T\| == 1e-09"):
        kernel_regression_limit(H + torch.tensor([[0.0, 1e-9], [0.0, 0.0]]), H, torch.ones(2, 1))


@pytest.mark.parametrize("cls", [SoftmaxMLP, ReluMLP, ExpMLP])
def test_infinite_width_gram_needs_a_training_point_as_gram_does(cls):
    for function in (gram, infinite_width_gram):
        with pytest.raises(ValidationError, match=r"X has 0 entries along axis 'n'"):
            function(cls(3, 2, 8), torch.ones(0, 3))


# ---- 6. to_unit_ball returns the validated float64 tensor --------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    [X.float(), X.numpy(), X.tolist(), torch.tensor([[1, 0], [0, 1]]), torch.tensor([[3, 4], [0, 1]])],
    ids=["float32", "numpy", "list", "int-inside", "int-outside"],
)
def test_to_unit_ball_returns_a_float64_tensor_for_every_array_like(value, recwarn):
    reference = torch.as_tensor(np.asarray(value, dtype=np.float64))
    largest = float(reference.norm(dim=1).max())
    out, scale = to_unit_ball(value)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    expected_scale = largest if largest > 1.0 + 1e-12 else 1.0
    assert scale == expected_scale and torch.equal(
        out, reference / expected_scale if expected_scale != 1 else reference
    )


# ---- 7-11. raw exceptions instead of named errors ----------------------------------------------------------------
def _input_map(d=2):
    return InputMap(ForwardProcess(), 1.0, 1.0, 1.0, d=d)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: step_terms(SoftmaxMLP(3, 2, 8).float(), X, Y, 0.01), r"net holds torch\.float32 weights"),
        (lambda: step_terms(None, X, Y, 0.01), r"net must be a TwoLayerNet .*got NoneType"),
        (lambda: perturbed_kernels([], [0.1], X, 2, 1.0, 0), r"widths is empty"),
        (lambda: perturbed_kernels([8], [], X, 2, 1.0, 0), r"radii is empty"),
        (lambda: perturbed_kernels(8, [0.1], X, 2, 1.0, 0), r"widths must be a sequence"),
        (lambda: perturbed_kernels([8], [0.1], torch.ones(0, 3), 2, 1.0, 0), r"X has 0 entries along axis 'n'"),
        (lambda: ScoreModel(SoftmaxMLP(5, 2, 8), ForwardProcess(), _input_map()), r"net has d_in = 5 and d_out = 2"),
        (lambda: ScoreModel(None, ForwardProcess(), _input_map()), r"net must be a TwoLayerNet"),
        (lambda: ScoreModel(SoftmaxMLP(3, 2, 8), None, _input_map()), r"process must be a ForwardProcess"),
        (lambda: ScoreModel(SoftmaxMLP(3, 2, 8), ForwardProcess(), None), r"inputs must be a InputMap"),
        (lambda: ScoreModel(SoftmaxMLP(4, 3, 8), ForwardProcess(), _input_map(2)), r"inputs was fitted on points of"),
        (lambda: empirical_ntk(nn.Linear(3, 2, dtype=torch.float32), X), r"x1 .*float64.*parameters are torch\.float32"),
        (lambda: empirical_ntk(nn.Linear(3, 2, dtype=torch.float64), torch.ones(5, 4, dtype=torch.float64)),
         r"module Linear cannot take x1 \(shape \(5, 4\)"),
        (lambda: empirical_ntk(nn.Linear(3, 2, dtype=torch.float64), X * math.nan), r"x1 has 15 non-finite"),
        (lambda: empirical_ntk(nn.Linear(3, 2, dtype=torch.float64), X, X / 0), r"x2 has \d+ non-finite"),
        (lambda: mode_coverage(X[:, :2], torch.zeros(0, 2), 0.1), r"means has 0 entries along axis 'K'"),
    ],
    ids=["step_terms-float32", "step_terms-None", "empty-widths", "empty-radii", "bare-width", "empty-X",
         "score-d_in", "score-None-net", "score-None-process", "score-None-inputs", "score-map-dim",
         "ntk-dtype", "ntk-shape", "ntk-nan-x1", "ntk-inf-x2", "empty-means"],
)  # fmt: skip
def test_bad_arguments_raise_a_named_validation_error(call, match):
    with pytest.raises(ValidationError, match=match):
        call()


def test_a_valid_score_model_denoises_as_its_formula_says_and_a_mismatched_one_is_refused():
    net, inputs = SoftmaxMLP(3, 2, 8, seed=1), _input_map()
    with torch.no_grad():
        net.W.add_(0.1)
    model, x = ScoreModel(net, ForwardProcess(), inputs), torch.full((2, 2), 0.5, dtype=torch.float64)
    t = torch.full((2,), 0.5, dtype=torch.float64)
    u = torch.cat([t[:, None], x], dim=1)  # spec §7.5 with T = rho = 1
    expected = inputs.skip_gain(t)[:, None] * x + 8 * torch.softmax(u @ net.W.detach(), dim=1) @ net.a.T
    assert torch.allclose(model.denoiser(x, 0.5), expected, rtol=1e-14, atol=1e-15)
    with pytest.raises(ValidationError, match=r"net has d_in = 5 and d_out = 2"):
        ScoreModel(SoftmaxMLP(5, 2, 8), ForwardProcess(), inputs).denoiser(x, 0.5)  # was a matmul RuntimeError


# ---- InputMap's fields and fit_input_map's skip: read as typed, never by truthiness or sign ------------------------
@pytest.mark.parametrize(
    "change, match",
    [
        ({"rho": 0.0}, "rho"),  # u = (t / T, x) / rho: inf
        ({"T": 0.0}, "T"),  # t / T: inf
        ({"v0": -5.0, "kind": "scaled"}, "v0"),  # c(t) = sqrt(alpha^2 v0 + h): NaN
        ({"skip": "no"}, "skip"),  # a truthy string: the skip applied
        ({"skip": 0}, "skip"),
        ({"process": None}, "process"),
    ],
)
def test_input_map_fields_are_checked(change, match):
    fields = {"process": ForwardProcess(1.0), "T": 1.0, "v0": 1.0, "rho": 1.0} | change
    with pytest.raises(ValidationError, match=match):
        InputMap(**fields)


def test_fit_input_map_refuses_a_skip_that_is_not_a_bool():
    process = ForwardProcess(1.0)
    data = denoising_set(torch.randn(6, 2, dtype=torch.float64), process, 0.01, 1.0, seed=0)
    assert fit_input_map(data, process, 1.0, skip=False).skip is False
    with pytest.raises(ValidationError, match="skip"):
        fit_input_map(data, process, 1.0, skip="no")
