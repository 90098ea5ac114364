"""Layers import only downwards; the core imports nothing but the standard library."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "tickwheel"

# what each layer may import from tickwheel itself (DESIGN.md, "Layers")
ALLOWED = {
    "core": {"core"},
    "runtime": {"core", "runtime", "errors"},
    "errors": {"errors"},
    "model": {"model", "errors"},
    "stores": {"core", "model", "stores", "errors"},
    "engine": {"core", "runtime", "model", "stores", "errors", "engine"},
    "service": {"core", "runtime", "model", "stores", "errors", "engine", "service"},
    "testing": {"core", "runtime", "model", "stores", "errors", "engine", "testing"},
    "cli": {"core", "runtime", "model", "stores", "errors", "engine", "service", "testing", "cli"},
}


def _layer(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0].removesuffix(".py")


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _modules(layer: str) -> list[Path]:
    target = PACKAGE / layer
    return sorted(target.rglob("*.py")) if target.is_dir() else [target.with_suffix(".py")]


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_downwards(layer: str) -> None:
    for path in _modules(layer):
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "tickwheel" and len(parts) > 1:
                assert parts[1] in ALLOWED[layer], f"{path.name} imports {name}"


def test_core_uses_only_the_standard_library() -> None:
    for path in _modules("core"):
        for name in _imports(path):
            top = name.split(".")[0]
            assert top in sys.stdlib_module_names or name.startswith("tickwheel.core"), (
                f"{path.name} imports {name}"
            )


def test_every_module_belongs_to_a_layer() -> None:
    for path in PACKAGE.rglob("*.py"):
        if path.parent == PACKAGE and path.name in {"__init__.py", "__main__.py"}:
            continue
        assert _layer(path) in ALLOWED, f"{path} is in no layer of tests/test_architecture.py"
