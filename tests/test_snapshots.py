"""Snapshots: a room rebuilt from a snapshot and the log after it is the room the whole log
rebuilds, a snapshot that does not fit is ignored, and storing one is fenced like a log append.
"""

from __future__ import annotations

import copyreg
import io
import logging
import pickle
import zlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from blackdrez.server.stores import open_stores
from blackdrez.server.stores.base import Append, LeaseLost, Stores
from blackdrez.server.table import snapshots
from blackdrez.server.table.commands import rebuild as rebuild_from_log
from blackdrez.server.table.room import GameOver, Room
from blackdrez.server.table.snapshots import SnapshotError, load, rebuild, take
from blackdrez.server.testing.table_logs import play_table
from blackdrez.tools.compile import compiled

from .leases import SHORT_LEASE, until_lapsed

LIVE_ONLY = frozenset({"room.timers.budget"})
"""What a live room keeps and a replay does not: the runaway-timer budget counts every timer
firing, logged or not (what it decides is logged as a command of its own)."""


def assert_same(a: Any, b: Any, path: str = "room", skip: frozenset[str] = frozenset()) -> None:
    """Two rooms (or parts of them) hold the same state, but for the attributes at the paths
    ``skip``; plain objects compare by attributes."""
    if path in skip:
        return
    if type(a) is not type(b):
        raise AssertionError(f"{path}: {type(a).__name__} != {type(b).__name__}")
    if hasattr(a, "__dict__") and type(a).__eq__ is object.__eq__:
        assert vars(a).keys() == vars(b).keys(), path
        for name in vars(a):
            assert_same(vars(a)[name], vars(b)[name], f"{path}.{name}", skip)
    elif type(a).__eq__ is object.__eq__ and type(a).__reduce__ is not object.__reduce__:
        # no attributes to read (a compiled engine, ``blackdrez compile``): what it pickles as
        assert_same(a.__reduce__()[1], b.__reduce__()[1], f"{path}.__reduce__", skip)
    elif isinstance(a, list | tuple) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{index}]", skip)
    else:
        assert a == b, path


def test_a_room_from_a_snapshot_is_the_room_the_whole_log_rebuilds() -> None:
    taken: list[tuple[int, bytes]] = []

    def snapshot_now(room: Any, log: list[bytes]) -> None:
        if len(log) % 53 == 0:
            taken.append((len(log), take(room)))

    live, log = play_table(700, seed=7, after_each=snapshot_now)
    replayed = rebuild_from_log(log)
    assert len(taken) >= 12
    for position, data in taken:
        # taken from the live room, as a node does
        rebuilt = rebuild(log, (position, data))
        assert_same(rebuilt, replayed, "room", LIVE_ONLY)
        assert rebuilt.spec is replayed.spec
        # taken from a replayed room: the same in every attribute
        exact = rebuild(log, (position, take(rebuild_from_log(log[:position]))))
        assert_same(exact, replayed)
    assert_same(rebuild(log, taken[-1]), live, "room", LIVE_ONLY)


def test_a_snapshot_that_does_not_fit_the_log_is_ignored(caplog: pytest.LogCaptureFixture) -> None:
    _, log = play_table(300, seed=3)
    good = (200, take(rebuild_from_log(log[:200])))
    replayed = rebuild_from_log(log)
    assert_same(rebuild(log, good), replayed)
    with caplog.at_level(logging.WARNING, logger="blackdrez.node"):
        for unfit in ((len(log) + 1, good[1]), (0, good[1]), (200, b"not a snapshot")):
            assert_same(rebuild(log, unfit), replayed)
        # A snapshot taken later than it claims: the entries after its position do not apply.
        assert_same(rebuild(log, (100, good[1])), replayed)
    assert len([r for r in caplog.records if "not used" in r.message]) == 2


def test_a_snapshot_naming_a_special_attribute_is_refused_and_the_log_replayed() -> None:
    """A room's pickled attributes are set back one by one (``parts.restore``, so that an
    extension type gets them too): one named like ``__class__`` would change what the object
    is, where a plain object's dictionary only held it. Such a snapshot is refused."""
    _, log = play_table(120, seed=5)
    room = rebuild_from_log(log[:100])
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {
        **snapshots._DISPATCH,
        Room: lambda r: (copyreg.__newobj__, (Room,), {**vars(r), "__class__": GameOver}),
    }
    pickler.dump(room)
    with pytest.raises(SnapshotError, match="__class__"):
        load(zlib.compress(out.getvalue()))
    assert_same(rebuild(log, (100, zlib.compress(out.getvalue()))), rebuild_from_log(log))


def test_a_snapshot_of_a_room_laid_out_otherwise_is_refused_and_the_log_replayed() -> None:
    _, log = play_table(120, seed=5)
    room = rebuild_from_log(log[:100])
    room.layout = 1  # a room as the code before the split into parts pickled it
    with pytest.raises(SnapshotError, match="layout 1"):
        load(take(room))
    assert_same(rebuild(log, (100, take(room))), rebuild_from_log(log))


def test_a_snapshot_is_compressed_and_one_written_before_is_still_read() -> None:
    """A snapshot is kept on its host and stored beside the log: compressed (zlib), it is
    under half the size (a four-seat table's, 5.9 KB pickled, 2.7 KB compressed). A snapshot
    written by a node from before (a bare pickle) is still read."""
    _, log = play_table(300, seed=11)
    room = rebuild_from_log(log[:250])
    data = take(room)
    out = io.BytesIO()
    _PicklerBefore(out, protocol=pickle.HIGHEST_PROTOCOL).dump(room)  # as before
    bare = out.getvalue()
    assert len(data) * 2 < len(bare)
    assert_same(load(data), room)
    assert_same(rebuild(log, (250, bare)), rebuild_from_log(log))
    assert_same(load(zlib.compress(bare)), room)  # compressed, adapter by persistent id


def test_a_snapshot_from_before_the_rules_types_had_a_module_of_their_own_is_still_used() -> None:
    """Before ``games/blackdrez/model.py`` a snapshot named BlackDrez's Structs under ``rules``
    (which still has every one of them) and pickled the engine by its attributes (it now pickles
    as its state, as a compiled engine must: ``blackdrez compile``). The Python rules read such a
    snapshot; compiled rules cannot make an engine from attributes, and the table is rebuilt
    from its whole log instead."""
    _, log = play_table(300, seed=11)
    room = rebuild_from_log(log[:250])
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {
        **snapshots._DISPATCH,
        type(room.engine): lambda engine: (copyreg.__newobj__, (type(engine),), vars_of(engine)),
    }
    pickler.dump(room)
    new, old = b"blackdrez.games.blackdrez.model", b"blackdrez.games.blackdrez.rules"
    assert new in out.getvalue()
    before = zlib.compress(out.getvalue().replace(new, old))
    if compiled("blackdrez.games.blackdrez.rules"):
        with pytest.raises(SnapshotError):
            load(before)
    else:
        assert_same(load(before), room)
    assert_same(rebuild(log, (250, before)), rebuild_from_log(log))


def test_a_snapshot_from_before_the_engine_pickled_as_its_dump_is_still_read() -> None:
    """A BlackDrez engine pickles as its MessagePack dump (``rules.restored``), a fifth of the
    time pickle took over its state's fields; a snapshot from before, its engine pickled as
    ``BlackDrez(state)``, is still read as the same room (compiled rules too)."""
    _, log = play_table(300, seed=11)
    room = rebuild_from_log(log[:250])
    assert b"restored" in zlib.decompress(take(room))
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {
        **snapshots._DISPATCH,
        type(room.engine): lambda engine: (type(engine), (engine.state,)),
    }
    pickler.dump(room)
    assert b"restored" not in out.getvalue()
    assert_same(load(zlib.compress(out.getvalue())), room)


def vars_of(engine: Any) -> dict[str, Any]:
    """The engine's attributes, as pickle took them before it pickled as its state."""
    return {"state": engine.state}


class _PicklerBefore(pickle.Pickler):
    """How snapshots were pickled before ``adapter_named``: the adapter by a persistent id (the
    room and its parts as plain objects: so they are reduced, compiled or not)."""

    def __init__(self, file: Any, protocol: int) -> None:
        super().__init__(file, protocol)
        self.dispatch_table = snapshots._DISPATCH  # (its adapters: persistent ids come first)

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) in snapshots._ADAPTER_TYPES:
            return ("adapter", obj.name)
        return None


def test_a_snapshot_names_its_adapter_and_an_unknown_one_is_refused() -> None:
    _, log = play_table(120, seed=5)
    room = rebuild_from_log(log[:100])
    loaded = load(take(room))
    assert loaded.spec is room.spec  # the shared adapter itself, not a copy
    assert_same(load(zlib.compress(_with_adapter(room, room.spec.name))), room)
    with pytest.raises(SnapshotError, match="unknown game adapter"):
        load(zlib.compress(_with_adapter(room, "no such game")))


def _with_adapter(room: Any, name: str) -> bytes:
    """``room`` pickled as a snapshot is, its adapter named ``name``."""
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {
        **snapshots._DISPATCH,
        **dict.fromkeys(snapshots._ADAPTER_TYPES, lambda _: (snapshots.adapter_named, (name,))),
    }
    pickler.dump(room)
    return out.getvalue()


class _Call:
    def __reduce__(self) -> tuple[Any, ...]:
        return (print, ("a snapshot ran this",))


def test_a_snapshot_may_name_only_the_projects_types() -> None:
    with pytest.raises(SnapshotError, match=r"may not name builtins\.print"):
        load(pickle.dumps(_Call()))
    with pytest.raises(SnapshotError, match="not a room"):
        load(pickle.dumps({"a": 1}))


@pytest.fixture(params=["memory", "redis", "cluster"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Stores]:
    url = {"memory": None, "redis": "redis_url_clean", "cluster": "redis_cluster_url_clean"}
    name = url[request.param]
    started = open_stores(request.getfixturevalue(name) if name else None, "node-a")
    await started.start()
    yield started
    await started.close()


async def test_a_snapshot_is_stored_by_the_lease_holder_only(store: Stores) -> None:
    token = await store.leases.acquire("t1", SHORT_LEASE)
    assert token is not None
    assert await store.logs.read_snapshot("t1") is None
    await store.logs.put_snapshot("t1", token, 500, b"at 500")
    with pytest.raises(LeaseLost):
        await store.logs.put_snapshot("t1", token + 1, 1000, b"stale token")
    assert await store.logs.read_snapshot("t1") == (500, b"at 500")
    await store.logs.put_snapshot("t1", token, 400, b"older")  # arrived late: the later one stays
    assert await store.logs.read_snapshot("t1") == (500, b"at 500")
    await store.logs.append(Append("t1", token, 1, b"create"))
    await until_lapsed(store, "t1")  # the lease lapses; another node adopts
    adopted = await store.leases.acquire("t1", 5)
    assert adopted is not None and adopted > token
    with pytest.raises(LeaseLost):
        await store.logs.put_snapshot("t1", token, 1000, b"from the old holder")
    await store.logs.put_snapshot("t1", adopted, 1000, b"at 1000")
    assert await store.logs.read_snapshot("t1") == (1000, b"at 1000")
    await store.logs.retire("t1", adopted, b"record", keep=60)
    assert await store.logs.read_snapshot("t1") is None


async def test_a_log_is_read_from_any_entry_on(store: Stores) -> None:
    token = await store.leases.acquire("t1", 5)
    assert token is not None
    for position in range(1, 13):
        await store.logs.append(Append("t1", token, position, f"e{position}".encode()))
    assert await store.logs.read("t1", after=9) == [b"e10", b"e11", b"e12"]
    assert await store.logs.read("t1", after=12) == []
    assert len(await store.logs.read("t1")) == 12
