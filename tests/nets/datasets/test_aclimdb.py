"""Tests of the aclImdb loader on a corpus in that layout that conftest.py writes."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.nets.datasets.aclimdb import Vocabulary, load_aclimdb, read_aclimdb, tokenize
from tests.nets.datasets.conftest import NEGATIVE, POSITIVE, TEST_ONLY_WORD


def test_tokenize_lowercases_drops_line_breaks_and_keeps_contractions():
    assert tokenize("A GREAT film!<br /><br />Don't miss it.") == ["a", "great", "film", "!", "don't", "miss", "it"]


def test_read_aclimdb_labels_neg_zero_pos_one_in_file_order(aclimdb_root):
    texts, labels = read_aclimdb(aclimdb_root, "train")
    assert texts == NEGATIVE + POSITIVE
    assert labels == [0, 0, 0, 1, 1, 1]


def test_vocabulary_comes_from_the_training_split_only(aclimdb_root):
    text = load_aclimdb(aclimdb_root, max_len=8, vocab_size=100, min_count=1)
    vocabulary = text.vocabulary
    assert vocabulary.tokens[:3] == ("<pad>", "<cls>", "<unk>")
    assert TEST_ONLY_WORD not in vocabulary.tokens
    unk = vocabulary.tokens.index("<unk>")
    # every test review ends with the test-only word; where it fits in 8 tokens it is encoded as <unk>
    fits = [i for i, t in enumerate(read_aclimdb(aclimdb_root, "test")[0]) if len(tokenize(t)) <= 7]
    for row in fits:
        ids = text.split.x_test[row]
        assert int(ids[int((ids != 0).sum()) - 1]) == unk


def test_encoding_puts_cls_first_then_truncates_and_pads(aclimdb_root):
    text = load_aclimdb(aclimdb_root, max_len=4, vocab_size=100, min_count=1)
    vocabulary = text.vocabulary
    train_texts, labels = read_aclimdb(aclimdb_root, "train")
    assert torch.equal(text.split.y_train, torch.tensor(labels))
    first = text.split.x_train[0].tolist()
    assert first[0] == 1
    assert [vocabulary.tokens[i] for i in first[1:]] == tokenize(train_texts[0])[:3]
    short = Vocabulary(("<pad>", "<cls>", "<unk>", "a")).encode([["a"]], max_len=4)
    assert short.tolist() == [[1, 3, 0, 0]]


def test_vocabulary_keeps_the_most_frequent_words():
    vocabulary = Vocabulary.build([["b", "a", "b"], ["c", "b", "a"]], max_size=5)
    assert vocabulary.tokens == ("<pad>", "<cls>", "<unk>", "b", "a")
    assert len(Vocabulary.build([["b", "a", "b"]], max_size=10, min_count=2)) == 4


def test_max_per_split_keeps_a_seeded_subset(aclimdb_root):
    a = load_aclimdb(aclimdb_root, max_len=8, max_per_split=4, min_count=1, seed=0)
    b = load_aclimdb(aclimdb_root, max_len=8, max_per_split=4, min_count=1, seed=0)
    assert len(a.split.y_train) == 4 and len(a.split.y_test) == 4
    assert torch.equal(a.split.x_train, b.split.x_train)


def test_missing_folder_names_the_expected_layout(tmp_path):
    with pytest.raises(ValidationError, match="train/pos, train/neg, test/pos and test/neg"):
        load_aclimdb(tmp_path)
