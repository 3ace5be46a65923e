"""The one loop and its one policy (attnlab.training.loop), seen from every training entry point.

Each entry point (token selection single and batched, the flow, regression, NTK gradient descent, kernel regression,
projected mirror descent, the classifier) is run twice: once clean, stopped at the step a fault will strike, and
once with a NaN injected at that step. The faulty run must go through the one loop function, end "diverged" with its
last finite state (equal to the clean run's), have no row past it, and neither warn nor raise; every other run goes
on. Each entry point also returns the one result type and accepts the one metric protocol (a function of the state).
"""

from __future__ import annotations

import math
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pytest
import torch
from torch import nn

import attnlab as al
import attnlab.ntk.network as network  # NTK gradient descent looks its gradient up there at every step
import attnlab.training.loop as loop
from attnlab.data import example1, scores_equal
from attnlab.models import Diagonal
from attnlab.nets.classifier import fit_classifier
from attnlab.nets.datasets.split import train_test_split
from attnlab.ntk import SoftmaxMLP, gram, practical_step
from attnlab.optim import NormalizedGD
from attnlab.optim.transforms import Rule, Step, Transform, scale_by_lr
from attnlab.regression import PopulationOracle, make_problem, manifold_point, random_rotation
from attnlab.training import COMPLETED, DIVERGED, STATUSES, STOPPED, TrainingResult
from attnlab.training import flow as flow_module
from attnlab.training.batched import train as batched_train
from attnlab.training.flow import gradient_flow
from attnlab.training.ntk import gradient_descent, kernel_regression_path
from attnlab.training.projected import projected_mirror_descent
from attnlab.training.regression import fit as regression_fit

AT = 3  # the step whose update the fault poisons: the state after it is bad, so every faulty run keeps step AT


def _poison(at: int, run: int) -> Transform:
    """A transform that turns run ``run``'s step ``at`` into NaN (its coefficient), and leaves the rest alone."""

    def update(step: Step, state: None, ctx: Any) -> tuple[Step, None]:
        if ctx.step != at:
            return step, state
        coefs = [c.clone() for c in step.log_coef]
        for c in coefs:
            c[run] = math.nan
        return Step(step.direction, step.log_scale, coefs, step.factor), state

    return Transform("poison", lambda params: None, update)


def _gd(fault: bool, run: int = 0) -> Rule:
    return Rule((scale_by_lr(0.5), *([_poison(AT, run)] if fault else [])))


@dataclass
class Case:
    """One entry point: ``run(steps, fault, metric)`` returns its result; ``state(result)`` the tensors compared;
    ``faulty`` the runs the fault hits (the others must complete)."""

    run: Callable[[int, bool, Any], TrainingResult]
    state: Callable[[TrainingResult], torch.Tensor]
    faulty: tuple[int, ...] = (0,)
    runs: int = 1
    clock: str = "step"  # the frame's column of the loop's step (the classifier's is the epoch)


def _single(steps, fault, metric):
    data = example1(n=4, T=3, d=6, seed=0)
    model = al.models.Combined(6)
    return al.train(model, _gd(fault), data, steps=steps, metrics={"probe": metric}, record_every=1)


def _batched(steps, fault, metric):
    data = al.data.stack([example1(n=4, T=3, d=6, seed=s) for s in (0, 1)])
    rule = _gd(fault, run=1)
    return batched_train(
        data.X, data.Z, data.y, data.v, optimizer=rule, steps=steps, record_every=1, metrics={"probe": metric}
    )


def _flow(steps, fault, metric):
    data = scores_equal(n=2, T=3, d=4, seed=0)
    real = flow_module.flow_rule
    if fault:  # the integrator's rule with the fault after it
        flow_module.flow_rule = lambda *args: Rule((*real(*args).transforms, _poison(AT, 0)))
    try:
        model = Diagonal(4, omega=0.5)
        return gradient_flow(model, data, step=0.05, steps=steps, record_every=1, metrics={"probe": metric})
    finally:
        flow_module.flow_rule = real


def _regression_problem():
    problem = make_problem(d=3, k=5, singular_values=(0.25, 0.2, 0.15), seed=0)
    V, Q = manifold_point(random_rotation(3, runs=2, seed=0), problem.W_star, problem.Sigma)
    return problem, V + 0.05 * torch.randn(V.shape, generator=torch.Generator().manual_seed(1)), Q


def _regression(steps, fault, metric):
    problem, V, Q = _regression_problem()
    oracle, calls = PopulationOracle(problem), [0]

    def faulty(V, Q):
        calls[0] += 1
        gV, gQ = oracle(V, Q)
        if fault and calls[0] == AT + 1:  # the oracle's call at step AT
            gV = gV.clone()
            gV[1] = math.nan
        return gV, gQ

    opt = lambda ps: torch.optim.SGD(ps, lr=0.1)  # noqa: E731
    return regression_fit(V, Q, faulty, opt, steps=steps, metrics={"probe": metric})


def _ntk_data():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(8, 4, generator=g, dtype=torch.float64)
    return X / X.norm(dim=1, keepdim=True), torch.randn(8, 2, generator=g, dtype=torch.float64)


def _ntk(steps, fault, metric):
    X, Y = _ntk_data()
    net = SoftmaxMLP(4, 2, 32, seed=1)
    lr = practical_step(net, X)
    if not fault:
        return gradient_descent(net, X, Y, lr=lr, steps=steps, metrics={"probe": metric})
    calls, real = [0], network.weight_gradient

    def poisoned(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs) * (math.nan if calls[0] == AT + 1 else 1.0)

    network.weight_gradient = poisoned
    try:
        return gradient_descent(net, X, Y, lr=lr, steps=steps, metrics={"probe": metric})
    finally:
        network.weight_gradient = real


def _kernel(steps, fault, metric):
    X, Y = _ntk_data()
    net = SoftmaxMLP(4, 2, 32, seed=1)
    H = gram(net, X)
    # the fault is the step size, in both runs: far past the stability limit the coefficients grow by ~1e60 per step
    # until they overflow (a natural fault); the clean run stops before it
    lr = 1e60 * practical_step(net, X)
    return kernel_regression_path(H, H, Y, lr=lr, scale=net.kernel_scale, steps=[steps], metrics={"probe": metric})


def _projected(steps, fault, metric):
    A = torch.tensor([[0.3, -0.2], [0.1, 0.4]], dtype=torch.float64)
    calls = [0]

    def grad(W):
        calls[0] += 1
        return (W - A) * (math.nan if fault and calls[0] == AT + 1 else 1.0)

    return projected_mirror_descent(grad, torch.zeros(2, 2), p=2.0, radius=10.0, steps=steps, metrics={"probe": metric})


class _Poisonable(nn.Module):
    """A linear classifier whose output turns NaN once ``poisoned`` is set (the fault)."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 2).double()
        self.poisoned = False

    def forward(self, x):
        out = self.linear(x)
        return out * math.nan if self.poisoned else out


def _classifier(epochs, fault, metric):
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (64,), generator=g)
    x = torch.randn(64, 2, generator=g, dtype=torch.float64) + 2.0 * (2.0 * y[:, None] - 1.0)
    data = train_test_split(x, y, test_fraction=0.25, seed=0)
    torch.manual_seed(0)
    model = _Poisonable()

    def poison(record):
        if fault and record.rows["epoch"].iloc[0] == AT:
            model.poisoned = True

    optimizer = NormalizedGD(model.parameters(), lr=0.1)
    history = fit_classifier(
        model, optimizer, data, epochs=epochs, batch_size=16, seed=0, callbacks=[poison], metrics={"probe": metric}
    )
    model.poisoned = False
    return history


def _weights(result):
    return torch.cat([p.detach().reshape(-1) for p in result.model.parameters()])


CASES = {
    "al.train": Case(_single, lambda r: r.W),
    "batched.train": Case(_batched, lambda r: r.W, faulty=(1,), runs=2),
    "flow": Case(_flow, lambda r: torch.cat([r.params["xi_k"], r.params["xi_q"]], dim=-1)),
    "regression": Case(_regression, lambda r: torch.cat([r.V.flatten(1), r.Q.flatten(1)], 1), faulty=(1,), runs=2),
    "ntk gd": Case(_ntk, lambda r: r.W),
    "kernel regression": Case(_kernel, lambda r: r.params["gamma"]),
    "projected md": Case(_projected, lambda r: r.W),
    "classifier": Case(_classifier, _weights, clock="epoch"),
}


def _probe(state: Any) -> float:
    """A metric of any state: the count of its entries (a function of the state, the one protocol)."""
    return float(len(state))


def _through_the_loop(monkeypatch) -> list[int]:
    """Wrap the one loop function wherever it was imported; the list counts its calls."""
    calls, real = [], loop.run_loop

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("attnlab") and getattr(module, "run_loop", None) is real:
            monkeypatch.setattr(module, "run_loop", counting)
    return calls


@pytest.mark.parametrize("name", list(CASES))
def test_every_entry_point_runs_the_one_loop_under_the_one_policy(name, monkeypatch):
    case = CASES[name]
    calls = _through_the_loop(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the policy never warns ...
        faulty = case.run(10, True, _probe)  # ... and never raises
    assert len(calls) == 1, f"{name} did not run through attnlab.training.loop.run_loop exactly once"
    assert isinstance(faulty, TrainingResult) and set(faulty.status) <= set(STATUSES)
    assert "probe" in faulty.frame.columns  # the one metric protocol: a function of the state, as a column
    assert faulty.diverged_runs == list(case.faulty) and faulty.seconds > 0
    last = faulty.last_step[case.faulty[0]]
    clean = case.run(last, False, _probe)  # the same runs, stopped at the kept step
    assert clean.ok and clean.status == [COMPLETED] * case.runs
    for r in range(case.runs):
        rows = faulty.frame[faulty.frame["run"] == r]
        if r in case.faulty:
            assert faulty.status[r] == DIVERGED and rows[case.clock].max() == last  # a row there, none past it
            kept_row = rows[rows[case.clock] == last].drop(columns=["seconds"], errors="ignore").reset_index(drop=True)
            clean_rows = clean.frame[clean.frame["run"] == r]
            reference_row = clean_rows[clean_rows[case.clock] == last].reset_index(drop=True)
            pd.testing.assert_frame_equal(kept_row, reference_row[kept_row.columns])  # the row of the kept state
            kept = case.state(faulty)[r] if case.runs > 1 else case.state(faulty)
            reference = case.state(clean)[r] if case.runs > 1 else case.state(clean)
            assert torch.equal(kept, reference), "the diverged run does not hold its last finite state"
            assert bool(torch.isfinite(kept).all())
        else:
            assert faulty.status[r] == COMPLETED and faulty.last_step[r] == 10
    assert last == AT or (name == "kernel regression" and 0 < last < 10)  # a natural fault: after finite steps


@pytest.mark.parametrize("name", list(CASES))
def test_no_entry_point_lets_a_metric_overwrite_a_column_it_records(name):
    case = CASES[name]
    with pytest.raises(al.ValidationError, match=rf"\['{case.clock}'\] would overwrite.*rename the metric"):
        case.run(2, False, lambda state: {case.clock: 0.0})  # a metric filling the loop's own clock column


@pytest.mark.parametrize("column", ["time", "log_time"])
def test_the_flow_refuses_a_metric_named_as_its_clock(column):
    data = scores_equal(n=2, T=3, d=4, seed=0)
    with pytest.raises(al.ValidationError, match=rf"\['{column}'\] would overwrite"):
        gradient_flow(Diagonal(4, omega=0.5), data, step=0.05, steps=2, metrics={column: _probe})


def test_the_status_words_are_one():
    assert STATUSES == (COMPLETED, DIVERGED, STOPPED) == ("completed", "diverged", "stopped")


def test_a_callback_stops_every_run_still_going_and_the_last_step_stays_completed():
    problem, V, Q = _regression_problem()
    opt = lambda ps: torch.optim.SGD(ps, lr=0.1)  # noqa: E731
    stopped = regression_fit(
        V, Q, PopulationOracle(problem), opt, steps=10, metrics={}, callbacks=[lambda r: r.step >= 2]
    )
    assert stopped.status == [STOPPED, STOPPED] and stopped.last_step == [2, 2] and stopped.frame.step.max() == 2
    at_end = regression_fit(
        V, Q, PopulationOracle(problem), opt, steps=10, metrics={}, callbacks=[lambda r: r.step >= 10]
    )
    assert at_end.status == [COMPLETED, COMPLETED]


def test_a_bad_initial_state_is_bad_input_not_divergence():
    problem, V, Q = _regression_problem()
    with pytest.raises(al.ValidationError, match="state at step 0 of runs \\[0, 1\\] is not finite"):
        regression_fit(
            1e7 * V, Q, PopulationOracle(problem), lambda ps: torch.optim.SGD(ps, lr=0.1), steps=3, metrics={}
        )


def test_the_flow_clock_columns_come_from_the_integrator():
    flow = _flow(5, False, _probe)
    assert flow.frame["time"].iloc[0] == 0.0 and flow.frame["time"].is_monotonic_increasing


def _state_tensors(state: Any, run: int) -> list[torch.Tensor]:
    """Every tensor of a rule state with the runs axis first, at ``run`` (shared counts left out)."""
    if isinstance(state, dict):
        return [t for key in sorted(state) for t in _state_tensors(state[key], run)]
    if isinstance(state, (list, tuple)):
        return [t for s in state for t in _state_tensors(s, run)]
    return [state[run]] if isinstance(state, torch.Tensor) and state.dim() > 0 else []


@pytest.mark.parametrize("direction", ["momentum", "adam"])
def test_a_diverged_run_keeps_the_rule_state_of_its_last_finite_step(direction):
    # the loop put the run's parameters back but went on stepping its rule: its buffers took every later gradient
    from attnlab.optim.transforms import adam, momentum

    data = al.data.stack([example1(n=4, T=3, d=6, seed=s) for s in (0, 1)])

    def train(steps, fault):
        transform = momentum(0.9) if direction == "momentum" else adam(0.9, 0.999)
        rule = Rule((transform, scale_by_lr(0.5), *([_poison(AT, 1)] if fault else [])))
        return batched_train(data.X, data.Z, data.y, data.v, optimizer=rule, steps=steps)

    faulty = train(10, True)
    assert faulty.status == [COMPLETED, DIVERGED] and faulty.last_step == [10, AT]
    stopped, clean = train(AT, False), train(10, False)  # the diverged run stopped at its kept step; no fault at all
    kept, reference = _state_tensors(faulty.rule_state, 1), _state_tensors(stopped.rule_state, 1)
    assert len(kept) == len(reference) > 0
    assert all(torch.equal(a, b) for a, b in zip(kept, reference)), "the diverged run's rule state moved on"
    assert all(
        torch.equal(a, b) for a, b in zip(_state_tensors(faulty.rule_state, 0), _state_tensors(clean.rule_state, 0))
    )


class _LockedAdam(torch.optim.Adam):
    """Adam whose state also holds an object that cannot be copied (a lock): the put-back copies tensors only."""

    def step(self, closure=None):
        value = super().step(closure)
        for entries in self.state.values():
            entries["lock"] = threading.Lock()
        return value


@pytest.mark.parametrize("runs", [1, 2])
@pytest.mark.parametrize("steps_before", [0, 3])  # the first step into the bad state, and a later one
def test_a_torch_optimizer_of_a_diverged_run_goes_back_with_its_parameters(steps_before, runs):
    # the parameters went back but Adam's state did not: its step count and moments were those after the bad step
    # (NaN moments when the bad gradient was NaN), so training on with the returned optimizer diverged at once
    data = al.data.stack([example1(n=4, T=3, d=6, seed=s) for s in range(runs)]) if runs > 1 else example1(4, 3, 6)

    class PoisonedAdam(_LockedAdam):  # its step number steps_before + 1 takes a NaN gradient, in the last run
        calls = 0

        def step(self, closure=None):
            self.calls += 1
            if self.calls == steps_before + 1:
                for p in self.param_groups[0]["params"]:
                    p.grad[-1].fill_(math.nan)
            return super().step(closure)

    def train(kind, steps):
        model = al.models.Combined(6)
        optimizer = kind(model.parameters(), lr=0.05)
        return al.train(model, optimizer, data, steps=steps, progress=False, broadcast=runs > 1), optimizer

    faulty, optimizer = train(PoisonedAdam, 10)
    assert faulty.status[-1] == DIVERGED and faulty.last_step[-1] == steps_before
    _, reference = train(_LockedAdam, steps_before)
    kept, clean = optimizer.state_dict()["state"], reference.state_dict()["state"]
    if runs == 1:  # the whole state, the step count included
        assert kept.keys() == clean.keys()
        tensors = [(kept[k][e], clean[k][e]) for k in kept for e in kept[k] if e != "lock"]
    else:  # the diverged run's slices of the moments (the step count is shared by the runs); 0 before any step
        tensors = [
            (kept[k][e][-1], clean[k][e][-1] if clean else 0 * kept[k][e][-1])
            for k in kept
            for e in ("exp_avg", "exp_avg_sq")
        ]
    assert (tensors or runs == 1) and all(torch.equal(torch.as_tensor(a), torch.as_tensor(b)) for a, b in tensors)


def test_a_run_that_diverges_on_its_first_step_keeps_an_empty_buffer():
    data = al.data.stack([example1(n=4, T=3, d=6, seed=s) for s in (0, 1)])
    lr = torch.tensor([0.1, 1.7e308], dtype=torch.float64)  # run 1's first step overflows
    result = batched_train(data.X, data.Z, data.y, data.v, optimizer="gd:momentum=0.9", lr=lr, steps=20)
    assert result.status == [COMPLETED, DIVERGED] and result.last_step == [20, 0]
    state = result.rule_state[0]
    assert bool((state["momentum_buffer"][0][1] == 0).all())  # the buffer of a run that took no step: zero
    assert state["momentum_log_scale"][0][1] == -math.inf and bool(torch.isfinite(state["momentum_buffer"][0][0]).all())


@pytest.mark.parametrize("method", ["gd", "ngd-relative"])
def test_a_diverged_flow_keeps_the_clock_and_phi_of_its_last_finite_step(method):
    data = al.data.stack([scores_equal(n=2, T=3, d=4, seed=s) for s in (0, 1)])
    real = flow_module.flow_rule

    def flow(steps, fault):
        if fault:
            flow_module.flow_rule = lambda *args: Rule((*real(*args).transforms, _poison(AT, 1)))
        try:
            model = Diagonal(4, xi_k0=torch.full((2, 4), 0.5), xi_q0=torch.full((2, 4), 0.1))
            return gradient_flow(model, data, step=0.05, steps=steps, method=method, track_phi=True)
        finally:
            flow_module.flow_rule = real

    faulty, stopped = flow(10, True), flow(AT, False)
    assert faulty.status == [COMPLETED, DIVERGED] and faulty.last_step == [10, AT]
    assert torch.equal(faulty.log_time[1], stopped.log_time[1]) and torch.equal(faulty.phi[1], stopped.phi[1])
    if method == "gd":  # AT steps of dt = 0.05
        assert math.isclose(math.exp(float(faulty.log_time[1])), AT * 0.05, rel_tol=1e-12)
