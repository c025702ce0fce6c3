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
