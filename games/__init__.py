"""The games: pure rules, reference bots and per-game glue, one folder per game.

Theory of operation
-------------------
Each sub-package is one game (``games/<name>/``: ``rules`` the engine, no I/O, no asyncio,
deterministic from a seed and the list of actions; ``bots`` the reference strategies; ``table``
its :class:`~blackdrez.games.spec.GameSpec`) and exposes ``SPEC``. :data:`GAMES` is built by listing
those
folders, in name order, so adding a game is adding a folder: the server, the CLI, the protocol's
game names and schema, and the browser's game list all read this registry. The shared helpers
beside the folders (``base``, ``cards``, ``shuffle``, ``records``, ``verify``, ``transcript``)
are plain modules. Nothing here imports from the rest of the project.
"""

from __future__ import annotations

import importlib
import pkgutil

from blackdrez.games.spec import GameSpec


def _discover() -> dict[str, GameSpec]:
    """Every game folder's ``SPEC`` by the folder's name (which must be the game's name)."""
    found: dict[str, GameSpec] = {}
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not module.ispkg:
            continue
        spec = importlib.import_module(f"{__name__}.{module.name}").SPEC
        if spec.name != module.name:
            raise RuntimeError(f"games/{module.name}/ holds the spec of {spec.name!r}")
        found[spec.name] = spec
    return found


GAMES: dict[str, GameSpec] = _discover()
"""Every game by its wire name."""
SOLITAIRES: tuple[str, ...] = tuple(name for name, spec in GAMES.items() if spec.solitaire)
"""The one-seat games, started with ``start_solitaire``."""
