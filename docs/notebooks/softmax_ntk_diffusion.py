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
# # Lazy training of the two-layer softmax network: the key figure of softmax-ntk-diffusion, small
#
# The paper ([theory page](../theory/softmax-ntk-diffusion.md)) has no experiments; this is the picture of its main
# theorem (our experiment `ntk.lazy`). A two-layer network with a softmax over its $m$ hidden neurons (theory page
# §2), started symmetrically so that its output is zero (§2.1), is fitted to random targets by full-batch gradient
# descent with the practical step $c / (m\, \lambda_{\max}(H^*))$ (§8). Theorem 4.2 (§5, Lemma 5.3) says that, once
# $m$ is large, the squared error falls geometrically while every neuron's weights move only by about $1/m$: the
# network trains "lazily", in its neural-tangent-kernel regime (§4). The figure shows the error and the
# root-mean-square movement of a neuron's weights, $\sqrt{\operatorname{mean}_r \|w_r(t) - w_r(0)\|^2}$, at three
# widths. This notebook runs a small size (a few seconds on a CPU); `attnlab run ntk.lazy` runs the full experiment
# with its checks (the largest movement over neurons, the kernel's drift, the coupling to kernel regression).
#
# The notebook is a plain Python file in jupytext's percent format ([softmax_ntk_diffusion.py](softmax_ntk_diffusion.py)): run it with `python`, or
# open it as a notebook with `jupytext --to ipynb softmax_ntk_diffusion.py`. The site runs it when it is built and shows what it
# prints and draws; `tests/test_notebooks.py` runs it too and checks what its last cell says.

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch

import attnlab as al

WIDTHS, STEPS = (250, 1000, 4000), 1000
generator = torch.Generator().manual_seed(0)
X = torch.randn(12, 5, generator=generator, dtype=torch.float64)  # n = 12 inputs in d_in = 5
X = X / X.norm(dim=1, keepdim=True)  # on the unit sphere (the theory's ||x_i|| <= 1)
Y = torch.randn(12, 3, generator=generator, dtype=torch.float64)  # d_out = 3 targets per input
Y = Y / Y.norm(dim=1, keepdim=True)


def movement_from(W0):
    """A metric of the state: the typical neuron's movement, sqrt(mean_r ||w_r(t) - w_r(0)||^2), from W0 (d_in, m)."""
    return lambda state: float((state["W"] - W0).norm(dim=0).pow(2).mean().sqrt())


# %%
frames = {}
for m in WIDTHS:
    net = al.ntk.SoftmaxMLP(5, 3, m, sigma_w=1.0, seed=1)  # W (d_in, m) symmetric at init, a (d_out, m) fixed
    lr = al.ntk.practical_step(net, X, c=0.5)  # c / (m lambda_max(H*)), theory page §8
    metrics = {"rms_movement": movement_from(net.W.detach().clone())}
    result = al.training.ntk.gradient_descent(net, X, Y, lr=lr, steps=STEPS, record_every=20, metrics=metrics)
    frames[m] = result.frame  # step, sq_error ||F - Y||^2, weight_movement (the largest), rms_movement

# %%
figure, axes = plt.subplots(1, 2, figsize=(9, 3.5))
for m, frame in frames.items():
    axes[0].semilogy(frame["step"], frame["sq_error"], label=f"m = {m}")
    axes[1].plot(frame["step"], m * frame["rms_movement"], label=f"m = {m}")
axes[0].set(xlabel="GD step t", ylabel=r"$\|F(t) - Y\|^2$", title="the error falls geometrically")
axes[1].set(xlabel="GD step t", ylabel=r"$m \times$ rms of $\|w_r(t) - w_r(0)\|$", title="weights move like 1/m")
for ax in axes:
    ax.legend()
figure.tight_layout()

# %% [markdown]
# At every width the squared error falls by more than a factor of 100 in 1000 steps, while the typical neuron's
# movement (its largest over the run) shrinks like $1/m$: its log-log slope in $m$ is within 0.15 of $-1$ (on the
# right, $m$ times the movement stays of one size across a 16-fold range of widths). `tests/test_notebooks.py` runs
# this notebook and checks both.

# %%
error_drop = {m: float(frame["sq_error"].iloc[0] / frame["sq_error"].iloc[-1]) for m, frame in frames.items()}
moved = [float(frames[m]["rms_movement"].max()) for m in WIDTHS]
slope = float(np.polyfit(np.log(WIDTHS), np.log(moved), 1)[0])  # d log(movement) / d log(m); lazy: -1
print({"error drop per width": error_drop, "rms movement per width": moved, "slope in m": slope})
