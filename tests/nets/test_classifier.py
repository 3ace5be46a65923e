"""fit_classifier, the classifier training loop: metrics against direct computation, layer norms, resume, divergence."""

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnlab._validation import ValidationError
from attnlab.nets.classifier import evaluate, fit_classifier, layer_norms
from attnlab.nets.datasets.split import Split, train_test_split
from attnlab.nets.optimizers import make_optimizer
from attnlab.nets.vit import ViT
from attnlab.training.callbacks import Callback


def _blobs(n=120, seed=0):
    """Two Gaussian blobs in 2-D (float64), linearly separable with high probability."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.randn(n, 2, generator=g, dtype=torch.float64) * 0.5 + (2.0 * y[:, None] - 1.0) * 2.0
    return train_test_split(x, y, test_fraction=0.25, seed=seed)


def _tiny_model(seed=0):
    g = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Dropout(0.1), nn.Linear(8, 2)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.3)
    return model


def _digits_subset():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(96, 1, 8, 8, generator=g, dtype=torch.float32)  # the ViT is float32
    y = torch.randint(0, 10, (96,), generator=g)
    return train_test_split(x, y, test_fraction=0.25, seed=0)


def test_fit_trains_a_tiny_model_and_records_every_epoch():
    data = _blobs()
    model = _tiny_model()
    history = fit_classifier(model, torch.optim.SGD(model.parameters(), lr=0.5), data, epochs=5, batch_size=16, seed=0)
    frame = history.frame
    assert frame["epoch"].tolist() == list(range(6))
    assert frame["step"].tolist() == [0, 6, 12, 18, 24, 30]  # 90 training samples / 16 = 6 batches per epoch
    assert frame["train_loss"].iloc[-1] < 0.5 * frame["train_loss"].iloc[0]
    assert frame["test_accuracy"].iloc[-1] >= 0.9  # separable blobs, 2.0 apart in units of 0.5
    assert history.status == ["completed"] and history.last_step == [5]
    assert set(history.norms["layer"]) == {"0", "3"}


def test_evaluate_matches_full_batch_cross_entropy_and_accuracy():
    data = _blobs()
    model = _tiny_model().eval()
    loss, accuracy = evaluate(model, data.x_test, data.y_test, batch_size=7)
    with torch.no_grad():
        logits = model(data.x_test)
    assert loss == pytest.approx(float(F.cross_entropy(logits, data.y_test)), rel=1e-12)  # float64 sums
    assert accuracy == float((logits.argmax(1) == data.y_test).double().mean())


def test_layer_norms_split_the_total_norm_by_block():
    model = ViT(depth=2, seed=0)
    norms = layer_norms(model)
    assert {"encoder.blocks.0", "encoder.blocks.1", "patch_embed", "cls_token", "pos_embed", "norm", "head"} == set(
        norms
    )
    total = sum(float(p.detach().double().square().sum()) for p in model.parameters())
    assert sum(v**2 for v in norms.values()) == pytest.approx(total, rel=1e-12)
    block = sum(float(p.detach().double().square().sum()) for p in model.encoder.blocks[1].parameters())
    assert norms["encoder.blocks.1"] ** 2 == pytest.approx(block, rel=1e-12)


@pytest.mark.parametrize("name, lr", [("adam", 1e-2), ("sps:max_step=0.5", None), ("md:1.1,normalized=false", 0.05)])
def test_resumed_run_ends_bit_identical_to_an_uninterrupted_one(tmp_path, name, lr):
    data = _digits_subset()

    def run(epochs, checkpoint):
        model = ViT(dim=8, depth=1, heads=2, mlp_dim=8, dropout=0.1, seed=0)  # dropout draws from the global RNG
        optimizer = make_optimizer(name, model.parameters(), lr, sngd_cap=1.0)
        return model, fit_classifier(
            model, optimizer, data, epochs=epochs, batch_size=16, seed=3, checkpoint=checkpoint
        )

    straight_model, straight = run(4, tmp_path / "straight.pt")
    run(2, tmp_path / "resumed.pt")  # "interrupted" after epoch 2, checkpoint on disk
    resumed_model, resumed = run(4, tmp_path / "resumed.pt")
    for (key, a), b in zip(straight_model.state_dict().items(), resumed_model.state_dict().values()):
        assert torch.equal(a, b), key
    columns = [c for c in straight.frame.columns if c != "seconds"]
    pd.testing.assert_frame_equal(straight.frame[columns], resumed.frame[columns], check_exact=True)
    pd.testing.assert_frame_equal(straight.norms, resumed.norms, check_exact=True)


def test_fit_leaves_the_callers_global_rng_alone():
    data = _blobs()
    model = _tiny_model()
    state = torch.get_rng_state()
    fit_classifier(model, torch.optim.SGD(model.parameters(), lr=0.1), data, epochs=1, batch_size=16, seed=0)
    assert torch.equal(torch.get_rng_state(), state)


def test_fit_stops_and_flags_a_non_finite_loss():
    data = _blobs()
    poisoned = Split(data.x_train.clone(), data.y_train, data.x_test, data.y_test)
    poisoned.x_train[:] = float("nan")
    model = _tiny_model()
    history = fit_classifier(
        model, torch.optim.SGD(model.parameters(), lr=0.1), poisoned, epochs=3, batch_size=16, seed=0
    )
    assert history.status == ["diverged"] and history.last_step == [0]  # epoch 1 went non-finite: back to 0
    assert history.frame["epoch"].tolist() == [0] and all(bool(torch.isfinite(p).all()) for p in model.parameters())


def test_fit_refuses_a_checkpoint_of_another_seed(tmp_path):
    data = _blobs()
    model = _tiny_model()
    fit_classifier(
        model,
        torch.optim.SGD(model.parameters(), lr=0.1),
        data,
        epochs=1,
        batch_size=16,
        seed=0,
        checkpoint=tmp_path / "c.pt",
    )
    with pytest.raises(ValidationError, match="written for other runs: with seed=0, but this call has seed=1"):
        fit_classifier(
            model,
            torch.optim.SGD(model.parameters(), lr=0.1),
            data,
            epochs=2,
            batch_size=16,
            seed=1,
            checkpoint=tmp_path / "c.pt",
        )


def test_fit_refuses_a_checkpoint_past_epochs(tmp_path):
    data, path = _blobs(), tmp_path / "c.pt"
    model = _tiny_model()
    fit_classifier(
        model, torch.optim.SGD(model.parameters(), lr=0.1), data, epochs=3, batch_size=16, seed=0, checkpoint=path
    )
    model = _tiny_model()
    with pytest.raises(ValidationError, match=r"is at epoch 3 > epochs=2; pass epochs >= 3 or a new checkpoint path"):
        fit_classifier(
            model, torch.optim.SGD(model.parameters(), lr=0.1), data, epochs=2, batch_size=16, seed=0, checkpoint=path
        )


def test_fit_refuses_zero_epochs():
    model = _tiny_model()
    with pytest.raises(ValidationError, match="epochs == 0, must be >= 1"):
        fit_classifier(model, torch.optim.SGD(model.parameters(), lr=0.1), _blobs(), epochs=0, batch_size=4, seed=0)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "pickled-code"])
def test_a_damaged_checkpoint_names_its_file_and_what_to_delete(tmp_path, damage):
    data, path = _blobs(), tmp_path / "c.pt"
    model = _tiny_model()
    fit_classifier(
        model, torch.optim.SGD(model.parameters(), lr=0.1), data, epochs=1, batch_size=16, seed=0, checkpoint=path
    )
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "garbage":
        path.write_text("not a checkpoint")
    else:
        torch.save({"epoch": 1, "hook": _blobs}, path)  # a function: only a full unpickle would import and run it
    match = rf"checkpoint '{path}' cannot be loaded .*: delete it to start the run over"
    with pytest.raises(ValidationError, match=match):
        fit_classifier(
            model, torch.optim.SGD(model.parameters(), lr=0.1), data, epochs=2, batch_size=16, seed=0, checkpoint=path
        )


def test_callbacks_count_optimizer_steps_of_the_epochs():
    data = _blobs()
    model, seen, ticks = _tiny_model(), [], []

    class Ticks(Callback):
        def on_step(self, step):
            ticks.append(step)

    callbacks = [lambda record: seen.append((record.step, record.steps, int(record.rows["epoch"].iloc[0]))), Ticks()]
    fit_classifier(
        model, torch.optim.SGD(model.parameters(), lr=0.1), data, epochs=2, batch_size=16, seed=0, callbacks=callbacks
    )
    assert seen == [(0, 12, 0), (6, 12, 1), (12, 12, 2)]  # 90 training samples / 16: 6 optimizer steps per epoch
    assert ticks == list(range(1, 13))


class _FakeCuda:
    """A CUDA RNG for a machine without a GPU: one device whose state only ``set_rng_state_all`` changes."""

    def __init__(self) -> None:
        self.states = [torch.tensor([42], dtype=torch.uint8)]

    def get_rng_state_all(self) -> list[torch.Tensor]:
        return [s.clone() for s in self.states]

    def set_rng_state_all(self, states: list[torch.Tensor]) -> None:
        self.states = [s.clone() for s in states]


@pytest.mark.parametrize("stacked", [False, True])
def test_a_checkpoint_saves_and_restores_the_cuda_rng_when_cuda_is_available(tmp_path, monkeypatch, stacked):
    # no GPU here: torch.cuda's availability and RNG are stand-ins; what is tested is that the checkpoint carries the
    # device RNG state (dropout on a GPU draws from it) and that resuming puts it back
    from attnlab.checkpoint import read_checkpoint
    from attnlab.nets import fit_stacked

    cuda = _FakeCuda()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", cuda.get_rng_state_all)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", cuda.set_rng_state_all)
    data, path = _blobs(), tmp_path / "c.pt"

    def run(epochs):
        if stacked:
            fit_stacked([_tiny_model(0), _tiny_model(1)], [("sgd", 0.1)] * 2, [0, 1], data, epochs=epochs,
                        batch_size=16, checkpoint=path)  # fmt: skip
        else:
            model = _tiny_model()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            fit_classifier(model, optimizer, data, epochs=epochs, batch_size=16, seed=0, checkpoint=path)

    run(1)
    assert [s.tolist() for s in read_checkpoint(path)["cuda_rng"]] == [[42]]
    cuda.states = [torch.tensor([0], dtype=torch.uint8)]  # a new process: the device RNG starts elsewhere
    run(2)  # resumed at epoch 1
    assert [s.tolist() for s in cuda.states] == [[42]]  # back where the interrupted run left it


def test_fit_refuses_a_checkpoint_of_another_optimizer_or_model(tmp_path):
    """load_state_dict swapped Adam's settings for SGD's (lr 0.3) without a word; another model raised torch's error."""
    data, path = _blobs(), tmp_path / "c.pt"
    model = _tiny_model()
    fit_classifier(
        model, torch.optim.SGD(model.parameters(), lr=0.3), data, epochs=1, batch_size=16, seed=0, checkpoint=path
    )
    for optimizer in (torch.optim.Adam(model.parameters(), lr=1e-3), torch.optim.SGD(model.parameters(), lr=0.9)):
        with pytest.raises(ValidationError, match=r"written by an optimizer with .*lr=0.3.* resume with the same"):
            fit_classifier(model, optimizer, data, epochs=2, batch_size=16, seed=0, checkpoint=path)
    wider = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Dropout(0.1), nn.Linear(16, 2)).double()
    with pytest.raises(ValidationError, match=r"holds another model's weights \(size mismatch"):
        fit_classifier(
            wider, torch.optim.SGD(wider.parameters(), lr=0.3), data, epochs=2, batch_size=16, seed=0, checkpoint=path
        )
    resumed = fit_classifier(
        model, torch.optim.SGD(model.parameters(), lr=0.3), data, epochs=2, batch_size=16, seed=0, checkpoint=path
    )
    assert resumed.status == ["completed"]


def test_fit_refuses_an_optimizer_of_another_model_and_labels_beyond_the_outputs():
    data, model = _blobs(), _tiny_model()
    other = _tiny_model(seed=1)
    with pytest.raises(ValidationError, match="holds none of the model's parameters"):
        fit_classifier(model, torch.optim.SGD(other.parameters(), lr=0.1), data, epochs=1, batch_size=16, seed=0)
    three = Split(data.x_train, data.y_train.clamp(max=1) + (data.y_train == 1).long(), data.x_test, data.y_test)
    with pytest.raises(ValidationError, match=r"labels go up to 2, but the model has 2 outputs"):
        fit_classifier(model, torch.optim.SGD(model.parameters(), lr=0.1), three, epochs=1, batch_size=16, seed=0)
    with pytest.raises(ValidationError, match="negative labels"):
        Split(data.x_train, data.y_train - 1, data.x_test, data.y_test)


@pytest.mark.parametrize(
    ("x", "y", "batch_size", "match"),
    [
        (torch.zeros(0, 2), torch.zeros(0, dtype=torch.int64), 4, "x has 0 rows and y 0"),
        (torch.zeros(4, 2), torch.zeros(4, dtype=torch.int64), 0, "batch_size == 0"),
        (torch.zeros(4, 2), torch.zeros(3, dtype=torch.int64), 4, "x has 4 rows and y 3"),
        (torch.zeros(4, 2), torch.zeros(4), 4, "int64 class labels"),
        (torch.zeros(4, 2), torch.full((4,), 5), 4, "y holds labels 5 to 5, the model 2 classes"),
    ],
)
def test_evaluate_refuses_bad_input_by_name(x, y, batch_size, match):
    model = _tiny_model()
    with pytest.raises(ValidationError, match=match):
        evaluate(model, x.double(), y, batch_size)
    assert model.training  # left as it was
