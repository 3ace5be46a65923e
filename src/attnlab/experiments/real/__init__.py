"""The optimizers on real attention models and real data: the experiments ``real.digits-vit`` and ``real.text``.

Spec: implicit-bias-ngd §4 A8 and §9 (SGD, SNGD, SPS, Adam on BERT and ViTs), mirror-descent-lp §9 E4-E5 (l_p
mirror descent on an IMDb encoder and a ViT). Importing this package registers ``real.digits-vit`` and
``real.text``. The models, loaders, training loop and probes they are built from are the library
:mod:`attnlab.nets`, and so is the comparison of optimizers (:mod:`attnlab.nets.compare`).
"""

from attnlab.experiments.real.digits_vit import DigitsViTConfig, build_digits_vit, run_digits_vit
from attnlab.experiments.real.summary import paper_checks
from attnlab.experiments.real.text import TextConfig, build_text, run_text

__all__ = [
    "DigitsViTConfig",
    "TextConfig",
    "build_digits_vit",
    "build_text",
    "paper_checks",
    "run_digits_vit",
    "run_text",
]
