"""The IMDb-style text encoder of mirror-descent-lp E4, with every size a parameter so it fits two CPU cores.

Spec: mirror-descent-lp §9 E4: token + learned positional embedding, post-LayerNorm blocks with GELU MLPs, no
biases, attention scaled by 1/sqrt(d_head) with a padding mask, prediction from the first token ([CLS]).
"""

from __future__ import annotations

import torch
from torch import nn

from attnlab._validation import ValidationError, check_scalar
from attnlab.nets.encoder import Encoder, check_float_dtype, check_sizes, init_weights
from attnlab.nets.shared_forward import shareable

__all__ = ["TextEncoder"]


class TextEncoder(nn.Module):
    """Transformer encoder over token ids; classifies from the state of the first token.

    Spec: mirror-descent-lp §9 E4 (paper sizes: dim 384, MLP 1536, 3/4/6 blocks and heads, max length 512,
    dropout 0.2).

    Parameters
    ----------
    vocab_size : int
        Number of token ids, padding included.
    max_len : int
        Longest sequence (the [CLS] token included).
    num_classes : int, default=2
    dim : int, default=32
    depth : int, default=2
    heads : int, default=2
    mlp_dim : int, default=64
    dropout : float, default=0.0
    pad_id : int, default=0
        Id of the padding token; keys with this id get no attention.
    seed : int, default=0
        Seeds the initial weights (through a private ``torch.Generator``).
    dtype : torch.dtype, default=torch.float32

    Notes
    -----
    E4 puts a single logit through a sigmoid and sums the binary cross-entropy over the batch; we use
    ``num_classes`` logits and the mean cross-entropy so that one training loop serves every task. With two classes
    this is the same model (the logit difference is E4's logit); the mean instead of the sum divides the
    gradient by the batch size, so E4's learning rates correspond to ours divided by the batch size.

    Examples
    --------
    >>> model = TextEncoder(vocab_size=20, max_len=6, seed=0)
    >>> model(torch.tensor([[1, 5, 6, 0, 0, 0]])).shape
    torch.Size([1, 2])
    """

    def __init__(
        self,
        vocab_size: int,
        max_len: int,
        *,
        num_classes: int = 2,
        dim: int = 32,
        depth: int = 2,
        heads: int = 2,
        mlp_dim: int = 64,
        dropout: float = 0.0,
        pad_id: int = 0,
        seed: int = 0,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        check_sizes(num_classes, dim, depth, heads, mlp_dim, dropout, vocab_size=vocab_size, max_len=max_len)
        check_scalar("pad_id", pad_id, kind=int, low=0, high=vocab_size - 1)
        self.pad_id = pad_id
        self.tokens = nn.Embedding(vocab_size, dim)
        self.positions = nn.Parameter(torch.empty(1, max_len, dim))
        self.drop = nn.Dropout(dropout)
        self.encoder = Encoder(dim, depth, heads, mlp_dim, dropout, norm_first=False)  # spec E4: post-LN
        self.head = nn.Linear(dim, num_classes, bias=False)
        self.to(check_float_dtype(dtype))
        init_weights(self, torch.Generator().manual_seed(seed))

    @shareable  # an epoch row's metrics reuse its test-loss pass (nets.shared_forward)
    def encode(self, ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Embed the tokens, add positions and run the encoder with padding keys masked out.

        Parameters
        ----------
        ids : torch.Tensor, shape (n, L), int64
            Token ids, ``L <= max_len``; ``pad_id`` marks padding (every sequence needs a non-padding token).

        Returns
        -------
        states : torch.Tensor, shape (n, L, dim)
            Token states after the encoder.
        attentions : list of torch.Tensor, shape (n, heads, L, L)
            Each layer's attention weights, ``depth`` of them; padded keys get weight 0.
        """
        return self.encoder(*self._inputs(ids))

    @shareable  # eval mode: the logits and the attention maps share this pass (nets.shared_forward)
    def encode_first(self, ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """:meth:`encode` with the first token's final state alone: the last block carries only that token past
        its attention, the one state the logits read (its values are :meth:`encode`'s).

        Parameters
        ----------
        ids : torch.Tensor, shape (n, L), int64
            As :meth:`encode` takes them.

        Returns
        -------
        states : torch.Tensor, shape (n, 1, dim)
            The first token's state after the encoder.
        attentions : list of torch.Tensor, shape (n, heads, L, L)
            Each layer's attention weights, all of them, as :meth:`encode` returns them.
        """
        return self.encoder(*self._inputs(ids), first_only=True)

    def _inputs(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The encoder's input (token and position embeddings, dropout) and its key mask (True on real tokens)."""
        self._check_ids(ids)
        mask = ids != self.pad_id  # (n, L), True on real tokens
        x = self.tokens(ids) + self.positions[:, : ids.shape[1]]  # (n, L, dim)
        return self.drop(x), mask

    def _check_ids(self, ids: object) -> None:
        """Refuse ids the embedding would fail on or the encoder would turn into NaN, naming what is wrong. Ids that
        vmap batches (the stacked runs' own, checked where they were made) have no values to read here."""
        if torch._C._functorch.is_batchedtensor(ids):
            return
        vocab, max_len = self.tokens.num_embeddings, self.positions.shape[1]
        if (
            not isinstance(ids, torch.Tensor)
            or ids.dim() != 2
            or ids.dtype.is_floating_point
            or ids.dtype == torch.bool
        ):
            shape = tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
            raise ValidationError(
                f"ids must be an (n, L) tensor of int64 token ids, got {shape}; batch one with ids[None]"
            )
        if ids.shape[1] > max_len:
            raise ValidationError(f"ids has L = {ids.shape[1]} tokens > max_len == {max_len}; cut the sequences")
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
            raise ValidationError(
                f"ids must lie in [0, {vocab - 1}] (vocab_size {vocab}), got {int(ids.min())} to {int(ids.max())}"
            )
        if ids.numel() and not bool((ids != self.pad_id).any(dim=1).all()):
            raise ValidationError(
                f"a sequence of ids is padding only (pad_id {self.pad_id}); every sequence needs a token"
            )

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Class logits, read from the first token's final state.

        Parameters
        ----------
        ids : torch.Tensor, shape (n, L), int64
            Token ids, ``L <= max_len``, the first one [CLS].

        Returns
        -------
        torch.Tensor, shape (n, num_classes)
        """
        x, _ = self.encode(ids) if self.training else self.encode_first(ids)  # eval: no draws, token 0 read
        return self.head(x[:, 0])  # spec E4: prediction from the first token

    def attention(self, ids: torch.Tensor) -> list[torch.Tensor]:
        """Attention weights of every layer.

        Parameters
        ----------
        ids : torch.Tensor, shape (n, L), int64
            Token ids, ``L <= max_len``.

        Returns
        -------
        list of torch.Tensor, shape (n, heads, L, L)
            ``depth`` tensors, first layer first; token 0 is [CLS].
        """
        return (self.encode if self.training else self.encode_first)(ids)[1]
