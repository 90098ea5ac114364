"""Layers import only downwards; the core imports nothing but the standard library, and
neither does ``import tickwheel``; comments say why in their own words."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "tickwheel"

# each layer and the layers it stands on (docs/design.md, "Floors"); a layer may import from
# tickwheel itself, and from everything below it
STANDS_ON: dict[str, tuple[str, ...]] = {
    "core": (),
    "errors": (),
    "recurrence": ("errors",),
    "urls": ("errors",),
    "runtime": ("core", "recurrence"),
    "model": ("urls",),
    "schedule": ("model", "recurrence"),
    "stores": ("core", "schedule"),
    "engine": ("runtime", "stores"),
    "service": ("engine",),
    "testing": ("engine",),
    "client": ("model",),
    "cli": ("service", "testing", "client"),
}


def _below(layer: str) -> set[str]:
    return {layer}.union(*(_below(lower) for lower in STANDS_ON[layer]))


ALLOWED = {layer: _below(layer) for layer in STANDS_ON}


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


def test_import_tickwheel_loads_only_the_standard_library() -> None:
    # in a fresh interpreter: what pytest and its plugins imported does not count, and what the
    # interpreter loaded before the import (site hooks) is not tickwheel's doing
    code = (
        "import json, sys; before = set(sys.modules); import tickwheel; "
        "new = sorted(set(sys.modules) - before); "
        "print(json.dumps({name: getattr(sys.modules[name], '__file__', None) for name in new}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    loaded: dict[str, str | None] = json.loads(result.stdout)
    foreign = [name for name, file in loaded.items() if not _ours_or_stdlib(name, file)]
    assert not foreign, f"import tickwheel loads {foreign}"


def _ours_or_stdlib(name: str, file: str | None) -> bool:
    top = name.partition(".")[0]
    if top == "tickwheel" or top in sys.stdlib_module_names:
        return True
    # modules the standard library generates per platform, such as sysconfig's
    # _sysconfigdata_*, are in its directory without being in stdlib_module_names
    if file is None:
        return False
    path = Path(file).resolve()
    stdlib = {Path(sysconfig.get_paths()[key]).resolve() for key in ("stdlib", "platstdlib")}
    installed = {"site-packages", "dist-packages"} & set(path.parts)
    return not installed and any(path.is_relative_to(root) for root in stdlib)


# "decision 17", "decisions 23", "docs/decisions.md #15", "entry 10": a number that means
# nothing to a reader without the file, and goes stale when the records are renumbered
DECISION_NUMBER = re.compile(
    r"\bdecisions?(?:\.md)?\s*,?\s*(?:#|no\.?\s*|entry\s*)?\d+|\bentry\s+\d+", re.IGNORECASE
)


def test_no_comment_cites_a_decision_number() -> None:
    cited = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.lua")])
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if DECISION_NUMBER.search(line)
    ]
    assert not cited, "say why in the comment's own words:\n" + "\n".join(cited)
