"""Running the code of another checkout (the "before" of an A/B) under the installed names.

An editable install maps ``blackdrez.server``, ``blackdrez.protocol``... to one checkout (setup.py
maps the top-level folders into the ``blackdrez`` namespace), whatever the current folder. To run
another checkout's server, or to type-check a checkout's folders under the names they are
imported by, :func:`namespace_path` builds ``<tree>/.namespace/blackdrez/<folder>``, one link per
installed folder: with that folder first on ``PYTHONPATH`` the import system finds the tree's
modules before the install's hook. A tree from before the namespace (no setup.py: its folders were
top-level packages) needs nothing but being the current folder; its module names have no prefix.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

FOLDERS = ("server", "protocol", "games", "clients", "tools")
"""The checkout's folders a wheel installs as ``blackdrez.<folder>``."""


def namespace_path(tree: Path) -> Path:
    """``tree/.namespace``, holding ``blackdrez/<folder>`` -> ``tree/<folder>`` links."""
    namespace = tree / ".namespace" / "blackdrez"
    namespace.mkdir(parents=True, exist_ok=True)
    for folder in FOLDERS:
        link = namespace / folder
        if not link.is_symlink():
            link.symlink_to(Path("..", "..", folder), target_is_directory=True)
    return namespace.parent


def uses_namespace(tree: Path) -> bool:
    """Whether ``tree`` imports itself as ``blackdrez.*`` (it maps its folders in setup.py)."""
    return (tree / "setup.py").is_file()


def module_in(tree: str | None, module: str) -> tuple[str, dict[str, str] | None]:
    """How to run ``module`` (``tools.cli``) of ``tree`` (this install when None) with ``-m``:
    the module name to give and the environment to run it in (None: this process's)."""
    if tree is None:
        return f"blackdrez.{module}", None
    root = Path(tree).resolve()
    if not uses_namespace(root):
        return module, None  # the tree's folders are top-level packages: its folder is enough
    path = os.pathsep.join(filter(None, [str(namespace_path(root)), os.environ.get("PYTHONPATH")]))
    return f"blackdrez.{module}", {**os.environ, "PYTHONPATH": path}


def cli_module(tree: str | None) -> str:
    """The module of ``tree``'s command line (``tools.cli``; ``server.cli`` in the first
    versions, before the ``tools`` folder)."""
    if tree is not None and not (Path(tree) / "tools" / "cli.py").is_file():
        return "server.cli"
    return "tools.cli"


def serve_flags(tree: str | None) -> set[str] | None:
    """The options ``tree``'s ``serve`` accepts (from its ``--help``), or None for this
    install's (all of them)."""
    if tree is None:
        return None
    module, env = module_in(tree, cli_module(tree))
    shown = subprocess.run(
        [sys.executable, "-m", module, "serve", "--help"],
        cwd=tree, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", shown))


def keep_known(command: list[str], known: set[str] | None) -> list[str]:
    """``command`` without the options (and their values) a serve that knows only ``known``
    would refuse: an older tree runs with its defaults there (e.g. no records before they
    existed, an in-memory lobby before ``--in-memory`` named it)."""
    if known is None:
        return command
    kept: list[str] = []
    dropping = False
    for part in command:
        if part.startswith("--"):
            dropping = part.split("=")[0] not in known
        if not dropping:
            kept.append(part)
    return kept
