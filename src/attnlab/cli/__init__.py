"""The ``attnlab`` command line. Each sub-command lives in its own module and is added to :data:`main` here."""

from attnlab.cli import (
    data_cmd,  # noqa: F401
    explain_cmd,  # noqa: F401  (registers `explain`)
    optimizers_cmd,  # noqa: F401  (registers `optimizers`)
    reproduce_cmd,  # noqa: F401  (registers `reproduce`)
    run_cmd,  # noqa: F401  (registers `list` and `run`)
    show_cmd,  # noqa: F401  (registers `show`)
    svm_cmd,  # noqa: F401
    sweep_cmd,  # noqa: F401  (registers `sweep`)
)
from attnlab.cli.main import main

__all__ = ["main"]
