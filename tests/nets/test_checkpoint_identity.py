"""Tests of what a checkpoint of fit_classifier, fit_stacked and train_trials must match to be resumed: the front
door that wrote it, the metric names, the data, the parameter dtypes and (train_trials) the code."""

import warnings
from dataclasses import dataclass

import pytest
import torch
from torch import nn

import attnlab.runner.fingerprint as fingerprint
from attnlab._validation import ValidationError
from attnlab.experiments.real.result import code_key
from attnlab.nets import Setup, ViT, fit_classifier, fit_stacked
from attnlab.nets.datasets import load_digits_split
from attnlab.nets.datasets.split import Split
from attnlab.nets.trials import Trial, train_trials

_GEN = torch.Generator().manual_seed(0)
_X = torch.randn(40, 5, dtype=torch.float64, generator=_GEN)
_Y = (_X[:, 0] > 0).long()
DATA = Split(_X[:30], _Y[:30], _X[30:], _Y[30:])
OTHER = Split(5 * _X[:30], 1 - _Y[:30], _X[30:], _Y[30:])  # another split: other inputs, flipped labels


def _model(dtype: torch.dtype = torch.float64) -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2)).to(dtype)


def _classifier(path, epochs, metrics=None, data=DATA, dtype=torch.float64):
    model = _model(dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return fit_classifier(model, optimizer, data, epochs=epochs, batch_size=7, seed=3, checkpoint=path, metrics=metrics)


def _stacked(path, epochs, metrics=None, data=DATA, dtype=torch.float64):
    (result,) = fit_stacked(
        [_model(dtype)], [("gd", 0.1)], [3], data, epochs=epochs, batch_size=7, checkpoint=path, metrics=metrics
    )
    return result


def _epoch(path) -> int:
    return torch.load(path, weights_only=True)["epoch"]


@pytest.mark.parametrize("fit", [_classifier, _stacked])
def test_a_checkpoint_of_other_metrics_is_refused_before_any_training(tmp_path, fit):
    path = tmp_path / "c.pt"
    fit(path, 2, {"a": lambda state: 1.0})
    with pytest.raises(ValidationError, match=r"with metrics=\['a'\], but this call has metrics=\['b'\]"):
        fit(path, 4, {"b": lambda state: 2.0})
    assert _epoch(path) == 2  # nothing trained: the checkpoint is as it was, and still resumes with its metrics
    assert list(fit(path, 4, {"a": lambda state: 1.0}).frame["a"]) == [1.0] * 5


@pytest.mark.parametrize("fit", [_classifier, _stacked])
def test_a_checkpoint_of_other_data_or_dtype_is_refused(tmp_path, fit):
    path = tmp_path / "c.pt"
    fit(path, 2)
    with pytest.raises(ValidationError, match=r"written for other runs: with data_sha256="):
        fit(path, 4, data=OTHER)
    single = Split(DATA.x_train.float(), DATA.y_train, DATA.x_test.float(), DATA.y_test)
    with pytest.raises(ValidationError, match=r"dtypes=\['float64'\], but this call has .*dtypes=\['float32'\]"):
        fit(path, 4, data=single, dtype=torch.float32)
    assert _epoch(path) == 2


def test_a_checkpoint_of_the_other_front_door_or_any_dict_is_refused(tmp_path):
    _classifier(tmp_path / "clf.pt", 1)
    _stacked(tmp_path / "st.pt", 1)
    torch.save({"step": 3, "w": torch.zeros(2)}, tmp_path / "other.pt")  # e.g. an attnlab.checkpoint.Checkpoint's
    with pytest.raises(ValidationError, match="written by fit_classifier/2, not by fit_stacked/2"):
        _stacked(tmp_path / "clf.pt", 2)
    with pytest.raises(ValidationError, match="written by fit_stacked/2, not by fit_classifier/2"):
        _classifier(tmp_path / "st.pt", 2)
    for fit in (_classifier, _stacked):
        with pytest.raises(ValidationError, match="written by an older attnlab or by something else.*delete it"):
            fit(tmp_path / "other.pt", 2)


def test_a_checkpoint_of_the_older_format_is_refused_by_name(tmp_path):
    # the keys an older attnlab saved: seed and batch_size at the top level, no kind
    path = tmp_path / "c.pt"
    _classifier(path, 1)
    state = torch.load(path, weights_only=True)
    old = {k: v for k, v in state.items() if k not in ("kind", "identity")} | {"seed": 3, "batch_size": 7}
    torch.save(old, path)
    with pytest.raises(ValidationError, match=rf"checkpoint {path} was written by an older attnlab"):
        _classifier(path, 2)
    stacked = tmp_path / "s.pt"
    _stacked(stacked, 1)
    state = torch.load(stacked, weights_only=True)
    state.pop("kind")
    torch.save(state, stacked)
    with pytest.raises(ValidationError, match="written by an older attnlab"):
        _stacked(stacked, 2)


@dataclass(frozen=True)
class Tiny:
    dim: int = 8


def build_tiny(config: Tiny, seed: int) -> Setup:
    """A one-layer ViT on a few digits (module level, as train_trials asks)."""
    full = load_digits_split(seed=0)
    data = Split(full.x_train[:64], full.y_train[:64], full.x_test[:32], full.y_test[:32])
    return Setup(ViT(patch_size=4, dim=config.dim, depth=1, heads=2, mlp_dim=8, seed=seed), data)


def _trials(folder):
    code = code_key(build_tiny, Tiny())  # as the real-data experiments key their checkpoints
    trials = [Trial("sgd", 0.3, 0)]
    (result,) = train_trials(build_tiny, Tiny(), trials, epochs=2, batch_size=32, checkpoint_dir=folder, code=code)
    return result["frame"]


def _mark(path) -> None:
    """Write a sentinel into the checkpoint's rows: a rerun that resumes it reports the sentinel."""
    state = torch.load(path, weights_only=True)
    state["rows"][0][-1]["test_loss"] = -1.0
    torch.save(state, path)


def test_trials_resume_only_a_checkpoint_of_the_same_code(tmp_path, monkeypatch):
    asked = []
    code = {"source": {"attnlab": "a"}, "versions": {}}  # stands in for the fingerprint of the code that runs now

    def fake(modules=()):
        asked.append(list(modules))
        return code

    monkeypatch.setattr(fingerprint, "code_fingerprint", fake)
    _trials(tmp_path)
    assert asked == [[__name__, __name__]]  # the modules of build and of the config, as a record's "code"
    (path,) = tmp_path.iterdir()
    _mark(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same code: resumed, without a word
        assert _trials(tmp_path)["test_loss"].iloc[-1] == -1.0
    code = {"source": {"attnlab": "b"}, "versions": {}}  # the code changed
    with pytest.warns(RuntimeWarning, match=rf"checkpoint {path} is not resumed.*computed again.*made by other code"):
        frame = _trials(tmp_path)
    assert frame["test_loss"].iloc[-1] != -1.0  # computed again by this code
    assert not path.exists() and len(list(tmp_path.iterdir())) == 1  # this code's checkpoint alone
    code = {"source": {"attnlab": "b", "nb": "unreadable:1f"}, "versions": {}}  # a notebook's build: never resumed
    with pytest.warns(RuntimeWarning, match="no readable source"):  # and said so, not "other code"
        _trials(tmp_path)


def test_checkpoints_without_a_key_of_the_code_are_refused_before_any_training(tmp_path):
    # keyed by the config alone, a checkpoint would be resumed after build or attnlab changed
    trials = [Trial("sgd", 0.1, 0)]
    with pytest.raises(ValidationError, match="checkpoint_dir needs code"):
        train_trials(build_tiny, Tiny(), trials, epochs=2, batch_size=32, checkpoint_dir=tmp_path)
    assert not any(tmp_path.iterdir())
