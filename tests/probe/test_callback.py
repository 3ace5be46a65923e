"""HeadProbe during real training (fit_classifier's callbacks): each row against a by-hand recomputation."""

import math

import numpy as np
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.metrics import cosine
from attnlab.nets.classifier import fit_classifier
from attnlab.nets.datasets.split import train_test_split
from attnlab.nets.vit import ViT
from attnlab.probe import HeadProbe, capture, head_W
from attnlab.svm import attention_svm


def _digits_like(n=48):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, 1, 8, 8, generator=g, dtype=torch.float64)
    y = torch.randint(0, 10, (n,), generator=g)
    return train_test_split(x, y, test_fraction=0.25, seed=0)


def _trained(callbacks, epochs=2, every=None):
    data = _digits_like()
    model = ViT(seed=0, dtype=torch.float64)
    probe = HeadProbe(model, {"block1": model.encoder.blocks[1].attn}, data.x_test[:8], heads=(0, 1), every=every)
    history = fit_classifier(
        model,
        torch.optim.SGD(model.parameters(), lr=0.1),
        data,
        epochs=epochs,
        batch_size=12,
        seed=0,
        callbacks=[probe, *callbacks],
    )
    return model, probe, history, data


def test_probe_records_one_row_per_head_and_epoch_and_matches_a_recomputation():
    model, probe, history, data = _trained([])
    frame = probe.frame
    assert frame["step"].tolist() == [0, 0, 3, 3, 6, 6]  # 36 training images / 12 = 3 steps per epoch
    assert frame["step"].drop_duplicates().tolist() == history.frame["step"].tolist()
    last = frame[frame["step"] == 6].set_index("head")
    module = model.encoder.blocks[1].attn
    for head in (0, 1):
        data_h = capture(model, module, data.x_test[:8], select="attended", head=head)
        W = head_W(module, head)
        reference = attention_svm(data_h, "fro", solver="SCS")  # a second solver of the same program
        assert last.loc[head, "alignment"] == pytest.approx(float(cosine(W, reference.W)), abs=1e-5)  # SCS at eps 1e-9
        assert last.loc[head, "norm"] == pytest.approx(float(W.norm()), rel=1e-12)
        with torch.no_grad():
            own = model.attention(data.x_test[:8])[1][:, head, 0]  # the model's own CLS weights (n, T)
        assert last.loc[head, "selected_mass"] == pytest.approx(float(own.max(-1).values.mean()), rel=1e-12)
    assert frame["svm_status"].eq("optimal").all()


def test_probe_every_k_steps_and_no_double_rows_at_a_record():
    _, probe, _, _ = _trained([], epochs=2, every=2)
    assert probe.frame["step"].drop_duplicates().tolist() == [0, 2, 3, 4, 6]


def test_probing_does_not_change_training():
    """The probe runs in eval mode without randomness: the trained weights are bit-identical without it."""
    model_a, _, _, data = _trained([])
    model_b = ViT(seed=0, dtype=torch.float64)
    fit_classifier(model_b, torch.optim.SGD(model_b.parameters(), lr=0.1), data, epochs=2, batch_size=12, seed=0)
    for a, b in zip(model_a.parameters(), model_b.parameters()):
        assert torch.equal(a, b)


def test_a_callback_returning_true_stops_fit_after_that_epoch():
    _, probe, history, _ = _trained([lambda record: record.step >= 3], epochs=4)
    assert history.frame["epoch"].tolist() == [0, 1]
    assert probe.frame["step"].max() == 3


def test_infeasible_selection_gives_nan_alignment():
    """Two identical probe sequences with different fixed selections cannot both be separated."""
    model = ViT(seed=0, dtype=torch.float64)
    images = torch.rand(1, 1, 8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64).repeat(2, 1, 1, 1)
    probe = HeadProbe(model, {"b": model.encoder.blocks[0].attn}, images, select=[1, 2])
    (row,) = probe.probe(0)
    assert math.isnan(row["alignment"]) and row["svm_status"] == "infeasible"


def test_bad_arguments_are_refused_before_training():
    model = ViT(seed=0)
    with pytest.raises(ValidationError, match="modules must be a non-empty mapping name -> attention module"):
        HeadProbe(model, model.encoder.blocks[0].attn, None)
    with pytest.raises(ValidationError, match=r"head == 2, must be in \[0, 1\]"):
        HeadProbe(model, {"b": model.encoder.blocks[0].attn}, None, heads=(2,))
    with pytest.raises(ValidationError, match="select == 'first', must be \"attended\" or an array"):
        HeadProbe(model, {"b": model.encoder.blocks[0].attn}, None, select="first")
    with pytest.raises(ValidationError, match="every == 0, must be >= 1"):
        HeadProbe(model, {"b": model.encoder.blocks[0].attn}, None, every=0)


def test_heads_query_and_select_are_refused_when_the_probe_is_built():
    """heads=0 raised a bare TypeError; query=40 and a short select were accepted and failed at the first probe."""
    model = ViT(seed=0, dtype=torch.float64)
    modules, images = {"b": model.encoder.blocks[0].attn}, _digits_like().x_test[:6]
    for heads in (0, (), "0"):
        with pytest.raises(ValidationError, match=r"heads == .*, must be a non-empty sequence of head indices"):
            HeadProbe(model, modules, images, heads=heads)
    with pytest.raises(ValidationError, match="heads must be a int"):
        HeadProbe(model, modules, images, heads=(0.5,))
    with pytest.raises(ValidationError, match="query == 40, must be <= 16"):
        HeadProbe(model, modules, images, query=40)
    with pytest.raises(ValidationError, match=r"select must be 6 integer token indices .* got shape \(2,\)"):
        HeadProbe(model, modules, images, select=[1, 2])
    with pytest.raises(ValidationError, match=r"select holds indices outside \[0, 16\]"):
        HeadProbe(model, modules, images, select=[50] * 6)
    probe = HeadProbe(model, modules, images, heads=np.arange(2), select=np.ones(6, dtype=np.int64))
    assert probe.heads == (0, 1) and [row["head"] for row in probe.probe(0)] == [0, 1]


def test_first_block_with_one_shared_class_query_falls_back_to_the_primal_svm():
    """In block 0 every image's class-token query is the same vector, so the SVM constraints are linearly
    dependent: the NNLS dual does not apply and the probe solves the primal program instead."""
    model = ViT(seed=0, dtype=torch.float64)
    images = _digits_like().x_test[:8]
    module = model.encoder.blocks[0].attn
    (row,) = HeadProbe(model, {"b0": module}, images).probe(0)
    data = capture(model, module, images, select="attended", head=0)
    with pytest.raises(ValidationError, match="linearly independent"):
        attention_svm(data, "fro", method="dual")
    reference = attention_svm(data, "fro", solver="SCS")
    assert row["alignment"] == pytest.approx(float(cosine(head_W(module, 0), reference.W)), abs=1e-5)  # SCS tol
