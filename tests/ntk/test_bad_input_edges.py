"""Bad input at the edges of the NTK and diffusion modules: a named ValidationError, never NaN, inf, complex numbers
or a bare Python/torch error; and the limit values where the formula has one (QA report ntk2, D1-D15)."""

import math

import pytest
import torch
from torch import nn

from attnlab._validation import ValidationError
from attnlab.experiments.ntk import GMMConfig
from attnlab.ntk import (
    ForwardProcess,
    GaussianMixture,
    ReluMLP,
    SoftmaxMLP,
    circle_mixture,
    contraction_bound,
    coupling_bound,
    cross_kernel,
    denoiser_error_at,
    denoising_set,
    euler_maruyama,
    extreme_eigenvalues,
    gram,
    infinite_width_gram,
    kernel_drift,
    kernel_regression_limit,
    lambda_max,
    mode_coverage,
    perturbation,
    perturbed_kernels,
    practical_step,
    reverse_sde_sample,
    score_from_denoiser,
    stability_limit,
    theorem_B,
    theorem_step,
    to_unit_ball,
    weighted_score_error,
)
from attnlab.training.ntk import gradient_descent, kernel_regression_path, train_score_model

PROCESS = ForwardProcess(1.0)


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.fixture(scope="module")
def trained():
    """A tiny score model (d = 2) and its training set."""
    data = denoising_set(circle_mixture().sample(16, _gen(), 1.0), PROCESS, 0.01, 1.0, seed=1)
    model, _ = train_score_model(SoftmaxMLP(3, 2, 8, seed=0), data, data, PROCESS, 1.0, steps=2)
    return model, data


# ---- D1, D12: the Euler-Maruyama grid and the samplers' seeds -----------------------------------------------------
@pytest.mark.parametrize("times", [[0.0, 0.5, 0.4], [0.0, 0.5, 0.5]])
def test_euler_maruyama_refuses_a_grid_that_is_not_strictly_increasing(times):
    with pytest.raises(ValidationError, match="times must be strictly increasing"):
        euler_maruyama(lambda y, s: y, lambda s: 1.0, torch.ones(2, 2), torch.tensor(times), 0)


@pytest.mark.parametrize("seed", [-1, "a", 1.5])
def test_samplers_and_training_sets_check_their_seed(seed):
    with pytest.raises(ValidationError, match="seed"):
        denoising_set(torch.rand(3, 2), PROCESS, 0.1, 1.0, seed)
    with pytest.raises(ValidationError, match="seed"):
        reverse_sde_sample(lambda x, t: -x, PROCESS, torch.rand(3, 2), 0.01, 1.0, 3, seed)


# ---- D2: the ReLU limit kernel at a zero row ---------------------------------------------------------------------
def test_relu_limit_kernel_is_zero_on_a_zero_row_and_unchanged_elsewhere():
    net = ReluMLP(3, 2, 4)
    X = torch.tensor([[0.0, 0.0, 0.0], [0.6, 0.0, 0.0], [0.3, -0.4, 0.2]])
    K = net.limit_kernel(X)
    assert torch.isfinite(K).all()
    assert (K[0] == 0).all() and (K[:, 0] == 0).all()  # <x_0, x_j> = 0: the formula's value, diagonal included
    rest = X[1:]
    G, norms = rest @ rest.T, rest.norm(dim=1)
    cos = (G / (norms[:, None] * norms[None, :])).clamp(-1.0, 1.0)
    assert torch.equal(K[1:, 1:], G * (math.pi - torch.arccos(cos)) / (2 * math.pi))  # bitwise the old formula
    assert torch.equal(infinite_width_gram(net, X), torch.kron(torch.eye(2, dtype=K.dtype), K))


# ---- D3, D4, D11: the score model's points and times -------------------------------------------------------------
def test_score_model_refuses_t_zero_non_finite_x_and_bad_shapes(trained):
    model, _ = trained
    with pytest.raises(ValidationError, match="t must hold times > 0"):
        model.score(torch.rand(2, 2), 0.0)
    with pytest.raises(ValidationError, match="x has 4 non-finite"):
        model.denoiser(torch.full((2, 2), float("nan")), 0.1)
    with pytest.raises(ValidationError, match=r"x has shape \(3, 3\)"):
        model.score(torch.rand(3, 3), 0.1)
    with pytest.raises(ValidationError, match=r"t has shape \(2,\): pass one time for every point"):
        model.score(torch.rand(3, 2), torch.rand(2))


def test_input_map_refuses_points_of_another_dimension(trained):
    model, data = trained
    assert model.inputs.d == 2
    assert model.inputs(data.t, data.x_t).shape == (16, 3)
    with pytest.raises(ValidationError, match=r"x has shape \(2, 5\).*fixed d = 2"):
        model.inputs(0.1, torch.rand(2, 5))


def test_score_from_denoiser_takes_a_float_time_and_checks_shapes():
    x, denoised = torch.rand(3, 2), torch.rand(3, 2)
    expected = score_from_denoiser(PROCESS, x, torch.full((3,), 0.5), denoised)
    assert torch.equal(score_from_denoiser(PROCESS, x, 0.5, denoised), expected)
    with pytest.raises(ValidationError, match=r"denoised has shape \(3, 3\)"):
        score_from_denoiser(PROCESS, x, torch.rand(3), torch.rand(3, 3))
    with pytest.raises(ValidationError, match="times > 0"):
        score_from_denoiser(PROCESS, x, 0.0, denoised)


def test_score_errors_refuse_a_target_of_another_dimension(trained):
    model, _ = trained
    target = GaussianMixture(torch.zeros(2, 3), torch.ones(2), torch.tensor([0.5, 0.5]))
    with pytest.raises(ValidationError, match="target has points of dimension 3"):
        weighted_score_error(model, target, 0.01, 1.0, n=10)
    with pytest.raises(ValidationError, match="target has points of dimension 3"):
        denoiser_error_at(model, target, 0.1, n=10)
    with pytest.raises(ValidationError, match="target must be a GaussianMixture"):
        weighted_score_error(model, None, 0.01, 1.0, n=10)


def test_reverse_sde_sample_refuses_a_score_of_another_shape():
    with pytest.raises(ValidationError, match=r"score\(x, t\) returned \(1, 3\)"):
        reverse_sde_sample(lambda x, t: x[:, :1].T, PROCESS, torch.rand(3, 2), 0.01, 1.0, 3, 0)
    with pytest.raises(ValidationError, match="process must be a ForwardProcess"):
        reverse_sde_sample(lambda x, t: -x, None, torch.rand(3, 2), 0.01, 1.0, 3, 0)


def test_training_set_and_score_training_refuse_missing_objects(trained):
    _, data = trained
    with pytest.raises(ValidationError, match="process must be a ForwardProcess"):
        denoising_set(torch.rand(3, 2), None, 0.1, 1.0, 0)
    with pytest.raises(ValidationError, match=r"x0 has 0 entries along axis 'n'"):
        denoising_set(torch.rand(0, 2), PROCESS, 0.1, 1.0, 0)
    with pytest.raises(ValidationError, match="held_out must be a DenoisingSet"):
        train_score_model(SoftmaxMLP(3, 2, 8), data, None, PROCESS, 1.0, steps=2)
    with pytest.raises(ValidationError, match="net must be a TwoLayerNet"):
        train_score_model(None, data, data, PROCESS, 1.0, steps=2)


# ---- D5: the theory helpers --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: contraction_bound(0.1, -1.0, 0.3), "scale"),
        (lambda: contraction_bound(0.1, float("nan"), 0.3), "scale"),
        (lambda: coupling_bound(-1.0, 2, 2, 1.0, 1.0), "eps_H"),
        (lambda: coupling_bound(0.1, 0, 2, 1.0, 1.0), "n"),
        (lambda: coupling_bound(0.1, 2, 2, -1.0, 1.0), "y_norm"),
        (lambda: theorem_B(1.0, 0, 3), "n"),
        (lambda: theorem_B(1.0, 2, 0), "d"),
        (lambda: theorem_B(-1.0, 2, 3), "sigma_w"),
        (lambda: theorem_B(1.0, 2, 3, C=-1.0), "C"),
        (lambda: theorem_step(0.1, 5, 3, 0, 1.0), "width"),
        (lambda: theorem_step(0.1, 5, 3, 4, float("nan")), "B"),
        (lambda: theorem_step(0.1, 2.5, 3, 4, 1.0), "n"),
    ],
)
def test_theory_helpers_refuse_out_of_range_arguments_by_name(call, name):
    with pytest.raises(ValidationError, match=rf"^{name} "):
        call()


# ---- D6, D13: mixture sampling -----------------------------------------------------------------------------------
def _recursive_sample(target, n, generator, max_norm):
    """The rejection sampler as it was (recursive), for the bitwise comparison."""
    comp = torch.multinomial(target.weights, n, replacement=True, generator=generator)
    x = target.means[comp] + target.stds[comp, None] * torch.randn(
        n, target.dim, generator=generator, dtype=torch.float64
    )
    outside = x.norm(dim=1) > max_norm
    if bool(outside.any()):
        x[outside] = _recursive_sample(target, int(outside.sum()), generator, max_norm)
    return x


def test_mixture_sample_redraws_as_before_and_refuses_an_infeasible_max_norm():
    target = circle_mixture(std=0.3)  # about a quarter of the draws fall outside 0.6
    assert torch.equal(target.sample(500, _gen(3), 0.6), _recursive_sample(target, 500, _gen(3), 0.6))
    with pytest.raises(ValidationError, match=r"max_norm == 0.0, must be > 0"):
        circle_mixture().sample(3, _gen(), max_norm=0.0)
    with pytest.raises(ValidationError, match=r"max_norm == 0.3: .* still lie outside it"):
        circle_mixture().sample(3, _gen(), max_norm=0.3)  # the modes sit at radius 0.5, std 0.05


def test_samplers_require_a_generator():
    with pytest.raises(ValidationError, match="generator must be a torch.Generator"):
        circle_mixture().sample(2, None)
    with pytest.raises(ValidationError, match="generator must be a torch.Generator"):
        PROCESS.sample(torch.rand(2, 2), torch.rand(2), None)


# ---- D7: the diffusion config ------------------------------------------------------------------------------------
def test_gmm_config_refuses_a_single_sample_up_front():
    with pytest.raises(ValidationError, match=r"n_samples == 1, must be >= 2"):
        GMMConfig(n_samples=1)
    assert GMMConfig(n_samples=2).n_samples == 2
    assert ">= 2 (the energy distance" in GMMConfig.__doc__


# ---- D8, D9, D11: networks and Grams -----------------------------------------------------------------------------
def test_all_zero_inputs_have_no_step_size():
    net = SoftmaxMLP(3, 2, 8)
    for call in (
        lambda: stability_limit(net, torch.zeros(3, 3)),
        lambda: practical_step(net, torch.zeros(3, 3)),
        lambda: gradient_descent(SoftmaxMLP(3, 2, 8), torch.zeros(4, 3), torch.rand(4, 2), lr=1e-3, steps=2),
    ):
        with pytest.raises(ValidationError, match=r"X gives a Gram with lambda_max\(H\) == 0"):
            call()


def test_empty_inputs_are_refused_by_name():
    net = SoftmaxMLP(3, 2, 8)
    with pytest.raises(ValidationError, match=r"H has 0 entries along axis 'N'"):
        extreme_eigenvalues(torch.rand(0, 0))
    for call in (
        lambda: gram(net, torch.rand(0, 3)),
        lambda: lambda_max(net, torch.rand(0, 3)),
        lambda: cross_kernel(net, torch.rand(2, 3), torch.rand(0, 3)),
        lambda: gradient_descent(net, torch.rand(0, 3), torch.rand(0, 2), lr=1e-3, steps=2),
    ):
        with pytest.raises(ValidationError, match=r"X has 0 entries along axis 'n'"):
            call()
    with pytest.raises(ValidationError, match=r"samples has 0 entries along axis 'n'"):
        mode_coverage(torch.rand(0, 2), torch.rand(2, 2), 0.1)


@pytest.mark.parametrize("bad", [None, nn.Linear(3, 2)])
def test_gram_and_training_refuse_what_is_not_a_two_layer_net(bad):
    X, Y = torch.rand(4, 3) * 0.5, torch.rand(4, 2)
    with pytest.raises(ValidationError, match="net must be a TwoLayerNet"):
        gram(bad, X)
    with pytest.raises(ValidationError, match="net must be a TwoLayerNet"):
        gradient_descent(bad, X, Y, lr=1e-3, steps=1)


def test_a_float32_network_is_refused_by_name():
    net, X = SoftmaxMLP(3, 2, 8).float(), torch.rand(4, 3) * 0.5
    with pytest.raises(ValidationError, match=r"torch.float32 weights.*\.double\(\)"):
        net(X)
    with pytest.raises(ValidationError, match=r"net holds torch.float32 weights"):
        gram(net, X)


def test_kernel_drift_checks_shapes_and_values():
    with pytest.raises(ValidationError, match=r"H0 has shape \(4, 4\)"):
        kernel_drift(torch.rand(3, 3), torch.rand(4, 4))
    with pytest.raises(ValidationError, match="H has 4 non-finite"):
        kernel_drift(torch.full((2, 2), float("nan")), torch.rand(2, 2))
    assert kernel_drift(torch.ones(2, 3), torch.zeros(2, 3)) == pytest.approx(math.sqrt(6))  # a test kernel


# ---- D10: kernel regression --------------------------------------------------------------------------------------
def test_kernel_regression_refuses_a_cut_test_kernel_and_a_bare_step_count():
    net, X, Y = SoftmaxMLP(3, 2, 8), torch.rand(4, 3) * 0.5, torch.rand(4, 2)
    H, K = gram(net, X), cross_kernel(net, X[:2], X)
    with pytest.raises(ValidationError, match="K_test has 3 rows, must be p \\* L"):
        kernel_regression_path(H, K[:3], Y, lr=1e-3, scale=8.0, steps=[1])
    with pytest.raises(ValidationError, match="K_test has 3 rows, must be p \\* L"):
        kernel_regression_limit(H, K[:3], Y)
    with pytest.raises(ValidationError, match="steps must be a sequence of step counts, got 5"):
        kernel_regression_path(H, K, Y, lr=1e-3, scale=8.0, steps=5)


# ---- D14, D15 ----------------------------------------------------------------------------------------------------
def test_to_unit_ball_refuses_nan():
    with pytest.raises(ValidationError, match="X has 4 non-finite"):
        to_unit_ball(torch.full((2, 2), float("nan")))


def test_perturbed_kernels_names_x_for_zero_mean_inputs():
    with pytest.raises(ValidationError, match=r"^X has mean row 0"):
        perturbed_kernels([4], [0.1], torch.tensor([[0.5, 0.0], [-0.5, 0.0]]), 1, 1.0, 0)


def test_perturbed_kernels_moves_every_neuron_by_exactly_r(monkeypatch):
    """A neuron with <w_r, u> = 0 moves too (the docstring's "every neuron moved by exactly R")."""

    def net_with_a_neuron_orthogonal_to_u(*args, **kwargs):
        net = SoftmaxMLP(*args, **kwargs)
        with torch.no_grad():
            net.W[0, :2] = 0.0  # the first pair: <w_r, u> = 0 for u = e_1
        return net

    moved = []
    real_with_weights = perturbation.with_weights
    monkeypatch.setattr(perturbation, "SoftmaxMLP", net_with_a_neuron_orthogonal_to_u)
    monkeypatch.setattr(
        perturbation, "with_weights", lambda net, W: moved.append(W - net.W) or real_with_weights(net, W)
    )
    perturbed_kernels([4], [0.25], torch.tensor([[0.5, 0.0], [0.3, 0.0]]), 1, 1.0, 0)  # u = e_1
    assert torch.allclose(moved[0].norm(dim=0), torch.full((4,), 0.25), rtol=0, atol=1e-15)
