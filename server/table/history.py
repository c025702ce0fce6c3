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

Kept events are stored encoded (:class:`_KeptEvent`): a busy node keeps hundreds of thousands of
them, and bytes are invisible to the garbage collector, where objects were most of its work.
"""

from __future__ import annotations

import collections
from typing import Any

import msgspec

from blackdrez.protocol import v1

KEPT_EVENTS = 256
"""Events kept for ``resync``; a client further behind gets a snapshot."""
RECENT_EVENTS = 64
"""Events of the current game a snapshot carries as ``recent``, for the client's table log."""

INFO_EVENTS = (v1.SeatTaken, v1.SeatFreed, v1.ReadyChanged, v1.PresenceChanged, v1.TableClosed)
"""The events that change the table's lobby entry."""

_kept_encoder = msgspec.msgpack.Encoder()


class _KeptEvent(msgspec.Struct, frozen=True, gc=False):
    """One event kept for ``resync``, in its encoded (MessagePack) form.

    A table keeps its last :data:`KEPT_EVENTS` events, and each lives for hundreds of actions:
    as objects (an event, its lists) they were most of what the garbage collector walked on a
    busy node (a young generation of about 95,000 objects, 70-120 ms a collection, with 300
    tables). Bytes are not tracked by the collector, nor is this struct (``gc=False``: it
    holds an int and bytes, so it can never be part of a cycle). :attr:`event` gives the wire
    form back (plain data, encoded to any client exactly as the event was).
    """

    seq: int
    data: bytes

    @property
    def event(self) -> Any:
        """The event in its wire form (dicts and lists, as a client decodes it)."""
        return msgspec.msgpack.decode(self.data)


class EventLog:
    """A room's events: their numbers, the last ones kept, the ones not broadcast yet."""

    def __init__(self) -> None:
        self.seq = 0
        """The number of the last event (0 before the first)."""
        self.kept: collections.deque[_KeptEvent] = collections.deque(maxlen=KEPT_EVENTS)
        self.pending: list[v1.Numbered] = []
        """Events not broadcast yet."""
        self.info_dirty = False
        """The table's lobby entry changed since the last broadcast."""
        self.game_start = 1
        """The first event of the current (or last) game, or of the table since it was cleared:
        where ``recent`` history starts."""

    def emit(self, event: Any) -> None:
        """Number ``event``, keep it and queue it for the next broadcast."""
        self.seq += 1
        self.kept.append(_KeptEvent(self.seq, _kept_encoder.encode(event)))
        self.pending.append(v1.Numbered(seq=self.seq, event=event))
        if isinstance(event, INFO_EVENTS):
            self.info_dirty = True

    def since(self, since: int) -> list[v1.Numbered] | None:
        """The events after ``since`` (the same for every viewer), or ``None`` if they are no
        longer kept."""
        if since >= self.seq:
            return []
        if since < 0 or not self.kept or self.kept[0].seq > since + 1:
            return None
        return [v1.Numbered(seq=e.seq, event=e.event) for e in self.kept if e.seq > since]

    def recent(self) -> list[v1.Numbered]:
        """The last :data:`RECENT_EVENTS` events of the current game (or of the table since it
        was last cleared)."""
        first = max(self.game_start, self.seq - RECENT_EVENTS + 1)
        return self.since(first - 1) or []
