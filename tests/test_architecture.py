"""Layers import only downwards; the core imports nothing but the standard library, and
neither does ``import tickwheel``; modules stay small, import no circle, and no two share a name
for different things; comments say why in their own words."""

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
    "tracecontext": ("errors",),
    "runtime": ("core", "recurrence"),
    "model": ("urls", "tracecontext"),
    "schedule": ("model", "recurrence"),
    "stores": ("core", "schedule"),
    "engine": ("runtime", "stores"),
    "callbacks": ("engine",),
    "service": ("callbacks",),
    "testing": ("callbacks",),
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


MAX_LINES = 480
"""Longest a module may be: past it, split it by concept (CONTRIBUTING.md, "Style")."""


def test_every_module_is_at_most_max_lines() -> None:
    long = [
        f"{path.relative_to(PACKAGE)}: {lines} lines"
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    ]
    assert not long, f"over {MAX_LINES} lines, split by concept:\n" + "\n".join(long)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> list[str]:
    """The tickwheel modules a module imports when it runs: at the top and inside functions
    alike (a deferred import is a dependency all the same), but not under ``if TYPE_CHECKING:``,
    which only the type checker follows. ``from a import b`` names the module ``a.b`` when
    there is one, else ``a``."""
    found: list[str] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            found.extend(name for child in node.orelse for name in _runtime_imports(child))
            continue
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.extend(
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in MODULES
                else node.module
                for alias in node.names
            )
        found.extend(_runtime_imports(node))
    return [name for name in found if name in MODULES]


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of `graph` with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_import_circle() -> None:
    graph = {
        name: set(_runtime_imports(ast.parse(path.read_text(), filename=str(path)))) - {name}
        for name, path in MODULES.items()
    }
    circles = _circles(graph)
    assert not circles, "modules that import each other, directly or around a circle:\n" + (
        "\n".join(" <-> ".join(circle) for circle in circles)
    )


# a name several modules may share because it means the same in each, and why; keep it short
SAME_NAME: dict[str, str] = {
    "settings.py": "each layer's frozen settings dataclass, validated in __post_init__",
    "clock.py": "a clock a part reads now from: the runtime drivers' and the Redis server's",
}


def _backend_part(path: Path) -> str | None:
    """The store backend whose package holds `path` (``stores/<backend>/<module>.py``): each
    backend is assembled from the same parts under the same names, so a reader can compare
    them side by side."""
    parts = path.relative_to(PACKAGE).parts
    return parts[1] if len(parts) == 3 and parts[0] == "stores" else None


def test_no_two_modules_share_a_name_for_different_things() -> None:
    by_name: dict[str, list[Path]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name not in {"__init__.py", "__main__.py"}:
            by_name.setdefault(path.name, []).append(path)
    shared = [
        f"{name}: " + ", ".join(str(path.relative_to(PACKAGE)) for path in paths)
        for name, paths in sorted(by_name.items())
        if len(paths) > 1
        and name not in SAME_NAME
        and not all(_backend_part(path) is not None for path in paths)
    ]
    assert not shared, "one name, different things; rename one (or say why in SAME_NAME):\n" + (
        "\n".join(shared)
    )
