"""Experiments of the softmax-NTK paper (arXiv:2405.03251): lazy training, Table 1 scaling, diffusion score.

Spec: docs/theory/softmax-ntk-diffusion.md §9. The paper has no experiments; every setting here is ours (each config's
``OURS`` lists them all). One module per experiment: ``ntk.lazy`` (P1-P6, Lemma 5.1), ``ntk.table1`` (P7),
``diffusion.gmm`` (P8). Importing the package registers them and the paper's checkable results.
"""

from attnlab.experiments.ntk import gmm, lazy, table1  # noqa: F401
from attnlab.experiments.ntk.gmm_config import GMMConfig
from attnlab.experiments.ntk.lazy import LazyConfig
from attnlab.experiments.ntk.table1 import Table1Config

__all__ = ["GMMConfig", "LazyConfig", "Table1Config"]

from attnlab.experiments.coverage import register_results  # noqa: E402
from attnlab.verify import PaperResult

register_results(
    "softmax-ntk-diffusion",
    (
        PaperResult(
            "004:Def3.7",
            "symmetric initialisation: F(W(0), .) = 0",
            "unit",
            "a definition, tested as a property row of ntk.lazy (F(W(0), x) = 0 to rounding)",
        ),
        PaperResult("004:Def3.6", "the NTK Gram H* and its infinite-width limit I (x) K (spec §4.2, derived)"),
        PaperResult("004:Thm4.2", "GD reaches ||F - Y||^2 <= eps at a geometric rate once m is large enough"),
        PaperResult("004:Cor4.3", "scalar output: width and iterations lambda^-2 n^(2+o(1)) suffice"),
        PaperResult("004:Lem5.1", "weights within R of their start move the kernel by at most R n d e^{O(B)}"),
        PaperResult("004:Lem5.3", "induction: lazy weights, loss factor 1 - m eta lambda / 2, kernel near H*"),
        PaperResult("004:Table1", "softmax needs width and iterations comparable to ReLU and exp"),
        PaperResult(
            "004:ThmF.2", "a kernel perturbation eps_H moves GD's predictions by O(eps_H sqrt(nd) ||Y|| / lambda)"
        ),
        PaperResult("004:Thm6.6", "the GD-trained softmax score estimator's error falls with n and m"),
        PaperResult(
            "004:ClaimG.1",
            "error decomposition: coupling + label mismatch + early stopping + approximation",
            "not checkable",
            "its approximation and label-mismatch terms need the RKHS approximant f*_H and its norm bound R_H, which "
            "the spec does not recover (§10); the coupling term is Theorem F.2's, checked by ntk.lazy P5",
        ),
    ),
)
