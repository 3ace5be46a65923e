"""Name an optimizer in one short string (``"sngd"``, ``"md:1.1,normalized=false"``) and build it over a model's
parameters: the one optimizer grammar of :mod:`attnlab.optim.spec`, with the real-data harness's defaults.

Spec: implicit-bias-ngd §4 A8 (SNGD, SPS) and §9 (SGD, SNGD, SPS, Adam on real data); mirror-descent-lp §4
(l_p mirror descent) and §9 E4-E5 (unnormalised l_p-MD on every parameter of a transformer, p = 1.1, 2, 3).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from attnlab._validation import ValidationError, check_scalar
from attnlab.optim import OptimizerSpec

__all__ = ["KINDS", "make_optimizer", "parse_optimizer"]

KINDS = ("sgd", "sngd", "sps", "adam", "md")
_KIND = {"gd": "sgd", "ngd": "sngd", "polyak": "sps", "adam": "adam", "md": "md"}


def parse_optimizer(name: str) -> tuple[str, float | None]:
    """The kind of an optimizer string (:mod:`attnlab.optim.spec`) and, for mirror descent, its exponent ``p``.

    ``"sgd"``, ``"sngd"``, ``"sps"``, ``"adam"`` or ``"md:<p>"`` (``p > 1``; write ``"md:1.1,normalized=false"``
    for the unnormalised update of the paper's real-data runs; the spelling ``"md-1.1"`` is deprecated), with any
    option the grammar allows. Joint training has no kind here.

    Parameters
    ----------
    name : str
        An optimizer string of the grammar of :mod:`attnlab.optim.spec`; aliases (``"gd"``, ``"ngd"``,
        ``"polyak"``) map to their kind.

    Returns
    -------
    kind : {"sgd", "sngd", "sps", "adam", "md"}
        One of :data:`KINDS`.
    p : float or None
        Mirror descent's exponent (2.0 when ``"md"`` gives none); None for the other kinds.

    Raises
    ------
    ValidationError
        When ``name`` does not parse, or names a joint (head and attention) rule.

    Examples
    --------
    >>> parse_optimizer("md:1.1")
    ('md', 1.1)
    >>> parse_optimizer("adam")
    ('adam', None)
    """
    spec = OptimizerSpec.parse(name)
    if spec.name not in _KIND:
        raise ValidationError(
            f"optimizer == {name!r} trains a head and attention jointly, which the real-data models do not; pass "
            "one of 'sgd', 'sngd', 'sps', 'adam' or 'md:<p>'"
        )
    return _KIND[spec.name], (spec.get("p", 2.0) if spec.name == "md" else None)


def make_optimizer(
    name: str,
    params: Iterable[torch.nn.Parameter],
    lr: float,
    *,
    sngd_cap: float | None = None,
    sps_c: float | None = None,
) -> torch.optim.Optimizer:
    """Build the optimizer ``name`` over ``params``: :meth:`attnlab.optim.OptimizerSpec.build` with ``lr``.

    Parameters
    ----------
    name : str
        An optimizer string (see :func:`parse_optimizer`).
    params : iterable of Parameter
    lr : float
        sgd, adam, md: the learning rate. sngd: the base step :math:`\\eta` (each uncapped step has length
        :math:`\\eta`). sps: the cap :math:`\\eta_{\\max}` on the Polyak step size, unless ``name`` sets
        ``max_step``.
    sngd_cap : float, optional
        SNGD's cap :math:`\\eta_{\\max}` on :math:`\\eta/\\|g\\|` (spec A8), unless ``name`` sets ``max_step``;
        ``None``: no cap.
    sps_c : float, optional
        SPS's constant :math:`c` in :math:`(\\mathcal L_B - 0)/(c\\,\\|g\\|^2)`, unless ``name`` sets it (``"sps"``
        sets 0.5, spec A8 [L]).

    Returns
    -------
    torch.optim.Optimizer
        ``torch.optim.SGD``/``Adam``, or ``attnlab.optim.NormalizedGD``/``PolyakStep``/``MirrorDescent``.
    """
    parse_optimizer(name)
    spec = OptimizerSpec.parse(name)
    check_scalar("lr", lr, low=0.0, low_inclusive=False)
    extra: dict[str, float | None] = {}
    if spec.name == "polyak":
        extra["max_step"] = lr  # spec A8: SPS_max's cap
        if sps_c is not None:
            extra["c"] = sps_c
    if spec.name == "ngd" and sngd_cap is not None:
        extra["max_step"] = sngd_cap
    spec = spec.with_options(**{k: v for k, v in extra.items() if spec.get(k) is None})
    return spec.build(params, lr=None if spec.name == "polyak" or spec.get("lr") is not None else lr)
