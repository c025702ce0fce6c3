"""Table snapshots: a hosted room as bytes, so that rebuilding it replays only the log after them.

Theory of operation
-------------------
A room is rebuilt by replaying its log (:func:`blackdrez.server.table.commands.rebuild`), which
costs one
command per entry: a table that played for hours has a long log and a slow adoption. So every
:data:`SNAPSHOT_EVERY` entries the host takes a snapshot, the room just after entry ``position`` as
bytes (:func:`take`), and stores it beside the log (fenced by its lease like a log append:
:meth:`~blackdrez.server.stores.base.TableLogs.put_snapshot`). :func:`rebuild` then starts
from the latest snapshot and replays only the entries after it, at most ``SNAPSHOT_EVERY - 1`` of
them, whatever the log's length; the room is the same as the full replay's
(``tests/test_snapshots.py``). The log itself stays whole: it is the record (a retired table's
game record compresses it) and the truth a
snapshot is checked against: a snapshot that does not fit the log (past its end, not readable, or
not at the event number the log's entry at its position gives) is ignored and the whole log
replayed.

A snapshot is the room pickled (a room is plain Python data: seats, engine, event log, deadlines),
with its game adapter by name, since adapters are shared singletons, and compressed
(:data:`COMPRESSION`; a bare pickle, as nodes wrote before, is read too). Unpickling runs code named
by the data, so a snapshot is loaded only from the project's own modules and a few standard
types (:class:`_Unpickler`): a Redis that someone else could write cannot make a node import or
call anything else. It is still Redis data the nodes trust, as they trust its log and its
token-signing secret.
"""

from __future__ import annotations

import copyreg
import io
import logging
import pickle
import zlib
from collections.abc import Sequence
from typing import Any

from blackdrez.games import GAMES
from blackdrez.server.table import parts
from blackdrez.server.table.commands import decode_entry, execute
from blackdrez.server.table.commands import rebuild as rebuild_from_log
from blackdrez.server.table.history import EventLog
from blackdrez.server.table.room import LAYOUT, GameOver, Outcome, Room, RoomError
from blackdrez.server.table.seating import Roster, Seat, Seating
from blackdrez.server.table.timers import Timers

log = logging.getLogger("blackdrez.node")

SNAPSHOT_EVERY = 50
"""Log entries between snapshots: a rebuild replays fewer than this many entries, and the host
keeps fewer than this many entries to undo from (a table's memory on the node: at 500, a
four-seat table held about 35 KB of entries on average, more than its connections; at 100,
the entries were still the largest thing a busy node held per connection after the connection
itself: 2.9 KiB of 24 on Redis; at 50, RSS per connection 22.0-22.2 KiB against 23.8-24.1).
A snapshot of a four-seat BlackDrez table is about
6 KB pickled, 2.5-2.7 KB compressed, and takes about 75 µs to make (110 while pickle called back
for each object to find the adapter), so one every 50 entries costs the host about 1.5 µs an entry
and Redis 55 bytes an entry, and one store call more in 50."""
COMPRESSION = 1
"""zlib's level for snapshots: a four-seat table's 5.9 KB pickle becomes 2.7 KB in 35 µs (level
6: 2.5 KB in 50 µs), once every :data:`SNAPSHOT_EVERY` entries; it is kept on the host and
stored beside the log, so the smaller the better (issue 35: the node's memory per connection).
A node from before compression finds a compressed snapshot unreadable and replays the log."""
_PICKLED = pickle.PROTO
"""How a bare pickle (protocol 2 and later) starts; a zlib stream starts otherwise (0x78)."""

_ALLOWED_PREFIXES = (
    "blackdrez.server.",
    "blackdrez.protocol.",
    "blackdrez.games.",
    # a game registered from outside games/ (BLACKDREZ_GAMES): its own package
    *{f"{type(spec).__module__.rpartition('.')[0]}." for spec in GAMES.values()},
)
_ALLOWED_GLOBALS = {
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "bytearray"),
    ("collections", "deque"),
    ("collections", "OrderedDict"),
    ("collections", "defaultdict"),
    ("collections", "Counter"),
    ("copyreg", "_reconstructor"),
    ("builtins", "object"),
    ("random", "Random"),
    ("msgspec._utils", "rebuild"),  # a Struct: its class is checked on its own
}


class SnapshotError(ValueError):
    """A snapshot that cannot be loaded (damaged, or naming something it may not)."""


def take(room: Room) -> bytes:
    """The room as it is now, as bytes (see the module docstring). Take it right after a
    logged command, once its update is flushed."""
    out = io.BytesIO()
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(room)
    return zlib.compress(out.getbuffer(), COMPRESSION)


def load(data: bytes) -> Room:
    """The room a snapshot holds; :class:`SnapshotError` if it cannot be loaded."""
    try:
        if data[:1] != _PICKLED:  # compressed (a bare pickle: written before compression)
            data = zlib.decompress(data)
        room = _Unpickler(io.BytesIO(data)).load()
    except SnapshotError:
        raise
    except Exception as error:
        raise SnapshotError(f"unreadable snapshot: {error!r}") from error
    if not isinstance(room, Room):
        raise SnapshotError(f"a snapshot holds a {type(room).__name__}, not a room")
    if room.layout != LAYOUT:
        raise SnapshotError(f"a room of layout {room.layout}, not {LAYOUT}: replay the log")
    return room


def rebuild(entries: Sequence[bytes], snapshot: tuple[int, bytes] | None = None) -> Room:
    """The room of this log: from ``snapshot`` (its position, its bytes) and the entries after
    it when it fits the log, else by replaying the whole log."""
    if snapshot is not None and 0 < snapshot[0] <= len(entries):
        try:
            return resume(snapshot, list(entries[snapshot[0] - 1 :]))
        except SnapshotError as error:
            log.warning("snapshot at %d not used, whole log replayed: %s", snapshot[0], error)
    return rebuild_from_log(list(entries))


def resume(snapshot: tuple[int, bytes], tail: list[bytes]) -> Room:
    """The room from ``snapshot`` and ``tail``, the log from the snapshot's own entry on (that
    one is checked against the snapshot, the others replayed); :class:`SnapshotError` if they do
    not fit. This needs only the end of the log: what an adopting node reads."""
    return resume_games(snapshot, tail)[0]


def resume_games(snapshot: tuple[int, bytes], tail: list[bytes]) -> tuple[Room, list[GameOver]]:
    """:func:`resume`, with the games that ended in ``tail`` (oldest first): what an adopting node
    submits to the records again. Games that ended before the snapshot are not among them."""
    if not tail:
        raise SnapshotError(f"the log ends before entry {snapshot[0]}")
    room = load(snapshot[1])
    logged = decode_entry(tail[0]).seq
    if logged is not None and room.seq != logged:
        raise SnapshotError(f"the room is at event {room.seq}, the log at {logged}")
    for index, data in enumerate(tail[1:], start=1):
        try:
            execute(room, decode_entry(data))
        except RoomError as error:
            raise SnapshotError(f"entry {index} after the snapshot refused: {error}") from None
    room.flush()
    return room, room.take_outcome().games_over


def adapter_named(name: str) -> Any:
    """The game adapter ``name`` (adapters are shared singletons: a snapshot names theirs)."""
    adapter = GAMES.get(name) if isinstance(name, str) else None
    if adapter is None:
        raise SnapshotError(f"unknown game adapter {name!r}")
    return adapter


def _reduce_adapter(adapter: Any) -> tuple[Any, tuple[str]]:
    return adapter_named, (adapter.name,)


class _Pickler(pickle.Pickler):
    """Pickles a room's game adapter by name; by a dispatch table, which pickle's C code looks
    up for each object, not a ``persistent_id``, which it calls for each (Python: most of the
    time of taking a snapshot)."""

    def __init__(self, file: Any, protocol: int) -> None:
        super().__init__(file, protocol)
        self.dispatch_table = _DISPATCH


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid: Any) -> Any:  # snapshots taken before ``adapter_named``
        if isinstance(pid, tuple) and len(pid) == 2 and pid[0] == "adapter" and pid[1] in GAMES:
            return GAMES[pid[1]]
        raise SnapshotError(f"unknown reference {pid!r}")

    def find_class(self, module: str, name: str) -> Any:
        if module.startswith(_ALLOWED_PREFIXES) or (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise SnapshotError(f"a snapshot may not name {module}.{name}")


_ADAPTER_TYPES = {type(adapter) for adapter in GAMES.values()}
_PARTS = (Room, Outcome, Seating, Seat, Roster, Timers, EventLog)
parts.register(*_PARTS)
_DISPATCH = {
    **copyreg.dispatch_table,
    **dict.fromkeys(_ADAPTER_TYPES, _reduce_adapter),
    **dict.fromkeys(_PARTS, parts.reduce),
}
"""How the snapshots' pickler reduces: game adapters by name; the room and its parts as their
``__reduce__`` does, without that method's call."""
