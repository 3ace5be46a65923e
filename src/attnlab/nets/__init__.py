"""Real attention models as a library: a ViT, a text encoder, their loaders, a classifier training loop, probes,
and a comparison of optimizers with its summary table (its figures are :mod:`attnlab.nets.figures`).

Spec: implicit-bias-ngd §4 A8 and §9 (SGD, SNGD, SPS, Adam on BERT and ViTs), mirror-descent-lp §9 E4-E5 (l_p
mirror descent on an IMDb encoder and a ViT). The experiments ``real.digits-vit`` and ``real.text``
(:mod:`attnlab.experiments.real`) are built from these pieces; so is any study of your own::

    from attnlab.nets import ViT, fit_classifier, make_optimizer
    from attnlab.nets.datasets import load_digits_split
    model = ViT()
    history = fit_classifier(model, make_optimizer("md:1.1,normalized=false", model.parameters(), lr=0.2), load_digits_split(),
                             epochs=10, batch_size=32, seed=0, checkpoint="run.pt")
"""

from attnlab.nets.chance import at_chance, binomial_se, chance_bound, majority_rate
from attnlab.nets.classifier import evaluate, fit_classifier, layer_norms
from attnlab.nets.compare import Comparison, ComparisonConfig, Setup, Trial, compare_optimizers, summary_table
from attnlab.nets.encoder import Encoder, EncoderBlock, SelfAttention, attention_weights
from attnlab.nets.optimizers import make_optimizer, optimizer_kind, parse_optimizer
from attnlab.nets.probes import first_token_attention, hoyer_sparsity, projection_entries
from attnlab.nets.shared_forward import shareable, shared_encodings
from attnlab.nets.stacked import fit_stacked
from attnlab.nets.text_encoder import TextEncoder
from attnlab.nets.trials import train_trials
from attnlab.nets.tuning import tune_rates
from attnlab.nets.vit import ViT

__all__ = [
    "Comparison",
    "ComparisonConfig",
    "Setup",
    "Trial",
    "compare_optimizers",
    "summary_table",
    "Encoder",
    "EncoderBlock",
    "SelfAttention",
    "TextEncoder",
    "ViT",
    "at_chance",
    "attention_weights",
    "binomial_se",
    "chance_bound",
    "evaluate",
    "first_token_attention",
    "fit_classifier",
    "fit_stacked",
    "hoyer_sparsity",
    "layer_norms",
    "majority_rate",
    "make_optimizer",
    "optimizer_kind",
    "parse_optimizer",
    "projection_entries",
    "shareable",
    "shared_encodings",
    "train_trials",
    "tune_rates",
]
