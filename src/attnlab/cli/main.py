"""The root ``attnlab`` command group; sub-command modules attach themselves to :data:`main`."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import click

import attnlab
from attnlab._errors import FileSystemError, ValidationError  # not attnlab._validation, which loads torch

__all__ = ["KEEPS_NOTHING", "main", "user_errors", "warnings_as_lines"]

RESUMES = "interrupted: what finished is kept (a run, sweep or reproduction run again goes on from it)"
KEEPS_NOTHING = "interrupted: nothing was written (this command keeps no partial result); run it again"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(attnlab.__version__, prog_name="attnlab")
def main() -> None:
    """attnlab: the theory of how softmax attention learns, runnable and measurable."""


def user_errors(func: Callable[..., Any] | None = None, *, interrupted: str = RESUMES) -> Any:
    """Turn a :class:`ValidationError` (bad input) into a one-line message and exit status 2, and a file-system
    failure (:class:`FileSystemError`, or an :class:`OSError`, which names its file) into one line and exit status 1,
    without a traceback. A reader that closed the pipe (``attnlab list | head -1``) ends the command quietly. Ctrl-C
    (SIGINT) ends it with one line and status 130, the shell's for an interrupted command (click's own ``Aborted!``
    exits 1, which reads as a failed check). A warning is shown as one line, ``warning: MESSAGE``, when it is
    raised.

    Parameters
    ----------
    func : callable, optional
        The command; without it, ``user_errors(interrupted=...)`` is the decorator.
    interrupted : str, default=RESUMES
        The line that Ctrl-C prints: what the command keeps. A command that writes only at its end says that
        nothing was kept (:data:`KEEPS_NOTHING`, or its own line), never the resumable commands' :data:`RESUMES`.

    Returns
    -------
    callable
        The wrapped command, or the decorator when ``func`` is None.
    """
    if func is None:
        return functools.partial(user_errors, interrupted=interrupted)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with warnings.catch_warnings():  # restores Python's warning printer after the command
                warnings.showwarning = _warning_line
                return func(*args, **kwargs)
        except BrokenPipeError:
            _quiet_broken_pipe()
        except KeyboardInterrupt:
            click.echo(interrupted, err=True)
            sys.exit(130)
        except FileSystemError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(1)
        except ValidationError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(2)
        except OSError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(1)

    return wrapper


def _warning_line(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
    """A warning as the command line shows it, when it is raised: ``warning: MESSAGE`` on stderr (Python's own form
    adds the file, the line and the source line of the library's code)."""
    click.echo(f"warning: {message}", err=True)


def _quiet_broken_pipe() -> None:
    """Exit 0 when stdout's reader has gone: the rest of the output was not wanted, which is not an error. stdout is
    pointed at devnull first, so that the interpreter's flush at exit does not raise again (Python's own advice)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


@contextlib.contextmanager
def warnings_as_lines() -> Iterator[None]:
    """Print each distinct warning raised inside the block once, as ``warning: MESSAGE`` on stderr: the command
    line's form of the library's warnings (Python's own shows the file, the line and the source line, each time)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for text in dict.fromkeys(str(w.message) for w in caught):  # distinct, in order
                click.echo(f"warning: {text}", err=True)
