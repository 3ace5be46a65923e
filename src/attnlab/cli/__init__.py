"""The ``attnlab`` command line. Each sub-command lives in its own module and is added to :data:`main` here."""

from attnlab.cli.main import main
from attnlab.cli import run_cmd  # noqa: F401  (registers `list` and `run`)
from attnlab.cli import data_cmd  # noqa: F401
from attnlab.cli import svm_cmd  # noqa: F401
from attnlab.cli import explain_cmd  # noqa: F401  (registers `explain`)
from attnlab.cli import sweep_cmd  # noqa: F401  (registers `sweep`)
from attnlab.cli import reproduce_cmd  # noqa: F401  (registers `reproduce`)

__all__ = ["main"]
