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
# # Mirror descent picks its own l_p geometry: the key figure of mirror-descent-lp, small
#
# Fig. 4 of the paper ([theory page](../theory/mirror-descent-lp.md)): train the attention weights $W$ of a
# fixed-head softmax model with normalised $\ell_p$ mirror descent (theory page §4) for $p \in \{1.75, 2, 3\}$, then
# measure how far the last iterate's direction is from the solution $W^{\mathrm{mm}}_q$ of the $\ell_q$ attention SVM
# (§5) for each $q$ in the same set, with the directional Bregman divergence $\mathrm{dB}_p(W^{\mathrm{mm}}_q, W_K)$ of
# §3. Theory page §8, predictions 2 and 4: mirror descent with potential $p$ converges in direction to the
# $\ell_p$-SVM, so in each row of the $q \times p$ grid the divergence is smallest on the diagonal, $q = p$. The
# theorem needs the selected tokens (the argmax of the final softmax, §6) to be locally optimal (§5, Definition 3);
# the full experiment checks that per data set, this notebook takes the median over all six. It runs at a small size
# (about fifteen seconds on a CPU); `attnlab run mirror-descent.e1` runs the full experiment (100 data sets) with its
# checks.
#
# The notebook is a plain Python file in jupytext's percent format ([mirror_descent_lp.py](mirror_descent_lp.py)): run it with `python`, or
# open it as a notebook with `jupytext --to ipynb mirror_descent_lp.py`. The site runs it when it is built and shows what it
# prints and draws; `tests/test_notebooks.py` runs it too and checks what its last cell says.

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch

import attnlab as al

PS = (1.75, 2.0, 3.0)  # the mirror-map exponents p, and the SVM exponents q of the grid
STEPS = {1.75: 150, 2.0: 150, 3.0: 300}  # larger p converges in direction more slowly
datasets = [al.data.unit_gaussian(n=6, T=8, d=10, seed=seed) for seed in range(1, 7)]  # X (n, T, d), Z (n, d)
data = al.data.stack(datasets)  # the six data sets on a leading runs axis R
W0 = torch.randn(len(datasets), 10, 10, generator=torch.Generator().manual_seed(0), dtype=torch.float64)

# %%
last = {}
for p in PS:
    model = al.models.Combined(d=10, W0=W0)  # W (R, d, d), one run per data set; the head v stays fixed
    optimizer = f"md:{p},lr=1.0"  # normalised l_p mirror descent (the default of "md", theory page §4)
    al.train(model, optimizer, data, loss="logistic", steps=STEPS[p], record_every=STEPS[p], progress=False)
    last[p] = model.W.detach()  # (R, d, d)

# %%
divergence = np.zeros((len(PS), len(PS)))  # rows: trained p; columns: SVM q; median over the data sets
for i, p in enumerate(PS):
    X, Z = data.X, data.Z  # (R, n, T, d), (R, n, d)
    select = al.models.functional.attention_probabilities(X, last[p], Z).argmax(-1)  # (R, n): §6, the final softmax
    for j, q in enumerate(PS):
        W_mm = torch.stack(
            [al.svm.attention_svm(one, norm="fro" if q == 2 else q, select=s).W for one, s in zip(datasets, select)]
        )  # (R, d, d): the l_q-SVM of each data set for its selection (§5; q = 2 is the Frobenius QP)
        divergence[i, j] = float(al.metrics.directional_bregman(W_mm, last[p], p).median())

# %%
figure, axes = plt.subplots(figsize=(4.8, 3.8))
image = axes.imshow(np.log10(divergence), cmap="viridis")
for (i, j), value in np.ndenumerate(divergence):
    axes.text(j, i, f"{value:.3f}", ha="center", va="center", color="white")
axes.set_xticks(range(len(PS)), [f"{q:g}" for q in PS])
axes.set_yticks(range(len(PS)), [f"{p:g}" for p in PS])
axes.set_xlabel("SVM exponent q")
axes.set_ylabel("mirror descent p")
axes.set_title("median $dB_p(W^{mm}_q, W_K)$ (fig. 4, small)", fontsize=10)
figure.colorbar(image, label="log10 of the divergence")
figure.tight_layout()

# %% [markdown]
# Each row's smallest divergence sits on the diagonal: $\ell_p$ mirror descent is closest to the $\ell_p$-SVM, for each
# of the three $p$ (`tests/test_notebooks.py` runs this notebook and checks it, row by row).

# %%
closest = {p: PS[int(np.argmin(row))] for p, row in zip(PS, divergence)}
print(np.round(divergence, 4), closest)
