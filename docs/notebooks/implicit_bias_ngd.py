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
# # Implicit bias of normalised GD: the key figure of implicit-bias-ngd, small
#
# Fig. 2 of the paper ([theory page](../theory/implicit-bias-ngd.md)): on Example 1 data with the decoder fixed, the
# attention weights $W_t$ of gradient descent and of normalised GD both turn towards the solution $W_{\mathrm{mm}}$ of
# the W-SVM (theory page §5), NGD much faster. This notebook rebuilds that panel at a small size (a few seconds on a
# CPU); `attnlab run implicit-bias.fig2` runs the full experiment with its checks.
#
# The notebook is a plain Python file in jupytext's percent format ([implicit_bias_ngd.py](implicit_bias_ngd.py)): run it with `python`, or
# open it as a notebook with `jupytext --to ipynb implicit_bias_ngd.py`. The site runs it when it is built and shows what it
# prints and draws; `tests/test_notebooks.py` runs it too and checks what its last cell says.

# %%
import matplotlib.pyplot as plt

import attnlab as al

STEPS = 300  # the figure's horizon; the experiment runs longer
data = al.data.example1(n=8, T=6, d=32, seed=0)  # X (n, T, d), Z (n, d), y (n,), v (d,)
W_mm = al.svm.attention_svm(data, norm="fro").W  # (d, d): the direction both methods should reach

# %%
frames = {}
for name, optimizer in (("GD", "gd:lr=1.0"), ("NGD", "ngd:lr=0.1")):
    model = al.models.Combined(d=data.d)
    result = al.train(
        model,
        optimizer,
        data,
        loss="exp",
        steps=STEPS,
        record_every=10,
        metrics=[al.metrics.alignment(W_mm)],
        progress=False,
    )
    frames[name] = result.frame

# %%
figure, axes = plt.subplots(figsize=(5, 3.5))
for name, frame in frames.items():
    axes.plot(frame["step"], frame["alignment"], label=name)
axes.set_xlabel("step t")
axes.set_ylabel("corr(W_t, W_mm)")
axes.set_title("Example 1, fixed decoder (fig. 2, small)")
axes.legend()
figure.tight_layout()

# %% [markdown]
# NGD's alignment with $W_{\mathrm{mm}}$ is above 0.99 within about 100 steps; GD's is still below 0.98 at step 300
# (`tests/test_notebooks.py` runs this notebook and checks both).

# %%
final = {name: float(frame["alignment"].iloc[-1]) for name, frame in frames.items()}
print(final)
