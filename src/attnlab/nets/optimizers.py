"""Name an optimizer in one short string (``"sngd"``, ``"md-1.1"``) and build it over a model's parameters.

Spec: implicit-bias-ngd §4 A8 (SNGD, SPS) and §9 (SGD, SNGD, SPS, Adam on real data); mirror-descent-lp §4
(l_p mirror descent) and §9 E4-E5 (unnormalised l_p-MD on every parameter of a transformer, p = 1.1, 2, 3).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from attnlab._validation import ValidationError, check_scalar
from attnlab.optim import MirrorDescent, NormalizedGD, PolyakStep

__all__ = ["KINDS", "make_optimizer", "parse_optimizer"]

KINDS = ("sgd", "sngd", "sps", "adam", "md")


def parse_optimizer(name: str) -> tuple[str, float | None]:
    """Split an optimizer name into its kind and, for mirror descent, its exponent ``p``.

    ``"sgd"``, ``"sngd"``, ``"sps"``, ``"adam"`` or ``"md-<p>"`` with ``p > 1``, e.g. ``"md-1.1"``.

    Examples
    --------
    >>> parse_optimizer("md-1.1")
    ('md', 1.1)
    >>> parse_optimizer("adam")
    ('adam', None)
    """
    kind, _, tail = name.partition("-")
    if kind == "md" and tail:
        try:
            p = float(tail)
        except ValueError:
            p = float("nan")
        if p > 1:
            return "md", p
    elif kind in KINDS and kind != "md" and not tail:
        return kind, None
    raise ValidationError(
        f"optimizer == {name!r}, must be one of 'sgd', 'sngd', 'sps', 'adam' or 'md-<p>' with p > 1 (e.g. 'md-1.1')"
    )


def make_optimizer(
    name: str,
    params: Iterable[torch.nn.Parameter],
    lr: float,
    *,
    sngd_cap: float | None = None,
    sps_c: float = 0.5,
) -> torch.optim.Optimizer:
    """Build the optimizer ``name`` over ``params``.

    Parameters
    ----------
    name : str
        See :func:`parse_optimizer`.
    params : iterable of Parameter
    lr : float
        sgd, adam, md: the learning rate. sngd: the base step :math:`\\eta` (each uncapped step has length
        :math:`\\eta`). sps: the cap :math:`\\eta_{\\max}` on the Polyak step size.
    sngd_cap : float, optional
        SNGD's cap :math:`\\eta_{\\max}` on :math:`\\eta/\\|g\\|` (spec A8); ``None``: no cap.
    sps_c : float, default=0.5
        SPS's constant :math:`c` in :math:`(\\mathcal L_B - 0)/(c\\,\\|g\\|^2)` (spec A8, [L] 0.5).

    Returns
    -------
    torch.optim.Optimizer
        ``torch.optim.SGD``/``Adam``, or ``attnlab.optim.NormalizedGD``/``PolyakStep``/``MirrorDescent``
        (unnormalised, as in mirror-descent-lp E4-E5).
    """
    kind, p = parse_optimizer(name)
    check_scalar("lr", lr, low=0.0, low_inclusive=False)
    params = list(params)
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if kind == "adam":
        return torch.optim.Adam(params, lr=lr)
    if kind == "sngd":
        return NormalizedGD(params, lr=lr, max_step=sngd_cap)  # spec A8: one global norm over all parameters
    if kind == "sps":
        return PolyakStep(params, max_lr=lr, optimal_loss=0.0, c=sps_c)  # spec A8: L_B* = 0 for cross-entropy
    return MirrorDescent(params, lr=lr, p=p, normalized=False)  # spec mirror-descent-lp E4: unnormalised
