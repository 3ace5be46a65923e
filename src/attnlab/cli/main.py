"""The root ``attnlab`` command group; sub-command modules attach themselves to :data:`main`."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import click

import attnlab
from attnlab._errors import ValidationError  # not attnlab._validation, which loads torch

__all__ = ["main", "user_errors"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(attnlab.__version__, prog_name="attnlab")
def main() -> None:
    """attnlab: the theory of how softmax attention learns, runnable and measurable."""


def user_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a :class:`ValidationError` (bad input) into a one-line message and exit status 2, and a file-system
    failure (:class:`OSError`, which names its file) into one line and exit status 1, without a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ValidationError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(2)
        except OSError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(1)

    return wrapper
