"""The config of P8 (score estimation for a 2-d Gaussian mixture), apart from the experiment so that its
measurements (:mod:`attnlab.experiments.ntk.gmm_measures`) and the experiment (:mod:`attnlab.experiments.ntk.gmm`)
both import it.

Spec: softmax-ntk-diffusion §7.3-7.5, §9 P8.
"""

from __future__ import annotations

from dataclasses import dataclass

from attnlab._validation import ValidationError, check_grid, check_in, check_scalar
from attnlab.ntk.score_data import INPUT_MAPS, TIMES

__all__ = ["GMMConfig"]


@dataclass(frozen=True)
class GMMConfig:
    """P8: score estimation for a 2-d Gaussian mixture across n and m, and reverse-SDE samples.

    Attributes
    ----------
    ns : tuple of int
        Training-set sizes (spec §9: 256, 1024, 4096); the size-n run trains on the first n triples of one pool.
        Distinct, each >= 2, at least two (Thm 6.6's row is a slope in n).
    widths : tuple of int
        Hidden widths (ours: the spec's 512, 2048, 8192 is ``spec_size=True``): even, distinct, at least two (P8's
        coupling row compares the widest with the narrowest).
    sigma_w : float
        Init standard deviation (ours: 2; spec §9: 1).
    c : float
        Practical step ``lr = c / (m lambda_max(H*))`` (spec §9: 0.5).
    T0 : float
        Early-stopping time of the diffusion (spec §9: 0.01); > 0.
    T : float
        Final diffusion time (spec §9: 2); > T0.
    modes : int
        Gaussians of the target, means on a circle (spec §9: 4).
    radius : float
        Radius of the circle of means (spec §9: 0.5); >= 0, with ``radius + 10 std <= 1``: the data inside the
        unit ball (spec §1), with 10 std of room (ours).
    std : float
        Standard deviation of each Gaussian (spec §9: 0.05); > 0, with ``radius + 10 std <= 1`` (so <= 0.1).
    n_val : int
        Held-out triples for early stopping (spec §9: 1024).
    n_eval : int
        Fresh draws for the weighted score error (spec §9: 10000).
    max_steps : int
        GD steps at most (ours; the spec stops early only).
    record_every : int
        Steps between held-out evaluations.
    patience : int
        Records without a better held-out loss before stopping.
    skip : bool
        True: learn the residual over the linear denoiser (ours); False is spec §7.4.
    input_map : str
        Network input: ``"sphere"`` (ours), ``"scaled"`` or ``"spec"`` (spec §7.5's ``u = (t/T, x)/rho``).
    decay : float
        Sphere map: input radius 1 at T0, ``1 - decay`` at T (ours).
    times : str
        Training and held-out times: ``"log-uniform"`` (ours) or ``"uniform"`` (spec §7.5).
    time_power : float
        Log-uniform times ``t = T0 (T/T0)^(U^power)``: more draws at small t (ours).
    n_samples : int
        Reverse-SDE samples per sampler; >= 2 (the energy distance compares pairs of samples).
    sde_steps : int
        Euler-Maruyama steps from T down to T0.
    spec_size : bool
        True: the spec's n x m grid (``SPEC_SIZES``), hours on 2 CPU cores.
    spec_settings_run : bool
        Also train the spec's own settings (``SPEC_SETTINGS``) once: a documented departure.
    seed : int
        Seed of the data, the networks and the sampler.
    """

    OURS = (
        "ns",
        "widths",
        "sigma_w",
        "c",
        "T0",
        "T",
        "modes",
        "radius",
        "std",
        "n_val",
        "n_eval",
        "max_steps",
        "record_every",
        "patience",
        "skip",
        "input_map",
        "decay",
        "times",
        "time_power",
        "n_samples",
        "sde_steps",
        "seed",
    )

    ns: tuple[int, ...] = (256, 1024, 4096)  # spec §9 diffusion experiment
    widths: tuple[int, ...] = (128, 512)  # ours: the spec's (512, 2048, 8192) is spec_size=True (GPU-sized)
    sigma_w: float = 2.0  # ours (spec §9: 1); at 1 the samples cover the modes too, but the error stalls in n
    c: float = 0.5  # spec §9: lr = 0.5 / (m lambda_max(H*))
    T0: float = 0.01  # spec §9
    T: float = 2.0  # spec §9
    modes: int = 4  # spec §9: 4 means on a circle of radius 0.5, std 0.05
    radius: float = 0.5
    std: float = 0.05
    n_val: int = 1024  # spec §9: held-out triples for early stopping
    n_eval: int = 10000  # spec §9: fresh draws for the weighted error
    max_steps: int = 8000  # ours (the spec stops early only): keeps the full reproduction in budget (docs)
    record_every: int = 20
    patience: int = 50  # records without a better held-out loss before stopping
    skip: bool = False  # True: learn the residual over the linear denoiser (ours; see attnlab.ntk.InputMap)
    input_map: str = "sphere"  # ours (see attnlab.ntk.InputMap); "spec" is spec §7.5's u = (t/T, x)/rho
    decay: float = 0.97  # sphere map: input radius 1 at T0, 1 - decay at T (ours)
    times: str = "log-uniform"  # training/held-out times; "uniform" is spec §7.5 (ours: see denoising_set)
    time_power: float = 3.0  # log-uniform times: t = T0 (T/T0)^(U^power), more draws at small t (ours)
    n_samples: int = 2000
    sde_steps: int = 200  # Euler-Maruyama steps from T down to T0
    spec_size: bool = False  # True: the spec's n x m grid (SPEC_SIZES), hours on 2 CPU cores: for a GPU-sized budget
    spec_settings_run: bool = True  # also train the spec's own settings (SPEC_SETTINGS) once: a documented departure
    seed: int = 0

    def __post_init__(self) -> None:
        check_grid("ns", self.ns, 2, points=2, why="Thm 6.6's row is a slope in n", example="256,1024")
        check_grid(
            "widths",
            self.widths,
            2,
            even=True,
            points=2,
            why="P8's coupling row compares the widest with the narrowest width",
            example="128,512",
        )
        for name in ("modes", "n_val", "n_eval", "max_steps", "record_every", "patience", "sde_steps"):
            check_scalar(name, getattr(self, name), kind=int, low=1)
        check_scalar("n_samples", self.n_samples, kind=int, low=2)  # the energy distance's within-sample pairs
        for name in ("sigma_w", "T0"):
            check_scalar(name, getattr(self, name), low=0.0, low_inclusive=False)
        if check_scalar("T", self.T) <= self.T0:
            raise ValidationError(
                f"T == {self.T}, must be > T0 == {self.T0} (the diffusion runs from T0 up to T); raise T or lower T0"
            )
        check_scalar("c", self.c, low=0.0, high=1.0, low_inclusive=False)
        # p_0 inside the unit ball (spec §1: ||x_i|| <= 1), with 10 std of each Gaussian of room (ours)
        check_scalar("std", self.std, low=0.0, low_inclusive=False)
        check_scalar("radius", self.radius, low=0.0, high=1.0)
        if self.radius + 10 * self.std > 1.0:
            fixes = [f"at this radius, std == {self.std}, must be <= {(1.0 - self.radius) / 10:g}"]
            if 10 * self.std <= 1.0:  # some radius fits this std
                fixes.insert(0, f"at this std, radius == {self.radius}, must be <= {1.0 - 10 * self.std:g}")
            raise ValidationError(
                f"radius + 10 std == {self.radius} + 10 x {self.std} = {self.radius + 10 * self.std:g}, must be <= 1 "
                "(the data inside the unit ball, spec §1, with 10 std of room: ours): " + "; ".join(fixes)
            )
        check_in("times", self.times, TIMES)
        check_in("input_map", self.input_map, INPUT_MAPS)
        check_scalar("decay", self.decay, low=0.0, high=1.0, high_inclusive=False)
        check_scalar("time_power", self.time_power, low=0.0, low_inclusive=False)
