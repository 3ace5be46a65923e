"""The layer rule of DESIGN.md: imports inside attnlab point down the stack only, and the families stay apart.

An import is any ``import attnlab.x``, ``from attnlab.x import ...``, ``from attnlab import x`` and any string that
names a module of attnlab (``"attnlab.x.y"`` or ``"attnlab.x.y:Name"``, as ``importlib`` and the task and falsifier
registries take them).
"""

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "attnlab"

# Lower numbers sit lower in the stack. Modules of one layer may import each other, except the three families
# (svm / regression / ntk), which share only the layers below them.
LAYERS = {
    "_validation": 0,
    "_deprecation": 0,
    "_numerics": 0,
    "_errors": 0,
    "_io": 0,
    "_overrides": 0,
    "_sources": 0,
    "checkpoint": 0,
    "plotting": 0,
    "data": 1,
    "losses": 2,
    "models": 2,
    "metrics": 2,
    "geometry": 2,
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
# names that ``from attnlab import X`` binds without a module of their own name: the module that holds them
ATTRIBUTES = {"train": "training", "ValidationError": "_errors", "batched": "training", "flow": "training",
              "callbacks": "training", "__version__": None}  # fmt: skip
MODULE_STRING = re.compile(r"attnlab(\.[A-Za-z_]\w*)+(:[\w.]+)?")


def _top(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "attnlab" and len(parts) > 1 else None


def _imports(source: str):
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.module == "attnlab" and node.level == 0:
            for alias in node.names:
                target = ATTRIBUTES.get(alias.name, alias.name)
                if target is not None:
                    yield f"attnlab.{target}"
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_STRING.fullmatch(node.value):
            yield node.value.partition(":")[0]


def _files():
    return sorted(p for p in SRC.rglob("*.py") if p.parent != SRC or p.name != "__init__.py")


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_down(path):
    rel = path.relative_to(SRC)
    own = rel.parts[0].removesuffix(".py")
    assert own in LAYERS, f"{rel}: module {own!r} has no layer in tests/test_layers.py; add it"
    for module in _imports(path.read_text()):
        target = _top(module)
        if target is None or target == own or target == "__version__":
            continue
        assert target in LAYERS, f"{rel} imports attnlab.{target}, which has no layer"
        assert LAYERS[target] <= LAYERS[own], f"{rel} (layer {own}) imports attnlab.{target}, a higher layer"
        assert not (own in FAMILIES and target in FAMILIES), f"{rel}: family {own} imports family {target}"


def test_the_reader_sees_importlib_strings_and_from_attnlab_import():
    source = (
        "import importlib\nfrom attnlab import nets, train\n"
        'TASK = "attnlab.report.html:build_report"\nimportlib.import_module("attnlab.cli.main")\n'
        'doc = "see attnlab.runner for the executors"\n'
    )
    assert set(_imports(source)) == {
        "importlib",
        "attnlab.nets",
        "attnlab.training",
        "attnlab.report.html",
        "attnlab.cli.main",
    }
