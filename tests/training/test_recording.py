"""The recorder: a metric never overwrites a recorded column, what a metric returns is checked by name, the
selection metrics of a nonlinear head ask for select=, and recording calls the diagnostics unchecked."""

import pytest
import torch

import attnlab as al
import attnlab.batched as batched
import attnlab.geometry as geometry
import attnlab.metrics._checks as checks
from attnlab._validation import ValidationError
from attnlab.data import example1, multi_token
from attnlab.metrics import Metric, alignment, as_metrics, bregman, margin, norm, opt_softmax
from attnlab.models import Combined, ReluHead
from attnlab.svm import attention_svm
from attnlab.training import Recorder


@pytest.fixture(scope="module")
def data():
    return example1(n=4, T=3, d=6, seed=0)


def _batched(data, **kwargs):
    return batched.train(data.X, data.Z, data.y, data.v, optimizer="ngd", lr=0.5, steps=3, progress=False, **kwargs)


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({}, "loss"),
        ({}, "grad_norm"),
        ({}, "norm"),
        ({}, "step"),
        ({}, "opt_softmax"),  # recorded for the optimal tokens of a linear head
        ({"W_ref": "svm"}, "alignment"),
        ({"W_ref": "svm", "bregman_p": 2.0}, "bregman"),
    ],
)
def test_a_metric_named_as_a_recorded_column_is_refused_when_the_recorder_is_built(data, options, name):
    if options.get("W_ref") == "svm":
        options = {**options, "W_ref": attention_svm(data).W}
    with pytest.raises(ValidationError, match=rf"metric column\(s\) \['{name}'\] would overwrite.*rename the metric"):
        _batched(data, metrics=[Metric(name, lambda state: torch.zeros(1))], **options)
    with pytest.raises(ValidationError, match=rf"\['{name}'\] would overwrite"):
        Recorder(select=torch.zeros(1, 4, dtype=torch.int64), metrics={name: lambda state: 0.0}, **_refs(options))


def _refs(options):
    refs = {"refs": {"": options["W_ref"][None]}} if "W_ref" in options else {}
    return {**refs, **({"bregman_p": options["bregman_p"]} if "bregman_p" in options else {})}


def test_al_train_refuses_a_metric_named_as_a_recorded_column(data):
    model = Combined(6)
    with pytest.raises(ValidationError, match=r"\['loss'\] would overwrite"):
        al.train(model, "ngd:lr=0.5", data, steps=2, metrics=[Metric("loss", lambda state: torch.zeros(1))])
    # columns the front door does not record itself stay free for metrics
    frame = al.train(model, "ngd:lr=0.5", data, steps=2, metrics=[opt_softmax(), margin()], progress=False).frame
    assert {"opt_softmax", "margin"} <= set(frame.columns)


def test_a_mapping_metric_is_refused_at_its_first_record_when_a_column_is_taken(data):
    with pytest.raises(ValidationError, match=r"\['log_loss'\] would overwrite"):
        _batched(data, metrics={"two": lambda state: {"a": state["W"].sum((-2, -1)), "log_loss": 0.0}})
    with pytest.raises(ValidationError, match="metric 'two' fills the column 'a', which another metric fills too"):
        _batched(data, metrics={"a": lambda state: 1.0, "two": lambda state: {"a": 2.0, "b": 3.0}})
    frame = _batched(data, metrics={"two": lambda state: {"a": 2.0, "b": state["W"].sum((-2, -1))}}).frame
    assert len(frame) == 2 and (frame["a"] == 2.0).all()


def test_two_metric_objects_of_one_name_are_refused():
    with pytest.raises(ValidationError, match=r"several Metric objects named \['norm_nuc'\]"):
        as_metrics([norm("nuc"), norm("nuc")])
    with pytest.raises(ValidationError, match="must be a non-empty str"):
        Metric("", lambda state: 0.0)
    with pytest.raises(ValidationError, match="not callable"):
        Metric("x", 3.0)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (
            lambda state: torch.ones(5),
            r"metric column 'bad' returned shape \(5,\); a metric must return one value per run",
        ),
        (lambda state: state["W"].new_ones(4), r"returned shape \(4,\).*not one per sequence"),  # n = 4 sequences
        (lambda state: "hi", "metric column 'bad' returned a str, not numbers"),
        (lambda state: None, "metric column 'bad' returned a NoneType, not numbers"),
    ],
)
def test_a_metric_of_the_wrong_shape_or_type_is_refused_by_name(data, value, match):
    with pytest.raises(ValidationError, match=match):
        _batched(data, metrics=[Metric("bad", value)])


def test_a_metric_gives_one_value_per_run_or_one_for_all(data):
    stacked = [example1(n=4, T=3, d=6, seed=s) for s in (0, 1)]
    X, Z, y, v = (torch.stack([getattr(d, k) for d in stacked]) for k in "XZyv")
    metrics = {
        "number": lambda state: 1.5,
        "one": lambda state: torch.ones(1),
        "per_run": lambda state: state["W"].sum((-2, -1)),
        "column": lambda state: state["W"].sum((-2, -1))[:, None],
    }
    run = batched.train(X, Z, y, v, optimizer="ngd", lr=0.5, steps=2, progress=False, metrics=metrics)
    last = run.frame[run.frame["step"] == 2].sort_values("run")
    assert list(last["number"]) == [1.5, 1.5] and list(last["one"]) == [1.0, 1.0]
    expected = run.W.sum((-2, -1)).tolist()
    assert list(last["per_run"]) == expected and list(last["column"]) == expected
    with pytest.raises(ValidationError, match=r"returned shape \(2, 2\)"):
        batched.train(X, Z, y, v, steps=1, progress=False, metrics={"square": lambda state: torch.ones(2, 2)})


def test_the_selection_metrics_of_a_nonlinear_head_ask_for_select():
    problem = multi_token(seed=3)
    X, Z, y = problem.data.X, problem.data.Z, problem.data.y
    head = ReluHead(problem.V, problem.v)
    for metric in (opt_softmax(), margin()):
        with pytest.raises(ValidationError, match=rf"metric '{metric.name}' has no tokens to read.*pass select="):
            batched.train(X, Z, y, head, steps=1, progress=False, metrics=[metric])
    with pytest.raises(ValidationError, match="metric 'opt_softmax' has no tokens to read"):
        al.train(Combined(4, v0=head), "ngd", problem.data, steps=1, metrics=[opt_softmax()], progress=False)
    select = [0, 1, 2]
    frame = batched.train(X, Z, y, head, steps=1, progress=False, metrics=[opt_softmax(select), margin(select)]).frame
    assert frame["opt_softmax"].between(0, 1).all() and frame["margin"].notna().all()


def test_recording_calls_the_diagnostics_unchecked(data, monkeypatch):
    """The recorder and the metric objects call the unchecked diagnostics: no argument check runs per record."""
    sol = attention_svm(data)
    metrics = [alignment(sol.W, name="a"), bregman(sol.W, 1.5), opt_softmax([0, 1, 2, 0], name="o"), norm(1.5)]
    metrics += [margin([0, 1, 2, 0], name="m")]
    expected = _batched(data, W_ref=sol.W, bregman_p=2.0, metrics=metrics).frame

    def refuse(*args, **kwargs):
        raise AssertionError("an argument check ran while recording")

    for module, name in [(checks, "attention_args"), (checks, "score_args"), (geometry, "_matrices")]:
        monkeypatch.setattr(module, name, refuse)
    monkeypatch.setattr("attnlab.metrics.diagnostics.attention_args", refuse)
    monkeypatch.setattr("attnlab.metrics.diagnostics._floats", refuse)
    got = _batched(data, W_ref=sol.W, bregman_p=2.0, metrics=metrics).frame
    assert got.equals(expected)
