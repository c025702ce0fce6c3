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
    return {
        (line, layer)
        for line, name in absolute_imports(path)
        if (layer := layer_of(name)) in PACKAGES
    }


def absolute_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every absolute import in ``path``, inside functions too."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
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
    return {
        (line, name) for line, name in absolute_imports(path) if name.split(".")[0] in INSTALLED
    }


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


def module_name(path: Path) -> str:
    """The installed name of the module at ``path``: ``server/http/routes.py`` is
    ``blackdrez.server.http.routes``, ``server/node/__init__.py`` ``blackdrez.server.node``."""
    parts = ["blackdrez", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(layer: str) -> dict[str, set[str]]:
    """Each module of ``layer`` and the modules of ``layer`` it imports, wherever the import
    stands (in a function, under ``if TYPE_CHECKING``). ``from package import name`` imports
    the module ``package.name`` if there is one, else ``package``; a name that is no module of
    the layer (a class, another layer) leads to the nearest module above it, or nowhere."""
    paths = {module_name(path): path for path in modules(layer)}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, up ``level - 1`` packages
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                while target and target not in paths:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    imported.add(target)
        graph[name] = imported
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: its strongly connected components of more than one
    module (Tarjan's algorithm, iterative), each sorted."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = lowest[root] = len(index)
        stack.append(root)
        while work:
            module, pending = work[-1]
            following = next(pending, None)
            if following is not None:
                if following not in index:
                    index[following] = lowest[following] = len(index)
                    stack.append(following)
                    work.append((following, iter(sorted(graph[following]))))
                elif following in stack:
                    lowest[module] = min(lowest[module], index[following])
                continue
            work.pop()
            if work:
                lowest[work[-1][0]] = min(lowest[work[-1][0]], lowest[module])
            if lowest[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_of_the_server_imports_itself_back() -> None:
    """An import circle (``app`` -> ``admin`` -> ``app``) makes each module half of the other:
    neither can be read, tested or typed alone. Lazy and ``TYPE_CHECKING`` imports count."""
    assert cycles(import_graph("server")) == []


def test_the_cycle_finder_finds_each_circle_once() -> None:
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},
        "d": set(),
        "e": {"e"},  # a module naming itself is no circle
    }
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_sees_lazy_relative_and_package_imports(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    layer = tmp_path / "server"
    (layer / "node").mkdir(parents=True)
    (layer / "__init__.py").write_text("")
    (layer / "node" / "__init__.py").write_text("from blackdrez.server.node.core import Node\n")
    (layer / "node" / "core.py").write_text("from . import helpers\n")
    (layer / "node" / "helpers.py").write_text(
        "def later():\n    from blackdrez.server.node import Node\n"
    )
    (layer / "app.py").write_text(
        "import blackdrez.server.node.core\nfrom blackdrez.games import GAMES\n"
    )
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    graph = import_graph("server")
    assert graph == {
        "blackdrez.server": set(),
        "blackdrez.server.app": {"blackdrez.server.node.core"},
        "blackdrez.server.node": {"blackdrez.server.node.core"},
        "blackdrez.server.node.core": {"blackdrez.server.node.helpers"},
        "blackdrez.server.node.helpers": {"blackdrez.server.node"},
    }
    assert cycles(graph) == [
        ["blackdrez.server.node", "blackdrez.server.node.core", "blackdrez.server.node.helpers"]
    ]
