"""Matchmaker: "find a game", the queue every node shares, and the one node that makes its tables.

Theory of operation
-------------------
A player's ``find_game`` puts a ticket in the store's queue (``Stores.matchmaking``): their
rating (the one people see, read from the records at a rated table's request; 1500 without
one), the table size, rated or casual, since when they wait, and after how long bots may fill
in. One ticket per player, whichever connection or node asks: asking again keeps ``since``, so
a player whose node died and who asks again from another node within :data:`KEEP` seconds keeps
their place. The node of the player's connection refreshes the ticket while the connection
lives; a ticket nobody refreshes is dropped :data:`KEEP` seconds later.

Every node runs :meth:`Matchmaker.run`; the one holding the matcher's lease (``lead``) pairs the
queue every :data:`~blackdrez.server.matchmaking.pairing.TICK` seconds with the pure core
(:func:`~blackdrez.server.matchmaking.pairing.pair`) and makes each table: created here, every
player seated in the order they came and counted away until they watch it, bots in the seats
left (when a ticket allowed them), everyone ready, the game started. Then ``place`` takes the
players out of the queue and announces the table on the match channel in one step, fenced by the
lease; every node tells the players connected to it (``match_found``). A player who cancelled
while the table was made is not placed, nor is anyone else of that table: the table is left at
once (it closes) and the others wait on. A matcher that dies mid-table leaves the tickets queued
(the next matcher places them) and a table nobody was told of, whose seats are freed after the
grace.

The state this component owns: the connections here that queue (:attr:`Matchmaker.queueing`)
and the matcher's token while it leads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from typing import TYPE_CHECKING, Any

import msgspec

from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.connection import Connection
from blackdrez.server.matchmaking.pairing import (
    ANYONE_AFTER,
    BAND,
    TICK,
    WIDEN,
    Match,
    Ticket,
    pair,
)
from blackdrez.server.node.clock import Clock
from blackdrez.server.node.seams import Spawn, error_answer, refused
from blackdrez.server.records.ratings import DISPLAY_BASE, display
from blackdrez.server.stores import LeaseLost, Stores, StoreUnavailable
from blackdrez.server.stores.base import MATCH_CHANNEL
from blackdrez.server.table.commands import Answer, ConnectionChanged

if TYPE_CHECKING:
    from blackdrez.server.node.hosting import Hosting

log = logging.getLogger("blackdrez.matchmaking")

KEEP = 15.0
"""Seconds a ticket lives after its last refresh: a player whose connection (or node) is lost
keeps their place that long, for a ``find_game`` from their next connection."""
REFRESH = KEEP / 3
"""Seconds between two refreshes of the tickets of the players queueing here."""
LEAD_TTL = 3.0
"""Seconds the matcher's lease lasts unless renewed (renewed at every pairing)."""
BOTS_PATIENCE = 10.0
"""Seconds a matched table with bots waits for them to sit before its game starts."""
ARENA_ROUNDS = 5
ARENA_ROUND_PAUSE = 2.0
"""An arena table's game: 5 rounds, 2 s between them (a game of a minute or so, so that an
arena's players play many games; the open queue's tables play on until the game ends)."""
QUEUE_ROUND_PAUSE = 3.0
"""The open queue's tables: seconds between rounds (they play on until the game ends)."""
GRACE = 30.0
"""A matched table's grace: a matched player who never comes is freed after it."""


class QueueTicket(msgspec.Struct, array_like=True, frozen=True):
    """A ticket as the store keeps it: :class:`Ticket` and how to seat its player."""

    player: str
    name: str
    rating: float
    seats: int | None
    rated: bool
    since: float
    bots_after: float | None
    bot: bool
    pool: str = ""
    """An arena's id (its players are paired together), or ``""``: the queue open to all."""
    opens: float = 0.0
    closes: float = math.inf
    """When the pool pairs (an arena's start and end, wall-clock)."""

    def pairing(self) -> Ticket:
        return Ticket(
            self.player,
            self.rating,
            self.seats,
            self.rated,
            self.since,
            self.bots_after,
            self.pool,
        )


class Placed(msgspec.Struct, array_like=True, frozen=True):
    """A table the queue made, as announced on the match channel."""

    table: str
    players: list[str]
    """Who sits in seats 0, 1...: the players' ids."""
    names: list[str]
    bots: int
    rated: bool
    since: list[float]
    at: float
    arena: str | None = None


_ticket_decoder = msgspec.msgpack.Decoder(QueueTicket)
_placed_decoder = msgspec.msgpack.Decoder(Placed)


class Matchmaker:
    """The matchmaking queue's node side (see the module docstring)."""

    def __init__(
        self,
        store: Stores,
        clock: Clock,
        hosting: Hosting,
        clients: dict[str, Connection],
        *,
        spawn: Spawn,
    ) -> None:
        self.store = store
        self._spawn = spawn
        self.clock = clock
        self.hosting = hosting
        self._clients = clients
        """The node's connections by player (``Node.clients``): who to tell of a table."""
        self.queueing: dict[str, Connection] = {}
        """The connection here of each player queueing from this node."""
        self._token: int | None = None
        """The matcher's lease token while this node leads the queue."""
        self.made = 0
        """Tables made here (a figure for tests and benchmarks)."""

    async def start(self) -> None:
        """Hear the tables the queue makes, whichever node makes them."""
        await self.store.bus.subscribe(MATCH_CHANNEL, self._on_placed)

    # ------------------------------------------------------------------ requests
    async def find(self, client: Connection, message: v1.FindGame) -> Answer:
        """Queue ``client``'s player (their place kept if they queue already)."""
        if self.hosting.stopping:
            return error_answer(message, ErrorCode.UNAVAILABLE, "this node is shutting down")
        ticket, waiting = await self.enter(
            client, seats=message.seats, rated=message.rated, bots_after=message.bots_after
        )
        queued = v1.Queued(
            id=message.id,
            since=ticket.since,
            rating=round(ticket.rating),
            seats=message.seats,
            rated=message.rated,
            bots_after=message.bots_after,
            waiting=waiting,
            band=BAND,
            widen=WIDEN,
            anyone_after=ANYONE_AFTER,
            keep_seconds=KEEP,
        )
        return Answer(replies=[queued])

    async def enter(
        self,
        client: Connection,
        *,
        seats: int | None,
        rated: bool,
        bots_after: float | None = None,
        pool: str = "",
        opens: float = 0.0,
        closes: float = math.inf,
    ) -> tuple[QueueTicket, int]:
        """Put (or keep) ``client``'s player in the queue with these choices, in ``pool``
        (an arena's, paired from ``opens`` until ``closes``): their ticket, and how many
        wait. A ticket of theirs already queued keeps its ``since`` (in another pool: the
        wait starts again)."""
        now = self.clock.time()
        queue = self.store.matchmaking
        held = await queue.ticket(client.player, now)
        before = None if held is None else _ticket_decoder.decode(held)
        since = now if before is None or before.pool != pool else before.since
        rating = await self._rating(client.player) if rated else float(DISPLAY_BASE)
        ticket = QueueTicket(
            player=client.player,
            name=client.name,
            rating=rating,
            seats=seats,
            rated=rated,
            since=since,
            bots_after=bots_after,
            bot=client.bot,
            pool=pool,
            opens=opens,
            closes=closes,
        )
        await queue.enter(client.player, msgspec.msgpack.encode(ticket), now + KEEP)
        self.queueing[client.player] = client
        return ticket, len(await queue.waiting(now))

    async def leave_pool(self, client: Connection, pool: str) -> None:
        """Take ``client``'s player out of the queue if they wait in ``pool``."""
        held = await self.store.matchmaking.ticket(client.player, self.clock.time())
        if held is not None and _ticket_decoder.decode(held).pool == pool:
            await self.store.matchmaking.leave(client.player)
            self.forget(client)

    async def cancel(self, client: Connection, message: v1.CancelFind) -> Answer:
        """Take ``client``'s player out of the queue."""
        await self.store.matchmaking.leave(client.player)
        if self.queueing.get(client.player) is client:
            del self.queueing[client.player]
        return Answer(replies=[v1.Ok(id=message.id)])

    def forget(self, client: Connection) -> None:
        """``client`` closed: its ticket is no longer refreshed from here (it is kept
        :data:`KEEP` seconds, for the player's next connection)."""
        if self.queueing.get(client.player) is client:
            del self.queueing[client.player]

    async def _rating(self, player: str) -> float:
        """The rating people see of ``player`` in BlackDrez (1500 without records, or when
        they cannot be read now: the queue goes on)."""
        records = self.hosting.records
        if records is None:
            return float(DISPLAY_BASE)
        try:
            ratings = await records.seat_ratings(v1.TABLE_GAME, [player])
        except Exception as error:  # the database's own errors
            log.warning("matchmaking: the rating of %s could not be read: %r", player, error)
            return float(DISPLAY_BASE)
        seat = ratings.get(player)
        return float(DISPLAY_BASE if seat is None else display(seat.ordinal))

    # ------------------------------------------------------------------ the matcher
    async def run(self) -> None:
        """Refresh the tickets of the players queueing here; while anyone queues, lead the
        queue when no other node does, and then make its tables (an empty queue: nobody leads,
        and no key of the matcher's is written)."""
        refreshed = 0.0
        queue = self.store.matchmaking
        while not self.hosting.stopping:
            await asyncio.sleep(TICK)
            now = self.clock.time()
            try:
                if self.queueing and now - refreshed >= REFRESH:
                    await queue.refresh(list(self.queueing), now + KEEP)
                    refreshed = now
                waiting = await queue.waiting(now)
                self._token = await queue.lead(LEAD_TTL) if waiting else None
                if self._token is not None:
                    await self.match(waiting, now)
            except (StoreUnavailable, LeaseLost) as error:
                log.debug("matchmaking: %r", error)
                self._token = None

    async def match(self, waiting: list[bytes], now: float) -> None:
        """Pair the queue's ``waiting`` tickets once and make the tables (this node leads)."""
        tickets = {}
        for data in waiting:
            ticket = _ticket_decoder.decode(data)
            if ticket.opens <= now < ticket.closes:  # (an arena not started or ended: not)
                tickets[ticket.player] = ticket
        for match in pair([ticket.pairing() for ticket in tickets.values()], now):
            if self.hosting.stopping or self._token is None:
                return
            await self._make(match, [tickets[player] for player in match.players], now)

    async def _make(self, match: Match, tickets: list[QueueTicket], now: float) -> None:
        """Make one table: create it, seat and ready everyone; place them; then start it."""
        assert self._token is not None
        host = tickets[0]
        kind = "Arena" if host.pool else "Rated" if match.rated else "Casual"
        table = await self.seat_table(
            f"{kind} table of {match.seats}", tickets, match.seats, match.rated, match.bots
        )
        if table is None:
            return
        placed = Placed(
            table=table,
            players=[t.player for t in tickets],
            names=[t.name for t in tickets],
            bots=match.bots,
            rated=match.rated,
            since=[t.since for t in tickets],
            at=now,
            arena=host.pool or None,
        )
        announced = msgspec.msgpack.encode(placed)
        if not await self.store.matchmaking.place(self._token, placed.players, announced):
            await self._abandon(table, tickets)
            return
        self.made += 1
        self._spawn(self._start(table, host, match.seats))

    async def seat_table(
        self, name: str, people: list[QueueTicket], seats: int, rated: bool, bots: int = 0
    ) -> str | None:
        """A new table hosted here (an arena's if the first of ``people`` queued in one), with
        ``people`` seated in their order and ready, counted away until they watch it, and
        ``bots`` bots asked for: its id, or ``None`` if a step was refused (it is left, and
        closes). Its game is started by :meth:`start_when_seated`."""
        hosting = self.hosting
        host = people[0]
        options = v1.TableOptions(
            name=name,
            seats=seats,
            rated=rated,
            grace_seconds=GRACE,
            max_rounds=ARENA_ROUNDS if host.pool else None,
            round_pause_seconds=ARENA_ROUND_PAUSE if host.pool else QUEUE_ROUND_PAUSE,
        )
        room = await hosting.new_room(
            v1.TABLE_GAME, host.player, options, None, arena=host.pool or None
        )
        table = room.id
        steps: list[tuple[QueueTicket, Any]] = [
            (t, v1.JoinTable(table=table, seat=seat)) for seat, t in enumerate(people)
        ]
        if bots:
            steps.append((host, v1.AddBots(table=table, count=bots)))
        steps += [(t, v1.SetReady(table=table)) for t in people]
        steps += [(t, ConnectionChanged(table=table, connected=False)) for t in people]
        for ticket, step in steps:
            room = hosting.rooms.get(table, room)
            answer = await hosting.execute(room, ticket.player, ticket.name, step, bot=ticket.bot)
            if refused(answer):
                log.warning("matchmaking: %s at %s was refused: %r", step, table, answer)
                await self._abandon(table, people)
                return None
        return table

    def start_when_seated(self, table: str, host: QueueTicket, seats: int) -> None:
        """Start the table's game once every seat is taken (:meth:`_start`), in the background."""
        self._spawn(self._start(table, host, seats))

    async def _start(self, table: str, host: QueueTicket, seats: int) -> None:
        """Start the table's game once every seat is taken: at once, or once the bots the
        host added have connected and sat (at most :data:`BOTS_PATIENCE` seconds; then
        with whoever sits, as the host could)."""
        deadline = self.clock.monotonic() + BOTS_PATIENCE
        while True:
            room = self.hosting.rooms.get(table)
            if room is None:
                return  # moved or closed meanwhile: its players or next host start it
            full = sum(seat is not None for seat in room.seats) == seats
            if full or self.clock.monotonic() >= deadline:
                break
            await asyncio.sleep(0.05)
        with contextlib.suppress(StoreUnavailable, LeaseLost):
            await self.hosting.execute(
                room, host.player, host.name, v1.StartGame(table=table), bot=host.bot
            )

    async def _abandon(self, table: str, tickets: list[QueueTicket]) -> None:
        """A table that could not be made (someone left the queue meanwhile, or the store
        refused a step): its players leave it, so it closes; they wait on in the queue."""
        for ticket in tickets:
            room = self.hosting.rooms.get(table)
            if room is None:
                return
            with contextlib.suppress(StoreUnavailable, LeaseLost):
                await self.hosting.execute(
                    room, ticket.player, ticket.name, v1.LeaveTable(table=table), bot=ticket.bot
                )

    def _on_placed(self, data: bytes) -> None:
        """A table the queue made: tell its players connected here."""
        try:
            placed = _placed_decoder.decode(data)
        except msgspec.DecodeError:
            log.warning("undecodable match announcement dropped")
            return
        humans = len(placed.players)
        for seat, player in enumerate(placed.players):
            self.queueing.pop(player, None)
            client = self._clients.get(player)
            if client is None or client.closing:
                continue
            client.send(
                v1.MatchFound(
                    table=placed.table,
                    seat=seat,
                    players=placed.names,
                    bots=placed.bots,
                    rated=placed.rated,
                    waited=round(max(0.0, placed.at - placed.since[seat]), 1),
                    arena=placed.arena,
                )
            )
        log.debug("match %s: %d players, %d bots", placed.table, humans, placed.bots)
