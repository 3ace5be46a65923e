"""empirical_ntk (any module, torch.func) against a plain per-sample Jacobian contraction and the closed form."""

import pytest
import torch
from torch import nn

from attnlab._validation import ValidationError
from attnlab.ntk import SoftmaxMLP, empirical_ntk, gram

TOL = 1e-10  # float64, the same products summed in another order: round-off only


def _mlp(seed=0):
    """Two hidden layers and a tanh output: Theta[a, b, o, p] != Theta[a, b, p, o], so swapped axes show."""
    torch.manual_seed(seed)  # nn.Linear initialises from the global RNG; fixed for reproducible tests
    return nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 2), nn.Tanh()).double()


def _batch(n, seed):
    return torch.randn(n, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _reference_ntk(module, x1, x2):
    """Theta[a, b] = J(x1_a) J(x2_b)^T with J the (O, P) Jacobian of one sample over all parameters, flattened."""
    names = [name for name, _ in module.named_parameters()]
    shapes = [p.shape for _, p in module.named_parameters()]
    flat = torch.cat([p.detach().reshape(-1) for p in module.parameters()])

    def jacobian(x):
        def f(theta):
            params, start = {}, 0
            for name, shape in zip(names, shapes):
                params[name] = theta[start : start + shape.numel()].reshape(shape)
                start += shape.numel()
            return torch.func.functional_call(module, params, (x[None],)).reshape(-1)

        return torch.autograd.functional.jacobian(f, flat)  # (O, P)

    J1 = [jacobian(x) for x in x1]
    J2 = [jacobian(x) for x in x2]
    return torch.stack([torch.stack([a @ b.T for b in J2]) for a in J1])  # (N1, N2, O, O)


def test_full_kernel_equals_per_sample_jacobian_contraction():
    net, x1, x2 = _mlp(), _batch(4, 1), _batch(3, 2)
    K = empirical_ntk(net, x1, x2)
    assert K.shape == (4, 3, 2, 2)
    assert (K - K.transpose(-1, -2)).abs().max() > 1e-3  # the test can see a transposed output pair
    torch.testing.assert_close(K, _reference_ntk(net, x1, x2), rtol=0, atol=TOL)


def test_trace_is_the_trace_of_the_full_kernel():
    net, x1, x2 = _mlp(), _batch(4, 1), _batch(3, 2)
    reference = _reference_ntk(net, x1, x2).diagonal(dim1=-2, dim2=-1).sum(-1)
    torch.testing.assert_close(empirical_ntk(net, x1, x2, mode="trace"), reference, rtol=0, atol=TOL)


@pytest.mark.parametrize("mode", ["full", "trace"])
def test_chunks_give_the_same_kernel(mode):
    net, x1, x2 = _mlp(), _batch(5, 1), _batch(4, 2)
    torch.testing.assert_close(
        empirical_ntk(net, x1, x2, mode=mode, chunk_size=2), empirical_ntk(net, x1, x2, mode=mode), rtol=0, atol=TOL
    )


def test_default_second_batch_is_the_first_and_the_gram_is_symmetric_psd():
    net, x = _mlp(), _batch(5, 3)
    K = empirical_ntk(net, x).permute(0, 2, 1, 3).reshape(10, 10)  # rows (sample, output)
    torch.testing.assert_close(K, K.T, rtol=0, atol=TOL)
    assert torch.linalg.eigvalsh(K).min() > -TOL


def test_softmax_network_matches_its_closed_form_gram():
    """The closed form ``gram`` divides J J^T by the width m (spec §4.1); only W is trainable, ``a`` is a buffer."""
    net = SoftmaxMLP(3, 2, 8, seed=0)
    X = _batch(4, 5)
    X = X / X.norm(dim=1, keepdim=True)
    H = gram(net, X) * net.kernel_scale  # rows (l, i) at l * n + i
    closed = H.reshape(2, 4, 2, 4).permute(1, 3, 0, 2)  # (i, j, l1, l2)
    torch.testing.assert_close(empirical_ntk(net, X), closed, rtol=0, atol=TOL)


def test_frozen_parameters_and_scalar_outputs():
    """Only trainable parameters count; an output of shape (N,) is O = 1. A linear map: Theta = <x1, x2> + 1."""
    net = nn.Linear(3, 1).double()
    x1, x2 = _batch(3, 1), _batch(2, 2)
    squeezed = nn.Sequential(net, nn.Flatten(0))
    expected = x1 @ x2.T + 1  # d/dw (w.x + b) = (x, 1)
    torch.testing.assert_close(empirical_ntk(squeezed, x1, x2)[..., 0, 0], expected, rtol=0, atol=TOL)
    net.bias.requires_grad_(False)
    torch.testing.assert_close(empirical_ntk(net, x1, x2, mode="trace"), x1 @ x2.T, rtol=0, atol=TOL)


def test_integer_inputs_such_as_token_ids():
    torch.manual_seed(0)  # nn.Embedding initialises from the global RNG
    net = nn.Sequential(nn.Embedding(6, 3), nn.Flatten(1), nn.Linear(6, 2)).double()
    ids = torch.tensor([[1, 2], [3, 4], [1, 2]])
    K = empirical_ntk(net, ids, mode="trace")
    torch.testing.assert_close(K[0], K[2], rtol=0, atol=TOL)  # the same sequence twice: the same row


def test_bad_inputs_are_refused_with_the_fix():
    net = _mlp()
    with pytest.raises(ValidationError, match="mode == 'diag', must be one of 'full', 'trace'"):
        empirical_ntk(net, _batch(2, 0), mode="diag")
    with pytest.raises(ValidationError, match="chunk_size == 0, must be >= 1"):
        empirical_ntk(net, _batch(2, 0), chunk_size=0)
    with pytest.raises(ValidationError, match=r"x1 has shape \(\); pass a batch"):
        empirical_ntk(net, torch.tensor(1.0))
    with pytest.raises(ValidationError, match=r"x2 has samples of shape \(4,\), but x1's are \(3,\)"):
        empirical_ntk(net, _batch(2, 0), torch.zeros(2, 4))
    with pytest.raises(ValidationError, match="x1 must be a torch.Tensor"):
        empirical_ntk(net, [[1.0, 2.0, 3.0]])
    with pytest.raises(ValidationError, match="no parameters with requires_grad=True"):
        empirical_ntk(nn.Tanh(), _batch(2, 0))
    with pytest.raises(ValidationError, match="module must be a torch.nn.Module"):
        empirical_ntk(lambda x: x, _batch(2, 0))


def _bn_net():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Tanh(), nn.Dropout(0.5), nn.Linear(4, 2)).double()
    net(torch.randn(8, 3, dtype=torch.float64))  # running statistics away from their initial values
    return net


def test_training_mode_with_dropout_or_batch_norm_is_refused():
    net, x = _bn_net(), torch.randn(5, 3, dtype=torch.float64)
    with pytest.raises(
        ValidationError, match=r"training mode and holds BatchNorm1d, Dropout.*module.eval\(\).*eval_mode"
    ):
        empirical_ntk(net, x)


def test_batch_norm_in_eval_mode_matches_per_sample_autograd_jacobians():
    net, x = _bn_net(), torch.randn(5, 3, dtype=torch.float64)
    net.eval()
    kernel = empirical_ntk(net, x, mode="trace")
    params = [p for p in net.parameters()]
    rows = []
    for a in range(5):  # plain autograd, one sample and one output at a time
        out = net(x[a : a + 1]).reshape(-1)
        rows.append(
            [torch.cat([g.reshape(-1) for g in torch.autograd.grad(o, params, retain_graph=True)]) for o in out]
        )
    J = torch.stack([torch.stack(r) for r in rows])  # (N, O, P)
    torch.testing.assert_close(kernel, torch.einsum("aoP,boP->ab", J, J), rtol=1e-12, atol=1e-12)
    net.train()
    torch.testing.assert_close(empirical_ntk(net, x, mode="trace", eval_mode=True), kernel, rtol=0, atol=0)
    assert net.training  # the module's mode is restored


def test_meta_tensors_are_refused():
    from attnlab.probe import head_W

    with pytest.raises(ValidationError, match="'meta' tensors"):
        empirical_ntk(nn.Linear(3, 2, device="meta"), torch.randn(4, 3))
    with pytest.raises(ValidationError, match="'meta' tensor"):
        empirical_ntk(nn.Linear(3, 2), torch.randn(4, 3, device="meta"))
    with pytest.raises(ValidationError, match="'meta' tensors"):
        head_W(nn.MultiheadAttention(4, 2, device="meta"), 0)
