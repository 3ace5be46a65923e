"""The ``attnlab`` command line. Each sub-command lives in its own module and is added to :data:`main` here."""

from attnlab.cli.main import main
from attnlab.cli import run_cmd  # noqa: F401  (registers `list` and `run`)

__all__ = ["main"]
