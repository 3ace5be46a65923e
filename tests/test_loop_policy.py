"""The one loop policy (attnlab.training.callbacks): every training loop rolls a diverged run back to its last finite state,
says so with the same status words, reports progress through callbacks, and returns a TrainingResult.

Each test injects a fault (a NaN at a known step) and compares the kept state with a clean run stopped just before
the fault. The token-selection engine's own fault tests are in tests/training/test_model.py and tests/training/test_batched.py, and
NTK gradient descent's in tests/training/test_ntk.py; here all four loops meet the same assertions.
"""

import math

import torch
from torch import nn

import attnlab.training.ntk as gd
from attnlab.nets.classifier import History, fit_classifier
from attnlab.nets.datasets.split import train_test_split
from attnlab.ntk import SoftmaxMLP, practical_step
from attnlab.optim import NormalizedGD
from attnlab.regression import PopulationOracle, make_problem, manifold_point, random_rotation
from attnlab.training.callbacks import COMPLETED, DIVERGED, STATUSES, STOPPED, TrainingResult
from attnlab.training.ntk import gradient_descent
from attnlab.training.regression import fit


def test_every_loop_result_is_a_training_result_with_the_shared_status_words():
    from attnlab.training import EngineResult
    from attnlab.training.ntk import GDResult
    from attnlab.training.regression import Fit

    assert all(issubclass(cls, TrainingResult) for cls in (EngineResult, Fit, GDResult, History))
    assert STATUSES == (COMPLETED, DIVERGED, STOPPED) == ("completed", "diverged", "stopped")


def _regression(steps, oracle, callbacks=()):
    problem = make_problem(d=3, k=5, singular_values=(0.25, 0.2, 0.15), seed=0)
    V, Q = manifold_point(random_rotation(3, runs=2, seed=0), problem.W_star, problem.Sigma)
    V = V + 0.05 * torch.randn(V.shape, generator=torch.Generator().manual_seed(1))
    return fit(
        V,
        Q,
        oracle(PopulationOracle(problem)),
        lambda ps: torch.optim.SGD(ps, lr=0.1),
        steps=steps,
        metrics={"norm": lambda V, Q: torch.linalg.matrix_norm(V)},
        callbacks=callbacks,
    )


def test_regression_loop_rolls_a_nan_run_back_and_marks_it_diverged():
    def faulty(oracle, at=4, run=1):
        calls = [0]

        def wrong(V, Q):
            calls[0] += 1
            gV, gQ = oracle(V, Q)
            if calls[0] == at:
                gV = gV.clone()
                gV[run] = math.nan
            return gV, gQ

        return wrong

    clean = _regression(3, lambda o: o)  # the same runs, stopped just before the fault
    seen = []
    result = _regression(10, faulty, callbacks=[lambda record: seen.append(record.step)])
    assert result.status == [COMPLETED, DIVERGED] and result.diverged_runs == [1]
    assert torch.equal(result.V[1], clean.V[1]) and torch.equal(result.Q[1], clean.Q[1])  # last finite state
    assert seen == list(range(11)) and result.frame[result.frame.run == 1].step.max() == 3


def test_regression_loop_stops_when_a_callback_asks():
    result = _regression(10, lambda o: o, callbacks=[lambda record: record.step >= 2])
    assert result.status == [STOPPED, STOPPED] and result.frame.step.max() == 2


def test_ntk_gd_rolls_back_with_the_same_words_and_reports_through_callbacks(monkeypatch):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(8, 4, generator=g, dtype=torch.float64)
    X = X / X.norm(dim=1, keepdim=True)
    Y = torch.randn(8, 2, generator=g, dtype=torch.float64)
    reference = SoftmaxMLP(4, 2, 32, seed=1)
    lr = practical_step(reference, X)
    gradient_descent(reference, X, Y, lr=lr, steps=4)
    calls, real = [0], gd.weight_gradient

    def faulty(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs) * (math.nan if calls[0] == 5 else 1.0)

    monkeypatch.setattr(gd, "weight_gradient", faulty)
    net, seen = SoftmaxMLP(4, 2, 32, seed=1), []
    result = gradient_descent(net, X, Y, lr=lr, steps=10, callbacks=[lambda record: seen.append(record.step)])
    assert result.status == [DIVERGED] and result.diverged_runs == [0]
    assert torch.equal(net.W.detach(), reference.W.detach()) and seen == [0, 1, 2, 3, 4]
    assert list(result.frame.columns[:2]) == ["run", "step"]


class _Poisonable(nn.Module):
    """A linear classifier whose output turns NaN once ``poisoned`` is set (the fault)."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 2).double()
        self.poisoned = False

    def forward(self, x):
        out = self.linear(x)
        return out * math.nan if self.poisoned else out


def _classifier_run(epochs, poison_after=None):
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (64,), generator=g)
    x = torch.randn(64, 2, generator=g, dtype=torch.float64) + 2.0 * (2.0 * y[:, None] - 1.0)
    data = train_test_split(x, y, test_fraction=0.25, seed=0)
    torch.manual_seed(0)
    model = _Poisonable()

    def poison(record):
        if poison_after is not None and record.rows["epoch"].iloc[0] == poison_after:
            model.poisoned = True

    optimizer = NormalizedGD(model.parameters(), lr=0.1)
    history = fit_classifier(model, optimizer, data, epochs=epochs, batch_size=16, seed=0, callbacks=[poison])
    model.poisoned = False
    return model, history


def test_classifier_loop_rolls_back_to_the_last_finite_epoch():
    clean, _ = _classifier_run(epochs=2)
    model, history = _classifier_run(epochs=5, poison_after=2)
    assert history.status == [DIVERGED] and history.diverged_runs == [0]
    assert history.frame["diverged"].tolist() == [False, False, False, True]
    for kept, reference in zip(model.state_dict().values(), clean.state_dict().values()):
        assert torch.equal(kept, reference)  # the state at the end of epoch 2, not the NaN one
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
