"""Deprecated: moved to :mod:`attnlab.verify.replay` (``rerun`` now takes ``registry=``); warns for one release."""

from attnlab._deprecation import moved_module

__getattr__ = moved_module(__name__, "attnlab.verify.replay")
