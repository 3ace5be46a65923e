"""Experiment trackers as callbacks: what a training loop records, sent to TensorBoard.

A tracker is an :class:`attnlab.training.callbacks.Callback`, so every loop that takes ``callbacks=[...]`` feeds it.
:class:`TensorBoardLogger` writes each numeric column of the recorded rows as a scalar, one TensorBoard run
(a subfolder of ``log_dir``) per attnlab run, so TensorBoard overlays the runs of a batch on one chart per column.

It writes through ``torch.utils.tensorboard``, which needs the ``tensorboard`` package:
``pip install -e '.[tensorboard]'`` in your attnlab clone. View the logs with ``tensorboard --logdir <log_dir>``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from attnlab._io import make_dir
from attnlab._validation import ValidationError, check_scalar
from attnlab.training.callbacks import Callback, Record

__all__ = ["TensorBoardLogger"]


class TensorBoardLogger(Callback):
    """Write every numeric recorded column of every run as a TensorBoard scalar.

    Parameters
    ----------
    log_dir : path
        Folder of the logs; run ``r`` writes to ``log_dir/run-<r>`` (one TensorBoard run each).
    columns : sequence of str, optional
        The columns to log; default every numeric column but ``run`` and ``step`` (booleans as 0/1; text skipped).
    prefix : str, default=""
        Put before every tag, e.g. ``"train/"`` groups the charts under one heading.
    flush_secs : float, default=10
        How often the writers flush to disk; everything is flushed when the loop ends.

    Raises
    ------
    ImportError
        When the ``tensorboard`` package is missing; the message says how to install it.
    OutputError
        When ``log_dir`` cannot be created (the message names the path and the reason).
    ValidationError
        When ``columns`` is not a list of distinct column names, ``prefix`` is not a str, or ``flush_secs`` is not
        a positive number.

    Notes
    -----
    A scalar is written at the loop's step (``record.step``) with tag ``prefix + column``. TensorBoard stores
    scalars as float32, so values read back agree with the float64 rows to about 7 significant digits.

    Each run's writer starts with TensorBoard's purge marker at the first step it writes: whatever an earlier
    logger wrote to the same ``log_dir/run-<r>`` at that step or later is dropped when TensorBoard reads the logs.
    So a resumed loop (which re-sends the row of the last finished step) logs every step once, and a second
    run written to the same ``log_dir`` replaces the first one's points instead of doubling them.

    Examples
    --------
    >>> import pandas as pd, tempfile
    >>> from attnlab.training.callbacks import Record
    >>> logger = TensorBoardLogger(tempfile.mkdtemp())
    >>> logger.on_start(steps=1)
    >>> rows = pd.DataFrame({"run": [0, 1], "step": [0, 0], "loss": [0.7, 0.6]})
    >>> logger.on_record(Record(step=0, steps=1, rows=rows))
    >>> logger.on_end(None)
    >>> sorted(p.name for p in logger.log_dir.iterdir())
    ['run-0', 'run-1']
    """

    reads_state = False  # the rows only: the loop need not copy its state for this logger

    def __init__(
        self,
        log_dir: str | os.PathLike[str],
        *,
        columns: Sequence[str] | None = None,
        prefix: str = "",
        flush_secs: float = 10.0,
    ) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as err:
            raise ImportError(
                "TensorBoardLogger writes through torch.utils.tensorboard, which needs the tensorboard package; "
                "install it from your attnlab clone with: pip install -e '.[tensorboard]'"
            ) from err
        if columns is not None and (isinstance(columns, str) or not all(isinstance(c, str) for c in columns)):
            raise ValidationError(f"columns must be a list of column names, got {columns!r}; e.g. columns=['loss']")
        if columns is not None and len(set(columns)) < len(columns):
            repeated = sorted({c for c in columns if list(columns).count(c) > 1})
            raise ValidationError(f"columns lists {repeated} more than once; pass each column once, got {columns!r}")
        if not isinstance(prefix, str):
            raise ValidationError(f"prefix must be a str put before every tag, got {prefix!r}; e.g. prefix='train/'")
        self._writer_type = SummaryWriter
        self.log_dir = make_dir(log_dir)  # created now: a folder that cannot be made is refused before training
        self.columns = None if columns is None else tuple(columns)
        self.prefix = prefix
        self.flush_secs = check_scalar("flush_secs", flush_secs, low=0.0, low_inclusive=False)
        self._writers: dict[Any, Any] = {}

    def on_record(self, record: Record) -> None:
        """Write this record's numeric columns, one scalar per (run, column).

        Parameters
        ----------
        record : Record
            The rows just recorded; they must have a ``run`` column (every attnlab loop records one).
        """
        rows = record.rows
        if "run" not in rows.columns:
            raise ValidationError(
                f"TensorBoardLogger needs a 'run' column in the recorded rows, got columns {list(rows.columns)}; "
                "every attnlab loop records one"
            )
        for column, values in self._scalar_columns(rows).items():
            for run, value in zip(rows["run"], values):
                self._writer(run, record.step).add_scalar(self.prefix + column, float(value), global_step=record.step)

    def on_end(self, record: Record | None) -> None:
        """Flush and close every writer.

        Parameters
        ----------
        record : Record or None
            The loop's last record (unused: every record was written when it came).
        """
        self.close()

    def close(self) -> None:
        """Flush and close every writer (the loop's end does this; call it when a loop is interrupted)."""
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()

    def _scalar_columns(self, rows: Any) -> dict[str, Any]:
        """The columns to log as numeric Series, by name."""
        if self.columns is not None:
            missing = [c for c in self.columns if c not in rows.columns]
            if missing:
                raise ValidationError(
                    f"columns {missing} are not in the recorded rows, whose columns are {list(rows.columns)}; "
                    "pass columns from that list, or columns=None for every numeric one"
                )
            chosen = rows[list(self.columns)]
        else:
            chosen = rows.drop(columns=[c for c in ("run", "step") if c in rows.columns])
        numeric = chosen.select_dtypes(include=["number", "bool"])
        if self.columns is not None and len(numeric.columns) < len(chosen.columns):
            text = sorted(set(chosen.columns) - set(numeric.columns))
            raise ValidationError(f"columns {text} are not numeric, so TensorBoard cannot plot them; drop them")
        return {str(c): numeric[c].astype(float) for c in numeric.columns}

    def _writer(self, run: Any, step: int) -> Any:
        """Run ``run``'s writer, opened at its first record (``step``) with TensorBoard's purge marker there.

        ``purge_step`` makes TensorBoard drop the points an earlier writer left in the folder at ``step`` or later:
        the row a resumed loop sends again, or a previous run's points, are then logged once.
        """
        if run not in self._writers:
            folder = str(self.log_dir / f"run-{run}")
            self._writers[run] = self._writer_type(folder, flush_secs=self.flush_secs, purge_step=int(step))
        return self._writers[run]
