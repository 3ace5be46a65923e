"""A small Vision Transformer of our own: patch embedding, pre-LayerNorm encoder, class-token head.

Spec: implicit-bias-ngd §9 fig. 6-7 (ViT for small data sets, Lee et al. 2021), mirror-descent-lp §9 E5.
Scaled down to 8x8 images so that five seeds of seven optimizers train on two CPU cores.
"""

from __future__ import annotations

import torch
from torch import nn

from attnlab._validation import ValidationError
from attnlab.nets.encoder import Encoder, check_float_dtype, check_sizes, init_weights
from attnlab.nets.shared_forward import shareable

__all__ = ["ViT"]


class ViT(nn.Module):
    """Vision Transformer: non-overlapping patches -> linear embedding + class token + positions -> encoder -> head.

    Spec: implicit-bias-ngd §9 fig. 6 (ViT, SGD/SNGD/SPS/Adam), mirror-descent-lp §9 E5 (ViT, l_p-MD).

    Parameters
    ----------
    image_size : int, default=8
        Height and width of the (square) images.
    patch_size : int, default=2
        Height and width of a patch; must divide ``image_size``. Tokens: ``(image_size/patch_size)^2 + 1``.
    channels : int, default=1
    num_classes : int, default=10
    dim : int, default=32
        Token width.
    depth : int, default=2
        Number of encoder blocks.
    heads : int, default=2
    mlp_dim : int, default=64
    dropout : float, default=0.0
    seed : int, default=0
        Seeds the initial weights (through a private ``torch.Generator``).
    dtype : torch.dtype, default=torch.float32

    Notes
    -----
    No layer has a bias (as in mirror-descent-lp E4): l_p mirror descent with p near 1 barely moves entries that
    sit at exactly 0, so zero-initialised biases would stay frozen.

    Examples
    --------
    >>> model = ViT(seed=0)
    >>> model(torch.zeros(3, 1, 8, 8)).shape
    torch.Size([3, 10])
    """

    def __init__(
        self,
        *,
        image_size: int = 8,
        patch_size: int = 2,
        channels: int = 1,
        num_classes: int = 10,
        dim: int = 32,
        depth: int = 2,
        heads: int = 2,
        mlp_dim: int = 64,
        dropout: float = 0.0,
        seed: int = 0,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        check_sizes(
            num_classes,
            dim,
            depth,
            heads,
            mlp_dim,
            dropout,
            image_size=image_size,
            patch_size=patch_size,
            channels=channels,
        )
        if image_size % patch_size:
            raise ValidationError(
                f"patch_size == {patch_size} does not divide image_size == {image_size}; pick a divisor"
            )
        self.image_size, self.patch_size, self.channels = image_size, patch_size, channels
        tokens = (image_size // patch_size) ** 2 + 1
        self.patch_embed = nn.Linear(channels * patch_size**2, dim, bias=False)
        self.cls_token = nn.Parameter(torch.empty(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.empty(1, tokens, dim))
        self.drop = nn.Dropout(dropout)
        self.encoder = Encoder(dim, depth, heads, mlp_dim, dropout, norm_first=True)
        self.norm = nn.LayerNorm(dim, bias=False)
        self.head = nn.Linear(dim, num_classes, bias=False)
        self.to(check_float_dtype(dtype))
        init_weights(self, torch.Generator().manual_seed(seed))

    def patches(self, images: torch.Tensor) -> torch.Tensor:
        """Cut images into non-overlapping patches and flatten each.

        Parameters
        ----------
        images : torch.Tensor, shape (n, channels, image_size, image_size)

        Returns
        -------
        torch.Tensor, shape (n, P, channels * patch_size^2)
            ``P = (image_size / patch_size)^2`` patches, row-major over the patch grid; each flattened as
            (channel, row, column).

        Raises
        ------
        ValidationError
            When ``images`` does not have shape (n, channels, image_size, image_size) or the weights' dtype.
        """
        if images.dim() != 4 or images.shape[1:] != (self.channels, self.image_size, self.image_size):
            raise ValidationError(
                f"images has shape {tuple(images.shape)}, expected (n, {self.channels}, {self.image_size}, "
                f"{self.image_size}); add a channel axis with images[:, None] if it is missing"
            )
        if images.dtype != self.patch_embed.weight.dtype:
            raise ValidationError(
                f"images are {images.dtype} and the model's weights {self.patch_embed.weight.dtype}; pass "
                f"images.to({self.patch_embed.weight.dtype}) or build the model with that dtype"
            )
        n, s = images.shape[0], self.patch_size
        grid = images.unfold(2, s, s).unfold(3, s, s)  # (n, C, H/s, W/s, s, s)
        return grid.permute(0, 2, 3, 1, 4, 5).reshape(n, -1, self.channels * s * s)

    @shareable  # an epoch row's metrics reuse its test-loss pass (nets.shared_forward)
    def encode(self, images: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Embed the patches, prepend the class token, add positions and run the encoder.

        Parameters
        ----------
        images : torch.Tensor, shape (n, channels, image_size, image_size)

        Returns
        -------
        states : torch.Tensor, shape (n, T, dim)
            Token states after the encoder (before the final LayerNorm); token 0 is the class token,
            ``T = P + 1``.
        attentions : list of torch.Tensor, shape (n, heads, T, T)
            Each layer's attention weights, ``depth`` of them.

        Raises
        ------
        ValidationError
            When ``images`` has the wrong shape (see :meth:`patches`).
        """
        return self.encoder(self._tokens(images))

    @shareable  # eval mode: the logits and the attention maps share this pass (nets.shared_forward)
    def encode_first(self, images: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """:meth:`encode` with the class token's final state alone: the last block carries only that token past
        its attention, the one state the logits read (its values are :meth:`encode`'s).

        Parameters
        ----------
        images : torch.Tensor, shape (n, channels, image_size, image_size)

        Returns
        -------
        states : torch.Tensor, shape (n, 1, dim)
            The class token's state after the encoder (before the final LayerNorm).
        attentions : list of torch.Tensor, shape (n, heads, T, T)
            Each layer's attention weights, all of them, as :meth:`encode` returns them.
        """
        return self.encoder(self._tokens(images), first_only=True)

    def _tokens(self, images: torch.Tensor) -> torch.Tensor:
        """The encoder's input: embedded patches after the class token, positions added, dropout."""
        x = self.patch_embed(self.patches(images))  # (n, P, dim)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed  # (n, T, dim)
        return self.drop(x)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Class logits, read from the class token's final state.

        Parameters
        ----------
        images : torch.Tensor, shape (n, channels, image_size, image_size)

        Returns
        -------
        torch.Tensor, shape (n, num_classes)
        """
        x, _ = self.encode(images) if self.training else self.encode_first(images)  # eval: no draws, token 0 read
        return self.head(self.norm(x[:, 0]))

    def attention(self, images: torch.Tensor) -> list[torch.Tensor]:
        """Attention weights of every layer.

        Parameters
        ----------
        images : torch.Tensor, shape (n, channels, image_size, image_size)

        Returns
        -------
        list of torch.Tensor, shape (n, heads, T, T)
            ``depth`` tensors, first layer first; token 0 is the class token (CLS).
        """
        return (self.encode if self.training else self.encode_first)(images)[1]
