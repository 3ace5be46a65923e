"""Build any optimizer of the registry over a real model's parameters by its string (``"sngd"``,
``"md:1.1,normalized=false"``, ``"adam"``), with the real-data harness's defaults for SNGD's cap and SPS's constant.

Spec: implicit-bias-ngd §4 A8 (SNGD, SPS) and §9 (SGD, SNGD, SPS, Adam on real data); mirror-descent-lp §4
(l_p mirror descent) and §9 E4-E5 (unnormalised l_p-MD on every parameter of a transformer, p = 1.1, 2, 3).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import torch

from attnlab._validation import ValidationError
from attnlab.optim import OptimizerSpec

__all__ = ["KINDS", "harness_spec", "make_optimizer", "optimizer_kind", "parse_optimizer"]

#: The real-data papers' names of the registry's optimizers (the others keep their own).
KINDS = ("sgd", "sngd", "sps", "adam", "md")
_PAPER = {"gd": "sgd", "ngd": "sngd", "polyak": "sps"}


def optimizer_kind(name: str | OptimizerSpec) -> tuple[str, float | None]:
    """The real-data papers' name of an optimizer and, for mirror descent, its exponent ``p``.

    Parameters
    ----------
    name : str or OptimizerSpec
        An optimizer string of the grammar (:mod:`attnlab.optim.spec`), any name of the registry.

    Returns
    -------
    kind : str
        ``"sgd"``, ``"sngd"``, ``"sps"`` for GD, NGD and Polyak (the papers' names), else the registry's name.
    p : float or None
        The exponent of the optimizer's mirror map (2.0 for ``"md"`` with none given); None for the others.

    Raises
    ------
    ValidationError
        When ``name`` does not parse.

    Examples
    --------
    >>> optimizer_kind("md:1.1")
    ('md', 1.1)
    >>> optimizer_kind("polyak:max_step=1")
    ('sps', None)
    """
    spec = OptimizerSpec.parse(name)
    potential = spec.entry.potential
    return _PAPER.get(spec.name, spec.name), (None if potential is None else potential(dict(spec.options)))


def parse_optimizer(name: str) -> tuple[str, float | None]:
    """Deprecated: :func:`optimizer_kind` (``attnlab.optim.parse_optimizer`` is the grammar's parser).

    Parameters
    ----------
    name : str
        An optimizer string.

    Returns
    -------
    tuple of (str, float or None)
        :func:`optimizer_kind` of ``name``.
    """
    warnings.warn(
        "attnlab.nets.parse_optimizer is deprecated: use attnlab.nets.optimizer_kind (the real-data name of an "
        "optimizer) or attnlab.optim.parse_optimizer (the grammar)",
        DeprecationWarning,
        stacklevel=2,
    )
    return optimizer_kind(name)


def make_optimizer(
    name: str | OptimizerSpec,
    params: Iterable[torch.nn.Parameter],
    lr: float | None = None,
    *,
    sngd_cap: float | None = None,
    sps_c: float | None = None,
) -> torch.optim.Optimizer:
    """Build the optimizer ``name`` over ``params``: :meth:`attnlab.optim.OptimizerSpec.build` with ``lr``.

    Parameters
    ----------
    name : str or OptimizerSpec
        An optimizer string of the registry (:mod:`attnlab.optim.registry`).
    params : iterable of Parameter
    lr : float, optional
        The optimizer's step size ``lr`` (for SNGD the length of each uncapped step), unless ``name`` sets it;
        default the string's, else 0.1. An optimizer without one (Polyak, ``"sps"``) refuses it: write its cap as
        ``"sps:max_step=..."``.
    sngd_cap : float, optional
        SNGD's cap :math:`\\eta_{\\max}` on :math:`\\eta/\\|g\\|` (spec A8), unless ``name`` sets ``max_step``;
        ``None``: no cap.
    sps_c : float, optional
        SPS's constant :math:`c` in :math:`(\\mathcal L_B - 0)/(c\\,\\|g\\|^2)`, unless ``name`` writes it
        (``"sps:c=1"``); it replaces the 0.5 that ``"sps"`` implies (spec A8 [L]).

    Returns
    -------
    torch.optim.Optimizer
        The registry entry's class (``attnlab.optim.GD``, ``NormalizedGD``, ``PolyakStep``, ``Adam``,
        ``MirrorDescent``, ...).

    Raises
    ------
    ValidationError
        When ``name`` does not parse, ``lr`` is given to an optimizer without one or set twice, or ``params`` is a
        single tensor, not iterable, or empty.
    """
    return harness_spec(name, sngd_cap=sngd_cap, sps_c=sps_c).build(_parameter_list(params), lr=lr)


def _parameter_list(params: object) -> list:
    """``params`` as a list (a generator read once), refused when it is a tensor, not iterable, or empty."""
    fix = "pass model.parameters() or a list of tensors (or of parameter groups)"
    if isinstance(params, torch.Tensor):
        raise ValidationError(f"params is a single tensor of shape {tuple(params.shape)}; {fix}, e.g. [params]")
    try:
        listed = list(params)  # type: ignore[call-overload]
    except TypeError:
        raise ValidationError(f"params must be an iterable of tensors, got {type(params).__name__}; {fix}") from None
    if not listed:
        raise ValidationError(f"params is empty: there is nothing to optimize; {fix} of a model with parameters")
    return listed


def harness_spec(
    name: str | OptimizerSpec, *, sngd_cap: float | None = None, sps_c: float | None = None
) -> OptimizerSpec:
    """The optimizer ``name`` with the real-data harness's defaults: SNGD's cap and SPS's constant, unless it sets them.

    Parameters
    ----------
    name : str or OptimizerSpec
        An optimizer string of the registry.
    sngd_cap, sps_c : float, optional
        As for :func:`make_optimizer`.

    Returns
    -------
    OptimizerSpec
        What :func:`make_optimizer` builds (``spec.build(params, lr=...)``); ``spec.rule(names, lr=...)`` gives the
        same update for stacked runs, ``lr`` a per-run tensor where the runs' rates differ.
    """
    spec = OptimizerSpec.parse(name)
    extra = {"max_step": sngd_cap} if spec.name == "ngd" else {"c": sps_c} if spec.name == "polyak" else {}
    # what the string itself sets wins; what its alias implies ("sps": c = 0.5) does not
    return spec.replace(**{k: v for k, v in extra.items() if v is not None and k not in spec.written})
