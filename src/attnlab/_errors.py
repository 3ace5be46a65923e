"""The error of bad input, in a module of its own that imports nothing, so the command line can catch it cheaply."""

from __future__ import annotations

__all__ = ["FileSystemError", "ValidationError"]


class ValidationError(ValueError):
    """Raised when an argument of a public function is invalid; the message names the argument and the fix."""


class FileSystemError(ValidationError):
    """Raised when a file or folder could not be written (the file system refused); the message names the path.

    A :class:`ValidationError` for the library; the command line exits with status 1 on it ("a file could not be
    read or written"), where bad input exits with 2.
    """
