"""One forward pass per input while a model is evaluated: the per-epoch row's loss, accuracy and metrics share it.

An epoch's row evaluates the model on its test set and then runs its metrics, which may encode the same inputs
again (the keyword experiment's first-token attention reads the whole test set). Inside :func:`shared_encodings`,
an ``encode`` method marked :func:`shareable` answers a call on the same tensor as the call before it, with the same
weights, in eval mode and without autograd, with that call's result: the same computation, so the same values to the
bit. Only the last encoding is kept, so an evaluation in batches holds no more than one batch's encoding at a time,
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


def _key(model: nn.Module, x: torch.Tensor) -> tuple:
    """What an encoding depends on: the input's memory, layout and version (views of one storage share the version,
    which every in-place write bumps), and the memory and version of every parameter and buffer."""
    tensors = [*model.parameters(), *model.buffers()]
    weights = tuple((t.data_ptr(), t._version) for t in tensors)
    return (x.data_ptr(), x.shape, x.stride(), x.dtype, x.device, x._version, weights)


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
        key = _key(self, x)
        if key not in answers:
            answers.clear()  # one encoding kept: a batched evaluation holds one batch's, as without the block
            answers[key] = (x, encode(self, x))  # x held: its memory cannot be handed to another input
        return answers[key][1]

    method.shareable = True  # type: ignore[attr-defined]
    return method


@contextmanager
def shared_encodings(model: M) -> Iterator[M]:
    """Within the block, ``model.encode(x)`` called again on the input of the call before it returns that call's
    result, for models whose ``encode`` is marked :func:`shareable` (:class:`~attnlab.nets.ViT`,
    :class:`~attnlab.nets.TextEncoder`); others are left as they are.

    A call is answered from the last one when the input is the same memory with the same shape, strides, dtype and
    version, the weights are the same memory at the same versions, the model is in eval mode (no dropout draws) and
    autograd is off; any other call runs ``encode`` and its result replaces the kept one (one encoding is held at a
    time, so a batched evaluation needs no more memory than without the block). The kept input is held alive with
    its answer, so its memory is never reused by another tensor while the answer lasts.

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
