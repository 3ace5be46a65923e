# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Separate key and query matrices regularise the nuclear norm: the key figure of kq-nuclear-norm, small
#
# The paper ([theory page](../theory/kq-nuclear-norm.md)) has no figures of its own; this is the picture its theorems
# draw (our experiments X2 and X3). The same attention model is trained three ways on one data set, following the
# gradient flow of the exponential loss with normalised GD (theory page §3): with separate key and query matrices
# $K, Q$ ($W = K Q^\top$), with the combined matrix $W$ itself, and with diagonal $K, Q$
# ($W = \operatorname{diag}(\xi_k \odot \xi_q)$, initialisation (5) of §3.1). Each run's direction is compared with the
# max-margin programs of §4. Theory page §7: $K, Q$ tend to the nuclear-norm SVM (Theorem 5.1, prediction 3), $W$ to
# the Frobenius SVM (prediction 4), and diagonal $K, Q$ to the $\ell_1$-SVM rather than the $\ell_2$ one (Theorem 4.1,
# prediction 2). Theorem 5.1 is proved for the aligned data of Assumption 4 only; these random data are the open
# general case (§10), which experiment X3 probes and this notebook shows. This notebook runs a small size (a few
# seconds on a CPU); `attnlab run kq-nuclear.x3` and `attnlab run kq-nuclear.x2` run the full experiments with their
# checks.
#
# The notebook is a plain Python file in jupytext's percent format ([kq_nuclear_norm.py](kq_nuclear_norm.py)): run it with `python`, or
# open it as a notebook with `jupytext --to ipynb kq_nuclear_norm.py`. The site runs it when it is built and shows what it
# prints and draws; `tests/test_notebooks.py` runs it too and checks what its last cell says.

# %%
import matplotlib.pyplot as plt
import torch

import attnlab as al

data = al.data.scores_equal(n=2, T=3, d=6, gap=3.0, seed=1)  # X (n, T, d), Z (n, d), y (n,), v (d,): A1, A2 hold
svms = {  # the max-margin directions of §4, each (d, d)
    "nuclear": al.svm.attention_svm(data, norm="nuc").W,
    "Frobenius": al.svm.attention_svm(data, norm="fro").W,
    "l1 (diagonal)": al.svm.diagonal_svm(data, p=1).W,
    "l2 (diagonal)": al.svm.diagonal_svm(data, p=2).W,
}
generator = torch.Generator().manual_seed(0)
K0, Q0, W0 = (0.1 * torch.randn(6, 6, generator=generator, dtype=torch.float64) for _ in range(3))

# %%
models = {
    "K, Q": al.models.Factored(6, 6, K0=K0, Q0=Q0),
    "W": al.models.Combined(6, W0=W0),
    "diagonal K, Q": al.models.Diagonal(6, omega=0.1),
}
paths = {}
for name, model in models.items():
    flow = al.flow.gradient_flow(model, data, step=0.5, steps=500, record_every=10, progress=False)
    paths[name] = flow.path  # "step" (S,), "W" (S, d, d): W = K Q^T of each recorded step
correlation = {  # corr(W_t, W_svm) along each path, (S,) per pair
    (name, svm): al.metrics.cosine(path["W"], W_svm) for name, path in paths.items() for svm, W_svm in svms.items()
}

# %%
figure, axes = plt.subplots(1, 2, figsize=(9, 3.5))
pairs = (
    (axes[0], ("K, Q", "W"), ("nuclear", "Frobenius")),
    (axes[1], ("diagonal K, Q",), ("l1 (diagonal)", "l2 (diagonal)")),
)
for ax, names, targets in pairs:
    for name in names:
        for svm, color in zip(targets, ("C0", "C1")):
            style = "--" if name == "W" else "-"
            gap = (1 - correlation[name, svm]).clamp(min=1e-12)
            ax.semilogy(paths[name]["step"], gap, style, color=color, label=f"{name} to the {svm} SVM")
    ax.set_xlabel("normalised-GD step t (arc length 0.5 each)")
    ax.set_ylabel(r"$1 - \mathrm{corr}(W_t, W_{svm})$")
    ax.legend(fontsize=8)
axes[0].set_title("full weights")
axes[1].set_title("diagonal weights")
figure.tight_layout()

# %% [markdown]
# At the last step, $K, Q$ are within $10^{-3}$ of the nuclear-norm SVM's direction (correlation) and $W$ within
# $10^{-3}$ of the Frobenius SVM's, each further from the other program; diagonal $K, Q$ are within $10^{-3}$ of the
# $\ell_1$-SVM and further from the $\ell_2$ one (`tests/test_notebooks.py` runs this notebook and checks all three).

# %%
final = {pair: float(value[-1]) for pair, value in correlation.items()}  # corr(W_K, W_svm) at the last step
print({f"{name} / {svm}": round(value, 4) for (name, svm), value in final.items()})
