"""Deprecated: moved to :mod:`attnlab.nets.figures`; importing from here warns and goes in the next release."""

from attnlab._deprecation import moved_module

__getattr__ = moved_module(__name__, "attnlab.nets.figures")
