"""The empirical neural tangent kernel of any ``nn.Module``, through ``torch.func``.

Spec: softmax-ntk-diffusion §4.1 (the NTK as the Gram matrix of the parameter Jacobian, Definition 3.6), here for
any module and without the ``1/m`` normalisation of the closed form.

For a module ``f(theta, x)`` with outputs of size ``O`` per sample, the empirical NTK is

    Theta(x1_a, x2_b)[o, p] = sum over parameters P of  d f_o(x1_a) / d theta_P * d f_p(x2_b) / d theta_P,

the per-sample Jacobians contracted over every trainable parameter (neural-tangents' "jacobian contraction").
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call, jacrev, vmap

from attnlab._validation import ValidationError, check_bool, check_in, check_scalar

__all__ = ["empirical_ntk"]

Jacobians = dict[str, torch.Tensor]  # parameter name -> (N, O, *parameter shape)


def _check_inputs(name: str, x: object, sample_shape: tuple[int, ...] | None) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise ValidationError(
            f"{name} must be a torch.Tensor of shape (N, ...) (a batch of inputs), got "
            f"{type(x).__name__}; wrap arrays with torch.as_tensor"
        )
    if x.is_meta:
        raise ValidationError(f"{name} is a 'meta' tensor (a shape without values); pass inputs with data")
    if x.dim() < 1 or x.shape[0] < 1:
        raise ValidationError(
            f"{name} has shape {tuple(x.shape)}; pass a batch of shape (N, ...) with N >= 1, "
            f"e.g. x[None] for a single input"
        )
    if (x.is_floating_point() or x.is_complex()) and not bool(torch.isfinite(x).all()):
        bad = int((~torch.isfinite(x)).sum())
        raise ValidationError(
            f"{name} has {bad} non-finite (NaN or inf) entries: the kernel there has no value; remove or impute them "
            "first"
        )
    if sample_shape is not None and tuple(x.shape[1:]) != sample_shape:
        raise ValidationError(
            f"x2 has samples of shape {tuple(x.shape[1:])}, but x1's are {sample_shape}; both "
            f"batches must hold inputs of the same shape"
        )
    return x


#: Layers whose output in training mode is not a function of the sample and the parameters alone: dropout draws a
#: fresh mask at every call, batch norm normalises by the batch's own statistics (and fails under vmap).
_TRAINING_DEPENDENT = (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm)


def _check_mode(module: nn.Module, eval_mode: bool) -> None:
    """Refuse a module in training mode that holds dropout or batch norm, unless ``eval_mode`` asks for eval."""
    if eval_mode or not module.training:
        return
    layers = sorted({type(m).__name__ for m in module.modules() if isinstance(m, _TRAINING_DEPENDENT) and m.training})
    if layers:
        raise ValidationError(
            f"module {type(module).__name__} is in training mode and holds {', '.join(layers)}: dropout gives a "
            "different kernel at every call and batch norm mixes the samples of a batch. Call module.eval() first, "
            "or pass eval_mode=True to take the kernel in eval mode (the module's mode is restored afterwards)"
        )


def _per_sample_function(module: nn.Module, buffers: dict[str, torch.Tensor]) -> Callable:
    """``f(params, x) -> (O,)`` for one sample ``x`` (the module sees a batch of one)."""

    def f(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        out = functional_call(module, {**params, **buffers}, (x.unsqueeze(0),))
        return out.reshape(-1)  # (O,): a scalar output per sample counts as O = 1

    return f


def _check_per_sample(
    module: nn.Module, f: Callable, params: dict[str, torch.Tensor], name: str, x: torch.Tensor
) -> None:
    """Refuse a module that does not map a batch to one tensor of per-sample outputs: a tuple (``nn.GRU``'s
    ``(output, h_n)``), a batch axis of another size, or outputs that depend on the other samples of the batch
    (``x - x.mean(0)``, batch statistics): the per-sample Jacobians would then differentiate another function."""
    with torch.no_grad():
        try:
            batch = functional_call(module, {**params, **dict(module.named_buffers())}, (x,))
        except RuntimeError as err:
            raise ValidationError(_refused_input(module, params, name, x, err)) from None
        if not isinstance(batch, torch.Tensor):
            raise ValidationError(
                f"module {type(module).__name__} returns a {type(batch).__name__}, not one tensor (nn.GRU and nn.LSTM "
                "return (output, state)); wrap it in a module whose forward returns the one tensor to take the kernel of "
                "(e.g. gru(x)[0])"
            )
        if batch.dim() < 1 or batch.shape[0] != x.shape[0]:
            raise ValidationError(
                f"module {type(module).__name__} maps {name} of shape {tuple(x.shape)} to {tuple(batch.shape)}; it "
                f"must map a batch (N, ...) to outputs (N, ...) with the batch axis first"
            )
        try:
            alone = vmap(f, in_dims=(None, 0))(params, x)
        except RuntimeError as err:
            if "vmap" not in str(err):
                raise
            alone = torch.stack([f(params, sample) for sample in x])
    batch = batch.reshape(len(x), -1)
    # the same function of each sample, batched or alone, agrees to rounding: 1e3 ulps of the output's scale
    scale = float(batch.abs().max()) if batch.numel() else 0.0
    tol = 1e3 * torch.finfo(batch.dtype).eps * max(scale, 1.0) if batch.is_floating_point() else 0.0
    gap = float((batch - alone.reshape(batch.shape)).abs().max()) if batch.numel() else 0.0
    if alone.shape[-1] != batch.shape[-1] or not gap <= tol:
        raise ValidationError(
            f"module {type(module).__name__}'s output for a sample of {name} depends on the other samples of the "
            f"batch (batched and one-at-a-time outputs differ by {gap:.3g}): it mixes samples (e.g. x - x.mean(0), "
            "batch statistics), so it has no per-sample kernel; take the NTK of a module whose outputs are per "
            "sample (batch norm: module.eval())"
        )


def _refused_input(
    module: nn.Module, params: dict[str, torch.Tensor], name: str, x: torch.Tensor, err: RuntimeError
) -> str:
    """The message for a batch ``x`` the module's forward fails on: torch's error, and the fix when the floating
    dtypes of ``x`` and the parameters differ (``nn.Linear`` is float32, attnlab's data float64)."""
    kinds = sorted({str(p.dtype) for p in params.values() if p.is_floating_point()})
    message = (
        f"module {type(module).__name__} cannot take {name} (shape {tuple(x.shape)}, dtype {x.dtype}): "
        f"{str(err).splitlines()[0]}"
    )
    if x.is_floating_point() and kinds and str(x.dtype) not in kinds:
        wanted = kinds[0].removeprefix("torch.")
        message += (
            f"; its parameters are {', '.join(kinds)}: pass {name}.to(torch.{wanted}), or convert the module "
            f"with module.to({x.dtype}) (the kernel comes in the parameters' dtype)"
        )
    return message + "; pass inputs of the shape and dtype the module takes"


def _jacobians(f: Callable, params: dict[str, torch.Tensor], x: torch.Tensor) -> Jacobians:
    """Per-sample Jacobians ``{name: (N, O, *shape)}``: vmapped, or one sample at a time for a module whose
    forward cannot run under vmap (data-dependent control flow such as input checks)."""
    try:
        return vmap(jacrev(f), in_dims=(None, 0))(params, x)
    except RuntimeError as err:
        if "vmap" not in str(err):
            raise
    per_sample = [jacrev(f)(params, sample) for sample in x]
    return {name: torch.stack([J[name] for J in per_sample]) for name in params}


def _contract(J1: Jacobians, J2: Jacobians, mode: str) -> torch.Tensor:
    """Sum over parameters of the Jacobian products: ``(N1, N2, O, O)`` for ``"full"``, ``(N1, N2)`` for trace."""
    total = None
    for name, a in J1.items():
        a = a.flatten(2)  # (N1, O, P)
        b = J2[name].flatten(2)  # (N2, O, P)
        # spec §4.1: Theta = J J^T summed over parameters
        term = torch.einsum("aoP,bpP->abop", a, b) if mode == "full" else torch.einsum("aoP,boP->ab", a, b)
        total = term if total is None else total + term
    return total


def empirical_ntk(
    module: nn.Module,
    x1: torch.Tensor,
    x2: torch.Tensor | None = None,
    *,
    mode: str = "full",
    chunk_size: int | None = None,
    eval_mode: bool = False,
) -> torch.Tensor:
    """The empirical NTK ``Theta(x1, x2)`` of ``module`` at its current parameters.

    Spec: softmax-ntk-diffusion §4.1 (NTK Gram matrix ``J J^T``; the closed form divides by the width ``m``).

    Parameters
    ----------
    module : torch.nn.Module
        Maps a batch ``(N, ...)`` to outputs ``(N, O)`` (or ``(N,)``, read as ``O = 1``; any ``(N, ...)`` output
        is flattened per sample). Each sample's output must depend on that sample only: a module in training mode
        that holds dropout or batch norm is refused (call ``module.eval()`` first, or pass ``eval_mode=True``).
    x1 : torch.Tensor, shape (N1, ...)
        First batch of inputs (any dtype the module accepts, token ids included).
    x2 : torch.Tensor, shape (N2, ...), optional
        Second batch, inputs of the same shape as ``x1``'s; default ``x1``.
    mode : {"full", "trace"}, default="full"
        ``"full"``: the kernel with both output axes; ``"trace"``: its trace over outputs, ``sum_o Theta[..., o, o]``.
    chunk_size : int, optional
        Compute the kernel in blocks of ``chunk_size`` samples of ``x1`` by ``chunk_size`` samples of ``x2``:
        the Jacobians held at once take ``2 * chunk_size * O * P`` numbers instead of ``(N1 + N2) * O * P``
        (``P`` parameters), at the price of recomputing ``x2``'s Jacobians for every block of ``x1``. Default:
        one block.
    eval_mode : bool, default=False
        Take the kernel with the module in eval mode (its mode is restored afterwards). Without it, a module in
        training mode that holds dropout or batch norm is refused.

    Returns
    -------
    torch.Tensor
        Shape (N1, N2, O, O) for ``mode="full"``, (N1, N2) for ``mode="trace"``, in the parameters' dtype.
        ``Theta[a, b, o, p] = sum_P d f_o(x1_a)/d theta_P * d f_p(x2_b)/d theta_P`` over the parameters with
        ``requires_grad=True``.

    Raises
    ------
    ValidationError
        On a module with no trainable parameters, a module in training mode with dropout or batch norm (without
        ``eval_mode=True``), a module that returns a tuple (``nn.GRU``) or mixes the samples of a batch (its
        output for a sample changes with the others, e.g. ``x - x.mean(0)``), 'meta' parameters or inputs, inputs
        that are not batches or hold NaN or inf, batches of different sample shapes, inputs the module's forward
        fails on (another floating dtype than its parameters', a wrong sample shape), or a bad ``mode`` or
        ``chunk_size``.

    Notes
    -----
    The Jacobians come from ``torch.func.jacrev`` vmapped over samples, with buffers held fixed; a module whose
    forward cannot run under ``vmap`` (it checks its input's values, say) is differentiated one sample at a time. The API follows
    neural-tangents' ``empirical_ntk_fn`` (see ``docs/tutorial/your-model.md``): there one builds a function of
    ``(x1, x2, params)`` once and picks ``trace_axes``/``vmap_axes`` and an implementation; here one calls the
    kernel directly on a module, ``mode="trace"`` is ``trace_axes=(-1,)`` and ``mode="full"`` is
    ``trace_axes=()``, with the output axes last, ``(N1, N2, O, O)``, as in neural-tangents.

    Examples
    --------
    >>> net = nn.Linear(3, 2, dtype=torch.float64)
    >>> x = torch.eye(3, dtype=torch.float64)
    >>> empirical_ntk(net, x).shape
    torch.Size([3, 3, 2, 2])
    >>> empirical_ntk(net, x, mode="trace")  # a linear layer: 2 * (<x1, x2> + 1)
    tensor([[4., 2., 2.],
            [2., 4., 2.],
            [2., 2., 4.]], dtype=torch.float64)
    """
    if not isinstance(module, nn.Module):
        raise ValidationError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    check_in("mode", mode, ("full", "trace"))
    if chunk_size is not None:
        chunk_size = check_scalar("chunk_size", chunk_size, kind=int, low=1)
    eval_mode = check_bool("eval_mode", eval_mode)
    _check_mode(module, eval_mode)
    x1 = _check_inputs("x1", x1, None)
    x2 = x1 if x2 is None else _check_inputs("x2", x2, tuple(x1.shape[1:]))
    params = {name: p.detach() for name, p in module.named_parameters() if p.requires_grad}
    if not params:
        raise ValidationError(
            f"module {type(module).__name__} has no parameters with requires_grad=True; the "
            f"NTK is taken over the trainable parameters"
        )
    meta = [name for name, p in params.items() if p.is_meta]
    if meta:
        raise ValidationError(
            f"parameters {meta[:5]} of {type(module).__name__} are 'meta' tensors (shapes without values); load or "
            "initialise the weights (e.g. module.to_empty(device='cpu') and a state dict) first"
        )
    training = module.training
    if eval_mode:
        module.eval()
    try:
        return _kernel(module, params, x1, x2, mode, chunk_size)
    finally:
        module.train(training)


def _kernel(
    module: nn.Module,
    params: dict[str, torch.Tensor],
    x1: torch.Tensor,
    x2: torch.Tensor,
    mode: str,
    chunk_size: int | None,
) -> torch.Tensor:
    """The kernel of :func:`empirical_ntk` on checked arguments, in one block or in blocks of ``chunk_size``."""
    buffers = {name: b.detach() for name, b in module.named_buffers()}
    f = _per_sample_function(module, buffers)
    _check_per_sample(module, f, params, "x1", x1)
    if x2 is not x1:
        _check_per_sample(module, f, params, "x2", x2)
    if chunk_size is None:
        jac_1 = _jacobians(f, params, x1)
        return _contract(jac_1, jac_1 if x2 is x1 else _jacobians(f, params, x2), mode)
    rows = []
    for block_1 in x1.split(chunk_size):
        jac_1 = _jacobians(f, params, block_1)
        # x2's Jacobians are recomputed for every block of x1: memory stays at two blocks' Jacobians
        rows.append(
            torch.cat(
                [_contract(jac_1, _jacobians(f, params, block_2), mode) for block_2 in x2.split(chunk_size)], dim=1
            )
        )
    return torch.cat(rows, dim=0)
