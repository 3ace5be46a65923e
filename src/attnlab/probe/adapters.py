"""How attnlab reads an attention module: one adapter per module type, in a registry users can extend.

Spec: implicit-bias-ngd §2 (logits ``s_t = x_t^T W z``); a real head computes ``scale * (W_K x + b_K)^T (W_Q z + b_Q)``.

An :class:`Adapter` answers three questions about a module type, and optionally a fourth:

- ``heads(module)``: how many heads it has;
- ``projection(module, head)``: that head's query and key maps and its logit scale, as a :class:`HeadProjection`
  (raise :class:`~attnlab._validation.ValidationError` when the module is configured so that its logits are
  not a bilinear form of the tokens, e.g. with a normalisation of q and k);
- ``tokens(module, args, kwargs)``: from the arguments of one call of ``module.forward``, the query-side and the
  key-side tokens, both batch-first, ``(n, L, d_q)`` and ``(n, T, d_k)``;
- ``mask(module, args, kwargs)`` (optional): the attention mask of that call as an additive float tensor
  broadcastable to ``(n, heads, L, T)`` (0 keeps a key, ``-inf`` masks it; :func:`additive_mask` converts a
  boolean one), or None when the call has none.

Register an adapter under the module's class, or under the class's dotted name
(``"package.module.ClassName"``) so that the package need not be imported; a module is matched by its own class
first, then by its base classes.

Examples
--------
>>> import torch
>>> from torch import nn
>>> class MyAttention(nn.Module):
...     def __init__(self, d, heads):
...         super().__init__()
...         self.heads, self.q, self.k = heads, nn.Linear(d, d), nn.Linear(d, d)
>>> register_adapter(MyAttention, Adapter(
...     heads=lambda m: m.heads,
...     projection=lambda m, h: linear_projection(m.q, m.k, h, m.heads),
...     tokens=lambda m, args, kwargs: (args[0], args[0]),
... ))
>>> adapter_for(MyAttention(4, 2)).heads(MyAttention(4, 2))
2
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from attnlab._validation import ValidationError, check_scalar

__all__ = [
    "Adapter",
    "HeadProjection",
    "adapter_for",
    "additive_mask",
    "check_head",
    "linear_projection",
    "register_adapter",
    "registered",
]


@dataclass(frozen=True)
class HeadProjection:
    """One head's query and key maps: ``q = W_q z + b_q``, ``k = W_k x + b_k``, logit ``scale * k^T q``.

    Attributes
    ----------
    W_q : torch.Tensor, shape (e, d_q)
        Rows of the query projection that belong to the head (``e`` is the head width).
    W_k : torch.Tensor, shape (e, d_k)
    b_q, b_k : torch.Tensor, shape (e,), or None
        Biases (None: the projection has none).
    scale : float
        The factor on ``k^T q``, usually ``1 / sqrt(e)``.
    """

    W_q: torch.Tensor
    W_k: torch.Tensor
    b_q: torch.Tensor | None
    b_k: torch.Tensor | None
    scale: float


@dataclass(frozen=True)
class Adapter:
    """How to read one module type; see the module docstring for the three functions.

    Attributes
    ----------
    heads : callable ``module -> int``
    projection : callable ``(module, head) -> HeadProjection``
    tokens : callable ``(module, args, kwargs) -> (queries (n, L, d_q), keys (n, T, d_k))``
    mask : callable ``(module, args, kwargs) -> tensor broadcastable to (n, heads, L, T), or None``, optional
        The call's additive attention mask; None (the default) reads no mask.
    """

    heads: Callable[[nn.Module], int]
    projection: Callable[[nn.Module, int], HeadProjection]
    tokens: Callable[[nn.Module, tuple, dict], tuple[torch.Tensor, torch.Tensor]]
    mask: Callable[[nn.Module, tuple, dict], torch.Tensor | None] | None = None


_REGISTRY: dict[type | str, Adapter] = {}


def register_adapter(module_type: type | str, adapter: Adapter) -> None:
    """Teach :func:`~attnlab.probe.head_W` and :func:`~attnlab.probe.capture` a module type.

    Parameters
    ----------
    module_type : type or str
        The module class, or its dotted name ``"package.module.ClassName"`` (matched without importing it).
        Registering a type again replaces its adapter.
    adapter : Adapter
    """
    if not isinstance(adapter, Adapter):
        raise TypeError(f"adapter must be an attnlab.probe.Adapter, got {type(adapter).__name__}")
    if not isinstance(module_type, (type, str)):
        raise TypeError(f"module_type must be a class or a dotted class name, got {type(module_type).__name__}")
    _REGISTRY[module_type] = adapter


def registered() -> list[str]:
    """Dotted names of the module types that have an adapter, sorted.

    Returns
    -------
    list of str
        E.g. ``["torch.nn.modules.activation.MultiheadAttention", ...]``.
    """
    return sorted(key if isinstance(key, str) else _dotted(key) for key in _REGISTRY)


def _dotted(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def adapter_for(module: nn.Module) -> Adapter:
    """The adapter of ``module``'s class or of its nearest base class that has one.

    Parameters
    ----------
    module : nn.Module
        An attention layer.

    Returns
    -------
    Adapter
        What reads the layer's per-head projections and the tokens it receives.

    Raises
    ------
    TypeError
        When no adapter is registered; the message lists the known types and shows how to add one.
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module (an attention layer), got {type(module).__name__}")
    for cls in type(module).__mro__:
        for key in (cls, _dotted(cls)):
            if key in _REGISTRY:
                return _REGISTRY[key]
    name = _dotted(type(module))
    raise TypeError(
        f"attnlab.probe has no adapter for {name}; known types: {', '.join(registered())}. Pass the attention "
        f"module itself (e.g. model.encoder.layers[0].self_attn, not the layer around it), or add an adapter: "
        f"attnlab.probe.register_adapter({type(module).__name__}, attnlab.probe.Adapter(heads=..., "
        f"projection=..., tokens=...)) (see docs/tutorial/your-model.md, 'Adding an adapter')"
    )


def check_head(head: object, heads: int, *, owner: str = "", all_allowed: bool = False) -> int | str:
    """A head index checked against the number of heads: any integral type (``np.int64``, a 0-d integer tensor).

    Parameters
    ----------
    head : int
        The index to check.
    heads : int
        The number of heads; ``head`` must lie in ``[0, heads - 1]``.
    owner : str, optional
        The module type, named in the message (``"MultiheadAttention has 2 heads"``).
    all_allowed : bool, default=False
        Also accept the string ``"all"`` (returned as it is).

    Returns
    -------
    int or "all"
        ``head`` as a Python ``int``.

    Raises
    ------
    ValidationError
        On a non-integer ``head`` (``1.0``, ``"x"``, ``True``) or one outside ``[0, heads - 1]``; the message gives the
        bound.
    """
    if all_allowed and isinstance(head, str) and head == "all":
        return head
    try:
        index = check_scalar("head", head, kind=int)
    except ValidationError:
        also = ' or "all"' if all_allowed else ""
        raise ValidationError(f"head must be an int in [0, {heads - 1}]{also}, got {head!r}") from None
    if not 0 <= index < heads:
        has = f": {owner} has {heads} heads" if owner else ""
        raise ValidationError(f"head == {index}, must be in [0, {heads - 1}]{has}")
    return index


def linear_projection(
    query: nn.Linear, key: nn.Linear, head: int, heads: int, scale: float | None = None
) -> HeadProjection:
    """The :class:`HeadProjection` of a head whose q and k are rows ``[head * e, (head + 1) * e)`` of two Linears.

    Parameters
    ----------
    query, key : nn.Linear
        Projections of the same width ``heads * e`` (``out_features``).
    head, heads : int
        The head's index in ``[0, heads - 1]`` and the number of heads (``e = out_features / heads`` rows each).
    scale : float, optional
        A positive logit scale; default ``1 / sqrt(e)``.

    Returns
    -------
    HeadProjection
        The head's ``W_q (e, d_q)``, ``W_k (e, d_k)``, their biases (or None) and the logit scale.

    Raises
    ------
    ValidationError
        When ``query`` or ``key`` is not an ``nn.Linear``, their widths differ, ``heads`` does not divide the width,
        ``head`` is out of range, or ``scale`` is not positive.
    """
    for name, linear in (("query", query), ("key", key)):
        if not isinstance(linear, nn.Linear):
            raise ValidationError(
                f"{name} must be a torch.nn.Linear, got {type(linear).__name__}; for another layer, build the "
                "attnlab.probe.HeadProjection of the head yourself"
            )
    width = query.out_features
    if key.out_features != width:
        raise ValidationError(
            f"query has out_features = {width} but key has {key.out_features}: a head's q and k have the same width; "
            "pass the query and key projections of one attention module"
        )
    heads = check_scalar("heads", heads, kind=int, low=1)
    if width % heads:
        raise ValidationError(
            f"heads == {heads} does not divide the projections' width out_features = {width} (each head takes "
            "out_features / heads rows); pass the module's own number of heads"
        )
    head = check_head(head, heads)
    e = width // heads
    rows = slice(head * e, (head + 1) * e)
    return HeadProjection(
        query.weight.detach()[rows],
        key.weight.detach()[rows],
        _bias_rows(query, rows),
        _bias_rows(key, rows),
        1 / math.sqrt(e) if scale is None else float(check_scalar("scale", scale, low=0.0, low_inclusive=False)),
    )


def _bias_rows(linear: nn.Linear, rows: slice) -> torch.Tensor | None:
    return None if linear.bias is None else linear.bias.detach()[rows]


def _argument(args: tuple, kwargs: dict, index: int, name: str) -> Any:
    return args[index] if len(args) > index else kwargs.get(name)


def _batch_first(name: str, x: Any, width: int, batch_first: bool = True) -> torch.Tensor:
    """``x`` as ``(n, L, width)``: a 2-D ``(L, width)`` input is one sequence; ``batch_first=False`` is ``(L, n, width)``."""
    if not isinstance(x, torch.Tensor) or x.dim() not in (2, 3) or x.shape[-1] != width:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        layout = "(n, L, d)" if batch_first else "(L, n, d)"
        raise ValidationError(
            f"{name} entering the attention module has shape {shape}, expected {layout} with d = {width} (or "
            f"(L, d) for one sequence); check that the module is called on the tokens you think it is"
        )
    if x.dim() == 2:
        return x[None]
    return x if batch_first else x.transpose(0, 1)


def additive_mask(name: str, mask: Any, masked: bool = True) -> torch.Tensor:
    """An attention mask as the float64 tensor added to the logits: 0 keeps a key, ``-inf`` masks it.

    Parameters
    ----------
    name : str
        The argument's name, for messages.
    mask : torch.Tensor
        Boolean (``masked`` marks the keys left out) or floating (added to the logits as it is).
    masked : bool, default=True
        The boolean value that masks a key: True in torch (``attn_mask``, ``key_padding_mask``), False where a mask
        marks the kept keys (attnlab's ``key_mask``, transformers' boolean masks).

    Returns
    -------
    torch.Tensor
        Same shape, float64.

    Raises
    ------
    ValidationError
        When ``mask`` is not a tensor, is complex, or holds NaN or ``+inf`` (the logits would be NaN).
    """
    if not isinstance(mask, torch.Tensor) or mask.is_complex():
        raise ValidationError(f"{name} must be a boolean or real floating tensor, got {type(mask).__name__}")
    if mask.dtype == torch.bool:
        hidden = mask if masked else ~mask
        return torch.zeros(mask.shape, dtype=torch.float64, device=mask.device).masked_fill(hidden, -math.inf)
    additive = mask.detach().to(torch.float64)
    bad = torch.isnan(additive) | (additive == math.inf)
    if bool(bad.any()):
        raise ValidationError(
            f"{name} has {int(bad.sum())} NaN or +inf entries (first at index "
            f"{tuple(torch.nonzero(bad)[0].tolist())}): added to the logits they make the weights NaN; a float mask "
            "holds 0 (keep a key) and -inf (mask it), or pass a boolean mask"
        )
    return additive


# --- torch.nn.MultiheadAttention -------------------------------------------------------------------------------


def _mha_projection(module: nn.MultiheadAttention, head: int) -> HeadProjection:
    if module.bias_k is not None or module.add_zero_attn:
        raise ValidationError(
            "nn.MultiheadAttention with add_bias_kv=True or add_zero_attn=True appends key tokens that are not "
            "projections of the input, so no single W gives its weights; build it without these options"
        )
    E, e = module.embed_dim, module.head_dim
    rows = slice(head * e, (head + 1) * e)
    if module._qkv_same_embed_dim:
        W_q, W_k = module.in_proj_weight[:E][rows], module.in_proj_weight[E : 2 * E][rows]
    else:
        W_q, W_k = module.q_proj_weight[rows], module.k_proj_weight[rows]
    b = module.in_proj_bias
    b_q, b_k = (None, None) if b is None else (b[:E][rows].detach(), b[E : 2 * E][rows].detach())
    return HeadProjection(W_q.detach(), W_k.detach(), b_q, b_k, 1 / math.sqrt(e))  # torch scales q by e^-1/2


def _mha_tokens(module: nn.MultiheadAttention, args: tuple, kwargs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    query = _batch_first("query", _argument(args, kwargs, 0, "query"), module.embed_dim, module.batch_first)
    key = _batch_first("key", _argument(args, kwargs, 1, "key"), module.kdim, module.batch_first)
    return query, key


def _mha_mask(module: nn.MultiheadAttention, args: tuple, kwargs: dict) -> torch.Tensor | None:
    """``attn_mask`` ((L, T) or (n heads, L, T)) plus ``key_padding_mask`` ((n, T)), as torch combines them."""
    query, key = _mha_tokens(module, args, kwargs)
    n, L, T, H = query.shape[0], query.shape[1], key.shape[1], module.num_heads
    padding = _argument(args, kwargs, 3, "key_padding_mask")
    need_weights = _argument(args, kwargs, 4, "need_weights")
    attn_mask = _argument(args, kwargs, 5, "attn_mask")
    if _argument(args, kwargs, 7, "is_causal") and padding is None and need_weights is False:
        # torch then drops attn_mask and passes is_causal to its kernel: the causal mask, aligned top-left
        attn_mask = torch.ones(L, T, dtype=torch.bool).triu(diagonal=1)
    total = torch.zeros(n, H, L, T, dtype=torch.float64)
    if attn_mask is not None:
        m = additive_mask("attn_mask", attn_mask).cpu()
        if tuple(m.shape) not in ((L, T), (n * H, L, T)):
            raise ValidationError(
                f"attn_mask has shape {tuple(m.shape)}, expected (L, T) = ({L}, {T}) or (n * heads, L, T) = "
                f"({n * H}, {L}, {T})"
            )
        total = total + m.reshape(-1, H, L, T) if m.dim() == 3 else total + m
    if padding is not None:
        k = additive_mask("key_padding_mask", padding).cpu()
        if k.numel() != n * T:
            raise ValidationError(f"key_padding_mask has shape {tuple(k.shape)}, expected (n, T) = ({n}, {T})")
        total = total + k.reshape(n, 1, 1, T)
    return total if attn_mask is not None or padding is not None else None


register_adapter(
    nn.MultiheadAttention,
    Adapter(heads=lambda m: m.num_heads, projection=_mha_projection, tokens=_mha_tokens, mask=_mha_mask),
)


# --- attnlab.nets: our ViT and text encoder (q, k Linear layers without bias) ----------------------------------


def _self_tokens(width: Callable[[nn.Module], int], name: str = "x") -> Callable:
    """``tokens`` of a self-attention module whose first argument (or keyword ``name``) holds the tokens."""

    def tokens(module: nn.Module, args: tuple, kwargs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        x = _batch_first(name, _argument(args, kwargs, 0, name), width(module))
        return x, x

    return tokens


def _key_mask(module: nn.Module, args: tuple, kwargs: dict) -> torch.Tensor | None:
    """attnlab's ``key_mask`` (n, T), True on the real tokens."""
    mask = _argument(args, kwargs, 1, "key_mask")
    return None if mask is None else additive_mask("key_mask", mask, masked=False)[:, None, None, :]


register_adapter(
    "attnlab.nets.encoder.SelfAttention",
    Adapter(
        heads=lambda m: m.heads,
        projection=lambda m, h: linear_projection(m.q, m.k, h, m.heads),  # encoder.attention_weights: /sqrt(e)
        tokens=_self_tokens(lambda m: m.q.in_features),
        mask=_key_mask,
    ),
)


def _hf_mask(module: nn.Module, args: tuple, kwargs: dict) -> torch.Tensor | None:
    """transformers' ``attention_mask``: additive (its dtype's lowest value on padding), or boolean True on kept
    keys; shape (n, 1, L, T)."""
    mask = _argument(args, kwargs, 1, "attention_mask")
    return None if mask is None else additive_mask("attention_mask", mask, masked=False)


# --- Hugging Face transformers (eager attention): BERT's and ViT's self-attention -------------------------------

register_adapter(
    "transformers.models.bert.modeling_bert.BertSelfAttention",
    Adapter(
        heads=lambda m: m.num_attention_heads,
        projection=lambda m, h: linear_projection(m.query, m.key, h, m.num_attention_heads, m.scaling),
        tokens=_self_tokens(lambda m: m.query.in_features, "hidden_states"),
        mask=_hf_mask,
    ),
)

register_adapter(
    "transformers.models.vit.modeling_vit.ViTAttention",
    Adapter(
        heads=lambda m: m.num_attention_heads,
        projection=lambda m, h: linear_projection(m.q_proj, m.k_proj, h, m.num_attention_heads, m.scaling),
        tokens=_self_tokens(lambda m: m.q_proj.in_features, "hidden_states"),
    ),
)


# --- timm's Attention (one fused qkv Linear) ------------------------------------------------------------------


def _timm_projection(module: nn.Module, head: int) -> HeadProjection:
    if not isinstance(module.q_norm, nn.Identity) or not isinstance(module.k_norm, nn.Identity):
        raise ValidationError(
            "timm Attention with qk_norm=True normalises q and k before their product, so its logits are not "
            "x^T W z for any fixed W; probe a model built with qk_norm=False"
        )
    e, width = module.head_dim, module.attn_dim
    rows = slice(head * e, (head + 1) * e)
    weight, bias = module.qkv.weight.detach(), module.qkv.bias
    b_q, b_k = (None, None) if bias is None else (bias.detach()[:width][rows], bias.detach()[width : 2 * width][rows])
    return HeadProjection(weight[:width][rows], weight[width : 2 * width][rows], b_q, b_k, module.scale)


register_adapter(
    "timm.layers.attention.Attention",
    Adapter(heads=lambda m: m.num_heads, projection=_timm_projection, tokens=_self_tokens(lambda m: m.qkv.in_features)),
)
