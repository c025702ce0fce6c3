"""A table core wired to fake clients in memory: no sockets, no node, a clock the test moves.

Theory of operation
-------------------
Like h11's ``ConnectionPair``, :class:`TableHarness` joins the two ends of the table protocol
without any I/O. It does what a node does for a hosted room, and nothing else: it runs each request
as a logged :class:`~blackdrez.server.table.commands.LogEntry` through
:func:`~blackdrez.server.table.commands.execute`,
keeps the entry only when the room changed (as the node writes it to the store), flushes the room's
:class:`~blackdrez.server.table.room.Broadcast` and hands every watcher its own copy, and fires the
room's
timers when the test moves the clock (:meth:`TableHarness.advance`), and finds a finished
solitaire's par (inline, where a node uses its worker). A :class:`FakeClient` keeps
what a real client keeps: its seat, the events it was sent, the view and its legal actions.

Every test can therefore ask the two questions that matter: did the room do what the rules say,
and does the log rebuild exactly this room (:meth:`TableHarness.replayed`)?
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import msgspec

from blackdrez.protocol import v1
from blackdrez.server.table.assist import par_of
from blackdrez.server.table.commands import (
    NEEDS_SEED,
    Answer,
    ConnectionChanged,
    Create,
    LogEntry,
    ParFound,
    decode_entry,
    encode_entry,
    execute,
    new_room,
    rebuild,
    state_key,
    timer_entry,
)
from blackdrez.server.table.lifecycle import TableStatus
from blackdrez.server.table.room import Broadcast, Room, RoomError

START = 1_000_000.0
"""The harness clock's first reading (any fixed time: the room only compares times)."""

SPIN_LIMIT = 1000
"""Timer firings within one :meth:`TableHarness.advance` beyond which the room is spinning."""


class Spinning(AssertionError):
    """The room kept asking for its timer without the clock moving: a busy loop on a node."""


@dataclass(eq=False)
class FakeClient:
    """One player's end of the table: what a real client would hold after each message."""

    harness: TableHarness
    player: str
    name: str
    bot: bool = False
    seat: int | None = None
    watching: bool = False
    seq: int = 0
    events: list[v1.Numbered] = field(default_factory=list)
    recent: list[v1.Numbered] = field(default_factory=list)
    view: Any = None
    legal: list[Any] = field(default_factory=list)
    info: v1.TableInfo | None = None
    replies: list[Any] = field(default_factory=list)

    # requests (each returns the replies, or raises RoomError with nothing changed)
    def send(self, message: Any) -> list[Any]:
        """Send any table request as this player."""
        return self.harness.request(self, message)

    def join(self, seat: int | None = None, invite: str | None = None) -> list[Any]:
        return self.send(v1.JoinTable(table=self.harness.table, seat=seat, invite=invite))

    def spectate(self, invite: str | None = None) -> list[Any]:
        return self.send(v1.Spectate(table=self.harness.table, invite=invite))

    def leave(self) -> list[Any]:
        return self.send(v1.LeaveTable(table=self.harness.table))

    def ready(self, ready: bool = True) -> list[Any]:
        return self.send(v1.SetReady(table=self.harness.table, ready=ready))

    def start(self) -> list[Any]:
        return self.send(v1.StartGame(table=self.harness.table))

    def act(self, action: Any) -> list[Any]:
        if not isinstance(action, dict):
            action = msgspec.to_builtins(action)
        return self.send(v1.Act(table=self.harness.table, action=action))

    def resync(self) -> list[Any]:
        return self.send(v1.Resync(table=self.harness.table, since=self.seq))

    def drop(self) -> list[Any]:
        """The connection dropped (the node sends this for a seated player)."""
        return self.send(ConnectionChanged(table=self.harness.table, connected=False))

    # what the client holds
    @property
    def event_types(self) -> list[str]:
        """The type of every event received, in order."""
        return [_kind(numbered.event) for numbered in self.events]

    def receive(self, message: Any) -> None:
        """Take one message as a real client would: as it comes out of a JSON frame."""
        message = _WIRE.decode(msgspec.json.encode(message))
        self.replies.append(message)
        if isinstance(message, v1.Joined):
            self.seat = message.seat
            self.info = message.table
        elif isinstance(message, v1.Snapshot):
            self.seq = message.seq
            self.seat = message.seat
            self.info = message.info
            self.view = message.view
            self.legal = message.legal
            self.recent = list(getattr(message, "recent", []))
        elif isinstance(message, v1.Update):
            fresh = [e for e in message.events if e.seq > self.seq]
            if fresh:
                assert fresh[0].seq == self.seq + 1, "an update skipped events"
            self.events.extend(fresh)
            self.seq = max(self.seq, message.seq)
            self.view = message.view
            self.legal = message.legal
            if message.info is not None:
                self.info = message.info


_WIRE = msgspec.json.Decoder(v1.ServerMessage)


def _kind(event: Any) -> str:
    return str(event["type"])


class TableHarness:
    """One room and its clients (see the module docstring)."""

    def __init__(
        self,
        game: str = "blackdrez",
        host: str = "host",
        seeds: list[str] | None = None,
        invite: str | None = None,
        daily: str | None = None,
        ranked: bool = False,
        spectator_chat: bool = True,
        **options: Any,
    ) -> None:
        self.now = START
        self.table = "t0000000001"
        self.seeds = iter(seeds) if seeds is not None else (f"seed:{i}" for i in itertools.count())
        create = Create(
            table=self.table,
            game=game,
            host=host,
            options=v1.TableOptions(**options),
            listed=game == "blackdrez",
            invite=invite,
            daily=daily,
            ranked=ranked,
            spectator_chat=spectator_chat,
        )
        self.room: Room = new_room(create, self.now)
        self.log: list[bytes] = [encode_entry(LogEntry(now=self.now, command=create))]
        self.clients: dict[str, FakeClient] = {}
        self.watchers: dict[FakeClient, int | None] = {}
        self.broadcasts: list[Broadcast] = []
        self.timer_firings = 0
        self.transitions: list[tuple[TableStatus, TableStatus]] = []
        """Every status change of the live room, in order."""
        self._record_transitions()

    # ------------------------------------------------------------------ wiring
    def client(self, player: str, name: str | None = None, *, bot: bool = False) -> FakeClient:
        """The client of ``player`` (made on first use)."""
        found = self.clients.get(player)
        if found is None:
            found = self.clients[player] = FakeClient(self, player, name or player, bot)
        return found

    def request(self, client: FakeClient, message: Any) -> list[Any]:
        """Run one request as the node does: execute, log if changed, answer, fan out."""
        entry = LogEntry(
            now=self.now,
            command=message,
            player=client.player,
            name=client.name,
            bot=client.bot,
            seed=next(self.seeds) if isinstance(message, NEEDS_SEED) else None,
        )
        answer = self._run(entry)
        self._deliver(client, answer)
        return answer.replies

    def advance(self, seconds: float) -> None:
        """Move the clock, firing the room's timer at each deadline on the way (as a node)."""
        until = self.now + seconds
        fired = 0
        while (
            not self.room.closed
            and (deadline := self.room.next_deadline()) is not None
            and deadline <= until
        ):
            self.now = max(self.now, deadline)
            self.tick()
            fired += 1
            if fired > SPIN_LIMIT:
                raise Spinning(f"the timer fired {fired} times by {self.now - START:.3f} s")
        self.now = until

    def tick(self) -> None:
        """Fire the room's timer now (as the node does: a tick, or a stop for a runaway)."""
        self.timer_firings += 1
        self._run(timer_entry(self.room, self.now))

    def sweep(self) -> None:
        """The node's sweeper: fire the timer of a room the rules say should be closed."""
        if self.room.should_close(self.now):
            self.tick()

    def replayed(self) -> Room:
        """The room rebuilt from the entries logged so far."""
        return rebuild(self.log)

    @property
    def logged_commands(self) -> list[str]:
        """The type of every logged command after the create, in order."""
        return [type(decode_entry(data).command).__name__ for data in self.log[1:]]

    # ------------------------------------------------------------------ internals
    def _record_transitions(self) -> None:
        room = self.room
        enter = room._enter

        def recording(status: TableStatus) -> None:
            before = room.status
            enter(status)
            if room.status is not before:
                self.transitions.append((before, room.status))

        room._enter = recording  # type: ignore[method-assign]

    def _run(self, entry: LogEntry) -> Answer:
        room = self.room
        version, before = room.version, state_key(room)
        try:
            answer = execute(room, entry)
        except RoomError:
            assert state_key(room) == before, "a refused command changed the room"
            assert room.flush() is None, "a refused command queued an update"
            raise
        if room.version == version:
            assert state_key(room) == before
            assert room.flush() is None, "an unchanged room has an update to send"
            return answer
        entry.seq = room.seq
        self.log.append(encode_entry(entry))
        broadcast = self.room.flush()
        if broadcast is not None:
            self.broadcasts.append(broadcast)
            for watcher, seat in list(self.watchers.items()):
                watcher.receive(broadcast.for_seat(seat))
        if room.par_wanted is not None:  # as the node does, but inline
            par = par_of(room.spec.name, room.engine.dump())
            self._run(LogEntry(now=self.now, command=ParFound(game=room.par_wanted, par=par)))
        return answer

    def _deliver(self, client: FakeClient, answer: Answer) -> None:
        if answer.watch is not None:
            _, seat, _ = answer.watch
            self.watchers[client] = seat
            client.watching = True
        for reply in answer.replies:
            client.receive(reply)
        if answer.unwatch is not None:
            self.watchers.pop(client, None)
            client.watching = False
