"""Experiment ``real.digits-vit``: SGD, SNGD, SPS, Adam and l_p mirror descent train a small ViT on 8x8 digits.

Spec: implicit-bias-ngd §9 fig. 6-7 (ViT on MNIST / CIFAR-10: training loss, layer-norm growth) and
mirror-descent-lp §9 E5 (ViT with l_1.1-MD against Adam). The papers' data sets and sizes do not fit two CPU
cores; scikit-learn's bundled digits and a two-block ViT stand in, so every setting here is ours.
"""

from __future__ import annotations

from dataclasses import dataclass

from attnlab._validation import ValidationError, check_scalar
from attnlab.experiments.real.result import check_pairs, check_seed_counts, code_key, comparison_result
from attnlab.experiments.real.revisions import revised_claims
from attnlab.experiments.real.summary import CLAIMS, paper_checks
from attnlab.experiments.registry import register
from attnlab.nets.chance import majority_rate
from attnlab.nets.compare import ComparisonConfig, Setup, summary_table
from attnlab.nets.datasets.digits import load_digits_split
from attnlab.nets.vit import ViT
from attnlab.verify import Experiment, ExperimentResult, RunContext

__all__ = ["DigitsViTConfig", "run_digits_vit"]

_CLAIMS = revised_claims("real.digits-vit", CLAIMS)


@dataclass(frozen=True)
class DigitsViTConfig(ComparisonConfig):
    """Settings of ``real.digits-vit``; all are ours (the papers train larger ViTs on MNIST and CIFAR-10).

    The optimizers, their rate grids, seeds, epochs, workers and probes are :class:`ComparisonConfig`'s. Each
    optimizer's rate is tuned on its grid before the comparison (``tune_epochs`` epochs of ``tune_seeds`` seeds,
    scored on a validation part of the training set; :func:`~attnlab.nets.tune_rates`).

    Attributes
    ----------
    seed : int
        Seeds the train/test split and the first run.
    epochs, batch_size : int
        Passes over the training images, and images per mini-batch.
    test_fraction : float
        Share of the images held out for testing.
    patch_size, dim, depth, heads, mlp_dim : int
        ViT sizes: 2x2 patches give 16 patch tokens plus the class token.
    dropout : float
        Dropout rate of the encoder blocks.
    seeds : int
        Runs per optimizer, seeded ``seed, seed + 1, ...``; from 1 to 100 (ours: a bound on the run's time), and
        ``seed + seeds - 1 <= 2**63 - 1``.
    tune_seeds : int
        Seeds of each tuning cell, ``seed, seed + 1, ...``; from 1 to 100 (ours), and ``seed + tune_seeds - 1 <= 2**63
        - 1``.
    """

    OURS = (
        "optimizers",
        "lr_grids",
        "tune_epochs",
        "tune_seeds",
        "sngd_cap",
        "epochs",
        "batch_size",
        "patch_size",
        "dim",
        "depth",
        "heads",
        "mlp_dim",
        "dropout",
    )

    tune_epochs: int = 10  # half the epochs, one seed; tuning is on here (ComparisonConfig: off)
    tune_seeds: int = 1
    test_fraction: float = 0.2
    patch_size: int = 2
    dim: int = 32
    depth: int = 2
    heads: int = 2
    mlp_dim: int = 64
    dropout: float = 0.0

    def __post_init__(self) -> None:
        check_pairs("tied_lrs", self.tied_lrs, "(('md:2,normalized=false', sgd),)")
        super().__post_init__()
        check_seed_counts(self)
        for name in ("patch_size", "dim", "depth", "heads", "mlp_dim"):
            check_scalar(name, getattr(self, name), kind=int, low=1)
        check_scalar("test_fraction", self.test_fraction, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
        check_scalar("dropout", self.dropout, low=0.0, high=1.0, high_inclusive=False)
        if 8 % self.patch_size:
            raise ValidationError(f"patch_size == {self.patch_size} must divide the image size 8; use 1, 2, 4 or 8")


def build_digits_vit(config: DigitsViTConfig, seed: int) -> Setup:
    """The digits split (fixed by ``config.seed``) and a ViT initialised from ``seed``, in float32."""
    data = load_digits_split(test_fraction=config.test_fraction, seed=config.seed)
    model = ViT(
        patch_size=config.patch_size,
        dim=config.dim,
        depth=config.depth,
        heads=config.heads,
        mlp_dim=config.mlp_dim,
        dropout=config.dropout,
        seed=seed,
    )
    return Setup(model, data, probe_inputs=data.x_test[: config.probes])


def run_digits_vit(config: DigitsViTConfig, ctx: RunContext) -> ExperimentResult:
    """Train every optimizer for every seed; tables, paper checks and figures."""
    comparison = config.compare(
        build_digits_vit, checkpoint_dir=ctx.out / "checkpoints", bar=ctx.bar, code=code_key(build_digits_vit, config)
    )
    y_test = load_digits_split(test_fraction=config.test_fraction, seed=config.seed).y_test
    chance = majority_rate(y_test)
    summary = summary_table(comparison)
    checks = paper_checks(comparison, summary, chance=chance, language=False, test_size=len(y_test), claims=_CLAIMS)
    notes = ["float32 models (a ViT on real images; no saturation-sensitive theory quantity is measured here)"]
    return comparison_result(comparison, summary, config, checks, notes, grid=(8 // config.patch_size,) * 2)


register(
    Experiment(
        name="real.digits-vit",
        cost=340.0,
        config_type=DigitsViTConfig,
        run=run_digits_vit,
        # quick: 4x4 patches (4 tokens + CLS) make a step cheap enough for 3 epochs, where every optimizer passes
        # test accuracy 0.5 (majority class 0.12); every rate tuned on its grid for the 3 epochs of one seed; the full
        # model's two blocks (with one, attention reads the raw patch embeddings and cannot show selection)
        quick={
            "seeds": 2,
            "epochs": 3,
            "tune_epochs": 3,
            "tune_seeds": 1,
            "workers": 1,
            "patch_size": 4,
            "dim": 16,
            "mlp_dim": 32,
            "depth": 2,
            "batch_size": 64,
            "probes": 2,
        },
        claims=_CLAIMS,
    )
)
