"""The games: pure rules, reference bots and per-game glue, one folder per game.

Theory of operation
-------------------
Each sub-package is one game (``games/<name>/``: ``rules`` the engine, no I/O, no asyncio,
deterministic from a seed and the list of actions; ``bots`` the reference strategies; ``table``
its :class:`~blackdrez.games.spec.GameSpec`) and exposes ``SPEC``. :data:`GAMES` is built once,
at import: first these folders, in name order, so adding a game here is adding a folder; then a
game kept anywhere else (a test's, a plugin's), a package exposing ``SPEC`` the same way, named
in the environment variable ``BLACKDREZ_GAMES`` (comma-separated module names): that one line
registers it, in every process that inherits the variable. The server, the CLI, the protocol's
game names and schema, and the browser's game list all read this registry, so it must be
complete before they are imported. The shared helpers beside the folders (``base``, ``cards``,
``shuffle``, ``records``, ``verify``, ``transcript``) are plain modules. Nothing here imports
from the rest of the project.
"""

from __future__ import annotations

import importlib
import os
import pkgutil

from blackdrez.games.spec import GameSpec

PLUGINS_VARIABLE = "BLACKDREZ_GAMES"
"""The environment variable naming the modules of games kept outside ``games/``."""

GAMES: dict[str, GameSpec] = {}
"""Every game by its wire name."""


def register(spec: GameSpec) -> None:
    """Add ``spec``'s game to :data:`GAMES`; a second game of one name is refused."""
    if not isinstance(spec, GameSpec):
        raise TypeError(f"a game's SPEC is a GameSpec, not {type(spec).__name__}")
    if spec.name in GAMES:
        raise RuntimeError(f"two games are called {spec.name!r}")
    GAMES[spec.name] = spec


def _discover(plugins: str) -> None:
    """Register every game folder's ``SPEC`` (the folder's name must be the game's), then the
    ``SPEC`` of each module named in ``plugins``."""
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not module.ispkg:
            continue
        spec = importlib.import_module(f"{__name__}.{module.name}").SPEC
        if spec.name != module.name:
            raise RuntimeError(f"games/{module.name}/ holds the spec of {spec.name!r}")
        register(spec)
    for name in filter(None, (part.strip() for part in plugins.split(","))):
        register(importlib.import_module(name).SPEC)


_discover(os.environ.get(PLUGINS_VARIABLE, ""))
SOLITAIRES: tuple[str, ...] = tuple(name for name, spec in GAMES.items() if spec.solitaire)
"""The one-seat games, started with ``start_solitaire``."""
