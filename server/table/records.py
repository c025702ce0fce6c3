"""The compact record a closed table leaves in the store instead of its log. No I/O.

Theory of operation
-------------------
When a table closes its log is replaced in the store by a :class:`TableRecord`: the seed,
commitment and result of every game played there, and the whole log compressed (so it still
replays), kept for the node's record retention.
:func:`table_record` rebuilds the table from its log
(:func:`blackdrez.server.table.commands.rebuilding`) to note each game's seed, commitment and
result;
:func:`record_log` gives the log back.
"""

from __future__ import annotations

import zlib
from typing import Any

import msgspec

from blackdrez.protocol import v1
from blackdrez.server.table.commands import decode_entry, rebuilding


class GamePlayed(msgspec.Struct, kw_only=True):
    """One game played at a table, as its record keeps it."""

    seed: str | None
    """Revealed: with the commitment, anyone can check the deal (``blackdrez verify``)."""
    commitment: str | None
    deal: int | None = None
    result: Any = None
    """The engine's result in wire form, if the game was played to its end."""


class TableRecord(msgspec.Struct, kw_only=True):
    """What a closed table leaves in the store: a compact record of its games, kept for the
    node's record retention instead of its log.

    ``log`` is the whole log, compressed: :func:`record_log` gives the entries back, and
    :func:`rebuild` rebuilds the table from them (every action, every time, every result).
    """

    table: str
    game: str
    closed: float
    games: list[GamePlayed]
    log: bytes


_record_encoder = msgspec.msgpack.Encoder()
_record_decoder = msgspec.msgpack.Decoder(TableRecord)
_entries_decoder = msgspec.msgpack.Decoder(list[bytes])


def table_record(entries: list[bytes], closed: float) -> bytes:
    """The encoded :class:`TableRecord` of a table with this log, closed at ``closed``."""
    engines: list[Any] = []
    for room in rebuilding(entries):
        if room.engine is not None and (not engines or room.engine is not engines[-1]):
            engines.append(room.engine)
    games = [
        GamePlayed(
            seed=engine.seed,
            commitment=engine.commitment,
            deal=room.deal,
            result=msgspec.to_builtins(engine.result()) if engine.over else None,
        )
        for engine in engines
    ]
    record = TableRecord(
        table=room.id,
        game=room.spec.name,
        closed=closed,
        games=games,
        log=zlib.compress(_record_encoder.encode(entries)),
    )
    return _record_encoder.encode(record)


def players_seated(entries: list[bytes]) -> set[str]:
    """Every player who ever took a seat at the table whose log this is."""
    commands = (decode_entry(data) for data in entries)
    return {entry.player for entry in commands if isinstance(entry.command, v1.JoinTable)}


def decode_table_record(data: bytes) -> TableRecord:
    """A table record from the bytes kept in the store."""
    return _record_decoder.decode(data)


def record_log(record: TableRecord) -> list[bytes]:
    """The log entries a table record keeps (oldest first)."""
    return _entries_decoder.decode(zlib.decompress(record.log))
