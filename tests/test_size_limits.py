"""The source's size limits (docs/architecture.md, "Size limits"): no module over 600 lines, no function over 80 lines
of code. A line of code is a line that is not blank, not a comment and not part of a docstring; a nested function's
lines count for the function around it too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "attnlab"
MODULES = sorted(SRC.rglob("*.py"))
MAX_MODULE_LINES = 600
MAX_FUNCTION_CODE_LINES = 80


def _docstring_lines(tree: ast.AST) -> set[int]:
    """The line numbers of every module, class and function docstring in ``tree``."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def function_code_lines(source: str) -> dict[str, int]:
    """``"name:line" -> lines of code`` for every function in ``source``."""
    text = source.splitlines()
    tree = ast.parse(source)
    docs = _docstring_lines(tree)
    sizes = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            code = [
                i
                for i in range(node.lineno, node.end_lineno + 1)
                if i not in docs and text[i - 1].strip() and not text[i - 1].strip().startswith("#")
            ]
            sizes[f"{node.name}:{node.lineno}"] = len(code)
    return sizes


def test_the_counter_skips_docstrings_comments_and_blank_lines():
    source = 'def f():\n    """Doc.\n\n    More.\n    """\n    # a comment\n\n    x = 1\n    return x\n'
    assert function_code_lines(source) == {"f:1": 3}


def test_the_limits_read_every_module():
    assert len(MODULES) > 200 and SRC / "training" / "loop.py" in MODULES


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_module_and_function_sizes(path):
    source = path.read_text()
    assert len(source.splitlines()) <= MAX_MODULE_LINES, f"{path.name} is over {MAX_MODULE_LINES} lines: split it"
    too_long = {name: n for name, n in function_code_lines(source).items() if n > MAX_FUNCTION_CODE_LINES}
    assert not too_long, f"functions over {MAX_FUNCTION_CODE_LINES} lines of code: {too_long}; split them"
