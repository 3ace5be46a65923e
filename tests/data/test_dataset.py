"""TokenSelectionData: validation messages, float64 storage, token scores, and the npz round trip."""

import numpy as np
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import TokenSelectionData, example1


@pytest.fixture
def parts():
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(3, 4, 2, generator=gen)
    return {"X": X, "y": torch.tensor([1.0, -1.0, 1.0]), "v": torch.tensor([1.0, -0.5])}


def test_stores_float64_and_defaults_queries_to_first_token(parts):
    data = TokenSelectionData(parts["X"].float(), y=[1, -1, 1], v=np.array([1, 0]))
    assert (data.n, data.T, data.d) == (3, 4, 2)
    assert data.X.dtype == data.Z.dtype == data.y.dtype == data.v.dtype == torch.float64
    assert torch.equal(data.Z, data.X[:, 0])


def test_token_scores_match_a_plain_loop(parts):
    data = TokenSelectionData(**parts)
    loop = torch.tensor([[float(parts["y"][i] * parts["v"] @ parts["X"][i, t]) for t in range(4)] for i in range(3)])
    assert torch.allclose(data.token_scores(), loop, rtol=0, atol=1e-15)  # same products, rounding only
    assert torch.equal(data.optimal_tokens(), loop.argmax(dim=1))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"X": torch.zeros(3, 4)}, "X has shape \\(3, 4\\), expected 3 axes"),
        ({"Z": torch.zeros(2, 2)}, "Z has shape \\(2, 2\\): axis 'n' has size 2"),
        ({"y": torch.ones(4)}, "y has shape \\(4,\\): axis 'n' has size 4"),
        ({"v": torch.ones(3)}, "v has shape \\(3,\\): axis 'd' has size 3"),
        ({"X": torch.zeros(3, 1, 2)}, "X has 1 entries along axis 'T', needs at least 2"),
        ({"y": torch.tensor([1.0, 0.0, 2.0])}, "y must hold only -1 and \\+1, found \\[0.0, 2.0\\]"),
        ({"y": None}, "y is required"),
        ({"select": [0, 1]}, "select must be 3 integer token indices"),
        ({"select": [0.5, 1, 0]}, "select must be 3 integer token indices"),
        ({"select": [0, 4, 1]}, "select holds indices outside \\[0, 3\\]"),
        ({"select": [-1, 0, 1]}, "select holds indices outside"),
    ],
)
def test_bad_input_names_the_field(parts, change, match):
    with pytest.raises(ValidationError, match=match):
        TokenSelectionData(**{**parts, **change})


@pytest.mark.parametrize("field", ["X", "v"])
def test_non_finite_values_are_refused(parts, field):
    bad = parts[field].clone()
    bad.view(-1)[0] = float("nan")
    with pytest.raises(ValidationError, match=f"{field} has 1 non-finite"):
        TokenSelectionData(**{**parts, field: bad})


def test_scores_need_a_head(parts):
    with pytest.raises(ValidationError, match="no head v"):
        TokenSelectionData(parts["X"], y=parts["y"]).token_scores()


def test_with_revalidates(parts):
    data = TokenSelectionData(**parts)
    assert torch.equal(data.with_(select=[1, 2, 3]).select, torch.tensor([1, 2, 3]))
    with pytest.raises(ValidationError, match="select holds indices outside"):
        data.with_(select=[0, 0, 9])


def test_npz_round_trip_is_exact_and_pickle_free(parts, tmp_path):
    data = TokenSelectionData(
        **parts, Z=torch.randn(3, 2, generator=torch.Generator().manual_seed(1)), select=[0, 3, 1]
    )
    path = data.save(tmp_path / "sub" / "d.npz")
    with np.load(path, allow_pickle=False) as f:  # raises if anything needed pickle
        assert sorted(f.files) == ["X", "Z", "select", "v", "y"]
    back = TokenSelectionData.load(path)
    for key in ("X", "Z", "y", "v", "select"):
        assert torch.equal(getattr(back, key), getattr(data, key)), key


@pytest.mark.parametrize("name", ["data", "data.NPZ"])
def test_a_file_name_without_the_npz_suffix_round_trips(parts, tmp_path, name):
    # numpy.savez(path) would write to path + ".npz" and leave path empty
    data = TokenSelectionData(**parts, select=[0, 3, 1])
    path = data.save(tmp_path / name)
    assert path == tmp_path / name and [p.name for p in tmp_path.iterdir()] == [name]
    back = TokenSelectionData.load(path)
    for key in ("X", "Z", "y", "v", "select"):
        assert torch.equal(getattr(back, key), getattr(data, key)), key


def test_npz_without_optional_keys(parts, tmp_path):
    path = TokenSelectionData(parts["X"], y=parts["y"]).save(tmp_path / "d.npz")
    with np.load(path) as f:
        assert sorted(f.files) == ["X", "Z", "y"]
    back = TokenSelectionData.load(path)
    assert back.v is None and back.select is None


def test_load_errors_name_the_file_and_keys(tmp_path):
    with pytest.raises(ValidationError, match="does not exist"):
        TokenSelectionData.load(tmp_path / "missing.npz")
    np.savez(tmp_path / "bad.npz", X=np.zeros((2, 2, 2)))
    with pytest.raises(ValidationError, match="lacks keys \\['y'\\]"):
        TokenSelectionData.load(tmp_path / "bad.npz")


def _text(path):
    path.write_text("X,y\n1,2\n")


def _empty(path):
    path.write_bytes(b"")


def _truncated(path):
    np.savez(path, X=np.zeros((2, 3, 2)), y=np.ones(2))
    path.write_bytes(path.read_bytes()[:150])


def _objects(path):
    np.savez(path, X=np.array([[1, "a"]], dtype=object), y=np.ones(1))


def _npy(path):
    with open(path, "wb") as f:
        np.save(f, np.zeros(3))


def _folder(path):
    path.mkdir()


def _strings(path):
    np.savez(path, X=np.full((2, 3, 2), "a"), y=np.ones(2))


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (_text, "is not an .npz archive .*; save the arrays with numpy.savez"),
        (_empty, "is empty; write it again"),
        (_truncated, "is truncated or corrupt .*; write it again"),
        (_objects, r"holds Python objects \(dtype=object\), which attnlab does not unpickle"),
        (_npy, "is a single .npy array, not an .npz archive"),
        (_folder, "is a folder; pass an .npz file"),
        (_strings, "X"),
    ],
    ids=["text", "empty", "truncated", "objects", "npy", "folder", "strings"],
)
def test_every_bad_file_is_one_line_naming_it(make, match, tmp_path):
    path = tmp_path / "bad.npz"
    make(path)
    with pytest.raises(ValidationError, match=match) as info:
        TokenSelectionData.load(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    assert "allow_pickle=True" not in message  # never suggest unsafe loading


def test_a_float64_tensor_is_copied_not_aliased(parts):
    X = torch.as_tensor(parts["X"], dtype=torch.float64).clone()
    data = TokenSelectionData(X, y=parts["y"], v=parts["v"])
    X[0, 0, 0] = float("nan")  # an in-place edit of the caller's tensor cannot bypass validation
    assert bool(torch.isfinite(data.X).all())


def test_a_whole_float_select_is_refused_not_truncated(parts):
    with pytest.raises(ValidationError, match="select must be 3 integer token indices .* got dtype float64"):
        TokenSelectionData(**parts, select=[1.0, 0.0, 2.0])


def test_cross_attention_queries_of_their_own_width_are_kept_saved_and_stacked(tmp_path):
    from attnlab.data import stack

    X, Z = torch.randn(3, 4, 6, dtype=torch.float64), torch.randn(3, 2, dtype=torch.float64)
    data = TokenSelectionData(X, Z=Z, y=[1, -1, 1], v=torch.ones(6))
    assert (data.d, data.d_q) == (6, 2)
    assert TokenSelectionData.load(data.save(tmp_path / "cross.npz")).d_q == 2
    assert stack([data, data]).Z.shape == (2, 3, 2)
    with pytest.raises(ValidationError, match=r"must share \(n, T, d, d_q\)"):
        stack([data, data.with_(Z=torch.randn(3, 5))])
    with pytest.raises(ValidationError, match=r"Z has shape \(2, 2\): axis 'n' has size 2"):
        TokenSelectionData(X, Z=Z[:2], y=[1, -1, 1])
    with pytest.raises(
        ValidationError, match=r"v has shape \(2,\): axis 'd' has size 2, but earlier arguments fixed d = 6"
    ):
        TokenSelectionData(X, Z=Z, y=[1, -1, 1], v=torch.ones(2))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"X": np.ones((2, 2, 2)) + 1j}, "X is complex"),
        ({"X": np.ones((2, 2, 2)).astype(str)}, "X holds text"),
        ({"y": ["1", "-1"]}, "y holds text"),
        ({"v": np.ones(2) + 0j}, "v is complex"),
    ],
)
def test_complex_and_text_fields_are_refused(change, match):
    # they were read as their real part, or parsed from the text, without an error
    fields = {"X": np.ones((2, 2, 2)), "y": [1, -1], **change}
    with pytest.raises(ValidationError, match=match):
        TokenSelectionData(**fields)


def test_new_tokens_bring_their_own_first_tokens_as_queries_and_unknown_fields_are_named():
    """with_(X=...) on self-attention data kept the old queries X[:, 0], silently: cross-wired data."""
    data = example1(n=3, T=3, d=8, seed=0)
    X2 = data.X.flip(1)
    assert torch.equal(data.with_(X=X2).Z, X2[:, 0])
    queries = torch.ones(3, 8, dtype=torch.float64)  # cross-attention queries stay
    assert torch.equal(data.with_(Z=queries).with_(X=X2).Z, queries)
    with pytest.raises(ValidationError, match=r"with_ got \['W'\], not fields of TokenSelectionData"):
        data.with_(W=1)
