"""Tests of fit_stacked against its reference, the plain per-run loop (fit_classifier), seed for seed."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.nets import ViT, fit_classifier, fit_stacked, make_optimizer
from attnlab.nets.datasets import load_digits_split
from attnlab.nets.datasets.split import Split
from attnlab.nets.stacked import _rated

FULL = load_digits_split(seed=0)
DATA = Split(FULL.x_train[:96], FULL.y_train[:96], FULL.x_test[:64], FULL.y_test[:64])
OPTIONS = {"sngd_cap": 1.0, "sps_c": 0.5}
# every kind the real experiments train; two seeds of SGD at one rate, SNGD, Adam and l_1.1-MD at two rates (one
# group each, its rates a per-run tensor), SPS at two caps (a group per cap), seeds out of order
RUNS = [
    ("sgd", 0.3, 0),
    ("sgd", 0.3, 1),
    ("sngd", 0.2, 0),
    ("sngd", 0.05, 1),
    ("sps", 1.0, 1),
    ("sps", 0.3, 0),
    ("adam", 1e-3, 0),
    ("adam", 1e-2, 0),
    ("md:1.1,normalized=false", 0.05, 0),
    ("md:1.1,normalized=false", 0.01, 1),
    ("md:3,normalized=false", 0.01, 1),
]


def _model(seed: int) -> ViT:
    return ViT(patch_size=4, dim=8, depth=1, heads=2, mlp_dim=8, seed=seed)


def _alone(name: str, lr: float, seed: int, epochs: int = 2):
    model = _model(seed)
    optimizer = make_optimizer(_rated(name, lr), model.parameters(), **OPTIONS)
    return model, fit_classifier(model, optimizer, DATA, epochs=epochs, batch_size=32, seed=seed)


def _stacked(runs, epochs: int = 2, **kwargs):
    models = [_model(seed) for _, _, seed in runs]
    histories = fit_stacked(
        models,
        [(name, lr) for name, lr, _ in runs],
        [seed for _, _, seed in runs],
        DATA,
        epochs=epochs,
        batch_size=32,
        **OPTIONS,
        **kwargs,
    )
    return models, histories


def test_each_stacked_run_is_the_run_trained_alone():
    models, histories = _stacked(RUNS)
    for (name, lr, seed), model, history in zip(RUNS, models, histories):
        alone, reference = _alone(name, lr, seed)
        # batched products round differently from one run's: equal up to float32 rounding, not to the bit
        torch.testing.assert_close(
            torch.tensor(history.frame["train_loss"].to_numpy()),
            torch.tensor(reference.frame["train_loss"].to_numpy()),
            rtol=1e-5,
            atol=1e-6,
        )
        assert history.frame["test_accuracy"].tolist() == reference.frame["test_accuracy"].tolist()
        for p, q in zip(model.parameters(), alone.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
        assert history.status == reference.status == ["completed"]


@pytest.mark.parametrize("name, lr", [("sgd", 0.3), ("joint", 0.1)])  # joint reads the loss: never a NaN one
def test_a_diverging_run_stops_alone_as_it_does_alone(name, lr):
    runs = [(name, 1e30, 0), (name, lr, 1)]
    _, histories = _stacked(runs)
    _, blown = _alone(*runs[0])
    assert histories[0].status == blown.status == ["diverged"]
    assert histories[0].frame["epoch"].tolist() == blown.frame["epoch"].tolist()  # no row past the last good epoch
    assert histories[0].last_step == blown.last_step
    _, fine = _alone(*runs[1])  # its neighbour in the stack is untouched
    torch.testing.assert_close(
        torch.tensor(histories[1].frame["train_loss"].to_numpy()),
        torch.tensor(fine.frame["train_loss"].to_numpy()),
        rtol=1e-5,
        atol=1e-6,
    )


def test_a_resumed_stack_ends_bit_identical(tmp_path):
    runs = RUNS[2:8]  # SNGD, SPS (a loss-reading rule) and Adam (a stateful one), two rates each
    _, whole = _stacked(runs, epochs=2)
    path = tmp_path / "runs.pt"
    _stacked(runs, epochs=1, checkpoint=path)
    models, resumed = _stacked(runs, epochs=2, checkpoint=path)
    for a, b in zip(whole, resumed):
        columns = [c for c in a.frame.columns if c != "seconds"]
        assert a.frame[columns].equals(b.frame[columns])
    with pytest.raises(ValidationError, match="written for other runs"):
        _stacked(RUNS[:2], epochs=2, checkpoint=path)


@pytest.mark.parametrize("option", ["sngd_cap", "sps_c"])
def test_a_resumed_stack_refuses_another_cap_or_constant(tmp_path, option):
    path = tmp_path / "runs.pt"
    _stacked(RUNS[2:6], epochs=1, checkpoint=path)  # SNGD and SPS under OPTIONS
    models = [_model(seed) for _, _, seed in RUNS[2:6]]
    with pytest.raises(ValidationError, match="written for other runs"):
        fit_stacked(
            models,
            [(name, lr) for name, lr, _ in RUNS[2:6]],
            [seed for _, _, seed in RUNS[2:6]],
            DATA,
            epochs=2,
            batch_size=32,
            **(OPTIONS | {option: 1e-6}),
            checkpoint=path,
        )


def test_a_stack_refuses_a_checkpoint_past_epochs(tmp_path):
    path = tmp_path / "runs.pt"
    _stacked(RUNS[:1], epochs=3, checkpoint=path)
    with pytest.raises(ValidationError, match=r"is at epoch 3 > epochs=2; pass epochs >= 3 or a new checkpoint path"):
        _stacked(RUNS[:1], epochs=2, checkpoint=path)
    (done,) = _stacked(RUNS[:1], epochs=3, checkpoint=path)[1]  # the same epochs: already there, as before
    assert done.status == ["completed"] and done.last_step == [3]


def test_eval_every_records_the_first_and_last_epochs():
    _, histories = _stacked(RUNS[:1], epochs=3, eval_every=3)
    assert histories[0].frame["epoch"].tolist() == [0, 3]


def test_last_only_records_each_runs_last_row_without_the_training_part():
    # the reference: the same runs recording every row; the last rows' test columns agree to the bit
    _, every = _stacked(RUNS[:4], epochs=3)
    _, last = _stacked(RUNS[:4], epochs=3, last_only=True)
    for full, only in zip(every, last):
        assert only.frame["epoch"].tolist() == [3] and only.last_step == full.last_step == [3]
        for column in ("step", "test_loss", "test_accuracy"):
            assert only.frame[column].tolist() == full.frame[column].tolist()[-1:]
        assert only.frame[["train_loss", "train_accuracy"]].isna().all(axis=None)
        assert only.norms["epoch"].unique().tolist() == [3]


@pytest.mark.parametrize(
    "models, optimizers, seeds, message",
    [
        ([], [], [], "at least one run"),
        ([_model(0)], [("sgd", 0.1), ("sgd", 0.1)], [0], "one of each per run"),
        (
            [_model(0), ViT(patch_size=4, dim=12, depth=1, heads=2, mlp_dim=8, seed=1)],
            [("sgd", 0.1)] * 2,
            [0, 1],
            "one architecture",
        ),
        ([_model(0)], [("sgd", 0.1)], [-1], "seed"),
    ],
)
def test_fit_stacked_refuses_runs_that_do_not_line_up(models, optimizers, seeds, message):
    with pytest.raises(ValidationError, match=message):
        fit_stacked(models, optimizers, seeds, DATA, epochs=1, batch_size=32)


class _BlowsUp(ViT):
    """A ViT whose ``blow``-th training forward pass returns NaN logits: a run that diverges at a chosen epoch."""

    def __init__(self, blow: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.blow, self.calls = blow, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        if self.training:
            self.calls += 1
            if self.calls == self.blow:
                out = out * float("nan")
        return out


def test_a_run_diverging_between_rows_reports_its_last_finite_epoch():
    # 3 batches an epoch: the 8th is in epoch 3, so the run ends at epoch 2, a row eval_every=4 would not record
    def blows() -> _BlowsUp:
        return _BlowsUp(8, patch_size=4, dim=8, depth=1, heads=2, mlp_dim=8, seed=0)

    model = blows()
    alone = fit_classifier(model, make_optimizer("sgd", model.parameters(), 0.1), DATA, epochs=4, batch_size=32, seed=0)
    models = [blows()]
    (stacked,) = fit_stacked(models, [("sgd", 0.1)], [0], DATA, epochs=4, batch_size=32, eval_every=4)
    assert stacked.status == alone.status == ["diverged"]
    assert stacked.last_step == alone.last_step == [2]
    assert stacked.frame["epoch"].tolist() == [0, 2]  # the first row and the last finite epoch's, fit_classifier's last
    last, reference = stacked.frame.iloc[-1], alone.frame.iloc[-1]
    assert last["step"] == reference["step"] == 6
    torch.testing.assert_close(float(last["train_loss"]), float(reference["train_loss"]), rtol=1e-5, atol=1e-6)
    for p, q in zip(models[0].parameters(), model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("blow", [2, 8])  # epoch 1: the last finite epoch is 0, whose row last_only skipped
def test_a_run_diverging_under_last_only_reports_its_last_finite_epoch(blow):
    def run(**kwargs):
        model = _BlowsUp(blow, patch_size=4, dim=8, depth=1, heads=2, mlp_dim=8, seed=0)
        return fit_stacked([model], [("sgd", 0.1)], [0], DATA, epochs=4, batch_size=32, **kwargs)[0]

    every, last = run(), run(last_only=True)
    assert last.status == every.status == ["diverged"] and last.last_step == every.last_step
    assert last.frame["epoch"].tolist() == every.frame["epoch"].tolist()[-1:]
    assert last.frame["test_loss"].tolist() == every.frame["test_loss"].tolist()[-1:]
    assert last.frame["train_loss"].isna().all()


def test_a_stacked_run_with_dropout_is_the_run_trained_alone(tmp_path):
    # each run's dropout masks come from its own seed, as fit_classifier draws them: not from its neighbours
    runs = [("sgd", 0.3, 1), ("adam", 1e-2, 0), ("sgd", 0.3, 0)]

    def build(seed: int) -> ViT:
        return ViT(patch_size=4, dim=8, depth=1, heads=2, mlp_dim=8, seed=seed, dropout=0.3)

    def stack(epochs: int, checkpoint=None):
        models = [build(seed) for _, _, seed in runs]
        optimizers = [(name, lr) for name, lr, _ in runs]
        seeds = [seed for _, _, seed in runs]
        kwargs = {"epochs": epochs, "batch_size": 32, "checkpoint": checkpoint}
        return models, fit_stacked(models, optimizers, seeds, DATA, **kwargs, **OPTIONS)

    models, histories = stack(2)
    for (name, lr, seed), model, history in zip(runs, models, histories):
        alone = build(seed)
        optimizer = make_optimizer(_rated(name, lr), alone.parameters(), **OPTIONS)
        reference = fit_classifier(alone, optimizer, DATA, epochs=2, batch_size=32, seed=seed)
        torch.testing.assert_close(
            torch.tensor(history.frame["train_loss"].to_numpy()),
            torch.tensor(reference.frame["train_loss"].to_numpy()),
            rtol=1e-5,
            atol=1e-6,
        )
        for p, q in zip(model.parameters(), alone.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    stack(1, tmp_path / "runs.pt")  # and a resumed stack draws the masks of an uninterrupted one
    resumed, _ = stack(2, tmp_path / "runs.pt")
    for a, b in zip(models, resumed):
        assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_stacked_text_encoders_train_under_vmap_as_one_does_alone():
    """TextEncoder checks its ids; under vmap the ids are batched and hold no values to read (a check that read them
    stopped every stacked text run)."""
    from attnlab.nets import TextEncoder
    from attnlab.nets.datasets.keywords import keyword_task

    data = keyword_task(n_train=64, n_test=32, length=8, vocab_size=40, seed=0).split
    models = [TextEncoder(vocab_size=40, max_len=9, dim=8, depth=1, heads=2, mlp_dim=8, seed=s) for s in (0, 1)]
    (a, b) = fit_stacked(models, [("sgd", 0.3), ("sgd", 0.3)], [0, 1], data, epochs=1, batch_size=32)
    alone = TextEncoder(vocab_size=40, max_len=9, dim=8, depth=1, heads=2, mlp_dim=8, seed=1)
    reference = fit_classifier(
        alone, make_optimizer("sgd", alone.parameters(), lr=0.3), data, epochs=1, batch_size=32, seed=1
    )
    assert a.status == b.status == ["completed"]
    torch.testing.assert_close(
        torch.tensor(b.frame["train_loss"].to_numpy()),
        torch.tensor(reference.frame["train_loss"].to_numpy()),
        rtol=1e-5,
        atol=1e-6,
    )
