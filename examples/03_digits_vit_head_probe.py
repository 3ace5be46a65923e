"""03: a real model: the digits ViT trained with SGD and with normalised GD, one head's W probed during training.

Run: ``python examples/03_digits_vit_head_probe.py [--out DIR]`` (about 21 minutes wall for both optimizers on two
shared cores, docs/tutorial/your-model.md; ``--small`` or ``ATTNLAB_EXAMPLE_SMALL=1``: a few seconds, for tests). Writes ``head_probe.csv`` (one row per optimizer, step and
head) and ``head_probe.png`` (alignment of the class-token head with its attention SVM, softmax mass on the
selected tokens, ||W||, against the step).

The probe (:class:`attnlab.probe.HeadProbe`) reads head 0 of the last block as attnlab's ``W`` (``head_W``), feeds
a fixed batch of test images through the model, takes the tokens entering that block's attention and the class
token as the query, selects for each image the token the head attends to most, solves the Frobenius attention
SVM of that selection on those tokens and records ``cos(W, W_svm)``.
Spec: implicit-bias-ngd §5 (W-SVM, alignment), §8.3 (NGD aligns fast), §9 fig. 6-7 (ViT with SGD and SNGD).
"""

import argparse
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from attnlab.nets import ViT, fit_classifier, make_optimizer  # noqa: E402
from attnlab.nets.datasets import load_digits_split, train_test_split  # noqa: E402
from attnlab.probe import HeadProbe  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--small", action="store_true", default=os.environ.get("ATTNLAB_EXAMPLE_SMALL") == "1")
parser.add_argument("--out", type=Path, default=Path("runs/examples/03"))
args = parser.parse_args()
args.out.mkdir(parents=True, exist_ok=True)

# Sizes: the real.digits-vit defaults (2x2 patches: 16 patch tokens + class token), 15 epochs; small: a subset.
data = load_digits_split(seed=0)
if args.small:
    print(
        "small mode: two epochs on a subset, a smoke test of the pipeline; its accuracy says nothing of the optimizers"
    )
    data = train_test_split(data.x_train[:160], data.y_train[:160], test_fraction=0.2, seed=0)
sizes = dict(patch_size=4, dim=16, depth=1, mlp_dim=32) if args.small else dict(patch_size=2, dim=32, depth=2)
epochs, every, probe_images = (2, 2, 12) if args.small else (15, 15, 32)
# learning rates of real.digits-vit (docs/experiments/real.md): SGD 0.3, SNGD step 0.2 with cap 1.0
OPTIMIZERS = {"SGD": ("sgd", 0.3), "NGD": ("sngd", 0.2)}

frames = []
for label, (name, lr) in OPTIMIZERS.items():
    model = ViT(seed=0, heads=2, **sizes)
    attention = model.encoder.blocks[-1].attn
    probe = HeadProbe(model, {"last_block": attention}, data.x_test[:probe_images], heads=(0,), every=every)
    history = fit_classifier(
        model,
        make_optimizer(name, model.parameters(), lr, sngd_cap=1.0),
        data,
        epochs=epochs,
        batch_size=32,
        seed=0,
        callbacks=[probe],
    )
    frame = probe.frame.assign(optimizer=label)
    frames.append(frame)
    first, last = frame.iloc[0], frame.iloc[-1]
    print(
        f"{label}: test accuracy {history.frame['test_accuracy'].iloc[-1]:.3f}; head 0 of the last block: "
        f"alignment {first.alignment:.3f} -> {last.alignment:.3f}, selected mass {first.selected_mass:.3f} -> "
        f"{last.selected_mass:.3f}, ||W|| {first.norm:.2f} -> {last.norm:.2f} (step {int(last.step)})"
    )

table = pd.concat(frames, ignore_index=True)
table.to_csv(args.out / "head_probe.csv", index=False)

figure, axes = plt.subplots(1, 3, figsize=(11, 3.2), layout="constrained")
for label, frame in table.groupby("optimizer", sort=False):
    for ax, column in zip(axes, ("alignment", "selected_mass", "norm")):
        ax.plot(frame["step"], frame[column], marker=".", label=label)
for ax, title in zip(axes, ("cos(W, W_svm of its own selection)", "softmax mass on selected tokens", "||W||_F")):
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("step")
axes[0].legend()
figure.suptitle("digits ViT, last block, head 0, class-token query: probed during training", fontsize=10)
figure.savefig(args.out / "head_probe.png", dpi=120)
print(f"wrote {args.out / 'head_probe.png'} and {args.out / 'head_probe.csv'}")
