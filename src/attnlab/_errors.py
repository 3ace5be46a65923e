"""The error of bad input, in a module of its own that imports nothing, so the command line can catch it cheaply."""

from __future__ import annotations

__all__ = ["ValidationError"]


class ValidationError(ValueError):
    """Raised when an argument of a public function is invalid; the message names the argument and the fix."""
