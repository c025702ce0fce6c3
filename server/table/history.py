"""A room's numbered events: kept for ``resync``, gathered for the next broadcast.

Theory of operation
-------------------
Every event a room emits gets the next number (:attr:`EventLog.seq`), goes into the broadcast
being gathered (:attr:`EventLog.pending`, taken by ``Room.flush``) and into the last
:data:`KEPT_EVENTS` kept for viewers who catch up (:meth:`EventLog.since`); a client further
behind gets a snapshot, which carries the current game's last :data:`RECENT_EVENTS`
(:meth:`EventLog.recent`). :attr:`EventLog.info_dirty` says the table's lobby entry changed since
the last broadcast, which then carries it: the seat and presence events set it themselves, the
room sets it for every other change of what the lobby shows.

Kept events are stored encoded, as bare bytes whose numbers follow from their place (the last
one is :attr:`EventLog.seq`): a busy node keeps hundreds of thousands of them. As objects (an
event, its lists) they were most of what the garbage collector walked (a young generation of
about 95,000 objects, 70-120 ms a collection, with 300 tables); bytes are not tracked by it, and
without a wrapper per event (its number beside its bytes) a table's kept events take about
a quarter less memory.

How many are kept is what a table costs the node's memory while it plays (they are in each of
its snapshots too): 256 kept took 17 KiB a table (a quarter of the node's RSS per connection
under load, issue 35); 64 take about 4 KiB and still cover a reconnection of some rounds. A
client further behind gets a snapshot, as before: the same table for it, one frame larger.
"""

from __future__ import annotations

import collections
import itertools
from typing import Any

import msgspec

from blackdrez.protocol import v1
from blackdrez.server.table import parts

KEPT_EVENTS = 64
"""Events kept for ``resync`` (as many as a snapshot's ``recent``); a client further behind
gets a snapshot."""
RECENT_EVENTS = 64
"""Events of the current game a snapshot carries as ``recent``, for the client's table log."""

INFO_EVENTS = (v1.SeatTaken, v1.SeatFreed, v1.ReadyChanged, v1.PresenceChanged, v1.TableClosed)
"""The events that change the table's lobby entry."""

_kept_encoder = msgspec.msgpack.Encoder()


class EventLog:
    """A room's events: their numbers, the last ones kept, the ones not broadcast yet."""

    def __init__(self) -> None:
        self.seq = 0
        """The number of the last event (0 before the first)."""
        self.kept: collections.deque[bytes] = collections.deque(maxlen=KEPT_EVENTS)
        """The last events, encoded (MessagePack), numbered up to :attr:`seq`."""
        self.pending: list[v1.Numbered] = []
        """Events not broadcast yet."""
        self.info_dirty = False
        """The table's lobby entry changed since the last broadcast."""
        self.game_start = 1
        """The first event of the current (or last) game, or of the table since it was cleared:
        where ``recent`` history starts."""

    def __setstate__(self, pickled: dict[str, Any]) -> None:
        parts.restore(self, pickled)

    def emit(self, event: Any) -> None:
        """Number ``event``, keep it and queue it for the next broadcast."""
        self.seq += 1
        self.kept.append(_kept_encoder.encode(event))
        self.pending.append(v1.Numbered(seq=self.seq, event=event))
        if isinstance(event, INFO_EVENTS):
            self.info_dirty = True

    @property
    def first_kept(self) -> int:
        """The number of the oldest event kept (``seq + 1`` when none is)."""
        return self.seq - len(self.kept) + 1

    def kept_events(self) -> list[v1.Numbered]:
        """Every event kept, decoded (the oldest first)."""
        return self.since(self.first_kept - 1) or []

    def since(self, since: int) -> list[v1.Numbered] | None:
        """The events after ``since`` (the same for every viewer), or ``None`` if they are no
        longer kept."""
        if since >= self.seq:
            return []
        kept = self.kept
        first = self.seq - len(kept) + 1  # (first_kept, inline)
        if since < 0 or not kept or first > since + 1:
            return None
        return [
            v1.Numbered(seq=seq, event=msgspec.msgpack.decode(data))
            for seq, data in enumerate(itertools.islice(kept, since + 1 - first, None), since + 1)
        ]

    def recent(self) -> list[v1.Numbered]:
        """The last :data:`RECENT_EVENTS` events of the current game (or of the table since it
        was last cleared)."""
        first = max(self.game_start, self.seq - RECENT_EVENTS + 1)
        return self.since(first - 1) or []
