"""The runtime names no game: what it knows of one comes from its ``GameSpec``.

Every module of ``server/`` is parsed: importing a registered game's own module
(``blackdrez.games.<game>`` or below, those inside functions too) fails, and so does a string
constant that is exactly a registered game's id (a docstring aside: it may name a game as an
example). Names that only contain an id (``blackdrez.node``, ``blackdrez_actions_total``) are not
game ids.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from blackdrez.games import GAMES

ROOT = Path(__file__).resolve().parent.parent
SERVER = sorted((ROOT / "server").rglob("*.py"))
GAME_MODULES = tuple(f"blackdrez.games.{name}" for name in GAMES)


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring nodes of a module, its classes and functions."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def game_names_in(source: str) -> list[str]:
    """What in ``source`` names a particular game: imported game modules, game ids written out."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            modules = []
        found += [
            f"line {node.lineno}: imports {module}"
            for module in modules
            if module in GAME_MODULES or module.startswith(tuple(f"{m}." for m in GAME_MODULES))
        ]
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in GAMES
            and id(node) not in docstrings
        ):
            found.append(f"line {node.lineno}: names the game {node.value!r}")
    return sorted(set(found))


@pytest.mark.parametrize("path", SERVER, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_server_names_no_game(path: Path) -> None:
    assert game_names_in(path.read_text(encoding="utf-8")) == []


def test_the_check_sees_game_imports_and_names_but_not_docstrings_or_longer_names() -> None:
    source = '''
"""A module about blackdrez."""
import logging
from blackdrez.games import GAMES
from blackdrez.games.blackdrez.bots import BOT_NAMES
from blackdrez.games import blue_jacket

def f():
    """Only blackjack_piles here."""
    import blackdrez.games.blackjack_piles.expert
    log = logging.getLogger("blackdrez.node")
    return GAMES["blackdrez"], "blackdrez_actions_total"
'''
    assert game_names_in(source) == [
        "line 10: imports blackdrez.games.blackjack_piles.expert",
        "line 12: names the game 'blackdrez'",
        "line 5: imports blackdrez.games.blackdrez.bots",
        "line 5: imports blackdrez.games.blackdrez.bots.BOT_NAMES",
        "line 6: imports blackdrez.games.blue_jacket",
    ]
