"""Labelled data for the real models: a train/test split, the 8x8 digits, aclImdb reviews, a keyword task.

Nothing is downloaded: the digits ship with scikit-learn, aclImdb is read from the folder you pass, and the
keyword task is generated.
"""

from attnlab.nets.datasets.aclimdb import TextSplit, Vocabulary, load_aclimdb, read_aclimdb, tokenize
from attnlab.nets.datasets.digits import load_digits_split
from attnlab.nets.datasets.keywords import KeywordTask, keyword_task
from attnlab.nets.datasets.split import Split, train_test_split

__all__ = [
    "KeywordTask",
    "Split",
    "TextSplit",
    "Vocabulary",
    "keyword_task",
    "load_aclimdb",
    "load_digits_split",
    "read_aclimdb",
    "tokenize",
    "train_test_split",
]
