"""What the regression experiments share: the theory instance and Algorithm 1's step settings.

Spec: docs/theory/preconditioned-regression.md §7 (A1-A3 on the instance), §6.2 (Algorithm 1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any

import torch

from attnlab._validation import ValidationError, check_count, check_grid, check_scalar
from attnlab.optim.preconditioned import PreconditionedGD
from attnlab.regression import (
    RegressionProblem,
    make_problem,
    near_manifold_point,
)
from attnlab.verify import Claim, old_sizes, pinned, size_change

PAPER = "preconditioned-regression"
SOURCE = "docs/theory/preconditioned-regression.md"
INSTANCE = ("d", "k", "noise_std", "singular_values", "problem_seed", "seed")
"""The config fields of the theory instance and its seed: every reading of the theory rows depends on them."""
RHO = 0.25
"""The local region of T1.3 in multiples of sigma_d^{1/2} (Tu et al.): the T1.3 and L4 rows read points within it."""


def local_radius(singular_values: Sequence[float]) -> float:
    """rho = RHO sigma_d^{1/2}, the radius of T1.3's local region (spec §4.4), from sigma(W* Sigma^{1/2}).

    Parameters
    ----------
    singular_values : sequence of float
        The instance's singular values, each > 0.

    Returns
    -------
    float
    """
    return RHO * min(singular_values) ** 0.5  # spec §4.4: rho = c_rho sigma_d^{1/2}


NEAR_M = 0.3
"""dist(theta, M) / rho of the points the T1.1, Theorem 2-5, L2 and Appendix D rows read 'near M' (ours, the
fraction suggested for checking 000:Thm3, 'a fixed theta at 0.3 rho from M'): inside the region dist <= rho that Theorems 2-5 and Lemmas
2, 9-23 assume, off M (the biases and the approach to M are read there). Declared 2026-11-30 before the first run
at it (audit fid0 #2: the raw N(0, 0.05^2) perturbation put them 3.5-5 rho away)."""
MOVED = "2026-11-30"
"""The date the points read 'near M' moved inside rho (:data:`NEAR_M`): the revision date of every row they feed."""
MOVED_WHY = (
    "the point was theta_R + N(0, 0.05^2) raw entries, not whitened, and lay OUTSIDE the theorem's region dist <= "
    "rho = 0.25 sigma_d^{{1/2}} = 0.097: {where} (seeds 0-9: 3.5-5.0 rho; audit fid0 #2), so the row read the "
    "theorem's conclusion outside its hypothesis. The point is now at dist(theta, M) = 0.3 rho exactly (theta_R "
    "moved along a random normal direction; seed-results' 0.3 rho, declared before the run){more}"
)
"""The reason of those revisions; ``where``: the distances of the rows' own points; ``more``: what else changed."""


@dataclass(frozen=True)
class InstanceConfig:
    """The theory instance and its seeds that ``regression.theory``, ``regression.scaling`` and ``regression.context``
    share (sizes are ours; the paper gives none).

    Attributes
    ----------
    d : int
        Covariate dimension; >= 1.
    k : int
        Response dimension, k >= d (A2).
    noise_std : float
        Noise sigma; L_irr = k sigma^2; >= 0.
    singular_values : tuple of float
        sigma(W* Sigma^{1/2}), d values, each > 0 (A2): A3 holds and kappa < 2 (a fast local rate).
    problem_seed : int
        Seed of Sigma and the singular vectors of W*.
    seed : int
        Seed of every sample, rotation and start.
    """

    d: int = 3
    k: int = 6
    noise_std: float = 0.1
    singular_values: tuple[float, ...] = (0.25, 0.2, 0.15)
    problem_seed: int = 0
    seed: int = 0

    OURS = ("d", "k", "noise_std", "singular_values")

    def __post_init__(self) -> None:
        check_scalar("d", self.d, kind=int, low=1)
        check_scalar("k", self.k, kind=int, low=self.d)
        check_scalar("noise_std", self.noise_std, low=0.0)
        if len(self.singular_values) != self.d:
            raise ValidationError(f"singular_values has {len(self.singular_values)} entries, needs d == {self.d}")
        for value in self.singular_values:
            check_scalar("singular_values entry", value, low=0.0, low_inclusive=False)

    def problem(self) -> RegressionProblem:
        """The instance these settings describe (:func:`theory_problem`)."""
        return theory_problem(self.d, self.k, self.noise_std, self.singular_values, self.problem_seed)


@dataclass(frozen=True)
class TheoryInstanceConfig(InstanceConfig):
    """The theory instance and Algorithm 1's step settings that ``regression.theory`` and ``regression.scaling``
    share (sizes are ours; the paper gives none).

    The instance (d, k, noise_std, singular_values, problem_seed) and seed are :class:`InstanceConfig`'s.

    Attributes
    ----------
    mu : float
        Regularizer weight (spec §3.4 [R]); >= 0.
    lr : float
        Step size eta of Algorithm 1; > 0.
    start_distance : float
        dist(theta_0, M) / rho of the starts (spec §4.4: rho = 0.25 sigma_d^{1/2}; theta_R moved along a random
        normal direction, :func:`near_points`); in (0, 1]: Theorem 2 assumes a start within rho, and the runs read
        their approach to M from a start off it.
    """

    mu: float = 0.25  # spec §3.4 [R]
    lr: float = 0.5
    start_distance: float = NEAR_M

    OURS = ("d", "k", "noise_std", "singular_values", "mu", "lr")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_scalar("mu", self.mu, low=0.0)  # checked here under its config name (fit calls it regularizer_weight)
        check_scalar("lr", self.lr, low=0.0, low_inclusive=False)
        check_scalar("start_distance", self.start_distance, low=0.0, high=1.0, low_inclusive=False)  # within rho


MAX_SEEDS = 100
"""Most seeds (runs) a regression experiment takes in one count field (ours: a bound on the run's time and memory,
which grow linearly in it; 5 x the largest default)."""
SEEDS_WHY = "ours: a bound on the run's time and memory, which grow linearly in it"


def theory_problem(d: int, k: int, noise_std: float, singular_values: Sequence[float], seed: int) -> RegressionProblem:
    """The instance of the theory rows: sigma(W* Sigma^{1/2}) fixed, so A3 holds and kappa is small."""
    return make_problem(d, k, noise_std=noise_std, singular_values=tuple(singular_values), seed=seed)


_INSTANCE_VALUES = {
    "d": 3,
    "k": 6,
    "noise_std": 0.1,
    "singular_values": (0.25, 0.2, 0.15),
    "problem_seed": 0,
    "seed": 0,
}
THEORY_BEFORE_MOVE = old_sizes(
    {**_INSTANCE_VALUES, "mu": 0.25, "lr": 0.5, "bias_scale": 0.05, "start_scale": 0.05,
     "bias_ns": (25, 50, 100, 200, 400, 800), "bias_samples": 400, "mc_ns": (50, 100, 200)},
    regularizer_samples=(4000, 2000), steps=(300, 150), mc_runs=(3, 2), mc_batches=(16, 8), mc_steps=(150, 60),
)  # fmt: skip
"""regression.theory's fields (full, quick) that its moved rows read, before the move (:data:`MOVED`)."""
SCALING_BEFORE_MOVE = old_sizes(
    {**_INSTANCE_VALUES, "mu": 0.25, "lr": 0.5, "start_scale": 0.05, "record_every": 2},
    ns=((25, 50, 100, 200), (50, 100, 200)), seeds=(4, 2), steps=(150, 60), batches=(16, 8),
)  # fmt: skip
"""regression.scaling's fields (full, quick) before the move."""
CONTEXT_BEFORE_MOVE = old_sizes(
    {**_INSTANCE_VALUES, "point_scale": 0.05, "ns": (25, 50, 100, 200, 400)}, draws=(16_000, 4_000)
)
"""regression.context's fields (full, quick) before the move."""


def near_points(
    problem: RegressionProblem, singular_values: Sequence[float], runs: int, fraction: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``runs`` points at dist(theta, M) = ``fraction`` rho (spec §4.4: rho = 0.25 sigma_d^{1/2}), each theta_R of a
    Haar R (``seed``) moved along a random normal direction (``seed + 1``; :func:`near_manifold_point`).

    Parameters
    ----------
    problem : RegressionProblem
        The instance whose manifold M the points are near.
    singular_values : sequence of float
        sigma(W* Sigma^{1/2}) of the instance: rho's sigma_d.
    runs : int
        Number of points.
    fraction : float
        dist(theta, M) / rho, >= 0.
    seed : int
        Seed of the rotations and directions.

    Returns
    -------
    V : torch.Tensor, shape (runs, k, d)
    Q : torch.Tensor, shape (runs, d, d)
    """
    return near_manifold_point(problem, runs, fraction * local_radius(singular_values), seed)


def moved_inside(
    claim: Claim,
    old: Mapping[str, Mapping[str, Any]],
    why: str,
    quick: str,
    full: str,
    texts: Mapping[str, str],
    **changes: Any,
) -> Claim:
    """``claim`` after its point moved inside rho (:data:`NEAR_M`): the reading as it ran kept as a revision at the
    ``old`` sizes (its scale field included), earlier revisions that meant the current sizes pinned to them.

    Parameters
    ----------
    claim : Claim
        The claim as declared before the move.
    old : mapping
        Every config field's full and quick value before the move (:func:`~attnlab.verify.old_sizes`).
    why, quick, full : str
        As :class:`~attnlab.verify.Revision`: the reason, and the old reading's last quick and full outcome.
    texts : mapping of str to str
        Old text -> new text, replaced in the reading's statistic, window, subset and tolerance (the point's
        description); the scale fields of its sizes become the distance fields.
    **changes
        Other fields of the new reading (``window``, ``params``...) where they differ.

    Returns
    -------
    Claim
    """
    revision = size_change(claim.reading, old, MOVED, why, quick, full)
    before = claim.reading
    swapped = {name: _swap(getattr(before, name), texts) for name in ("statistic", "window", "subset", "tolerance")}
    sizes = tuple(_DISTANCES.get(name, name) for name in before.sizes)
    reading = dataclasses.replace(before, **{**swapped, "sizes": sizes, **changes})
    return dataclasses.replace(claim, reading=reading, revisions=(*pinned(claim.revisions, old), revision))


_DISTANCES = {"bias_scale": "bias_distance", "start_scale": "start_distance", "point_scale": "point_distance"}
"""The config fields of the points before the move (entry sizes) and after (dist / rho)."""


def _swap(text: str, texts: Mapping[str, str]) -> str:
    for was, now in texts.items():
        text = text.replace(was, now)
    return text


def true_sigma_step(problem: RegressionProblem, runs: int, lr: float) -> Callable[[list], PreconditionedGD]:
    """Algorithm 1's preconditioned step with the true Sigma for ``runs`` runs (the floors' ``make_optimizer``)."""
    Sigma = problem.Sigma.expand(runs, -1, -1)
    return lambda ps: PreconditionedGD.for_attention(ps[0], ps[1], Sigma, lr=lr)  # spec §6.2


@dataclass(frozen=True)
class TheoryConfig(TheoryInstanceConfig):
    """Settings of the measured checks of spec §8 (sizes are ours; the paper gives none).

    The instance (d, k, noise_std, singular_values, problem_seed), seed, mu, lr and start_distance are
    :class:`~attnlab.experiments.regression.common.TheoryInstanceConfig`'s; the T2 runs amend lr and start_distance.

    Attributes
    ----------
    bias_ns : tuple of int
        Context sizes of the Monte-Carlo biases (T1.1, Theorems 4 and 5): distinct, each >= 1, at least three
        (the rows fit their rates in n).
    bias_samples : int
        Fresh samples per n for the loss and gradient biases.
    regularizer_samples : int
        Fresh covariances per n for the regularizer-gradient bias (Theorem 5; cheap, so many).
    bias_distance : float
        dist(theta, M) / rho of the point off M where the biases are measured (theta_R moved along a random normal
        direction, :func:`near_points`); in [0, 1]: Theorems 3-5 are stated for theta within rho.
    spectral_ns : tuple of int
        Sample sizes of the spectral start (Lemma 3): distinct, each >= d (an invertible Sigma_hat), at least two
        of them in the last decade, n >= max(spectral_ns) / 10 (L5 fits its slope there).
    spectral_seeds : int
        Samples per n of the spectral start; from 2 (the rows' tolerance is a spread over seeds) to 100 (ours: a
        bound on the run's time and memory).
    radii : tuple of float
        T1.3 radii, multiples of sigma_d^{1/2}; rho = 0.25 (Tu et al.): at least one, distinct, each in (0, rho]
        (the T1.3 and L4 rows read points within rho of M).
    directions : int
        Random directions per radius (T1.3).
    lr : float
        Step of the population-oracle and Monte-Carlo-oracle runs (T2); > 0.
    start_distance : float
        dist(theta_0, M) / rho of the T2 runs' starts; in (0, 1] (T2 reads the approach to M from a start off it,
        within rho).
    steps : int
        Steps of the population-oracle run (T2, L2); >= 25 (T2's rate reads at least 5 recorded steps, one every 5).
    mc_ns : tuple of int
        Context sizes of the Monte-Carlo-oracle floor (T2): distinct, each >= 1, at least two (the floor's rate in
        n).
    mc_batches : int
        Fresh samples per step of the Monte-Carlo oracle (the floor is also run at half of it): even, >= 2.
    mc_runs : int
        Starts per n of the floor runs; >= 2.
    mc_steps : int
        Steps of the floor runs; the floor is the mean gap over their second half; >= 2 (a second half after the
        start).
    lem4_n : int
        Context size of the fresh samples of the Lemma 4 rows; >= 1.
    lem4_batches : int
        Fresh samples per point of the Lemma 4 rows (the Monte-Carlo mean of the empirical gradient).
    lem4_directions : int
        Points per radius of the Lemma 4 rows' old readings (their revisions); >= 1.
    lem4_resolved_n : int
        Context size of the fresh samples of the Lemma 4 rows at rho (along the Hessian's normal eigenvectors and
        the scaling direction); >= 1. Ours: large enough that the oracle's squared bias ||b||^2 is well below
        alpha^2 rho^2 (at M: 5.5e-5 at n = 1000 against alpha^2 rho^2 = 8.4e-4; 2.8e-3 at n = 100).
    second_singular_values : tuple of float
        sigma(W* Sigma^{1/2}) of the second instance of t13-sigma-scaling (the same Sigma, singular vectors and seed),
        d values, each > 0; ours: sigma_1 halved and sigma_d a third of the default's, so that both constants move.
    lem4_train : int
        Size of the training sample whose Sigma_hat preconditions the Lemma 4 rows; >= d (an invertible
        Sigma_hat).
    """

    bias_ns: tuple[int, ...] = (25, 50, 100, 200, 400, 800)
    bias_samples: int = 400
    regularizer_samples: int = 4000
    bias_distance: float = NEAR_M
    spectral_ns: tuple[int, ...] = (100, 1000, 10_000, 100_000)
    spectral_seeds: int = 20
    radii: tuple[float, ...] = (0.02, 0.05, 0.1, 0.25)
    directions: int = 300
    steps: int = 300
    mc_ns: tuple[int, ...] = (50, 100, 200)
    mc_batches: int = 16
    mc_runs: int = 3
    mc_steps: int = 150
    lem4_n: int = 100
    lem4_batches: int = 64
    lem4_directions: int = 10
    lem4_resolved_n: int = 1000
    second_singular_values: tuple[float, ...] = (0.125, 0.1, 0.05)
    lem4_train: int = 1000

    OURS = TheoryInstanceConfig.OURS + ("bias_ns", "bias_distance", "mc_ns", "radii", "second_singular_values")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_scalar("bias_distance", self.bias_distance, low=0.0, high=1.0)  # within rho
        for name in ("bias_samples", "regularizer_samples", "directions", "mc_runs", "lem4_batches"):
            check_scalar(name, getattr(self, name), kind=int, low=2)
        check_count("spectral_seeds", self.spectral_seeds, 2, MAX_SEEDS, SEEDS_WHY)
        check_grid("bias_ns", self.bias_ns, 1, points=3, why="the rows fit their rates in n")
        check_grid("mc_ns", self.mc_ns, 1, points=2, why="the floor's rate in n")
        check_grid(
            "spectral_ns",
            self.spectral_ns,
            low=self.d,
            points=2,
            why="L3 and L6 are slopes in n",
            low_why="d: an invertible Sigma_hat",
        )
        last = [n for n in self.spectral_ns if n >= max(self.spectral_ns) / 10]
        if len(last) < 2:
            raise ValidationError(
                f"spectral_ns == {tuple(self.spectral_ns)} has {len(last)} size(s) in its last decade (n >= "
                f"{max(self.spectral_ns) / 10:g}); L5 fits its slope there and needs two, e.g. spectral_ns="
                f"{','.join(map(str, sorted(self.spectral_ns)))},{max(self.spectral_ns) * 10}"
            )
        if not self.radii:
            raise ValidationError(f"radii is empty; pass at least one radius in (0, {RHO}], e.g. radii=0.02,0.1")
        for radius in self.radii:  # the T1.3 and L4 rows read points within rho of M
            check_scalar("radii entry", radius, low=0.0, high=RHO, low_inclusive=False)
        check_grid("radii", self.radii, 0.0, kind=Real)
        # T2's rate reads >= 5 recorded steps (one every 5, T2_RATE's min_records) with 1e-7 < dist < 1e-2
        check_scalar("steps", self.steps, kind=int, low=25)
        check_scalar("mc_batches", self.mc_batches, kind=int, low=2)
        if self.mc_batches % 2:
            raise ValidationError(
                f"mc_batches == {self.mc_batches}, must be even (the floor is also run at mc_batches // 2); pass "
                f"mc_batches={self.mc_batches + 1}"
            )
        check_scalar("mc_steps", self.mc_steps, kind=int, low=2)  # the floor: the mean over the second half
        check_scalar("lem4_n", self.lem4_n, kind=int, low=1)
        check_scalar("lem4_directions", self.lem4_directions, kind=int, low=1)
        check_scalar("lem4_resolved_n", self.lem4_resolved_n, kind=int, low=1)
        if len(self.second_singular_values) != self.d:
            raise ValidationError(
                f"second_singular_values has {len(self.second_singular_values)} entries, needs d == {self.d}"
            )
        for value in self.second_singular_values:
            check_scalar("second_singular_values entry", value, low=0.0, low_inclusive=False)
        if check_scalar("lem4_train", self.lem4_train, kind=int, low=1) < self.d:
            raise ValidationError(
                f"lem4_train == {self.lem4_train}, must be >= d == {self.d} (an invertible Sigma_hat)"
            )
