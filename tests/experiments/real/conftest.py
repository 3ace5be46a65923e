"""The tiny aclImdb corpus of tests/nets/datasets, for the text experiment's test on an aclImdb folder."""

from tests.nets.datasets.conftest import aclimdb_root  # noqa: F401  (a fixture)
