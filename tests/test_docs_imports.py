"""Every Python block of the docs compiles, and each name it imports from attnlab exists where it imports it from.

The blocks are not all run here (some train for minutes); their imports are what rots first when code moves (the
diffusion snippet of docs/experiments/ntk.md imported train_score_model from attnlab.ntk after it moved).
"""

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _blocks():
    for page in PAGES:
        for k, match in enumerate(BLOCK.finditer(page.read_text(encoding="utf-8"))):
            if not match.group(1).lstrip().startswith(">>>"):  # a console session: its lines are not a module
                yield pytest.param(match.group(1), id=f"{page.relative_to(ROOT)}#{k}")


@pytest.mark.parametrize("source", list(_blocks()))
def test_a_python_block_compiles_and_its_attnlab_imports_exist(source):
    tree = ast.parse(source)  # a SyntaxError names the line
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "attnlab":
            module = importlib.import_module(node.module)
            missing = [a.name for a in node.names if a.name != "*" and not hasattr(module, a.name)]
            assert not missing, f"from {node.module} import {missing}: no such name there"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "attnlab":
                    importlib.import_module(alias.name)


def test_the_blocks_are_found():
    assert len(list(_blocks())) >= 10
