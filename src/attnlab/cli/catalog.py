"""Names, papers and one-line summaries of the named experiments, read without importing them.

Importing the experiment modules loads torch, cvxpy, pandas, matplotlib and scikit-learn (seconds); ``attnlab list``
needs none of that, so it reads this table. ``tests/cli/test_catalog.py`` checks the table against the registry of
:mod:`attnlab.experiments` and, when an experiment is added, renamed or re-summarised, prints the table to paste.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["EXPERIMENTS", "Entry", "list_entries"]


class Entry(NamedTuple):
    """One named experiment as ``attnlab list`` shows it."""

    name: str
    paper: str
    summary: str


EXPERIMENTS: tuple[Entry, ...] = (
    Entry("diffusion.gmm", "softmax-ntk-diffusion", "P8: softmax-NTK score estimation for a Gaussian mixture"),
    Entry("flagship", "implicit-bias-ngd", "Example 1: W-SVM, GD and NGD from zero, alignment and norm vs step"),
    Entry(
        "implicit-bias.fig2",
        "implicit-bias-ngd",
        "Fig. 2: GD / NGD / NGD-mom / Polyak on Example 1 (fixed decoder): loss, norm, softmax, alignment",
    ),
    Entry(
        "implicit-bias.fig3", "implicit-bias-ngd", "Fig. 3: GD / NGD / Polyak / NGD-joint training (u, W) jointly on DM"
    ),
    Entry("implicit-bias.fig5", "implicit-bias-ngd", "Fig. 5: as Fig. 2 with antipodal optimal tokens"),
    Entry(
        "implicit-bias.rates",
        "implicit-bias-ngd",
        "Spec §8 items 1-12: norm growth, gradient correlation, global directional convergence, Lemma 1 slope, "
        "Lemma 5, Polyak bounds, GD vs NGD, joint t^(1/3) loss rate, log norm growth, u-alignment",
    ),
    Entry(
        "kq-nuclear.x1",
        "kq-nuclear-norm",
        "X1: RK4 flow on diagonal K,Q against the closed form beta = omega0^2 sinh(B phi) (Lemma A.1)",
    ),
    Entry(
        "kq-nuclear.x2",
        "kq-nuclear-norm",
        "X2: diagonal K,Q converges to the l1-SVM, beta trained directly to the l2-SVM; approximate KKT",
    ),
    Entry(
        "kq-nuclear.x3",
        "kq-nuclear-norm",
        "X3: full K,Q (nuclear-norm SVM) vs combined W (Frobenius SVM) on random A1/A2 data",
    ),
    Entry(
        "kq-nuclear.x4",
        "kq-nuclear-norm",
        "X4: aligned initialisation stays aligned (Lemma 5.1); the limit's spectrum against program (9)",
    ),
    Entry(
        "kq-nuclear.x5",
        "kq-nuclear-norm",
        "X5: sweep the score gap across Assumption 3; does the diagonal flow reach the l1-SVM direction?",
    ),
    Entry(
        "mirror-descent.e1",
        "mirror-descent-lp",
        "E1: normalised l_p-AttGD on 100 data sets, the q x p grid of dB_p(W^mm_q, W_k), selectivity, monotone dB, "
        "log norm growth and the per-step norm bounds of plain MD",
    ),
    Entry(
        "mirror-descent.e2",
        "mirror-descent-lp",
        "E2: one path of (W[1,2], W[3,4]) under normalised l_p-AttGD from 0 against the l_p-AttSVM ray",
    ),
    Entry(
        "mirror-descent.e3",
        "mirror-descent-lp",
        "E3: l_p-JointGD of (W, v) on the toy set: softmax and logistic probability, paths against both SVM rays",
    ),
    Entry(
        "multi-token.equivalence",
        "multi-token",
        "ReLU head: trained W against the SVM-equivalence, set-direction and one-token SVMs, d in 4..10",
    ),
    Entry("ntk.lazy", "softmax-ntk-diffusion", "P1-P6: lazy training of the softmax network across widths"),
    Entry("ntk.table1", "softmax-ntk-diffusion", "P7: width and iterations needed vs n, softmax vs ReLU vs exp"),
    Entry(
        "real.digits-vit",
        "implicit-bias-ngd",
        "SGD, SNGD, SPS, Adam, l_p-MD (p=1.1,2,3) train a small ViT on sklearn's 8x8 digits, 5 seeds",
    ),
    Entry(
        "real.text",
        "mirror-descent-lp",
        "SGD, SNGD, SPS, Adam, l_p-MD (p=1.1,2,3) train the E4 text encoder on a keyword task or aclImdb",
    ),
    Entry(
        "regression.fig1",
        "preconditioned-regression",
        "population loss vs t: Algorithm 1 from the spectral start vs SGD from a random start",
    ),
    Entry(
        "regression.fig2",
        "preconditioned-regression",
        "population loss vs t from one random start: Algorithm 1, SGD, Adam and the ablations",
    ),
    Entry(
        "regression.scaling",
        "preconditioned-regression",
        "data-compute scaling law: population excess loss vs n and T (Theorem 2)",
    ),
    Entry(
        "regression.theory", "preconditioned-regression", "every row of the theorem table (spec §8) as a measured check"
    ),
)


def list_entries(paper: str | None = None) -> list[Entry]:
    """The entries sorted by name; ``paper`` filters by paper or name prefix (as ``list_experiments`` does)."""
    entries = sorted(EXPERIMENTS)
    if paper is not None and paper != "all":
        entries = [e for e in entries if e.paper == paper or e.name.split(".")[0] == paper]
    return entries
