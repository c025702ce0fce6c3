"""The type checker as the installed names see it: ``python3 -m tests.typecheck [PATH...]``.

The folders are installed as ``blackdrez.server``, ``blackdrez.protocol``... (setup.py maps them),
and an editable install reaches them through an import hook that mypy does not follow. So this
builds ``.namespace/blackdrez/`` in the checkout, one link per installed folder
(:func:`blackdrez.tools.trees.namespace_path`), and runs mypy
(its settings in pyproject.toml) on it: a module is checked under the name it is imported by.
With no PATH it checks what pyproject.toml names (server/, protocol/, games/); a PATH is a file or
folder of the checkout (``server/node``). The exit status is mypy's. ``tests/test_types.py`` runs
it as part of the test command.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from blackdrez.tools.trees import namespace_path

ROOT = Path(__file__).resolve().parent.parent


def checked(paths: list[str]) -> list[str]:
    """The paths to give mypy: the checkout's paths seen through the link tree."""
    if not paths:
        config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
        paths = config["tool"]["mypy"]["files"]
    namespace = namespace_path(ROOT) / "blackdrez"
    return [str((namespace / Path(path)).relative_to(ROOT)) for path in paths]


def run(paths: list[str]) -> subprocess.CompletedProcess[str]:
    """mypy over ``paths`` (the configured folders when empty), its report captured."""
    command = [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml", *checked(paths)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)


if __name__ == "__main__":
    result = run(sys.argv[1:])
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    sys.exit(result.returncode)
