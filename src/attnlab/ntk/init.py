"""Symmetric initialization of a two-layer network (Definition 3.7, Algorithm A).

Spec: softmax-ntk-diffusion §2.1, §8 (Algorithm A).
"""

from __future__ import annotations

import torch

from attnlab._validation import ValidationError, check_scalar, check_seed

__all__ = ["symmetric_init"]


def symmetric_init(
    d_in: int, d_out: int, width: int, sigma_w: float = 1.0, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``(W, a)`` in pairs so that the network output is exactly zero at initialization.

    Spec: softmax-ntk-diffusion §2.1 (Definition 3.7), Algorithm A.

    Parameters
    ----------
    d_in, d_out : int
        Input and output dimensions.
    width : int
        Number of hidden neurons ``m``; must be even (neurons come in pairs).
    sigma_w : float, default=1.0
        Standard deviation of each entry of ``w_r``.
    seed : int, default=0
        Pass an int to get the same draw every time.

    Returns
    -------
    W : torch.Tensor, shape (d_in, width), float64
        Columns ``2r`` and ``2r+1`` are equal (0-based).
    a : torch.Tensor, shape (d_out, width), float64
        Entries in {-1, +1}; column ``2r+1`` is minus column ``2r``.

    Raises
    ------
    ValidationError
        If ``width`` is odd or a size is not a positive int.

    Examples
    --------
    >>> W, a = symmetric_init(3, 2, 4, seed=1)
    >>> bool((W[:, 0] == W[:, 1]).all()), bool((a[:, 0] == -a[:, 1]).all())
    (True, True)
    """
    check_scalar("d_in", d_in, kind=int, low=1)
    check_scalar("d_out", d_out, kind=int, low=1)
    check_scalar("width", width, kind=int, low=2)
    if width % 2:
        raise ValidationError(
            f"width == {width}, must be even for the symmetric initialization (neurons come in +/- pairs); "
            f"pass width={width + 1}"
        )
    check_scalar("sigma_w", sigma_w, low=0.0, low_inclusive=False)
    check_seed("seed", seed)
    gen = torch.Generator().manual_seed(seed)
    half = width // 2
    w_half = sigma_w * torch.randn(d_in, half, generator=gen, dtype=torch.float64)  # spec §8 Alg. A step 1
    a_half = 2.0 * torch.randint(0, 2, (d_out, half), generator=gen).to(torch.float64) - 1.0
    W = w_half.repeat_interleave(2, dim=1)  # spec §2.1: w_{2r} = w_{2r-1}
    a = torch.stack([a_half, -a_half], dim=2).reshape(d_out, width)  # spec §2.1: a_{., 2r} = -a_{., 2r-1}
    return W, a
