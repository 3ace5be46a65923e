"""What a training loop tells the outside world: recorded rows, progress, early stopping, trackers.

Every training path of attnlab runs in the one loop (:func:`attnlab.training.loop.run_loop`), which calls these
callbacks, so a progress bar, a logger, an early stop or an experiment tracker written once works with all of them.
A callback sees a :class:`Record` each time the loop records: the step, the rows it just recorded (one per run:
``run, step, loss, ...``) and a read-only view of the state.

A callback is either a plain function ``fn(record) -> bool | None`` (called at every record; returning True asks
the loop to stop) or a :class:`Callback` that overrides any of ``on_start``, ``on_step``, ``on_record`` and
``on_end``. Front doors take ``callbacks=[...]``; the loop wraps them in a :class:`CallbackList`.

Examples
--------
>>> import pandas as pd
>>> seen = []
>>> calls = CallbackList([lambda record: seen.append(record.step)])
>>> calls.start(steps=2)
>>> calls.record(Record(step=0, steps=2, rows=pd.DataFrame({"run": [0], "step": [0], "loss": [1.0]})))
False
>>> seen
[0]
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "Callback",
    "CallbackList",
    "EarlyStop",
    "ProgressBar",
    "Record",
    "callback_list",
    "default_progress",
    "progress_bar",
    "tidy_frame",
]


class Record:
    """What a loop hands its callbacks at a recorded step.

    Parameters
    ----------
    step : int
        The step just recorded (0 is the initial point).
    steps : int
        The number of steps the loop plans to take.
    rows : pandas.DataFrame or mapping of str to array-like
        The rows recorded at this step, one per run, with at least ``run`` and ``step``: a frame, or its columns
        (the loop passes the columns, and the frame is built the first time a callback reads :attr:`rows`).
    state : mapping of str to object, optional
        The loop's state at this step (parameters such as ``"W"`` with the runs axis first, ``"model"`` for a loop
        over an ``nn.Module``, ``"status"`` per run). The loop hands each callback that reads it
        (:attr:`Callback.reads_state`) copies of its tensors and lists, so a kept state keeps this step's values;
        other objects (``"model"``, ``"optimizer"``) are the live ones, which later steps move. The engine's
        tensors are inference-mode tensors (:func:`attnlab.training.engine.fit`): ``.clone()`` one outside
        inference mode to use it with autograd.
    """

    __slots__ = ("step", "steps", "state", "_rows")

    def __init__(
        self, step: int, steps: int, rows: pd.DataFrame | Mapping[str, Any], state: Mapping[str, Any] | None = None
    ) -> None:
        self.step, self.steps, self._rows = step, steps, rows
        self.state: Mapping[str, Any] = {} if state is None else state

    @property
    def rows(self) -> pd.DataFrame:
        """The rows recorded at this step as a frame (:func:`tidy_frame`), one per run."""
        if not isinstance(self._rows, pd.DataFrame):
            self._rows = tidy_frame(self._rows)
        return self._rows

    def first_row(self) -> dict[str, Any]:
        """The first run's row as ``{column: value}`` (Python scalars), without building the frame.

        Returns
        -------
        dict of str to object
        """
        if isinstance(self._rows, pd.DataFrame):
            return {k: _scalar(v) for k, v in self._rows.iloc[0].items()}
        return {k: _scalar(v[0]) for k, v in self._rows.items()}

    def __repr__(self) -> str:
        rows = self._rows
        count = len(rows) if isinstance(rows, pd.DataFrame) else len(next(iter(rows.values()), ()))  # frame not built
        return f"Record(step={self.step}, steps={self.steps}, rows={count} rows)"


def _scalar(value: Any) -> Any:
    """A NumPy or torch scalar as the Python number it holds; anything else as it is."""
    return value.item() if hasattr(value, "item") else value


class Callback:
    """Base class of callbacks; override what you need. Each hook runs in the loop's process.

    Attributes
    ----------
    reads_state : bool
        Whether :meth:`on_record` reads :attr:`Record.state` (True unless a subclass says otherwise): the loop
        copies the state for each record only when some callback reads it.
    """

    reads_state = True

    def on_start(self, steps: int) -> None:
        """Called once before the first step with the number of steps planned.

        Parameters
        ----------
        steps : int
            The number of steps the loop plans to take.
        """

    def on_step(self, step: int) -> None:
        """Called after every step (only when overridden: it costs a Python call per step).

        Parameters
        ----------
        step : int
            The number of steps taken so far.
        """

    def on_record(self, record: Record) -> bool | None:
        """Called at every recorded step; return True to ask the loop to stop after this step.

        Parameters
        ----------
        record : Record
            The step, the rows just recorded (one per run) and a read-only view of the state.

        Returns
        -------
        bool or None
            True asks the loop to stop; False or None lets it go on.
        """

    def on_end(self, record: Record | None) -> None:
        """Called once when the loop ends, with its last record (None if it recorded nothing).

        Parameters
        ----------
        record : Record or None
            The loop's last record, or None when it recorded nothing.
        """


class _FunctionCallback(Callback):
    def __init__(self, fn: Callable[[Record], bool | None]) -> None:
        self.fn = fn

    def on_record(self, record: Record) -> bool | None:
        return self.fn(record)


def _as_callback(value: Any) -> Callback:
    if isinstance(value, Callback):
        return value
    if callable(value):
        return _FunctionCallback(value)
    raise TypeError(
        f"callbacks must be attnlab.training.callbacks.Callback objects or functions record -> bool | None, got "
        f"{type(value).__name__}"
    )


class CallbackList:
    """The callbacks of one loop: dispatches each hook to all of them, in order.

    Parameters
    ----------
    callbacks : iterable of Callback or callable, optional
        Callbacks, or functions ``record -> bool | None`` (called at every record).
    """

    def __init__(self, callbacks: Iterable[Any] | None = ()) -> None:
        self.callbacks: list[Callback] = [_as_callback(c) for c in (callbacks or ())]
        self.reads_state = any(getattr(c, "reads_state", True) for c in self.callbacks)  # copy the state per record
        self.wants_steps = any(type(c).on_step is not Callback.on_step for c in self.callbacks)
        self.last: Record | None = None

    def start(self, steps: int) -> None:
        """Call every callback's ``on_start``.

        Parameters
        ----------
        steps : int
            The number of steps the loop plans to take.
        """
        for c in self.callbacks:
            c.on_start(steps)

    def step(self, step: int) -> None:
        """Call every callback's ``on_step`` (nothing when none overrides it).

        Parameters
        ----------
        step : int
            The number of steps taken so far.
        """
        if self.wants_steps:
            for c in self.callbacks:
                c.on_step(step)

    def record(self, record: Record) -> bool:
        """Dispatch a record to every callback (each one sees it, even after one asked to stop).

        Parameters
        ----------
        record : Record
            The step, the rows just recorded (one per run) and a read-only view of the state.

        Returns
        -------
        bool
            True when any callback asked to stop.
        """
        self.last = record
        stop = False
        for c in self.callbacks:
            stop = bool(c.on_record(record)) or stop
        return stop

    def end(self) -> None:
        """Call every callback's ``on_end`` with the last record dispatched (None if there was none)."""
        for c in self.callbacks:
            c.on_end(self.last)


def callback_list(callbacks: Iterable[Any] | None, progress: bool | None, desc: str) -> CallbackList:
    """The callbacks of the loop plus, when ``progress`` asks for it, a :class:`ProgressBar`: the one way training
    shows progress.

    Parameters
    ----------
    callbacks : iterable of Callback or callable, optional
        The caller's callbacks (None: none).
    progress : bool or None
        True forces a bar, None shows it only when stderr is a terminal, False never.
    desc : str
        The bar's label.

    Returns
    -------
    CallbackList
        The caller's callbacks, then the bar (none when it would not show: a hidden bar is no callback, so a loop
        with no other callback builds no record view).
    """
    shown = default_progress() if progress is None else bool(progress)
    extra = [ProgressBar(desc=desc, show=True)] if shown else []
    return CallbackList([*(callbacks or ()), *extra])


def default_progress() -> bool:
    """Whether a progress bar shows when the caller did not say: only when stderr is a terminal.

    Returns
    -------
    bool
        True when stderr is a terminal.
    """
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def progress_bar(
    iterable: Iterable[Any] | None = None,
    *,
    total: int | None = None,
    desc: str = "",
    show: bool | None = None,
    unit: str = "it",
) -> Any:
    """A tqdm bar, shown when ``show`` is True, or, when ``show`` is None, only if stderr is a terminal.

    The one place attnlab makes progress bars, so piped logs never fill with carriage returns.

    Parameters
    ----------
    iterable : iterable, optional
        What to iterate over, as ``tqdm`` takes it.
    total : int, optional
        The number of iterations expected.
    desc : str, default=""
        The bar's label.
    show : bool, optional
        True shows the bar, False hides it; None shows it only when stderr is a terminal.
    unit : str, default="it"
        The unit of the count.

    Returns
    -------
    tqdm.tqdm
        The bar (a disabled one when hidden), iterable when ``iterable`` is given.
    """
    from tqdm.auto import tqdm

    visible = default_progress() if show is None else bool(show)
    return tqdm(iterable, total=total, desc=desc, disable=not visible, leave=False, dynamic_ncols=True, unit=unit)


class ProgressBar(Callback):
    """A progress bar over the steps of a loop, with the last recorded columns as its postfix.

    Parameters
    ----------
    desc : str, default="train"
        The label written before the bar.
    show : bool, optional
        Default: only when stderr is a terminal.
    columns : sequence of str, default=("loss",)
        Recorded columns shown (mean over runs) next to the bar.
    """

    reads_state = False  # the rows only

    def __init__(self, desc: str = "train", show: bool | None = None, columns: Sequence[str] = ("loss",)) -> None:
        self.desc, self.show, self.columns = desc, show, tuple(columns)
        self.bar: Any = None

    def on_start(self, steps: int) -> None:
        self.bar = progress_bar(total=steps, desc=self.desc, show=self.show)

    def on_step(self, step: int) -> None:
        if self.bar is not None and not self.bar.disable:
            self.bar.update(step - self.bar.n)

    def on_record(self, record: Record) -> None:
        if self.bar is None or self.bar.disable:
            return
        shown = {c: f"{float(record.rows[c].mean()):.3g}" for c in self.columns if c in record.rows}
        if shown:
            self.bar.set_postfix(shown, refresh=False)

    def on_end(self, record: Record | None) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class EarlyStop(Callback):
    """Stop once every run's recorded ``column`` has crossed ``threshold``.

    Parameters
    ----------
    column : str
        A recorded column, e.g. ``"loss"`` or ``"alignment"``.
    threshold : float
        The value to cross, in the column's units; strictly (``<`` or ``>``).
    mode : {"below", "above"}, default="below"
        Stop when the column is below (a loss) or above (an alignment) the threshold.

    Examples
    --------
    >>> stop = EarlyStop("loss", 0.5)
    >>> stop.on_record(Record(step=3, steps=9, rows=pd.DataFrame({"run": [0, 1], "step": 3, "loss": [0.4, 0.6]})))
    False
    """

    reads_state = False  # the rows only

    def __init__(self, column: str, threshold: float, mode: str = "below") -> None:
        if mode not in ("below", "above"):
            raise ValueError(f'mode must be "below" or "above", got {mode!r}')
        self.column, self.threshold, self.mode = column, float(threshold), mode

    def on_record(self, record: Record) -> bool:
        if self.column not in record.rows:
            raise KeyError(
                f"EarlyStop watches column {self.column!r}, which the loop does not record; recorded columns: "
                f"{sorted(record.rows.columns)}"
            )
        values = record.rows[self.column]
        return bool((values < self.threshold).all() if self.mode == "below" else (values > self.threshold).all())


def tidy_frame(columns: Mapping[str, Any], **constants: Any) -> pd.DataFrame:
    """One tidy frame from equal-length columns (arrays, tensors or lists) plus constant columns placed first.

    The frame builder of attnlab: the one loop builds every training frame with it, ``run`` and ``step`` first,
    snake_case columns after.

    Parameters
    ----------
    columns : mapping of str to array, tensor or list, each of shape (rows,)
        The columns, all of one length.
    **constants
        Columns of one value repeated on every row.

    Returns
    -------
    pandas.DataFrame
        ``rows`` rows; ``run`` and ``step`` first, then the other columns in the order given.

    Examples
    --------
    >>> tidy_frame({"run": [0, 1], "loss": [0.5, 0.25]}, step=3).columns.tolist()
    ['run', 'step', 'loss']
    """
    data = {k: v.detach().cpu().numpy() if hasattr(v, "detach") else np.asarray(v) for k, v in columns.items()}
    size = len(next(iter(data.values()))) if data else 0
    data.update({k: np.full(size, v) for k, v in constants.items()})
    order = [k for k in ("run", "step") if k in data] + [k for k in data if k not in ("run", "step")]
    return pd.DataFrame({k: data[k] for k in order})
