"""The layers import one way: every module's imports, parsed, against the allowed directions.

    games      -> (nothing of the project)
    protocol   -> games
    server     -> protocol, games
    clients    -> protocol, games
    tools      -> anything but tests
    benchmarks -> anything but tests

Imports inside functions count too (``ast.walk`` sees every ``import`` statement), so a lazy
import cannot hide a dependency. ``tests`` may import anything and is not checked.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("games", "protocol", "server", "clients", "tools", "benchmarks", "tests")
INSTALLED = ("games", "protocol", "server", "clients", "tools")
"""The folders a wheel installs, as ``blackdrez.<folder>``."""
ALLOWED: dict[str, set[str]] = {
    "games": {"games"},
    "protocol": {"protocol", "games"},
    "server": {"server", "protocol", "games"},
    "clients": {"clients", "protocol", "games"},
    "tools": {"tools", "server", "protocol", "games", "clients"},
    "benchmarks": {"benchmarks", "tools", "server", "protocol", "games", "clients"},
}


def project_imports(path: Path) -> set[tuple[int, str]]:
    """``(line, top-level package)`` of every import in ``path`` that names a project package."""
    found: set[tuple[int, str]] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.update((node.lineno, layer) for n in names if (layer := layer_of(n)) in PACKAGES)
    return found


def layer_of(module: str) -> str:
    """The layer a module name belongs to: ``blackdrez.server.app`` is ``server`` (the installed
    namespace), ``tests.conftest`` is ``tests``; anything else is not the project's."""
    parts = module.split(".")
    return parts[1] if parts[0] == "blackdrez" and len(parts) > 1 else parts[0]


def modules(layer: str) -> list[Path]:
    """Every Python file of ``layer``."""
    return sorted((ROOT / layer).rglob("*.py"))


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_each_layer_imports_only_the_layers_below_it(layer: str) -> None:
    files = modules(layer)
    assert files, f"{layer}/ holds no module"
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {package}"
        for path in files
        for line, package in sorted(project_imports(path))
        if package not in ALLOWED[layer]
    ]
    assert wrong == []


def test_the_checker_sees_imports_anywhere_in_a_module(tmp_path: Path) -> None:
    module = tmp_path / "sample.py"
    module.write_text(
        "import os\nfrom blackdrez.games import GAMES\n\n\ndef f():\n    from tests import x\n"
        "    import blackdrez.server.app\n    from . import sibling\n"
    )
    assert project_imports(module) == {(2, "games"), (6, "tests"), (7, "server")}


def test_the_project_is_imported_only_through_its_namespace() -> None:
    """Installed, the folders are ``blackdrez.server``, ``blackdrez.protocol``...: a bare
    ``import server`` works in the checkout by accident and fails in a wheel (or picks a bot
    author's own ``protocol.py``)."""
    bare = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for layer in PACKAGES
        for path in modules(layer)
        for line, name in sorted(bare_imports(path))
    ]
    assert bare == []


def bare_imports(path: Path) -> set[tuple[int, str]]:
    """Imports in ``path`` of an installed folder by its bare top-level name."""
    found: set[tuple[int, str]] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.update((node.lineno, n) for n in names if n.split(".")[0] in INSTALLED)
    return found


def test_every_logger_of_the_project_is_named_under_blackdrez() -> None:
    """An operator filters the logs by ``logger`` (``blackdrez.node``, ``blackdrez.store``...):
    a module logging under its own path (``blackdrez.server.stores.redis``) falls outside every
    filter.
    Checked: each module's own logger, ``NAME = logging.getLogger(...)`` at its top level."""
    outside = []
    for package in ("games", "protocol", "server", "clients", "tools"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.parse(path.read_text(), str(path)).body:
                call = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "getLogger"
                    and not (
                        call.args
                        and isinstance(call.args[0], ast.Constant)
                        and str(call.args[0].value).split(".")[0] == "blackdrez"
                    )
                ):
                    outside.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert outside == []
