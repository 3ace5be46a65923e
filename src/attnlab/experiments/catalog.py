"""Every named experiment, written once: its name, its paper, the module that defines it and its summary.

This module imports nothing heavy (no torch, cvxpy, pandas or matplotlib), so ``attnlab list`` reads it in
milliseconds; :func:`~attnlab.experiments.get_experiment` imports only the module that defines the experiment it
is asked for. An experiment module registers its experiments with
``register(Experiment(name=..., config_type=..., run=..., quick=...))`` and takes the paper and the summary from
here; ``tests/experiments/test_catalog.py`` checks that each module registers the entries that name it.
"""

from __future__ import annotations

from typing import NamedTuple

from attnlab._errors import ValidationError  # not attnlab._validation, which loads torch

__all__ = ["EXPERIMENTS", "PAPER_IDS", "Entry", "find_entry", "list_entries"]


# Paper ids used in result names ("001:Thm1"): the seed papers by the number of their theory page.
PAPER_IDS = {
    "preconditioned-regression": "000",
    "implicit-bias-ngd": "001",
    "mirror-descent-lp": "002",
    "kq-nuclear-norm": "003",
    "softmax-ntk-diffusion": "004",
}


class Entry(NamedTuple):
    """One named experiment as ``attnlab list`` shows it.

    Attributes
    ----------
    name : str
        Dotted name, ``"<paper>.<figure or check>"``.
    paper : str
        Stem of the theory page it reproduces (``docs/theory/<paper>.md``).
    module : str
        The module under :mod:`attnlab.experiments` whose import registers it (``"implicit_bias"``).
    summary : str
        One line for ``attnlab list``.
    """

    name: str
    paper: str
    module: str
    summary: str


EXPERIMENTS: tuple[Entry, ...] = (
    Entry(
        "diffusion.gmm",
        "softmax-ntk-diffusion",
        "ntk",
        "P8: softmax-NTK score estimation for a Gaussian mixture (Theorem 6.6)",
    ),
    Entry(
        "flagship",
        "implicit-bias-ngd",
        "flagship",
        "Example 1: W-SVM, GD and NGD from zero, alignment and norm vs step",
    ),
    Entry(
        "implicit-bias.assumptions",
        "implicit-bias-ngd",
        "implicit_bias",
        "Lemmas 4, 8, 11 over draws: initial logits linear in the init scale and under their union bound; the share "
        "of Example-1 and DM draws meeting the near-orthogonality assumptions as d grows",
    ),
    Entry(
        "implicit-bias.fig2",
        "implicit-bias-ngd",
        "implicit_bias",
        "Fig. 2: GD / NGD / NGD-mom / Polyak on Example 1 (fixed decoder): loss, norm, softmax, alignment",
    ),
    Entry(
        "implicit-bias.fig3",
        "implicit-bias-ngd",
        "implicit_bias",
        "Fig. 3: GD / NGD / Polyak / NGD-joint training (u, W) jointly on DM",
    ),
    Entry(
        "implicit-bias.fig5", "implicit-bias-ngd", "implicit_bias", "Fig. 5: as Fig. 2 with antipodal optimal tokens"
    ),
    Entry(
        "implicit-bias.rates",
        "implicit-bias-ngd",
        "implicit_bias",
        "implicit-bias-ngd theory page §8, items 1-13: norm growth, gradient correlation, global directional convergence (NGD, Polyak), Lemma 1 slope, Lemma 5, Polyak bounds, GD vs NGD, joint t^(1/3) loss rate, log norm growth, u-alignment",
    ),
    Entry(
        "kq-nuclear.x1",
        "kq-nuclear-norm",
        "kq_nuclear",
        "X1: RK4 flow on diagonal K,Q against the closed form beta = omega0^2 sinh(B phi) (Lemma A.1) and the (w+, w-) flow (Lemma 4.1)",
    ),
    Entry(
        "kq-nuclear.x2",
        "kq-nuclear-norm",
        "kq_nuclear",
        "X2: diagonal K,Q converges to the l1-SVM, beta trained directly to the l2-SVM; approximate KKT",
    ),
    Entry(
        "kq-nuclear.x3",
        "kq-nuclear-norm",
        "kq_nuclear",
        "X3: full K,Q (nuclear-norm SVM) vs combined W (Frobenius SVM) on random A1/A2 data",
    ),
    Entry(
        "kq-nuclear.x4",
        "kq-nuclear-norm",
        "kq_nuclear",
        "X4: aligned initialisation stays aligned (Lemma 5.1); the limit's spectrum against program (9)",
    ),
    Entry(
        "kq-nuclear.x5",
        "kq-nuclear-norm",
        "kq_nuclear",
        "X5: sweep the score gap across Assumption 3; does the diagonal flow reach the l1-SVM direction?",
    ),
    Entry(
        "mirror-descent.bounds",
        "mirror-descent-lp",
        "mirror_descent",
        "Lemmas 13, 16, 18: the Bregman divergence's power on the unit l_p sphere, the risk's two constants and a "
        "gradient bounded uniformly in W",
    ),
    Entry(
        "mirror-descent.cone",
        "mirror-descent-lp",
        "mirror_descent",
        "Lemmas 19-21 in the cone of the optimal tokens' l_p-AttSVM: normalised score gaps, the gradient's "
        "correlation with W^mm and its ratio to the correlation with W, over radii",
    ),
    Entry(
        "mirror-descent.e1",
        "mirror-descent-lp",
        "mirror_descent",
        "E1: normalised l_p-AttGD on 100 data sets, the q x p grid of dB_p(W^mm_q, W_k), selectivity, monotone dB, log norm growth and the per-step norm bounds of plain MD",
    ),
    Entry(
        "mirror-descent.e2",
        "mirror-descent-lp",
        "mirror_descent",
        "E2: one path of (W[1,2], W[3,4]) under normalised l_p-AttGD from 0 against the l_p-AttSVM ray",
    ),
    Entry(
        "mirror-descent.e3",
        "mirror-descent-lp",
        "mirror_descent",
        "E3: l_p-JointGD of (W, v) on the toy set: softmax and logistic probability, paths against both SVM rays",
    ),
    Entry(
        "mirror-descent.growth",
        "mirror-descent-lp",
        "mirror_descent",
        "Lemmas 24, 27-30: plain l_p-AttGD from the thin cone over a grid of steps: monotone loss, the correlation "
        "increment (25), cone invariance, the directional error against the norm, Omega(log k) norm growth",
    ),
    Entry(
        "mirror-descent.regpath",
        "mirror-descent-lp",
        "mirror_descent",
        "§8.1: the l_p regularisation path argmin_{||W||_p <= R} L(W) for growing R against the l_q-AttSVMs",
    ),
    Entry(
        "multi-token.equivalence",
        "multi-token",
        "multi_token",
        "ReLU head: trained W against the SVM-equivalence, set-direction and one-token SVMs, d in 4..10",
    ),
    Entry(
        "ntk.lazy",
        "softmax-ntk-diffusion",
        "ntk",
        "Theorem 4.2 and its proof (Lemmas 5.1, 5.3, B-E, Claim 3.4): lazy training of the softmax network across widths",
    ),
    Entry(
        "ntk.table1",
        "softmax-ntk-diffusion",
        "ntk",
        "P7: Corollary 4.3's width vs n, softmax vs ReLU vs exp; what binds (the kernel's concentration)",
    ),
    Entry(
        "real.digits-vit",
        "implicit-bias-ngd",
        "real",
        "SGD, SNGD, SPS, Adam, l_p-MD (p=1.1,2,3) train a small ViT on sklearn's 8x8 digits, 5 seeds",
    ),
    Entry(
        "real.text",
        "mirror-descent-lp",
        "real",
        "SGD, SNGD, SPS, Adam, l_p-MD (p=1.1,2,3) train the E4 text encoder on a keyword task or aclImdb",
    ),
    Entry(
        "regression.context",
        "preconditioned-regression",
        "regression",
        "Appendix D: moments of one query's softmax weights and context statistics given the query, vs n",
    ),
    Entry(
        "regression.fig1",
        "preconditioned-regression",
        "regression",
        "population loss vs t: Algorithm 1 from the spectral start vs SGD from a random start",
    ),
    Entry(
        "regression.fig2",
        "preconditioned-regression",
        "regression",
        "population loss vs t from one random start: Algorithm 1, SGD, Adam and the ablations",
    ),
    Entry(
        "regression.scaling",
        "preconditioned-regression",
        "regression",
        "data-compute scaling law: population excess loss vs n and T (Theorem 2)",
    ),
    Entry(
        "regression.theory",
        "preconditioned-regression",
        "regression",
        "every row of the theorem table (preconditioned-regression theory page §8) as a measured check",
    ),
    Entry(
        "steepest-descent.norms",
        "implicit-bias-ngd",
        "steepest_descent",
        "Extension (not a paper result): sign descent and l_p steepest descent (p=1.5,2,3) align with their own "
        "norm's SVM on Example 1, 3 seeds; Adam without epsilon observed",
    ),
)

_BY_NAME = {entry.name: entry for entry in EXPERIMENTS}


def find_entry(name: str) -> Entry | None:
    """The catalog's entry called ``name``, or ``None`` (an experiment registered from outside the catalog)."""
    return _BY_NAME.get(name)


def list_entries(paper: str | None = None) -> list[Entry]:
    """The entries sorted by name; ``paper`` filters by paper or name prefix (as ``list_experiments`` does).

    Parameters
    ----------
    paper : str, optional
        A paper's theory page name (``implicit-bias-ngd``) or an experiment name prefix (``implicit-bias``);
        ``None`` or ``"all"`` lists every entry.

    Returns
    -------
    list of Entry

    Raises
    ------
    ValidationError
        If ``paper`` matches no entry (an empty list would read as a paper without experiments); the message
        lists the papers, as ``attnlab reproduce --paper`` does.
    """
    entries = sorted(EXPERIMENTS)
    if paper is not None and paper != "all":
        entries = [e for e in entries if e.paper == paper or e.name.split(".")[0] == paper]
        if not entries:
            papers = sorted({e.paper for e in EXPERIMENTS})
            raise ValidationError(f"paper == {paper!r} matches no experiment; papers: {', '.join(papers)}")
    return entries
