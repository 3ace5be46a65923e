"""The kernel of a network whose weights moved a given distance: Lemma 5.1's worst case, measured.

Spec: softmax-ntk-diffusion §4.3 (Lemma 5.1: if every ``||w_r - w_r(0)|| <= R`` then
``||H(W) - H*||_F <= R n d e^{O(B)}``), §5 (Definition 4.1, ``|w_r^T x_i| <= B``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence

import pandas as pd
import torch

from attnlab._validation import ValidationError, check_scalar, check_tensor
from attnlab.ntk.network import TwoLayerNet
from attnlab.ntk.softmax_mlp import SoftmaxMLP
from attnlab.ntk.tangent_kernel import gram, kernel_drift

__all__ = ["perturbed_kernels", "with_weights"]


def with_weights(net: TwoLayerNet, W: torch.Tensor) -> TwoLayerNet:
    """A copy of ``net`` holding first-layer weights ``W``: a measurement at weights other than the net's own.

    Parameters
    ----------
    net : TwoLayerNet
    W : torch.Tensor, shape (d_in, m), float64
        The weights of the copy.

    Returns
    -------
    TwoLayerNet
        A deep copy; ``net`` is left as it was.
    """
    W = check_tensor("W", W)
    if tuple(W.shape) != tuple(net.W.shape):
        raise ValidationError(f"W has shape {tuple(W.shape)}, expected {tuple(net.W.shape)} (d_in, m) like net.W")
    clone = copy.deepcopy(net)
    with torch.no_grad():
        clone.W.copy_(W)
    return clone


def _entries(name: str, values: object, example: str) -> list:
    """The entries of a grid argument as a list; a ValidationError naming ``name`` for an empty grid or a value
    that is not a sequence (a bare number, a string)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValidationError(f"{name} must be a sequence, got {values!r}; pass e.g. {name}={example}")
    entries = list(values)
    if not entries:
        raise ValidationError(f"{name} is empty; pass at least one value, e.g. {name}={example}")
    return entries


def perturbed_kernels(
    widths: Sequence[int], radii: Sequence[float], X: torch.Tensor, d_out: int, sigma_w: float, seed: int
) -> pd.DataFrame:
    """``||H(W) - H*||_F`` of softmax networks with every neuron moved by exactly ``R``: ``w_r + R sign(<w_r, u>) u``.

    Spec: softmax-ntk-diffusion §4.3 (Lemma 5.1), §5 (Definition 4.1).

    Parameters
    ----------
    widths : sequence of int
        Widths m of the :class:`SoftmaxMLP` networks (each initialised from ``seed``).
    radii : sequence of float
        Distances R > 0 every neuron moves.
    X : torch.Tensor, shape (n, d_in), float64
        Inputs.
    d_out : int
        Output width.
    sigma_w : float
        Scale of the first-layer initialisation.
    seed : int

    Returns
    -------
    pandas.DataFrame
        One row per (width, radius): ``kernel_change``, ``B`` (Definition 4.1's bound, measured at the moved
        weights as ``max |w_r^T x_i|``), ``B_ball`` (the same bound over the whole ball the lemma covers,
        ``max |w_r(0)^T x_i| + R max_i ||x_i||``, which every W with ``||w_r - w_r(0)|| <= R`` satisfies) and
        ``per_radius = kernel_change / (R n d_out)``.

    Notes
    -----
    ``u`` is the mean input's direction. The move spreads the logits of all inputs coherently, so the kernel changes
    at first order in ``R`` (a common shift of every neuron leaves the softmax unchanged, and opposite moves of the
    two neurons of a pair cancel at first order): the order of the lemma's worst case, not a random direction's
    ``R / sqrt(m)``. A neuron with ``<w_r, u> = 0`` moves to the ``+u`` side.

    Raises
    ------
    ValidationError
        When ``X`` is not a finite (n, d_in) array with n >= 1 or its mean row is zero (``u`` undefined),
        ``widths`` or ``radii`` is not a non-empty sequence, a width is not an int >= 1, a radius is not > 0, or
        the network's arguments are out of range (:class:`SoftmaxMLP`).
    """
    X = check_tensor("X", X, "nd", min_size={"n": 1})
    widths = [check_scalar("widths entry", w, kind=int, low=1) for w in _entries("widths", widths, "[64, 256]")]
    radii = [
        check_scalar("radii entry", r, low=0.0, low_inclusive=False) for r in _entries("radii", radii, "[0.01, 0.1]")
    ]
    u = X.mean(dim=0)
    if not bool(u.norm() > 0):
        raise ValidationError(
            "X has mean row 0, so the move's direction u = mean(X) / ||mean(X)|| is undefined; pass inputs whose "
            "mean is not zero (e.g. not symmetric about the origin)"
        )
    u = u / u.norm()
    x_norm = float(X.norm(dim=1).max())
    rows = []
    for width in widths:
        net = SoftmaxMLP(X.shape[1], d_out, width, sigma_w, seed=seed)
        H0, W0 = gram(net, X), net.W.detach()
        side = torch.sign(u @ W0)  # (m,): the two neurons of a pair share w_r, so they move together
        side[side == 0] = 1.0  # <w_r, u> = 0: either side keeps ||w_r - w_r(0)|| = R; sign 0 would not move it
        B0 = float((X @ W0).abs().max())
        for radius in radii:
            moved = with_weights(net, W0 + radius * u[:, None] * side[None, :])  # ||w_r - w_r(0)|| = R
            rows.append(
                {
                    "width": width,
                    "radius": radius,
                    "kernel_change": kernel_drift(gram(moved, X), H0),
                    "B": float((X @ moved.W.detach()).abs().max()),  # spec §5 Def. 4.1: |w_r^T x_i| <= B
                    "B_ball": B0 + radius * x_norm,  # Def. 4.1 over the ball: |w_r^T x| <= |w_r(0)^T x| + R ||x||
                }
            )
    frame = pd.DataFrame(rows)
    frame["per_radius"] = frame["kernel_change"] / (frame["radius"] * X.shape[0] * d_out)  # spec §4.3: <= e^{O(B)}
    return frame
