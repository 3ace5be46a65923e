"""Experiments of the implicit-bias / fast-rates paper: Figs. 2, 3, 5 and the rate predictions of §8.

Spec: docs/theory/implicit-bias-ngd.md §9 (figures; every number there is a proposal [L]), §8 (predictions 1-13),
§4 (algorithms A1-A7), §5 (W-SVM, u-SVM), §6 (Example 1, DM). One module per figure or theorem group:
:mod:`.fixed_decoder` (Figs. 2, 5; the paper's remarks about them in :mod:`.remarks`), :mod:`.joint` (Fig. 3),
:mod:`.rates` with :mod:`.rates_fixed` and :mod:`.rates_joint` (§8), :mod:`.assumptions` (the hypotheses of §6-7 as
Lemmas 4, 8, 11); :mod:`.falsifiers` holds the wrong mechanisms
their checks must fail under. Importing the package registers the experiments and the paper's results (the
coverage table of the theory page).
"""

from attnlab.experiments.coverage import register_results
from attnlab.experiments.implicit_bias.assumptions import AssumptionsConfig
from attnlab.experiments.implicit_bias.common import PAPER
from attnlab.experiments.implicit_bias.fixed_decoder import Fig2Config, Fig5Config
from attnlab.experiments.implicit_bias.joint import Fig3Config
from attnlab.experiments.implicit_bias.rates import RatesConfig
from attnlab.verify import PaperResult

__all__ = ["AssumptionsConfig", "Fig2Config", "Fig3Config", "Fig5Config", "RatesConfig"]

register_results(
    PAPER,
    (
        PaperResult("001:Thm1", "NGD converges globally in direction to W_mm at rate O~(1/t)"),
        PaperResult("001:Lem1", "softmax saturation: 1 - phi_opt falls like exp(-||W_t|| / ||W_mm||)"),
        PaperResult("001:Lem2", "key correlation: -grad L correlates with W_mm at least (1 - eps) as with W"),
        PaperResult("001:Thm2", "joint training: the loss falls like exp(-c t^(1-alpha))"),
        PaperResult("001:Thm3", "joint training: W_t converges in direction to W_mm"),
        PaperResult("001:Thm4", "joint training: u_t converges in direction to u_mm with a margin fraction"),
        PaperResult(
            "001:Lem3",
            "PL-like, log-Lipschitz and second-order self-bounded loss along joint training",
            "unit",
            "tests/experiments/test_implicit_bias_lemmas.py: the PL-like bound ||grad_u L|| >= L (phi_min - (1 - "
            "phi_min) beta) / ||u_mm|| and the self-bound ||grad^2 L|| <= L max_i (||grad z_i||^2 + ||grad^2 z_i||) "
            "against autograd (constants ours [D], the paper's were lost); both hold at every point where Lemma 13 "
            "(iii) does, so no training mechanism can fail them along a run (the PL row of implicit-bias.rates was "
            "retired for that). The log-Lipschitz bullet is not tested: it needs consecutive iterates of A6",
        ),
        PaperResult("001:Lem4", "a small initialisation keeps every initial softmax logit small, linear in its scale"),
        PaperResult("001:Lem5", "a sample with violated SVM constraints never loses optimal-token probability"),
        PaperResult(
            "001:Lem6",
            "the negative gradient correlates with W_mm: a lower bound for every W",
            "unit",
            "tests/experiments/test_implicit_bias_landscape.py: <-grad L, W_mm_bar> 2 B^2 ||W_mm|| / ||grad L|| >= 1 at "
            "500 random W (norms 1e-2 to 1e2) of the rates data, against autograd on a plain re-implementation, for "
            "the exponential and logistic losses, head scales and temperatures; it holds at every W for every loss of "
            "its class, so no mechanism of the landscape within its hypotheses can fail it (the row lemma6 of "
            "implicit-bias.rates, read along the NGD path, was retired on 2026-11-30 for that)",
        ),
        PaperResult("001:Lem7", "NGD's iterate norm grows linearly: eta t / (2 B^2 ||W_mm||) <= ||W_t|| <= eta t"),
        PaperResult("001:Lem8", "Example 1 satisfies Assumptions 1 and 2 with high probability once d is large"),
        PaperResult("001:Thm6", "GD converges globally in direction too, with ||W_t|| = Theta(log t)"),
        PaperResult("001:Thm7", "Polyak's step converges in direction like NGD; its step length is bounded"),
        PaperResult("001:Lem11", "DM's tokens are nearly orthogonal with high probability once d is large"),
        PaperResult("001:Lem12", "joint training: ||W_t|| grows like log t"),
        PaperResult("001:Lem13", "joint invariants: bounded loss ratios, growing score gaps, phi_opt >= 1/2"),
        PaperResult("001:Lem14", "the attention outputs are separable by the head's direction along joint training"),
        PaperResult(
            "001:Lem15",
            "a lower bound on ||grad L|| and an upper bound on the Hessian (Lemma 3's proof)",
            "unit",
            "tests/experiments/test_implicit_bias_lemmas.py: the gradient bound (eq. 52) and the Hessian bound against "
            "autograd on a plain re-implementation of the model, with our [D] constants (Deora et al.'s C(||u||) and "
            "the paper's constants were lost)",
        ),
    ),
)
