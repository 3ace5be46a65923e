"""The one training loop of attnlab: every training path is a problem that :func:`run_loop` runs.

Token selection (:func:`attnlab.train`, :func:`attnlab.training.batched.train`, the flow), the in-context regression
of Algorithm 1, NTK gradient descent, kernel regression, projected mirror descent and the real-model classifier
each supply a small :class:`LoopProblem` (gradient, guard, apply, keep, record); the loop owns the steps, the
recording schedule, the callbacks, the timing and the divergence policy.

The divergence policy (stated here, once)
-----------------------------------------
Runs never interact. At every step the loop asks the problem's guard which runs are in a bad state: a non-finite
loss or iterate, or past a bound the problem sets (the regression's maximal norm). Each such run goes back to its
state before the last step, gets a row there (unless that step was recorded), takes no further step and gets no
further row, and ends ``"diverged"`` with ``last_step`` the step of the state it keeps; the other runs go on. A callback that returns True stops every run still going
(``"stopped"``, unless the last step was reached; then ``"completed"``). The loop never warns and never raises
about divergence: the result's ``status`` says it, per run. Only a bad *initial* state raises
(:class:`~attnlab.ValidationError`): it is bad input, not divergence. A front door whose own API must raise
(:func:`attnlab.explain.explain` names no SVM for a diverged run) reads the status first, and says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError
from attnlab.training.callbacks import Record, callback_list, tidy_frame
from attnlab.training.result import COMPLETED, DIVERGED, STOPPED, TrainingResult

__all__ = ["LoopProblem", "run_loop"]


class LoopProblem(Protocol):
    """What :func:`run_loop` runs: R independent runs of one training problem.

    A problem holds its current state and the one before its last step (so a bad run is put back without a copy per
    step). At step ``k`` the loop calls :meth:`gradient`, :meth:`guard`, :meth:`record` (on recorded steps) and
    :meth:`apply`. Optional members: ``device`` (of the runs' masks), ``done(gradient) -> bool`` (the problem's
    own end, such as a tolerance: the loop records the step and ends, ``"completed"``), ``state() -> mapping``
    (extra read-only state for callbacks), and ``substeps = True`` for a step made of smaller ones (an epoch of
    mini-batches): the loop hands the problem ``tick(count)`` to call after each and reads ``clock``.

    Attributes
    ----------
    runs : int
        The number of runs R.
    """

    runs: int

    def gradient(self, step: int, records: bool) -> Any:
        """What the step and the record read at the current state (None when :meth:`apply` computes it).

        Parameters
        ----------
        step : int
        records : bool
            Whether this step is recorded (a problem may skip the loss on the other steps).

        Returns
        -------
        object
            Passed to :meth:`guard`, :meth:`record` and :meth:`apply`.
        """

    def guard(self, gradient: Any) -> torch.Tensor | None:
        """The runs whose current state is bad: non-finite, or past a bound of the problem.

        Parameters
        ----------
        gradient : object

        Returns
        -------
        torch.Tensor of shape (R,), bool, or None
            None when every run is good.
        """

    def apply(self, step: int, gradient: Any, active: torch.Tensor) -> None:
        """Move every run one step (``step`` to ``step + 1``), keeping the state before it for :meth:`keep`.

        Parameters
        ----------
        step : int
        gradient : object
        active : torch.Tensor, shape (R,), bool
            The runs still going (the loop puts the others back after the step).
        """

    def keep(self, runs: torch.Tensor) -> None:
        """Put ``runs`` (shape (R,), bool) back to their state before the last :meth:`apply`.

        Parameters
        ----------
        runs : torch.Tensor, shape (R,), bool
        """

    def record(self, step: int, gradient: Any, active: torch.Tensor) -> Mapping[str, Any]:
        """This step's rows, one per active run.

        Parameters
        ----------
        step : int
        gradient : object
        active : torch.Tensor, shape (R,), bool

        Returns
        -------
        mapping of str to array-like
            Columns of equal length, ``run`` and ``step`` among them.
        """


def run_loop(
    problem: LoopProblem,
    steps: int,
    *,
    record_every: int | None = None,
    record_at: Collection[int] = (),
    start: int = 0,
    callbacks: Iterable[Any] = (),
    progress: bool | None = None,
    desc: str = "train",
    total: int | None = None,
    recorded: Sequence[Mapping[str, Any]] = (),
) -> TrainingResult:
    """Run ``problem`` from step ``start`` to ``steps`` under the one divergence policy (module docstring).

    Parameters
    ----------
    problem : LoopProblem
        The runs, their state and their step.
    steps : int
        The last step; the loop applies ``steps - start`` updates unless every run ends earlier.
    record_every : int, optional
        Record steps ``start``, ``start + k``, ... (multiples of k) and the last; None records the first and the last.
    record_at : collection of int, optional
        Further steps to record.
    start : int, default=0
        The step of the problem's current state (a resumed run starts past 0).
    callbacks : iterable of Callback or callable
        See :mod:`attnlab.training.callbacks`; a progress bar is added unless ``progress`` is False.
    progress : bool, optional
        Default: a bar only when stderr is a terminal.
    desc : str, default="train"
        Progress-bar label.
    total : int, optional
        The count the callbacks' ``on_start`` receives (default ``steps``; the mini-batches of a problem with
        ``substeps``).
    recorded : sequence of mapping, optional
        Rows recorded before ``start`` (a resumed run), as columns; they come first in the frame.

    Returns
    -------
    TrainingResult
        ``frame``, ``status``, ``last_step`` and ``seconds``; the front door adds the final state.

    Raises
    ------
    ValidationError
        When the state at ``start`` is bad for some run (bad input: nothing was trained).
    """
    runs = problem.runs
    active = torch.ones(runs, dtype=torch.bool, device=getattr(problem, "device", None))
    status, last_step = [COMPLETED] * runs, [steps] * runs
    calls = callback_list(callbacks, progress, desc)
    substeps = getattr(problem, "substeps", False)
    if substeps:
        problem.tick = calls.step
    done = getattr(problem, "done", None)
    extra_state = getattr(problem, "state", None)
    parts, running, frozen, stop, finished = list(recorded), runs, False, False, False
    started = time.perf_counter()
    planned = steps if total is None else total  # in the callbacks' unit: the smaller steps of a problem with substeps
    calls.start(planned)
    step, recorded = start, False  # recorded: whether the last step was recorded

    def emit(at: int, gradient: Any, runs_recorded: torch.Tensor) -> bool:
        """Record ``runs_recorded`` at step ``at``; hand the record to the callbacks. Returns whether one says stop."""
        part = problem.record(at, gradient, runs_recorded)
        parts.append(part)
        if not calls.callbacks:
            return False
        view = {"status": status, **(extra_state() if extra_state is not None else {})}
        if calls.reads_state:  # copies: later steps overwrite the live tensors (and statuses) in place
            view = map_tensors(view, torch.Tensor.clone)
        return calls.record(Record(problem.clock if substeps else at, planned, part, view))  # its frame built if read

    for step in range(start, steps + 1):
        records = step == start or step == steps or (record_every is not None and step % record_every == 0)
        records = records or step in record_at
        gradient = problem.gradient(step, records)
        bad = problem.guard(gradient)
        if bad is not None:  # the divergence policy: back to the last good state, stop, say so
            newly = bad & active
            if step == start:
                raise ValidationError(
                    f"the state at step {start} of runs {newly.nonzero().flatten().tolist()} is not finite (or out "
                    "of bounds); check the data and the initialisation for overflow"
                )
            problem.keep(newly)
            active &= ~newly
            for r in newly.nonzero().flatten().tolist():
                status[r], last_step[r] = DIVERGED, step - 1
                running -= 1
            frozen = True
            if running == 0 and recorded:
                break
            gradient = problem.gradient(step, records or not recorded)  # at the kept state for the runs put back
            if not recorded:  # the state a diverged run keeps gets its row, as the last step of a run does
                stop = emit(step - 1, gradient, newly)
            if running == 0:
                break
        finished = done is not None and done(gradient)
        if records or finished:
            stop = emit(step, gradient, active) or stop
            finished = finished or (done is not None and done(gradient))  # e.g. patience, read off this record
        recorded = records or finished
        if step == steps or stop or finished:
            break
        problem.apply(step, gradient, active)
        if frozen:
            problem.keep(~active)
        if calls.wants_steps and not substeps:
            calls.step(step + 1)
    _ended_early(status, last_step, step, steps, stop and not finished)
    calls.end()
    return TrainingResult(
        frame=_frame(parts), status=status, last_step=last_step, seconds=time.perf_counter() - started
    )


def _ended_early(status: list[str], last_step: list[int], step: int, steps: int, stopped: bool) -> None:
    """Fill in, in place, the statuses and last steps of a loop that ended at ``step`` before ``steps``: stopped by a
    callback (the runs still going are ``"stopped"`` there), or with every run ended (the survivors hold ``step``)."""
    if step >= steps:
        return
    for r, st in enumerate(status):
        if st == COMPLETED:
            last_step[r] = step
            if stopped:
                status[r] = STOPPED


def map_tensors(value: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """``value`` with ``fn`` applied to every tensor, every dict, list and tuple rebuilt; other objects (a model, an
    optimizer) as they are."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, dict):
        return {k: map_tensors(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(map_tensors(v, fn) for v in value)
    return value


def _frame(parts: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The one frame of a run: every recorded part, in order (:func:`tidy_frame`)."""
    if not parts:
        return pd.DataFrame()
    return tidy_frame({k: np.concatenate([_array(p[k]) for p in parts]) for k in parts[0]})


def _array(values: Any) -> np.ndarray:
    return values.detach().cpu().numpy() if isinstance(values, torch.Tensor) else np.asarray(values)
