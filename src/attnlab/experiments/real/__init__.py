"""The optimizers on real attention models and real data: a training harness, a ViT, a text encoder, data.

Spec: implicit-bias-ngd §4 A8 and §9 (SGD, SNGD, SPS, Adam on BERT and ViTs), mirror-descent-lp §9 E4-E5 (l_p
mirror descent on an IMDb encoder and a ViT). Importing this package registers ``real.digits-vit`` and
``real.text``.

Use the harness on any model::

    from attnlab.experiments.real import fit, make_optimizer
    history = fit(model, make_optimizer("md-1.1", model.parameters(), lr=0.2), split,
                  epochs=10, batch_size=32, seed=0, checkpoint="run.pt")
"""

from attnlab.experiments.real.compare import Comparison, Setup, Trial, compare_optimizers
from attnlab.experiments.real.digits_vit import DigitsViTConfig, build_digits_vit, run_digits_vit
from attnlab.experiments.real.summary import paper_checks, summary_table
from attnlab.experiments.real.text import TextConfig, build_text, run_text
from attnlab.nets.classifier import History, evaluate, fit, layer_norms
from attnlab.nets.datasets.aclimdb import TextSplit, Vocabulary, load_aclimdb, read_aclimdb, tokenize
from attnlab.nets.datasets.digits import load_digits_split
from attnlab.nets.datasets.keywords import KeywordTask, keyword_task
from attnlab.nets.datasets.split import Split, train_test_split
from attnlab.nets.encoder import Encoder, EncoderBlock, SelfAttention, attention_weights
from attnlab.nets.optimizers import make_optimizer, parse_optimizer
from attnlab.nets.probes import first_token_attention, hoyer_sparsity, projection_entries
from attnlab.nets.text_encoder import TextEncoder
from attnlab.nets.vit import ViT

__all__ = [
    "Comparison",
    "DigitsViTConfig",
    "Encoder",
    "EncoderBlock",
    "History",
    "KeywordTask",
    "SelfAttention",
    "Setup",
    "Split",
    "TextConfig",
    "TextEncoder",
    "TextSplit",
    "Trial",
    "ViT",
    "Vocabulary",
    "attention_weights",
    "build_digits_vit",
    "build_text",
    "compare_optimizers",
    "evaluate",
    "first_token_attention",
    "fit",
    "hoyer_sparsity",
    "keyword_task",
    "layer_norms",
    "load_aclimdb",
    "load_digits_split",
    "make_optimizer",
    "paper_checks",
    "parse_optimizer",
    "projection_entries",
    "read_aclimdb",
    "run_digits_vit",
    "run_text",
    "summary_table",
    "tokenize",
    "train_test_split",
]
