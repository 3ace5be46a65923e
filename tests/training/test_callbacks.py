"""The callback protocol every loop reports to: records per run, early stopping, progress bars, the frame builder."""

import pandas as pd
import pytest
import torch

import attnlab as al
from attnlab._validation import ValidationError
from attnlab.training import batched
from attnlab.training.callbacks import (
    Callback,
    CallbackList,
    EarlyStop,
    ProgressBar,
    Record,
    callback_list,
    default_progress,
    tidy_frame,
)


def _data():
    return al.data.example1(n=3, T=3, d=6, seed=0)


class _Log(Callback):
    def __init__(self):
        self.starts, self.steps, self.records, self.ends = [], [], [], []

    def on_start(self, steps):
        self.starts.append(steps)

    def on_step(self, step):
        self.steps.append(step)

    def on_record(self, record):
        self.records.append(record)

    def on_end(self, record):
        self.ends.append(record.step)


def test_every_hook_is_called_with_the_recorded_rows_and_state():
    data, log = _data(), _Log()
    model = al.models.Combined(data.d)
    al.train(model, al.optim.NormalizedGD(model.parameters(), lr=0.1), data, steps=6, record_every=3, callbacks=[log])
    assert log.starts == [6] and log.steps == list(range(1, 7)) and log.ends == [6]
    assert [r.step for r in log.records] == [0, 3, 6]
    rows = log.records[-1].rows
    assert list(rows["run"]) == [0] and list(rows["step"]) == [6] and {"loss", "grad_norm", "norm"} <= set(rows)
    assert log.records[-1].state["W"].shape == (1, data.d, data.d)  # read-only view, runs axis first


def test_a_plain_function_is_a_callback_and_early_stop_ends_every_front_door():
    data = _data()
    seen = []
    res = batched.train(
        data.X,
        data.Z,
        data.y,
        data.v,
        None,
        optimizer="ngd",
        lr=0.5,
        steps=500,
        record_every=1,
        callbacks=[lambda r: seen.append(r.step), EarlyStop("opt_softmax", 0.9, mode="above")],
    )
    stop = seen[-1]
    assert stop < 500 and res.status == ["stopped"] and res.last_step == [stop]
    assert float(res.frame["opt_softmax"].iloc[-1]) > 0.9 >= float(res.frame["opt_softmax"].iloc[-2])
    flow = al.flow.gradient_flow(
        al.models.Combined(data.d),
        data,
        step=0.5,
        steps=500,
        record_every=1,
        callbacks=[EarlyStop("loss", float(res.frame["loss"].iloc[-1]))],
    )
    assert int(flow.path["step"][-1]) < 500


def test_early_stop_on_a_column_that_is_not_recorded_says_which_are():
    stop = EarlyStop("alignment", 0.5)
    with pytest.raises(KeyError, match="recorded columns.*loss"):
        stop.on_record(Record(0, 1, pd.DataFrame({"run": [0], "step": [0], "loss": [1.0]})))


def test_bars_show_only_on_a_terminal_by_default(capsys):
    assert default_progress() is False  # pytest captures stderr: not a terminal
    bar = ProgressBar()
    bar.on_start(5)
    assert bar.bar.disable
    bar.on_end(None)
    forced = ProgressBar(show=True)
    forced.on_start(5)
    assert not forced.bar.disable
    forced.on_end(None)


def test_a_loop_gets_a_bar_only_when_it_shows():
    """A hidden bar is no callback at all (a loop with no other callback then builds no record frames)."""
    assert callback_list(None, None, "train").callbacks == []  # pytest captures stderr: not a terminal
    assert callback_list(None, False, "train").callbacks == []
    shown = callback_list([lambda record: None], True, "train").callbacks
    assert len(shown) == 2 and isinstance(shown[1], ProgressBar) and shown[1].show is True


def test_a_callback_must_be_a_callable():
    with pytest.raises(TypeError, match="Callback objects or functions"):
        CallbackList([3])


def test_tidy_frame_puts_run_and_step_first_and_accepts_tensors():
    frame = tidy_frame({"loss": torch.tensor([0.5, 0.25]), "run": [0, 1]}, step=4)
    assert frame.columns.tolist() == ["run", "step", "loss"] and frame["step"].tolist() == [4, 4]


def test_device_cpu_is_accepted_and_missing_cuda_is_refused_by_name():
    data = _data()
    cpu = batched.train(data.X, data.Z, data.y, data.v, None, optimizer="ngd", steps=3, device="cpu").W
    default = batched.train(data.X, data.Z, data.y, data.v, None, optimizer="ngd", steps=3).W
    torch.testing.assert_close(cpu, default, rtol=0, atol=0)
    if torch.cuda.is_available():  # the same program on the GPU (float64 kernels may sum in another order)
        cuda = batched.train(data.X, data.Z, data.y, data.v, None, optimizer="ngd", steps=3, device="cuda").W
        torch.testing.assert_close(cuda.cpu(), default, rtol=1e-12, atol=1e-12)
    else:
        with pytest.raises(ValidationError, match="CUDA is not available"):
            batched.train(data.X, data.Z, data.y, data.v, None, optimizer="ngd", steps=3, device="cuda")


def _kept_states(run):
    """The state each record hands a callback that keeps it, by step."""
    kept = {}
    result = run([lambda record: kept.__setitem__(record.step, record.state)])
    return result, kept


def test_a_kept_state_holds_the_values_of_its_step():
    # the state held the loop's live tensors, which later steps overwrite in place (the engine's two buffers take
    # turns, NTK's W too, regression's V and Q are copied into): a kept W was that of a later step
    from attnlab.ntk import SoftmaxMLP, practical_step
    from attnlab.regression import PopulationOracle, make_problem, manifold_point, random_rotation
    from attnlab.training.ntk import gradient_descent
    from attnlab.training.regression import fit

    data = al.data.stack([al.data.example1(n=4, T=3, d=6, seed=s) for s in (0, 1)])
    tokens, kept = _kept_states(
        lambda cbs: batched.train(
            data.X, data.Z, data.y, data.v, optimizer="gd", steps=6, record_every=2, keep_iterates=True, callbacks=cbs
        )
    )
    for i, step in enumerate(tokens.iterates["step"].tolist()):
        assert torch.equal(kept[step]["W"], tokens.iterates["W"][i])
    g = torch.Generator().manual_seed(0)
    X, Y = torch.randn(8, 4, generator=g, dtype=torch.float64), torch.randn(8, 2, generator=g, dtype=torch.float64)
    X = X / X.norm(dim=1, keepdim=True)
    net = SoftmaxMLP(4, 2, 16, seed=1)
    walk = []  # the weights of every step, from a metric (read while the step is current)
    lr = practical_step(net, X)
    _, kept = _kept_states(
        lambda cbs: gradient_descent(
            net, X, Y, lr=lr, steps=4, metrics={"w": lambda s: walk.append(s["W"].clone()) or 0.0}, callbacks=cbs
        )
    )
    assert all(torch.equal(kept[step]["W"], walk[step]) for step in range(5))
    problem = make_problem(d=3, k=5, noise_std=0.1, seed=3)
    V, Q = manifold_point(random_rotation(3, runs=2, seed=0), problem.W_star, problem.Sigma)
    seen = []
    _, kept = _kept_states(
        lambda cbs: fit(
            V + 0.1,
            Q,
            PopulationOracle(problem),
            lambda ps: torch.optim.SGD(ps, lr=0.1),
            steps=3,
            metrics={"v": lambda s: seen.append(s["V"].clone()) or torch.zeros(2)},
            callbacks=cbs,
        )
    )
    assert all(torch.equal(kept[step]["V"], seen[step]) for step in range(4))
    assert kept[0]["status"] == ["completed", "completed"]


def test_the_state_is_copied_only_for_a_callback_that_reads_it(monkeypatch):
    import attnlab.training.loop as loop

    copies, real = [], loop.map_tensors
    copied = lambda value: copies.append(1) if isinstance(value, dict) and "status" in value else None  # noqa: E731
    monkeypatch.setattr(loop, "map_tensors", lambda value, fn: copied(value) or real(value, fn))  # one per record
    data = _data()
    for callbacks in ([], [EarlyStop("loss", 0.0)], [ProgressBar(show=False)]):
        batched.train(data.X, data.Z, data.y, data.v, optimizer="gd", steps=3, callbacks=callbacks, record_every=1)
    assert copies == []
    batched.train(data.X, data.Z, data.y, data.v, optimizer="gd", steps=3, callbacks=[lambda r: None], record_every=1)
    assert len(copies) == 4
