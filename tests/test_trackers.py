"""TensorBoardLogger: what it is fed comes back out of the event files, run by run, column by column."""

import sys

import numpy as np
import pandas as pd
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from attnlab._io import OutputError
from attnlab._validation import ValidationError
from attnlab.trackers import TensorBoardLogger
from attnlab.training.callbacks import CallbackList, EarlyStop, Record

# TensorBoard stores scalars as float32: 2**-24 relative rounding, so 1e-6 relative is the float32 agreement.
FLOAT32_RTOL = 1e-6


def _records(steps=(0, 5, 10), runs=(0, 1)):
    """Rows as a loop records them: losses that differ by run and step, a bool, a text column."""
    out = []
    for step in steps:
        rows = pd.DataFrame(
            {
                "run": list(runs),
                "step": [step] * len(runs),
                "loss": [np.exp(-0.1 * step) / (1 + r) for r in runs],
                "alignment": [1 - 1 / (2 + step + r) for r in runs],
                "stopped": [step >= 10 and r == 1 for r in runs],
                "status": ["ok"] * len(runs),
            }
        )
        out.append(Record(step=step, steps=max(steps), rows=rows))
    return out


def _scalars(folder):
    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _feed(logger, records):
    calls = CallbackList([logger])
    calls.start(steps=records[-1].steps)
    for record in records:
        calls.record(record)
    calls.end()


def test_every_numeric_column_of_every_run_reads_back_from_the_event_file(tmp_path):
    records = _records()
    _feed(TensorBoardLogger(tmp_path), records)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run-0", "run-1"]
    for run in (0, 1):
        scalars = _scalars(tmp_path / f"run-{run}")
        assert sorted(scalars) == ["alignment", "loss", "stopped"]  # text and the run/step keys are not scalars
        for column in ("loss", "alignment", "stopped"):
            expected = [(r.step, float(r.rows.loc[r.rows.run == run, column].item())) for r in records]
            steps, values = zip(*scalars[column])
            assert list(steps) == [s for s, _ in expected]
            np.testing.assert_allclose(values, [v for _, v in expected], rtol=FLOAT32_RTOL)


def test_columns_and_prefix_choose_the_tags(tmp_path):
    _feed(TensorBoardLogger(tmp_path, columns=["loss"], prefix="train/"), _records(runs=(3,)))
    scalars = _scalars(tmp_path / "run-3")
    assert list(scalars) == ["train/loss"]
    assert [s for s, _ in scalars["train/loss"]] == [0, 5, 10]


def test_the_logger_does_not_stop_the_loop_and_sits_beside_early_stop(tmp_path):
    calls = CallbackList([TensorBoardLogger(tmp_path), EarlyStop("loss", 0.5)])
    calls.start(steps=10)
    stops = [calls.record(r) for r in _records()]
    calls.end()
    assert stops == [False, False, True]  # every run's loss is below 0.5 only at step 10
    assert len(_scalars(tmp_path / "run-0")["loss"]) == 3


def test_rows_without_a_run_column_are_refused(tmp_path):
    logger = TensorBoardLogger(tmp_path)
    with pytest.raises(ValidationError, match="needs a 'run' column.*got columns \\['step', 'loss'\\]"):
        logger.on_record(Record(step=0, steps=1, rows=pd.DataFrame({"step": [0], "loss": [1.0]})))


def test_unknown_or_text_columns_are_refused_by_name(tmp_path):
    record = _records()[0]
    with pytest.raises(ValidationError, match=r"columns \['los'\] are not in the recorded rows"):
        TensorBoardLogger(tmp_path, columns=["los"]).on_record(record)
    with pytest.raises(ValidationError, match=r"columns \['status'\] are not numeric"):
        TensorBoardLogger(tmp_path, columns=["loss", "status"]).on_record(record)
    with pytest.raises(ValidationError, match="columns must be a list of column names, got 'loss'"):
        TensorBoardLogger(tmp_path, columns="loss")
    with pytest.raises(ValidationError, match="flush_secs == 0, must be > 0.0"):
        TensorBoardLogger(tmp_path, flush_secs=0)


def test_a_missing_tensorboard_package_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # makes the import raise ImportError
    with pytest.raises(ImportError, match=r"pip install -e '\.\[tensorboard\]'"):
        TensorBoardLogger(tmp_path)


def test_a_log_dir_that_cannot_be_made_is_refused_when_the_logger_is_built(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OutputError, match=r"file"):
        TensorBoardLogger(blocker / "logs")  # a folder under a file: refused before any training
    assert TensorBoardLogger(tmp_path / "new" / "logs").log_dir.is_dir()


def test_a_resumed_loop_logs_the_step_it_sends_again_once(tmp_path):
    records = _records(steps=(0, 4, 8, 12, 16), runs=(0,))
    first = TensorBoardLogger(tmp_path)
    for record in records[:3]:  # interrupted after step 8
        first.on_record(record)
    first.close()
    _feed(TensorBoardLogger(tmp_path), records[2:])  # the resumed loop re-sends step 8's row, then goes on
    steps = [s for s, _ in _scalars(tmp_path / "run-0")["loss"]]
    assert steps == [0, 4, 8, 12, 16]


def test_a_second_run_into_one_log_dir_replaces_the_first_instead_of_doubling_it(tmp_path):
    _feed(TensorBoardLogger(tmp_path), _records())
    _feed(TensorBoardLogger(tmp_path), _records())
    for run in (0, 1):
        assert [s for s, _ in _scalars(tmp_path / f"run-{run}")["loss"]] == [0, 5, 10]


def test_repeated_columns_and_a_non_str_prefix_are_refused_when_the_logger_is_built(tmp_path):
    with pytest.raises(ValidationError, match=r"columns lists \['loss'\] more than once"):
        TensorBoardLogger(tmp_path, columns=["loss", "loss"])
    with pytest.raises(ValidationError, match="prefix must be a str.*got 3"):
        TensorBoardLogger(tmp_path, prefix=3)
