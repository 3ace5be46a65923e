"""One forward pass per input while a model is evaluated: the per-epoch row's loss, accuracy and metrics share it.

An epoch's row evaluates the model on its test set and then runs its metrics, which may encode the same inputs
again (the keyword experiment's first-token attention reads the whole test set). Inside :func:`shared_encodings`,
a method marked :func:`shareable` (``encode``, ``encode_first``) answers a call on the same input values as its call
before, with the same weight values, in eval mode and without autograd, with that call's result: the same computation,
so the same values to the bit. Only each method's last encoding is kept, so an evaluation in batches holds no more than one batch's encoding at a time,
as without the block.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import torch
from torch import nn

__all__ = ["shareable", "shared_encodings"]

_ATTRIBUTE = "_shared_encodings"
M = TypeVar("M", bound=nn.Module)


class _Answers(dict):
    """A block's answer (the last encoding, keyed by what it depends on), held by the model it was opened on; a copy
    of the model (``deepcopy``, pickling) gets ``None`` instead, so it encodes with its own weights."""

    def __deepcopy__(self, memo: dict) -> None:
        return None

    def __reduce__(self) -> tuple:
        return type(None), ()


def _same(held: torch.Tensor, now: torch.Tensor) -> bool:
    """Whether ``now`` holds what ``held`` (a copy taken at the kept call) holds: shape, dtype, device and every
    value. Compared by content, not by memory and version counters: a write through ``.data`` bumps no version."""
    return held.shape == now.shape and held.dtype == now.dtype and held.device == now.device and torch.equal(held, now)


class _Kept:
    """The kept call: copies of its input and of the model's parameters and buffers, and its result."""

    def __init__(self, x: torch.Tensor, weights: list[torch.Tensor], result: Any) -> None:
        self.x, self.weights, self.result = x, weights, result

    def weights_equal(self, weights: list[torch.Tensor]) -> bool:
        """Whether ``weights`` hold the kept call's weights."""
        return len(weights) == len(self.weights) and all(_same(a, b) for a, b in zip(self.weights, weights))


def shareable(encode: Callable[[M, torch.Tensor], Any]) -> Callable[[M, torch.Tensor], Any]:
    """Mark a model's ``encode(self, x)`` as answerable from an earlier call inside :func:`shared_encodings`.

    Parameters
    ----------
    encode : callable
        The method; its result must depend only on ``x``, the model's parameters and buffers, and its mode.

    Returns
    -------
    callable
        The method, which outside a block (or in training mode, or with autograd on) calls ``encode`` as before.
    """

    @functools.wraps(encode)
    def method(self: M, x: torch.Tensor) -> Any:
        answers = self.__dict__.get(_ATTRIBUTE)
        if answers is None or self.training or torch.is_grad_enabled() or not isinstance(x, torch.Tensor):
            return encode(self, x)
        weights = [*self.parameters(), *self.buffers()]
        kept = answers.get(encode.__name__)  # each shareable method keeps its own last call
        same_weights = kept is not None and kept.weights_equal(weights)
        if same_weights and _same(kept.x, x):
            return kept.result
        held = kept.weights if same_weights else [w.detach().clone() for w in weights]
        result = encode(self, x)
        # one encoding kept: a batched evaluation holds one batch's, as without the block
        answers[encode.__name__] = _Kept(x.detach().clone(), held, result)
        return result

    method.shareable = True  # type: ignore[attr-defined]
    return method


@contextmanager
def shared_encodings(model: M) -> Iterator[M]:
    """Within the block, ``model.encode(x)`` called again on the input of the call before it returns that call's
    result, for models whose ``encode`` is marked :func:`shareable` (:class:`~attnlab.nets.ViT`,
    :class:`~attnlab.nets.TextEncoder`; their ``encode_first`` too, each method answered from its own last call);
    others are left as they are.

    A call is answered from the last one when the input holds the same values (shape, dtype, device and every entry)
    and so do the model's parameters and buffers, the model is in eval mode (no dropout draws) and autograd is off;
    any other call runs ``encode`` and its result replaces the kept one (one encoding is held at a time, so a batched
    evaluation needs no more memory than without the block). Inputs and weights are compared by content against
    copies taken at the kept call, so a write by any route (in place, through ``.data``, a new tensor at the same
    address) is seen; the copies cost one input and one set of weights of memory.

    Parameters
    ----------
    model : nn.Module

    Yields
    ------
    nn.Module
        ``model``; after the block its answers are dropped.

    Examples
    --------
    >>> from attnlab.nets import TextEncoder, first_token_attention
    >>> model, ids = TextEncoder(vocab_size=10, max_len=4).eval(), torch.tensor([[1, 2, 3, 0]])
    >>> with torch.no_grad(), shared_encodings(model):
    ...     logits = model(ids)  # encodes ids
    ...     cls = first_token_attention(model, ids)  # answered from that pass
    >>> torch.equal(cls, first_token_attention(model, ids))
    True
    """
    if (
        not getattr(getattr(type(model), "encode", None), "shareable", False)
        or model.__dict__.get(_ATTRIBUTE) is not None
    ):
        yield model  # nothing to share, or an enclosing block already shares it
        return
    model.__dict__[_ATTRIBUTE] = _Answers()
    try:
        yield model
    finally:
        del model.__dict__[_ATTRIBUTE]
