"""Input checks of :class:`~attnlab.verify.Claim` and its row methods: a field or a number of the wrong type is
refused with a :class:`~attnlab._validation.ValidationError` that names it and the fix."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from attnlab._validation import ValidationError, check_scalar
from attnlab.verify.reading import Finding, Reading

if TYPE_CHECKING:  # claim.py imports this module
    from attnlab.verify.claim import Claim

__all__ = ["check_claim_types", "number"]


def check_claim_types(claim: Claim) -> None:
    """Refuse a :class:`Claim` field of the wrong type, naming it and the fix."""
    for name in ("claim", "result", "source", "id"):
        if not isinstance(getattr(claim, name), str):
            raise ValidationError(f"Claim.{name} must be a str, got {getattr(claim, name)!r}")
    if not claim.claim.strip():
        raise ValidationError("Claim.claim is empty; say the claim in words")
    names = (claim.falsifier,) if isinstance(claim.falsifier, str) else claim.falsifier
    if not isinstance(names, tuple | list) or not all(isinstance(n, str) for n in names):
        shown = getattr(claim.falsifier, "name", None)
        fix = f"falsifier={shown!r} (its name)" if shown else "falsifier='name' or ('name', 'other')"
        raise ValidationError(f"Claim.falsifier must name falsifiers by str, got {claim.falsifier!r}; pass {fix}")
    expected = {"reading": Reading, "finding": Finding}
    for name, kind in expected.items():
        value = getattr(claim, name)
        if value is not None and not isinstance(value, kind):
            raise ValidationError(
                f"Claim.{name} must be a {kind.__name__} or None, got {type(value).__name__}; build it with "
                f"attnlab.verify.{kind.__name__}(...)"
            )
    if not isinstance(claim.revisions, tuple | list):
        raise ValidationError(
            f"Claim.revisions must be a tuple of Revision, got {type(claim.revisions).__name__}; write "
            "revisions=(revision,) for one"
        )


def _nan(value: Any) -> bool:
    """Whether ``value`` is a float NaN (a row's number that is missing)."""
    return isinstance(value, float) and math.isnan(value)


def number(name: str, value: Any) -> float:
    """``value`` as a float: a real number (NaN and infinities included: a row with one fails), a NumPy scalar or a
    0-d array or tensor; anything else (a str, None, an array of several numbers) is refused."""
    if hasattr(value, "ndim") and getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        value = value.item()
    if _nan(value):
        return value
    return float(check_scalar(name, value, allow_inf=True))
