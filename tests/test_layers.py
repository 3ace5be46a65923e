"""The layer rule of DESIGN.md: imports inside attnlab point down the stack only, and the families stay apart."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "attnlab"

# Lower numbers sit lower in the stack. Modules of one layer may import each other, except the three families
# (svm / regression / ntk), which share only the layers below them.
LAYERS = {
    "_validation": 0,
    "_numerics": 0,
    "_errors": 0,
    "_io": 0,
    "_overrides": 0,
    "_deprecation": 0,
    "checkpoint": 0,
    "plotting": 0,
    "data": 1,
    "losses": 2,
    "models": 2,
    "metrics": 2,
    "svm": 3,
    "regression": 3,
    "ntk": 3,
    "optim": 4,
    "training": 5,
    "trackers": 5,
    "probe": 6,
    "nets": 6,
    "explain": 6,
    "runner": 7,
    "verify": 7,
    "experiments": 8,
    "tasks": 8,
    "report": 9,
    "cli": 9,
    "__main__": 9,
}
FAMILIES = {"svm", "regression", "ntk"}


def _top(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "attnlab" and len(parts) > 1 else None


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def _files():
    return sorted(p for p in SRC.rglob("*.py") if p.parent != SRC or p.name != "__init__.py")


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_down(path):
    rel = path.relative_to(SRC)
    own = rel.parts[0].removesuffix(".py")
    assert own in LAYERS, f"{rel}: module {own!r} has no layer in tests/test_layers.py; add it"
    for module in _imports(path):
        target = _top(module)
        if target is None or target == own or target == "__version__":
            continue
        assert target in LAYERS, f"{rel} imports attnlab.{target}, which has no layer"
        assert LAYERS[target] <= LAYERS[own], f"{rel} (layer {own}) imports attnlab.{target}, a higher layer"
        assert not (own in FAMILIES and target in FAMILIES), f"{rel}: family {own} imports family {target}"
