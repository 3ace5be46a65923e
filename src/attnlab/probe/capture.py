"""The tokens entering an attention module on given inputs, as token-selection data (forward hooks).

Spec: implicit-bias-ngd §1 (token-selection data ``X (n, T, d)``, query ``z_i``, labels, head ``v``) and §5 (the
attention SVM of a selection), applied to a trained head's own tokens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from attnlab._numerics import all_finite
from attnlab._validation import ValidationError, check_finite_result, check_instance, check_scalar, check_tensor
from attnlab.data.dataset import TokenSelectionData
from attnlab.data.selection import Selection
from attnlab.data.token_sets import HIGH, LOW, sets_from_probabilities
from attnlab.models.functional import attention_logits, attention_probabilities
from attnlab.probe.adapters import adapter_for, check_head
from attnlab.probe.head import _homogeneous_tokens, head_index, head_W, resolve_homogeneous

__all__ = [
    "Tokens",
    "attended_tokens",
    "capture",
    "capture_from_tokens",
    "head_mask",
    "module_calls",
    "module_tokens",
]

Tokens = tuple[torch.Tensor, torch.Tensor]  # (queries (n, L, d_q), keys (n, T, d_k)), batch-first


def _call(model: nn.Module, inputs: Any) -> None:
    if isinstance(inputs, Mapping):
        model(**inputs)
    elif isinstance(inputs, tuple):
        model(*inputs)
    else:
        model(inputs)


def module_tokens(model: nn.Module, modules: Sequence[nn.Module], inputs: Any) -> list[Tokens]:
    """Run ``model`` once on ``inputs`` and return the tokens entering each of ``modules`` (first call of each).

    Parameters
    ----------
    model : nn.Module
        Called as ``model(inputs)`` (``model(*inputs)`` for a tuple, ``model(**inputs)`` for a mapping), in its
        current train/eval mode, with gradients enabled (``nn.TransformerEncoderLayer``'s inference fast path
        skips ``self_attn.forward``) and no gradient kept.
    modules : sequence of nn.Module
        Attention modules inside ``model``, each with an adapter.
    inputs : tensor, tuple or mapping

    Returns
    -------
    list of (queries, keys)
        Per module, detached batch-first tensors ``(n, L, d_q)`` and ``(n, T, d_k)``.

    Raises
    ------
    ValidationError
        When a module is not called by ``model(inputs)``, or receives tokens of the wrong width.
    """
    return [tokens for tokens, _ in module_calls(model, modules, inputs)]


def module_calls(
    model: nn.Module, modules: Sequence[nn.Module], inputs: Any
) -> list[tuple[Tokens, torch.Tensor | None]]:
    """:func:`module_tokens` with each call's attention mask, as its adapter reads it.

    Parameters
    ----------
    model, modules, inputs
        As in :func:`module_tokens`.

    Returns
    -------
    list of ((queries, keys), mask)
        Per module, its tokens and its mask: an additive float64 tensor broadcastable to ``(n, heads, L, T)``
        (0 keeps a key, ``-inf`` masks it), or None (no mask, or an adapter that reads none).

    Raises
    ------
    ValidationError
        As :func:`module_tokens`, and on a mask of the wrong shape.
    """
    adapters = [adapter_for(module) for module in modules]
    seen: list[tuple[Tokens, torch.Tensor | None] | None] = [None] * len(modules)

    def hook(index: int):
        def record(module: nn.Module, args: tuple, kwargs: dict) -> None:
            if seen[index] is None:  # a module called twice (shared weights): its first call
                adapter = adapters[index]
                queries, keys = _adapter_tokens(adapter, module, args, kwargs)
                mask = None if adapter.mask is None else adapter.mask(module, args, kwargs)
                seen[index] = ((queries.detach(), keys.detach()), mask)

        return record

    handles = [m.register_forward_pre_hook(hook(i), with_kwargs=True) for i, m in enumerate(modules)]
    try:
        with torch.enable_grad():
            _call(model, inputs)
    finally:
        for handle in handles:
            handle.remove()
    for module, call in zip(modules, seen):
        if call is None:
            raise ValidationError(
                f"the {type(module).__name__} passed as module was not called when running model(inputs); pass "
                f"a module that lives inside model (e.g. model.encoder.blocks[0].attn), and the model itself"
            )
    return seen  # type: ignore[return-value]


def _adapter_tokens(adapter: Any, module: nn.Module, args: tuple, kwargs: dict) -> Tokens:
    """The adapter's ``tokens(module, args, kwargs)``, checked: two tensors (queries, keys) of shape (n, ., d)."""
    tokens = adapter.tokens(module, args, kwargs)
    if (
        not isinstance(tokens, tuple)
        or len(tokens) != 2
        or not all(isinstance(t, torch.Tensor) and t.dim() == 3 for t in tokens)
    ):
        got = (
            [tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__ for t in tokens]
            if isinstance(tokens, tuple)
            else type(tokens).__name__
        )
        raise ValidationError(
            f"the adapter of {type(module).__name__} returned {got} from tokens(module, args, kwargs); it must return "
            "a tuple (queries, keys) of two tensors of shapes (n, L, d) and (n, T, d) (for self-attention the same "
            "tensor twice); fix the adapter passed to register_adapter"
        )
    return tokens


def head_mask(mask: torch.Tensor | None, head: int | str | None, heads: int) -> torch.Tensor | None:
    """One head's mask ``(n, L, T)`` of a call's mask ``(n, heads, L, T)`` (broadcast), or the heads' shared one.

    Parameters
    ----------
    mask : torch.Tensor or None
        As :func:`module_calls` returns it.
    head : int, "all" or None
        The head whose mask to take (any integral type, in ``[0, heads - 1]``); "all" or None: every head's mask
        must be the same.
    heads : int
        The module's number of heads.

    Returns
    -------
    torch.Tensor of shape (n, L, T), or None

    Raises
    ------
    ValidationError
        On a head index out of range or not an integer (with or without a mask), or when the heads' masks differ and
        ``head`` is not an index.
    """
    head = None if head is None else check_head(head, heads, all_allowed=True)
    if mask is None:
        return None
    mask = mask.expand(mask.shape[0], heads, *mask.shape[2:]) if mask.shape[1] == 1 else mask
    if isinstance(head, int):
        return mask[:, head]
    if not bool((mask == mask[:, :1]).all()):
        raise ValidationError(
            "the attention mask differs between heads (a 3-D attn_mask of n * heads rows), so each head sees other "
            "keys: capture one head at a time with head=<index>"
        )
    return mask[:, 0]


# A mask entry at or below this is a masked key: exp(logit - 1e30) is 0 in float64 for any logit a model makes.
# transformers writes its dtype's lowest value (-3.4e38 or -1.8e308) where torch writes -inf.
_MASKED = -1e30


def _visible(mask: torch.Tensor) -> torch.Tensor:
    """Which keys a mask leaves visible, refusing entries that are neither 0 nor a masking value."""
    bias = (mask != 0) & (mask > _MASKED)
    if bool(bias.any()):
        value = float(mask[bias][0])
        raise ValidationError(
            f"the attention mask holds finite non-zero entries (e.g. {value:g}): a float mask adds them to the logits "
            "as a bias of each (query, key), which no W of the logits x^T W z carries; attnlab reads masks of 0 "
            "(visible) and -inf (masked), or a boolean mask"
        )
    return mask == 0


def _indices(name: str, value: Any, size: int) -> torch.Tensor:
    index = torch.arange(size)[value] if isinstance(value, slice) else torch.as_tensor(value, dtype=torch.int64)
    if index.dim() != 1 or index.numel() < 2 or bool(((index < -size) | (index >= size)).any()):
        raise ValidationError(
            f"{name} must pick at least 2 key tokens among the {size} entering the module (indices in "
            f"[0, {size - 1}] or a slice), got {value!r}"
        )
    index = index % size
    if len(set(index.tolist())) < len(index):
        raise ValidationError(
            f"{name} == {value!r} picks a key token twice ({index.tolist()}); a repeated token ties with itself and no "
            "W separates it: pick each position once"
        )
    return index


def _unmasked(X: torch.Tensor, visible: torch.Tensor, query: int | str) -> torch.Tensor:
    """The keys each problem sees, ``(P, T', d)`` from ``X (P, T, d)``: every problem must see the same number."""
    counts = visible.sum(dim=1)
    if bool((counts != counts[0]).any()):
        shown = ", ".join(f"{i}: {int(c)}" for i, c in list(enumerate(counts.tolist()))[:6])
        hint = (
            "a causal mask gives query l the keys 0..l: capture one query position at a time (query=l)"
            if query == "all"
            else "capture sequences of equal length together, or choose the keys with keys="
        )
        raise ValidationError(
            f"the attention mask leaves the problems different numbers of keys (problem: keys {shown}); attnlab's "
            f"data sets hold one length T for every problem: {hint}"
        )
    if int(counts[0]) < 2:
        raise ValidationError(
            f"the attention mask leaves each problem {int(counts[0])} key(s): attention selects among T >= 2 tokens; "
            "pick a later query position or unmask keys"
        )
    return X[visible].reshape(len(X), int(counts[0]), X.shape[-1])  # the visible keys, in their order


def attended_tokens(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """The token each query attends to most, ``argmax_t x_t^T W z``. Spec: implicit-bias-ngd §2.

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d_k)
        Key tokens.
    Z : torch.Tensor, shape ([R,] n, d_q)
        Queries.
    W : torch.Tensor, shape ([R,] d_k, d_q)
        The head's matrix (:func:`head_W`). The leading (runs) axes of the three broadcast.

    Returns
    -------
    torch.Tensor, shape ([R,] n), int64

    Raises
    ------
    ValidationError
        When ``X``, ``Z`` or ``W`` is not a finite floating tensor (all of one dtype), has too few axes, or their widths
        ``d_k``, ``d_q`` or leading axes disagree; or when the logits overflow float64.
    """
    _check_operand("X", X, 3, None)
    _check_operand("Z", Z, 2, X.dtype)
    _check_operand("W", W, 2, X.dtype)
    if W.shape[-2] != X.shape[-1]:
        raise ValidationError(
            f"W has shape {tuple(W.shape)} but X's tokens have width d_k = {X.shape[-1]}; W is (d_k, d_q)"
        )
    if W.shape[-1] != Z.shape[-1]:
        raise ValidationError(
            f"Z has queries of width {Z.shape[-1]} but W has d_q = {W.shape[-1]} columns; W is (d_k, d_q)"
        )
    try:
        torch.broadcast_shapes(X.shape[:-2], Z.shape[:-1], W.shape[:-2] + (1,))
    except RuntimeError:
        raise ValidationError(
            f"X {tuple(X.shape)}, Z {tuple(Z.shape)} and W {tuple(W.shape)} disagree on their leading axes: X is "
            "([R,] n, T, d_k), Z ([R,] n, d_q), W ([R,] d_k, d_q), with one n and runs axes R that broadcast"
        ) from None
    logits = attention_logits(X, W, Z)
    check_finite_result("the logits x^T W z", logits, "they overflow float64; scale W (or the tokens) down")
    return Selection.attended(logits).tokens


def _check_operand(name: str, value: object, axes: int, dtype: torch.dtype | None) -> None:
    """Refuse an operand of :func:`attended_tokens` that is not a finite floating tensor of at least ``axes`` axes,
    of ``dtype`` (X's; None: X itself)."""
    check_instance(name, value, torch.Tensor, f"pass {name} as a floating tensor (torch.as_tensor({name}))")
    if value.dim() < axes or not value.dtype.is_floating_point or value.dtype != (dtype or value.dtype):
        raise ValidationError(
            f"{name} has shape {tuple(value.shape)} and dtype {value.dtype}; pass a floating tensor of at least {axes} "
            f"axes" + (f", of X's dtype {dtype}" if dtype else "")
        )
    if not all_finite(value):
        raise ValidationError(
            f"{name} has {int((~torch.isfinite(value)).sum())} NaN or inf entries; pass finite values"
        )


def _attended_tokens(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """:func:`attended_tokens` without its checks, for the probe's own tokens and head (once per probed step)."""
    return Selection.attended(attention_logits(X, W, Z)).tokens


_ATTENDED = ("attended", "attended-sets")


def _head_selection(data: TokenSelectionData, W: torch.Tensor, select: str, thresholds: tuple[float, float]):
    """What the head with weights ``W`` selects: its arg-max token, or its token sets (multi-token §2)."""
    if select == "attended":
        return attended_tokens(data.X, data.Z, W)
    return sets_from_probabilities(attention_probabilities(data.X, W, data.Z), *thresholds)  # (n, T) softmax


def capture(
    model: nn.Module,
    module: nn.Module,
    inputs: Any,
    *,
    query: int | str = 0,
    keys: slice | Sequence[int] | None = None,
    y: object = None,
    v: object = None,
    select: object = None,
    head: int | str | None = None,
    homogeneous: bool | None = None,
    thresholds: tuple[float, float] = (LOW, HIGH),
) -> TokenSelectionData | list[TokenSelectionData]:
    """The tokens entering ``module`` when ``model`` runs on ``inputs``, as a :class:`TokenSelectionData`.

    Spec: implicit-bias-ngd §1 (``X (n, T, d)``, ``Z (n, d)``, ``y``, ``v``), §5 (attention SVM of a selection).

    Parameters
    ----------
    model : nn.Module
        Run once on ``inputs`` (see :func:`module_tokens`); pass ``model=module`` to feed tokens directly.
    module : nn.Module
        The attention module inside ``model`` (its type needs an adapter).
    inputs : tensor, tuple or mapping
        What ``model`` is called with; each of its ``n`` sequences becomes one sequence of the data.
    query : int or "all", default=0
        Position of the query token ``z_i`` among the tokens entering the module (0: a class token). ``"all"``:
        every query token is a query (multi-token §7): problem ``i L + l`` is sequence ``i`` with its ``l``-th
        query token, over the same keys, so ``n L`` problems (``y`` and an array ``select`` then have ``n L``
        entries; ``y`` given with ``n`` entries is repeated per query).
    keys : slice or sequence of int, optional
        Positions of the key tokens ``X_i`` (default all). The call's attention mask, when the module's adapter
        reads one (``torch.nn.MultiheadAttention``'s ``attn_mask`` and ``key_padding_mask``, boolean or float,
        ``is_causal`` included; attnlab's ``key_mask``; transformers' BERT ``attention_mask``), then drops the keys
        it hides from the query: the query at position ``s`` of a causal mask keeps keys ``0..s``, a padded
        sequence its real tokens. Every problem must keep the same number of keys (data sets have one ``T``).
    y : array-like, shape (n,), optional
        Labels in {-1, +1}; default +1 for every sequence (the SVM and the selection do not use them).
    v : array-like, shape (d_k,), optional
        A head ``v`` for the key tokens (``d_k`` without the homogeneous coordinate; a 0 is appended for it).
    select : array-like of int of shape (n,), token sets, "attended" or "attended-sets", optional
        The selected token per sequence, as a position among the keys kept (after ``keys`` and the mask), or a
        set of tokens per sequence (an ``(n, T)`` bool mask or ``n`` lists of positions, multi-token §2);
        ``"attended"`` (needs ``head``): the token the head puts most weight on; ``"attended-sets"`` (needs
        ``head``): the tokens whose softmax weight exceeds ``thresholds[1]``
        (:func:`attnlab.data.sets_from_probabilities`). Default: none.
    head : int or "all", optional
        The head whose attention defines an ``"attended"`` selection and whose mask is read (an index in
        ``[0, heads - 1]`` of any integral type, checked first); ``"all"``: one data set per head (a list, in head
        order), each with that head's selection.
    homogeneous : bool, optional
        Append a coordinate 1 to the tokens (as :func:`~attnlab.probe.head_W` does); default: when the
        module has query/key biases.
    thresholds : (float, float), default=(1e-6, 1e-3)
        ``(low, high)`` of ``select="attended-sets"``: a token is in the set above ``high`` and out at or below
        ``low``; a weight in between is refused with the sequence named (the head has not saturated there).

    Returns
    -------
    TokenSelectionData
        ``X (n, T, d_k [+ 1])``, ``Z (n, d_q [+ 1])``, ``y``, ``v``, ``select``, float64. Then
        ``attention_probabilities(data.X, head_W(module, h), data.Z)`` are the head's weights of query ``query``.
        Cross-attention (keys of width ``d_k`` = ``kdim`` != ``d_q`` = ``embed_dim``) gives rectangular data
        (multi-token §8): ``head_W`` is ``(d_k [+ 1], d_q [+ 1])``.

    Raises
    ------
    ValidationError
        On a ``head`` out of range or neither an integer nor ``"all"``, a module not called by ``model``, tokens of
        the wrong width, ``query`` or ``keys`` out of range, a mask it cannot represent (finite non-zero entries: a
        bias no ``W`` carries; a different number of visible keys per problem, or fewer than 2; masks that differ
        between heads without an index ``head``), a bad ``select`` or ``y``, an ``"attended"`` selection without
        ``head``, or an ``"attended-sets"`` selection with a weight between the thresholds or with no token dropped
        in any sequence (every set its whole sequence).
    TypeError
        When ``module``'s type has no adapter.

    Examples
    --------
    >>> mha = nn.MultiheadAttention(4, 2, batch_first=True, dtype=torch.float64)
    >>> x = torch.randn(5, 6, 4, dtype=torch.float64)
    >>> data = capture(mha, mha, (x, x, x), select="attended", head=0)
    >>> (data.n, data.T, data.d)  # homogeneous: the 4 coordinates and a constant 1
    (5, 6, 5)
    """
    head = None if head is None else head_index(module, head, all_allowed=True)  # before any mask indexes with it
    homogeneous = resolve_homogeneous(module, homogeneous)
    if head == "all" and select not in _ATTENDED:
        raise ValidationError(
            'head == "all" returns one data set per head with its own selection: pass select="attended" or '
            'select="attended-sets"'
        )
    if isinstance(select, str) and (select not in _ATTENDED or head is None):
        raise ValidationError(
            f'select == {select!r}: pass "attended" (the head\'s most-attended token) or "attended-sets" (its '
            "tokens above the thresholds) together with head=<index>, or token positions or token sets"
        )
    (((queries, key_tokens), mask),) = module_calls(model, [module], inputs)  # cross-attention: d_q != d (§8)
    data = capture_from_tokens(
        queries,
        key_tokens,
        query=query,
        keys=keys,
        y=y,
        v=v,
        select=None if isinstance(select, str) else select,
        homogeneous=homogeneous,
        mask=head_mask(mask, head, adapter_for(module).heads(module)),
    )
    if head == "all":  # multi-token §7: the tokens are shared, each head selects its own
        return [
            data.with_(select=_head_selection(data, head_W(module, h, homogeneous=homogeneous), select, thresholds))
            for h in range(adapter_for(module).heads(module))
        ]
    if isinstance(select, str):
        W = head_W(module, head, homogeneous=homogeneous)
        data = data.with_(select=_head_selection(data, W, select, thresholds))
    return data


def capture_from_tokens(
    queries: torch.Tensor,
    key_tokens: torch.Tensor,
    *,
    query: int | str = 0,
    keys: slice | Sequence[int] | None = None,
    y: object = None,
    v: object = None,
    select: object = None,
    homogeneous: bool = False,
    mask: torch.Tensor | None = None,
) -> TokenSelectionData:
    """Token-selection data from the tokens a module received (see :func:`capture` for the arguments).

    Parameters
    ----------
    queries : torch.Tensor, shape (n, L, d_q)
    key_tokens : torch.Tensor, shape (n, T_all, d_k)
    query, keys, y, v, select, homogeneous
        As in :func:`capture` (``select`` an array, ``homogeneous`` a bool).
    mask : torch.Tensor, shape (n, L, T_all), optional
        The head's additive attention mask (:func:`head_mask`): 0 keeps a key, ``-inf`` masks it.

    Returns
    -------
    TokenSelectionData

    Raises
    ------
    ValidationError
        On ``query`` or ``keys`` out of range, or a mask that leaves the problems different numbers of keys (or
        fewer than 2), or holds finite non-zero entries.
    """
    n, L = queries.shape[:2]
    if key_tokens.shape[0] != n:
        raise ValidationError(f"the module received {n} query sequences but {key_tokens.shape[0]} key sequences")
    positions = _indices("keys", slice(None) if keys is None else keys, key_tokens.shape[1])
    X = key_tokens[:, positions].to(torch.float64)  # (n, T, d_k)
    if query == "all":  # multi-token §7: every query token over the same keys, problem i L + l
        Z = queries.reshape(n * L, queries.shape[-1]).to(torch.float64)  # (n L, d_q)
        X = X.repeat_interleave(L, dim=0)  # (n L, T, d_k)
        rows = None if mask is None else mask.expand(n, L, mask.shape[-1]).reshape(n * L, -1)  # (n L, T_all)
        if y is not None and len(torch.as_tensor(y)) == n:
            y = torch.as_tensor(y, dtype=torch.float64).repeat_interleave(L)
        n = n * L
    else:
        check_scalar("query", query, kind=int, low=-L, high=L - 1)
        Z = queries[:, query].to(torch.float64)  # (n, d_q)
        rows = None if mask is None else mask.expand(n, L, mask.shape[-1])[:, query]  # (n, T_all)
    if rows is not None:
        X = _unmasked(X, _visible(rows[:, positions].to(X.device)), query)
    if homogeneous:
        X, Z = _homogeneous_tokens(X), _homogeneous_tokens(Z)
    if v is not None:
        v = check_tensor("v", v, "d", {"d": key_tokens.shape[-1]})
        v = torch.cat([v, v.new_zeros(1)]) if homogeneous else v  # the constant coordinate scores 0
    y = torch.ones(n, dtype=torch.float64) if y is None else y
    return TokenSelectionData(X, Z=Z, y=y, v=v, select=select)
