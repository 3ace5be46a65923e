"""A tiny corpus in the aclImdb folder layout, written by the tests (nothing is downloaded)."""

from pathlib import Path

import pytest

POSITIVE = ["A great film, I loved it!", "Wonderful acting<br /><br />and a great story.", "Loved it. Great fun!"]
NEGATIVE = ["A dull film, I hated it.", "Terrible acting and a boring story?", "Boring. I hated every minute."]
TEST_ONLY_WORD = "zyzzyva"  # appears only in the test split, so it must map to <unk>


def write_aclimdb(root: Path) -> Path:
    """Write train/{pos,neg} and test/{pos,neg} with three reviews each; returns ``root``."""
    for part in ("train", "test"):
        for polarity, texts in (("pos", POSITIVE), ("neg", NEGATIVE)):
            folder = root / part / polarity
            folder.mkdir(parents=True)
            for i, text in enumerate(texts):
                extra = f" {TEST_ONLY_WORD}" if part == "test" else ""
                (folder / f"{i}_{7 + i}.txt").write_text(text + extra, encoding="utf-8")
    return root


@pytest.fixture
def aclimdb_root(tmp_path: Path) -> Path:
    return write_aclimdb(tmp_path / "aclImdb")
