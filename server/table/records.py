"""The compact record a closed table leaves in the store instead of its log. No I/O.

Theory of operation
-------------------
When a table closes its log is replaced in the store by a :class:`TableRecord`: the whole log
compressed (so it still replays), kept for the node's record retention. :func:`record_log` gives
the log back; :func:`record_games` the seed, commitment and result of every game played there,
found by rebuilding the table from it (:func:`blackdrez.server.table.commands.rebuilding`).

The record is made by the node that hosted the table, on its event loop, so it only packs the
log: rebuilding a table that played for hours there would stall every other table of the node
for as long (about 15 µs an entry, a second for a day's table). Records made before kept the
games in :attr:`TableRecord.games`; :func:`record_games` reads them there.

The record of a long table (:data:`SNAPSHOT_KEPT_FROM` entries or more) also keeps the table's
latest snapshot, the one its host held: whoever needs the closed table's room (a viewer told what
it missed while its node's bus was down) resumes it from there and replays the entries after it
(at most ``SNAPSHOT_EVERY``), not the whole log: 20,000 entries took 434-538 ms of that node's
loop, 4.4-4.8 from the snapshot. A short table's record goes without: its replay is short, and
the snapshot (about 2.4 KB) would be most of the record.
"""

from __future__ import annotations

import zlib
from typing import Any

import msgspec

from blackdrez.protocol import v1
from blackdrez.server.table.commands import Create, decode_entry, rebuilding


class GamePlayed(msgspec.Struct, kw_only=True):
    """One game played at a table, as its record keeps it."""

    seed: str | None
    """Revealed: with the commitment, anyone can check the deal (``blackdrez verify``)."""
    commitment: str | None
    deal: int | None = None
    result: Any = None
    """The engine's result in wire form, if the game was played to its end."""


class TableRecord(msgspec.Struct, kw_only=True):
    """What a closed table leaves in the store, kept for the node's record retention instead
    of its log.

    ``log`` is the whole log, compressed: :func:`record_log` gives the entries back, and
    :func:`rebuild` rebuilds the table from them (every action, every time, every result);
    :func:`record_games` its games.
    """

    table: str
    game: str
    closed: float
    games: list[GamePlayed]
    """Empty in the records made now (:func:`record_games` finds them in ``log``); the games
    as records made before noted them. Kept (a node of an older version decodes it)."""
    log: bytes
    snapshot: tuple[int, bytes] | None = None
    """A long table's latest snapshot (the log entry it was taken at, its bytes), if its host
    held one (see the module docstring); older nodes ignore it."""


SNAPSHOT_KEPT_FROM = 1000
"""Log entries from which a table's record keeps its latest snapshot: replaying fewer takes the
node under 15 ms; at 1,000 the snapshot adds about a fifth to the record, less beyond."""

COMPRESSION = 3
"""zlib's level for a record's log: a third of level 6's time on the node's event loop, for a
record about a tenth larger."""

_record_encoder = msgspec.msgpack.Encoder()
_record_decoder = msgspec.msgpack.Decoder(TableRecord)
_entries_decoder = msgspec.msgpack.Decoder(list[bytes])


def table_record(
    entries: list[bytes], closed: float, snapshot: tuple[int, bytes] | None = None
) -> bytes:
    """The encoded :class:`TableRecord` of a table with this log, closed at ``closed``: the log
    packed, not replayed, and ``snapshot`` (the table's latest) if the log is long (see the
    module docstring)."""
    first = decode_entry(entries[0]).command
    if not isinstance(first, Create):
        raise ValueError("a room's log must start with its create command")
    record = TableRecord(
        table=first.table,
        game=first.game,
        closed=closed,
        games=[],
        log=zlib.compress(_record_encoder.encode(entries), COMPRESSION),
        snapshot=snapshot if len(entries) >= SNAPSHOT_KEPT_FROM else None,
    )
    return _record_encoder.encode(record)


def record_games(record: TableRecord) -> list[GamePlayed]:
    """Every game played at the table, oldest first: as a record made before noted them, else
    found by rebuilding the table from the record's log."""
    if record.games:
        return record.games
    engines: list[Any] = []
    room = None
    for room in rebuilding(record_log(record)):
        if room.engine is not None and (not engines or room.engine is not engines[-1]):
            engines.append(room.engine)
    return [
        GamePlayed(
            seed=engine.seed,
            commitment=engine.commitment,
            deal=room.deal if room is not None else None,
            result=msgspec.to_builtins(engine.result()) if engine.over else None,
        )
        for engine in engines
    ]


class _CommandKind(msgspec.Struct):
    type: str = ""


class _Seating(msgspec.Struct):
    """What :func:`players_seated` reads of a log entry: its command's kind and its player."""

    command: _CommandKind
    player: str = ""


_seating_decoder = msgspec.msgpack.Decoder(_Seating)
_JOIN = v1.JoinTable.__struct_config__.tag


def players_seated(entries: list[bytes]) -> set[str]:
    """Every player who ever took a seat at the table whose log this is (each entry's command
    kind and player only: a closing table's whole log is read on the node's event loop)."""
    decode = _seating_decoder.decode
    return {entry.player for entry in map(decode, entries) if entry.command.type == _JOIN}


def decode_table_record(data: bytes) -> TableRecord:
    """A table record from the bytes kept in the store."""
    return _record_decoder.decode(data)


def record_log(record: TableRecord) -> list[bytes]:
    """The log entries a table record keeps (oldest first)."""
    return _entries_decoder.decode(zlib.decompress(record.log))
