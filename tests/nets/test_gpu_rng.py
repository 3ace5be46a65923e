"""Dropout's RNG on a GPU, without a GPU: fit_stacked gives each run its own state of the device's CUDA RNG (set
before its forward pass, read back after it), as fit_classifier's ``torch.manual_seed(seed)`` gives a run alone, and
both leave the caller's CUDA RNG as it was. No GPU was available to write these: torch.cuda's RNG is a stand-in
(:class:`_FakeCuda`) and the model draws from it (:class:`_Draws`) as a dropout kernel on a GPU would."""

import pytest
import torch
from torch import nn

from attnlab.checkpoint import read_checkpoint
from attnlab.nets import fit_classifier, fit_stacked
from attnlab.nets import stacked as stacked_module
from attnlab.nets.datasets.split import train_test_split

DEVICE = 1  # the runs' GPU: not device 0, so a per-run state set on the wrong device shows
STEPS = 6  # optimizer steps an epoch: 90 training samples in batches of 16


class _FakeCuda:
    """torch.cuda's RNG for two devices, each state ``[seed, offset]`` as a Philox generator keeps it."""

    def __init__(self) -> None:
        self.states = [torch.tensor([1000, 0]), torch.tensor([2000, 0])]
        self.seen: list[list[int]] = []  # each draw's state before it, in order

    @staticmethod
    def index(device: int | str | torch.device = "cuda") -> int:
        device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
        return 0 if device.index is None else device.index

    def get_rng_state(self, device: int | str | torch.device = "cuda") -> torch.Tensor:
        return self.states[self.index(device)].clone()

    def set_rng_state(self, state: torch.Tensor, device: int | str | torch.device = "cuda") -> None:
        self.states[self.index(device)] = state.clone()

    def manual_seed_all(self, seed: int) -> None:
        self.states = [torch.tensor([int(seed), 0]) for _ in self.states]

    def get_rng_state_all(self) -> list[torch.Tensor]:
        return [s.clone() for s in self.states]

    def set_rng_state_all(self, states: list[torch.Tensor]) -> None:
        self.states = [s.clone() for s in states]

    def draw(self, device: int) -> None:
        self.seen.append(self.states[device].tolist())
        self.states[device] = self.states[device] + torch.tensor([0, 1])


class _Draws(nn.Module):
    """Dropout on GPU ``DEVICE``, for the RNG's sake: a training forward pass draws once from that device's RNG."""

    cuda: _FakeCuda  # a class attribute: fit_stacked's deep copy of the model keeps the one stand-in

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.cuda.draw(DEVICE)
        return x


@pytest.fixture
def cuda(monkeypatch) -> _FakeCuda:
    fake = _FakeCuda()
    monkeypatch.setattr(_Draws, "cuda", fake, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    for name in ("get_rng_state", "set_rng_state", "manual_seed_all", "get_rng_state_all", "set_rng_state_all"):
        monkeypatch.setattr(torch.cuda, name, getattr(fake, name))  # torch.manual_seed reseeds through manual_seed_all
    # the batches are on GPU DEVICE (they cannot be here: the stand-in says so where fit_stacked asks)
    monkeypatch.setattr(stacked_module, "_cuda_device", lambda x: torch.device("cuda", DEVICE), raising=False)
    return fake


def _data():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (120,), generator=g)
    x = torch.randn(120, 2, generator=g, dtype=torch.float64) * 0.5 + (2.0 * y[:, None] - 1.0) * 2.0
    return train_test_split(x, y, test_fraction=0.25, seed=0)


def _model(seed: int) -> nn.Module:
    with torch.random.fork_rng(devices=[]):  # nn.Linear's initial draws: not from the RNGs the fits must leave alone
        model = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Dropout(0.1), _Draws(), nn.Linear(8, 2)).double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.3)
    return model


def _stack(seeds: list[int], epochs: int, **kwargs) -> list:
    models = [_model(seed) for seed in seeds]
    return fit_stacked(models, [("sgd", 0.1)] * len(seeds), seeds, _data(), epochs=epochs, batch_size=16, **kwargs)


def _alone(seed: int, epochs: int, **kwargs):
    model = _model(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return fit_classifier(model, optimizer, _data(), epochs=epochs, batch_size=16, seed=seed, **kwargs)


def _own(seed: int, draws: range) -> list[list[int]]:
    """The states a run alone draws from: its seed's (as torch.manual_seed(seed) leaves it), advanced by its draws."""
    return [[seed, k] for k in draws]


def test_each_stacked_run_draws_from_its_own_state_of_the_device_rng(cuda):
    _alone(7, epochs=2)
    assert cuda.seen == _own(7, range(2 * STEPS))  # fit_classifier: torch.manual_seed(7) seeds the GPU
    for seeds in ([5, 7], [9, 7, 3]):  # seed 7 among other neighbours: its draws are the same, its own
        cuda.seen = []
        _stack(seeds, epochs=2)
        for r, seed in enumerate(seeds):  # one forward pass per run and step, runs in order
            assert cuda.seen[r :: len(seeds)] == _own(seed, range(2 * STEPS)), f"run {r} (seed {seed})"


@pytest.mark.parametrize("fit", ["alone", "stacked"])
def test_a_fit_leaves_the_callers_cpu_and_cuda_rng_as_they_were(cuda, fit):
    cuda.states = [torch.tensor([11, 3]), torch.tensor([12, 4])]
    cpu = torch.get_rng_state()
    _alone(7, epochs=1) if fit == "alone" else _stack([5, 7], epochs=1)
    assert cuda.seen  # the fit drew from the device RNG...
    assert [s.tolist() for s in cuda.states] == [[11, 3], [12, 4]]  # ...and put the caller's back
    assert torch.equal(torch.get_rng_state(), cpu)


def test_a_stacked_fit_with_dropout_leaves_the_callers_cpu_rng_alone():
    # on the CPU too: each run's RNG state is seeded inside the scope that puts the caller's back
    models = [nn.Sequential(nn.Linear(2, 8), nn.Dropout(0.1), nn.Linear(8, 2)).double() for _ in range(2)]
    torch.manual_seed(123)
    cpu = torch.get_rng_state()
    fit_stacked(models, [("sgd", 0.1)] * 2, [5, 7], _data(), epochs=1, batch_size=16)
    assert torch.equal(torch.get_rng_state(), cpu)


def test_a_resumed_stack_redraws_from_each_runs_saved_device_state(cuda, tmp_path):
    path = tmp_path / "runs.pt"
    _stack([5, 7], epochs=1, checkpoint=path)
    saved = read_checkpoint(path)
    assert [s.tolist() for s in saved["run_cuda_rngs"]] == [[5, STEPS], [7, STEPS]]  # after each run's own draws
    cuda.states, cuda.seen = [torch.tensor([0, 0]), torch.tensor([0, 0])], []  # a new process starts elsewhere
    _stack([5, 7], epochs=2, checkpoint=path)
    assert cuda.seen[0::2] == _own(5, range(STEPS, 2 * STEPS))  # epoch 2, as the uninterrupted stack draws it
    assert cuda.seen[1::2] == _own(7, range(STEPS, 2 * STEPS))


def test_a_checkpoint_without_per_run_device_states_still_resumes(cuda, tmp_path):
    path = tmp_path / "runs.pt"
    _stack([5, 7], epochs=1, checkpoint=path)
    state = read_checkpoint(path)
    del state["run_cuda_rngs"]  # as written before these were saved
    torch.save(state, path)
    cuda.seen = []
    histories = _stack([5, 7], epochs=2, checkpoint=path)
    assert [h.status for h in histories] == [["completed"]] * 2
    assert cuda.seen[1::2] == _own(7, range(STEPS))  # each run's device state as seeded: nothing else to go on


def test_a_cpu_run_on_a_gpu_machine_never_starts_cuda(monkeypatch, tmp_path):
    def refuse(*args, **kwargs):
        raise AssertionError("a CPU run touched the CUDA RNG")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    for name in ("_lazy_init", "device_count", "get_rng_state", "set_rng_state", "get_rng_state_all"):
        monkeypatch.setattr(torch.cuda, name, refuse)
    assert stacked_module._cuda_device(torch.zeros(1)) is None
    models = [nn.Sequential(nn.Linear(2, 8), nn.Dropout(0.1), nn.Linear(8, 2)).double() for _ in range(2)]
    fit_stacked(models, [("sgd", 0.1)] * 2, [5, 7], _data(), epochs=1, batch_size=16, checkpoint=tmp_path / "s.pt")
    model = models[0]
    fit_classifier(model, torch.optim.SGD(model.parameters(), lr=0.1), _data(), epochs=1, batch_size=16, seed=0)
    saved = read_checkpoint(tmp_path / "s.pt")
    assert saved["run_cuda_rngs"] is None and saved["cuda_rng"] is None
