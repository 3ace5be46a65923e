"""A real attention head as attnlab's combined matrix ``W``: its weights are ``softmax_t(x_t^T W z)``.

Spec: implicit-bias-ngd §2 (logits ``s_t = x_t^T W z``), kq-nuclear-norm §2 (``W = K Q^T`` from key and query
matrices).

A head of a transformer computes ``scale * (W_K x + b_K)^T (W_Q z + b_Q)`` for key token ``x`` and query token
``z`` (``W_K, W_Q`` of shape ``(e, d)``, ``scale`` usually ``1/sqrt(e)``). Without biases this is ``x^T W z`` with
``W = scale * W_K^T W_Q``, shape ``(d_k, d_q)``: the transpose of the product one reads off ``q k^T``. With
biases, tokens get a constant last coordinate 1 (homogeneous coordinates, ``x~ = (x, 1)``) and
``W = scale * [W_K, b_K]^T [W_Q, b_Q]``, shape ``(d_k + 1, d_q + 1)``, reproduces every logit exactly.
"""

from __future__ import annotations

import torch
from torch import nn

from attnlab._validation import ValidationError, check_bool, check_scalar
from attnlab.probe.adapters import HeadProjection, adapter_for, check_head

__all__ = ["has_bias", "head_W", "head_index", "homogeneous_tokens", "resolve_homogeneous", "weight_part"]


def _affine(W: torch.Tensor, b: torch.Tensor | None, homogeneous: bool) -> torch.Tensor:
    """``[W, b]`` (``(e, d + 1)``, a zero column when ``b`` is None) in homogeneous coordinates, else ``W``."""
    W = W.to(torch.float64)
    if not homogeneous:
        return W
    column = torch.zeros(W.shape[0], 1, dtype=torch.float64) if b is None else b.to(torch.float64)[:, None]
    return torch.cat([W, column], dim=1)


def head_index(module: nn.Module, head: object, *, all_allowed: bool = False) -> int | str:
    """``head`` checked against ``module``'s number of heads (:func:`~attnlab.probe.adapters.check_head`).

    Parameters
    ----------
    module : nn.Module
        An attention module with an adapter.
    head : int
        Any integral type (``np.int64``, a 0-d integer tensor).
    all_allowed : bool, default=False
        Also accept ``"all"``.

    Returns
    -------
    int or "all"
        The index as a Python ``int``.

    Raises
    ------
    ValidationError
        On a non-integer head or one out of range (the message gives the bound).
    """
    heads = int(adapter_for(module).heads(module))
    return check_head(head, heads, owner=type(module).__name__, all_allowed=all_allowed)


def _projection(module: nn.Module, head: object) -> HeadProjection:
    return adapter_for(module).projection(module, head_index(module, head))


def has_bias(module: nn.Module) -> bool:
    """Whether the query or key projection of ``module`` has a bias (then :func:`head_W` is homogeneous).

    Parameters
    ----------
    module : nn.Module
        An attention layer with an adapter.

    Returns
    -------
    bool
    """
    projection = _projection(module, 0)
    return projection.b_q is not None or projection.b_k is not None


def resolve_homogeneous(module: nn.Module, homogeneous: bool | None) -> bool:
    """``homogeneous`` checked against the module: None means "when it has biases"; False with biases is refused."""
    biased = has_bias(module)
    if homogeneous is None:
        return biased
    if not isinstance(homogeneous, bool):
        raise ValidationError(f"homogeneous must be True, False or None, got {homogeneous!r}")
    if biased and not homogeneous:
        raise ValidationError(
            f"homogeneous=False, but {type(module).__name__} has query/key biases, which no (d, d) matrix "
            f"reproduces; pass homogeneous=True or None (tokens then get a last coordinate 1)"
        )
    return homogeneous


def head_W(module: nn.Module, head: int, *, homogeneous: bool | None = None) -> torch.Tensor:  # noqa: N802 (spec symbol W)
    """The combined key-query matrix of one head, in attnlab's convention ``weights = softmax_t(x_t^T W z)``.

    Spec: implicit-bias-ngd §2 (``s = X W z``), kq-nuclear-norm §2 (``W = K Q^T``).

    Parameters
    ----------
    module : torch.nn.Module
        An attention module with a registered adapter: ``torch.nn.MultiheadAttention``, timm's ``Attention``,
        transformers' ``BertSelfAttention`` and ``ViTAttention``, ``attnlab.nets``'s
        ``SelfAttention``, or any type added with :func:`~attnlab.probe.register_adapter`.
    head : int
        Head index in ``[0, heads - 1]``, of any integral type (``np.int64``, a 0-d integer tensor).
    homogeneous : bool, optional
        True: tokens carry a last coordinate 1 and ``W`` has shape ``(d_k + 1, d_q + 1)`` (exact with biases;
        the last row and column are zero without them). False: ``W`` is ``(d_k, d_q)`` (refused for a module with
        biases). Default: True exactly when the module has query or key biases.

    Returns
    -------
    torch.Tensor, shape (d_k [+ 1], d_q [+ 1]), float64
        ``W = scale * [W_K, b_K]^T [W_Q, b_Q]``; the logit of key ``x`` for query ``z`` is ``x~^T W z~``, equal to
        the module's logit (before any mask).

    Raises
    ------
    TypeError
        When ``module``'s type has no adapter (the message says how to add one).
    ValidationError
        On a head index out of range, 'meta' weights, ``homogeneous=False`` for a module with biases, or a module
        configured so that its logits are not bilinear (timm's ``qk_norm``, ``MultiheadAttention``'s ``add_bias_kv``).

    Notes
    -----
    The last row of a homogeneous ``W`` adds ``b_K^T (W_Q z + b_Q)`` to every key's logit of a query alike, so it
    never changes the weights; :func:`~attnlab.probe.weight_part` drops it before norms and alignments. Masks
    (causal, padding) are not part of ``W``: a masked key is one the softmax leaves out, so restrict the keys
    (``capture(..., keys=...)``) instead.

    Examples
    --------
    >>> mha = nn.MultiheadAttention(4, 2, bias=False, batch_first=True, dtype=torch.float64)
    >>> x = torch.randn(1, 3, 4, dtype=torch.float64)
    >>> _, weights = mha(x, x, x, average_attn_weights=False)
    >>> W = head_W(mha, 1)
    >>> torch.allclose(torch.softmax(x[0] @ W @ x[0].T, dim=0).T, weights[0, 1])
    True
    """
    projection = _projection(module, head)
    if any(t is not None and t.is_meta for t in (projection.W_k, projection.W_q, projection.b_k, projection.b_q)):
        raise ValidationError(
            f"{type(module).__name__}'s weights are 'meta' tensors (shapes without values), so W has no value; load "
            "or initialise the weights first (e.g. module.to_empty(device='cpu') and load_state_dict)"
        )
    homogeneous = resolve_homogeneous(module, homogeneous)
    K = _affine(projection.W_k, projection.b_k, homogeneous)  # (e, d_k [+ 1])
    Q = _affine(projection.W_q, projection.b_q, homogeneous)  # (e, d_q [+ 1])
    check_scalar("scale", projection.scale, low=0.0, low_inclusive=False)
    return projection.scale * K.T @ Q  # spec ngd §2 / kq §2: x~^T (scale K^T Q) z~ = scale k^T q


def homogeneous_tokens(X: torch.Tensor) -> torch.Tensor:
    """Tokens with a constant last coordinate 1 appended.

    Parameters
    ----------
    X : torch.Tensor, shape (..., d)

    Returns
    -------
    torch.Tensor, shape (..., d + 1)
        Same dtype and device.

    Raises
    ------
    ValidationError
        When ``X`` is not a tensor of at least one axis.
    """
    if not isinstance(X, torch.Tensor) or X.dim() == 0:
        got = "a 0-d tensor" if isinstance(X, torch.Tensor) else f"a {type(X).__name__}"
        raise ValidationError(
            f"X must be a tensor of tokens of shape (..., d), got {got}; pass torch.as_tensor(X), with a token axis"
        )
    return _homogeneous_tokens(X)


def _homogeneous_tokens(X: torch.Tensor) -> torch.Tensor:
    """:func:`homogeneous_tokens` without its check, for tokens the probe has shaped (once per probed step)."""
    return torch.cat([X, torch.ones(X.shape[:-1] + (1,), dtype=X.dtype, device=X.device)], dim=-1)


def weight_part(W: torch.Tensor, homogeneous: bool) -> torch.Tensor:
    """``W`` with its key-side constant row zeroed when homogeneous: the part that moves the attention weights.

    The row multiplies the key's constant coordinate 1, so it shifts all of a query's logits alike.

    Parameters
    ----------
    W : torch.Tensor, shape (..., d_k + 1, d_q + 1) or (..., d_k, d_q)
        A head's matrix.
    homogeneous : bool
        Whether ``W`` acts on homogeneous tokens (its last row is the key-side constant's); ``True`` or ``False``
        only (a truthy ``"no"`` would zero a real row).

    Returns
    -------
    torch.Tensor
        ``W``'s shape; ``W`` itself when not homogeneous.

    Raises
    ------
    ValidationError
        When ``W`` is not a tensor of at least 2 axes or ``homogeneous`` is not a bool.
    """
    if not isinstance(W, torch.Tensor) or W.dim() < 2:
        shape = tuple(W.shape) if isinstance(W, torch.Tensor) else type(W).__name__
        raise ValidationError(f"W must be a tensor of shape (..., d_k, d_q), got {shape}; pass head_W's matrix")
    if not check_bool("homogeneous", homogeneous):
        return W
    return torch.cat([W[..., :-1, :], torch.zeros_like(W[..., -1:, :])], dim=-2)
