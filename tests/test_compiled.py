"""The compiled modules (``blackdrez compile``, mypyc) are the same code: every game, refusal,
view and pickle of BlackDrez played through the compiled rules, and every move and solution of
Blue Jacket's compiled expert and solver, give the same bytes as through the Python; the table
core compiled with Cython (``--core``) passes the node's tests.

The rules are compiled in a copy of the installed ``games`` folder (the suite never changes the
tree it tests), and the same script runs twice in fresh interpreters: once as installed, once
with ``blackdrez.games`` taken from the copy.
"""

from __future__ import annotations

import importlib.util
import os
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from blackdrez.tools import compile as compiling

PLAY = r"""
import hashlib, pickle, random, sys

import msgspec

from blackdrez.games.base import Rejected
from blackdrez.games.blackdrez import rules
from blackdrez.tools.compile import compiled

digest = hashlib.sha256()
encode = msgspec.msgpack.encode
odd = [
    rules.StartRound(seats=[0]), rules.StartRound(seats=[0, 0]), rules.StartRound(seats=[0, 9]),
    rules.StartRound(seats=[0, "1"]), rules.StartRound(seats=[0, True]),
    rules.StartRound(seats=[0, 1.0]), rules.StartRound(seats=[0, 1], newcomers=[5]),
    rules.Hit(), rules.Stand(), rules.Withdraw(), rules.EndGame(),
]
for number in range(int(sys.argv[1])):
    pick = random.Random(number)
    seats = 2 + number % 7
    engine = rules.BlackDrez.new(rules.Config(seats=seats, max_rounds=pick.choice([None, 3])),
                                 f"seed-{number}")
    while not engine.over:
        if pick.random() < 0.15:  # something the rules refuse, from anyone
            seat = pick.randrange(-1, seats)
            try:
                digest.update(encode(engine.apply(seat, pick.choice(odd))))
            except Rejected as refused:
                digest.update(f"{seat} {refused.reason} {refused.detail}".encode())
            continue
        acting = [s for s in range(-1, seats) if engine.legal_actions(s)]
        seat = pick.choice(acting)
        action = pick.choice(engine.legal_actions(seat))
        digest.update(encode([seat, action, engine.apply(seat, action)]))
        for viewer in (None, *range(seats)):
            digest.update(encode(engine.view(viewer)))
        digest.update(engine.dump())
    digest.update(encode([engine.result(), engine.dealt()]))
    again = pickle.loads(pickle.dumps(engine))
    assert type(again) is rules.BlackDrez and again.dump() == engine.dump()
print(compiled("blackdrez.games.blackdrez.rules"), digest.hexdigest())
"""

SOLVE = r"""
import hashlib, sys

import msgspec

from blackdrez.games.blue_jacket import expert, rules, solver
from blackdrez.tools.compile import compiled

digest = hashlib.sha256()
encode = msgspec.msgpack.encode
for number in range(int(sys.argv[1])):
    seed = f"seed-{number}"
    digest.update(encode(solver.solve_deal(seed, budget=5_000)))
    engine = rules.BlueJacket.new(rules.Config(), seed)
    digest.update(encode(solver.best_score(engine, budget=2_000)))
    digest.update(encode(expert.plan(engine.view(0), 3, 1_000)))
    bot = expert.ExpertBot(samples=3, budget=1_000)  # (plans again after every deal)
    while not engine.over:
        move = bot(engine.view(0), engine.legal_actions(0))
        digest.update(encode([move, engine.apply(0, move)]))
    digest.update(encode(engine.result()))
kinds = {compiled(f"blackdrez.games.blue_jacket.{name}") for name in ("solver", "expert")}
print(*kinds, digest.hexdigest())
"""

DEALS = 4

GAMES = 150


def _package_folder(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def _copy(games: Path, root: Path) -> Path:
    """A folder to put first on ``PYTHONPATH``, in which ``blackdrez`` is the installed package
    but for its games, a copy of ``games`` (without its extensions) in ``root``."""
    shutil.copytree(games, root / "games", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    namespace = root / "namespace" / "blackdrez"
    namespace.mkdir(parents=True)
    (namespace / "games").symlink_to(root / "games", target_is_directory=True)
    for part in ("server", "protocol", "clients", "tools"):
        (namespace / part).symlink_to(_package_folder(f"blackdrez.{part}"))
    return namespace.parent


@pytest.fixture(scope="module")
def compiled_tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A copy of the installed games folder with the rules compiled, and its ``PYTHONPATH``."""
    if shutil.which(os.environ.get("CC", "gcc")) is None and shutil.which("cc") is None:
        pytest.fail("no C compiler: .ci/run installs gcc")
    root = tmp_path_factory.mktemp("compiled")
    pythonpath = _copy(compiling.games_folder(), root)
    games = root / "games"
    built = compiling.build(games)
    assert len(built) == 2 * len(compiling.MODULES)  # each module's extension, mypyc's part
    assert {path.parent for path in built} == {games / "blackdrez", games / "blue_jacket"}
    yield games, pythonpath


def _play(pythonpath: Path, script: str = PLAY, count: int = GAMES) -> tuple[str, str]:
    """``script`` run with ``count`` in a fresh interpreter whose ``blackdrez`` is
    ``pythonpath``'s: whether its modules were compiled, and its digest."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(count)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    kind, digest = done.stdout.split()  # (two kinds, compiled or not, would fail here)
    return kind, digest


def test_the_compiled_rules_play_every_game_as_the_python_does(
    compiled_tree: tuple[Path, Path], tmp_path: Path
) -> None:
    _, pythonpath = compiled_tree
    compiled_kind, compiled_digest = _play(pythonpath)
    # the Python rules from a copy: the installed ones may be compiled (``blackdrez compile``)
    python_kind, python_digest = _play(_copy(compiling.games_folder(), tmp_path))
    assert (compiled_kind, python_kind) == ("True", "False")
    assert compiled_digest == python_digest


def test_the_compiled_solver_and_expert_solve_and_hint_as_the_python_do(
    compiled_tree: tuple[Path, Path], tmp_path: Path
) -> None:
    """Blue Jacket's solver and expert count their work in nodes, not time: compiled, they
    search faster and find exactly the same solutions, scores, hints and moves."""
    _, pythonpath = compiled_tree
    compiled_kind, compiled_digest = _play(pythonpath, SOLVE, DEALS)
    python_kind, python_digest = _play(_copy(compiling.games_folder(), tmp_path), SOLVE, DEALS)
    assert (compiled_kind, python_kind) == ("True", "False")
    assert compiled_digest == python_digest


def test_a_compiled_module_older_than_its_source_is_reported_and_cleaned_away(
    compiled_tree: tuple[Path, Path], tmp_path: Path
) -> None:
    games = tmp_path / "games"
    shutil.copytree(compiled_tree[0], games)  # (extensions and all: this test changes them)
    assert compiling.stale(games) == []
    source = compiling.source_of(compiling.MODULES[0], games)
    later = time.time() + 5
    os.utime(source, (later, later))
    assert compiling.stale(games) == [compiling.MODULES[0]]
    removed = compiling.clean(games)
    assert len(removed) == 2 * len(compiling.MODULES)
    assert not any(path.exists() for path in removed)
    assert compiling.stale(games) == []


def test_the_installed_rules_if_compiled_are_compiled_from_their_source() -> None:
    """A developer who ran ``blackdrez compile`` and then changed the rules would otherwise
    test (and serve) the old compiled ones: Python imports an extension before its source."""
    assert compiling.stale() == [], "run 'blackdrez compile' again (or 'blackdrez compile --clean')"


CORE_TESTS = [
    "tests/node",
    "tests/test_snapshots.py",
    "tests/server/test_log_compat.py",
    "tests/server/test_room_properties.py",
    "tests/server/test_lifecycle.py",
    "tests/server/test_table_lifecycle.py",
    "tests/server/test_reading.py",
    "tests/server/test_compression.py",
    "tests/test_group_commit.py::test_an_append_is_packed_for_the_commit_link_as_its_arguments_are",
]
"""What the compiled core must pass as the Python does: the node's tests (its tables, fan-out,
timers, failovers and counted budget over the harness), the snapshots' and logs' compatibility
with earlier versions, the room's properties, the tables' lifecycles on a real server, the
connection's reading and compressed writing."""


SNAPSHOT = r"""
import pickle, sys
from pathlib import Path

from blackdrez.server.table import snapshots
from blackdrez.server.table.commands import rebuild, state_key
from blackdrez.server.table.room import Room
from blackdrez.server.testing.table_logs import play_table
from blackdrez.tools.compile import compiled

mine, theirs = Path(sys.argv[1]), Path(sys.argv[2])
_, log = play_table(150, seed=7)
room = rebuild(log)
mine.write_bytes(snapshots.take(room))
read = None
if theirs.exists():
    other = snapshots.load(theirs.read_bytes())
    read = state_key(other) == state_key(room) and sorted(vars(other)) == sorted(vars(room))
try:
    pickle.dumps(room)
    pickled = True
except TypeError:
    pickled = False
extension = "seating" in Room.__dict__  # (a field of the type, not of the instance's dict)
print(compiled("blackdrez.server.table.room"), extension, pickled, read)
"""
"""Takes a snapshot of a played table (to ``argv[1]``), reads the other build's (``argv[2]``, if
written), and says: compiled; the room an extension type; pickled by ``pickle`` itself; the
other build's snapshot read as the same room."""


def test_each_pxd_declares_every_attribute_its_class_sets_in_its_order() -> None:
    """Compiled, the room and its parts, and a connection and its outbox, are extension types
    whose ``.pxd`` files declare their attributes (:mod:`blackdrez.server.table.parts`): one
    set in ``__init__`` and not declared would be refused there (they have no instance
    dictionary), and a snapshot pickles the declared ones."""
    from blackdrez.server.connection import Connection, Outbox, Watch
    from blackdrez.server.table import parts
    from blackdrez.server.table.commands import rebuild
    from blackdrez.server.testing.table_logs import play_table

    _, log = play_table(60, seed=3)
    room = rebuild(log)
    objects = (room, room.outcome, room.seating, room.seats[0], room.roster, room.timers, room.log)
    for obj in (*objects, Outbox()):
        cls = type(obj)
        assert parts.declared(cls.__module__)[cls.__name__] == tuple(vars(obj)), cls
    # (a connection has slots: its .pxd declares them, and __init__ sets each)
    for cls in (Connection, Watch):
        assert sorted(parts.declared(cls.__module__)[cls.__name__]) == sorted(cls.__slots__)


def test_the_compiled_core_passes_the_nodes_tests(tmp_path: Path) -> None:
    """``blackdrez compile --core``: the table core compiled with Cython, in a copy of the
    installed folders, runs the node's tests in a fresh interpreter, every module compiled."""
    if shutil.which(os.environ.get("CC", "gcc")) is None and shutil.which("cc") is None:
        pytest.fail("no C compiler: .ci/run installs gcc")
    if importlib.util.find_spec("Cython") is None:
        pytest.fail("no Cython: the test extra installs it")
    root = tmp_path / "tree"
    root.mkdir()
    for part in ("games", "server", "protocol"):
        shutil.copytree(
            _package_folder(f"blackdrez.{part}"),
            root / part,
            ignore=shutil.ignore_patterns("__pycache__", "*.so"),
        )
    namespace = root / "namespace" / "blackdrez"
    namespace.mkdir(parents=True)
    for part in ("games", "server", "protocol"):
        (namespace / part).symlink_to(root / part, target_is_directory=True)
    for part in ("clients", "tools"):
        (namespace / part).symlink_to(_package_folder(f"blackdrez.{part}"))
    built = compiling.build_core(root / "games")
    assert len(built) == len(compiling.CORE)
    assert compiling.stale(root / "games") == []
    env = {**os.environ, "PYTHONPATH": str(namespace.parent)}
    which = subprocess.run(
        [sys.executable, "-c", "from blackdrez.tools.compile import CORE, compiled; "
         "print(*sorted({compiled(m) for m in CORE}))"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert which.stdout.split() == ["True"], which.stdout + which.stderr
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-n", "2",
         *CORE_TESTS],
        cwd=Path(__file__).resolve().parent.parent, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
    passed = re.search(r"(\d+) passed", ran.stdout.splitlines()[-1])
    assert passed and int(passed.group(1)) > 250, ran.stdout[-2000:]
    # The room and its parts are extension types there, which pickle only as the snapshots do,
    # and each build reads the other's snapshots as the same room.
    plain, fast = tmp_path / "plain.snapshot", tmp_path / "compiled.snapshot"

    def snapshot(mine: Path, theirs: Path, compiled: dict[str, str] | None) -> list[str]:
        command = [sys.executable, "-c", SNAPSHOT, str(mine), str(theirs)]
        return subprocess.run(
            command, env=compiled, capture_output=True, text=True, check=True
        ).stdout.split()

    assert snapshot(fast, plain, env) == ["True", "True", "False", "None"]
    assert snapshot(plain, fast, None)[1:] == ["False", "True", "True"]
    assert snapshot(fast, plain, env) == ["True", "True", "False", "True"]
    # A node started on it says that it runs compiled, and how much of it.
    serving = subprocess.Popen(
        [sys.executable, "-m", "blackdrez.tools.cli", "serve", "--in-memory", "--db-url", "none",
         "--port", "0"],
        env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    said: list[str] = []
    try:
        assert serving.stderr is not None
        deadline = time.monotonic() + 60
        while not any("listening on" in line for line in said) and time.monotonic() < deadline:
            if select.select([serving.stderr], [], [], 1.0)[0]:
                line = serving.stderr.readline()
                if not line:  # (it exited: what it said is all there is)
                    break
                said.append(line)
    finally:
        serving.terminate()
        serving.wait(timeout=30)
    told = [line for line in said if "compiled: " in line]
    assert told, said
    assert f"compiled: {len(compiling.CORE)} of {len(compiling.ALL_MODULES)} modules (" in told[0]
    assert "server.table.room" in told[0], told
    source = compiling.source_of(compiling.CORE[0], root / "games")
    later = time.time() + 5
    os.utime(source, (later, later))
    assert compiling.stale(root / "games") == [compiling.CORE[0]]
    declared = compiling.source_of("blackdrez.server.table.room", root / "games")
    os.utime(declared.with_suffix(".pxd"), (later, later))  # (its .pxd counts as its source)
    assert compiling.stale(root / "games") == [compiling.CORE[0], "blackdrez.server.table.room"]
    # A node would run the old compiled code (Python imports an extension before its source):
    # `blackdrez serve` refuses, and says what to run.
    refused = subprocess.run(
        [sys.executable, "-m", "blackdrez.tools.cli", "serve", "--in-memory", "--db-url", "none",
         "--port", "0"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert (
        f"blackdrez serve: {compiling.CORE[0]}: compiled before its source changed: run "
        "'blackdrez compile --core'" in refused.stderr
    ), refused.stderr
    assert len(compiling.clean(root / "games")) == len(compiling.CORE)


def test_compiling_the_core_without_cython_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cython is optional: without it, ``blackdrez compile --core`` names it and exits 1 (the
    mypyc modules are built first; here they are stubbed: that build has its own tests)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        compiling.importlib.util,
        "find_spec",
        lambda name, *rest: None if name == "Cython" else real(name, *rest),
    )
    monkeypatch.setattr(compiling, "build", lambda *args, **kwargs: [])
    assert compiling.main(["--core"]) == 1
    assert "needs Cython: pip install cython" in capsys.readouterr().err
