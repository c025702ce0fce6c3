"""The Node: one server process's share of the game world, composed of its components.

Theory of operation
-------------------
:class:`Node` builds its components and hands each its collaborators (see ``blackdrez.server.node``
for what each one owns), then serves the server: it keeps the connected clients, answers what
needs no table (lobby, solitaire start, daily deals, leaderboards) through the lobby and hands
table requests to routing, delivers every answer (starting or ending the requester's watch), and
runs the node's periodic work (the bus subscriptions, heartbeat, lease renewals, orphan scans,
the sweeper for rooms that should close). It also keeps a player to one connection across the
nodes (:meth:`Node.claim`, :meth:`Node.close_replaced`) and closes the connections of an account
signed out everywhere.

The components are plain objects built in dependency order: fan-out, hosting (with the bots the
host adds, and its leases), routing, lobby, failover. The two calls that go back up that order
(hosting and routing asking for an orphan scan soon, fan-out sending a table request or
delivering an answer) are given as the node's own small methods, bound at construction.
The records of finished games are opened by the server after the node is built:
:meth:`Node.bind_records` wires them in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import msgspec

from blackdrez.games.shuffle import new_seed
from blackdrez.protocol import v1
from blackdrez.protocol.errors import CloseCode, ErrorCode
from blackdrez.server import bus, tracing
from blackdrez.server.connection import OLDEST, Connection, Outbox
from blackdrez.server.hints import HintWorker
from blackdrez.server.matchmaking.schedule import ArenaSchedule
from blackdrez.server.metrics import Metrics
from blackdrez.server.node.arenas import ArenaHall
from blackdrez.server.node.bots import SpawnBot, TableBots
from blackdrez.server.node.clock import Clock, SystemClock
from blackdrez.server.node.failover import Failover
from blackdrez.server.node.fanout import Fanout
from blackdrez.server.node.friends import Friendships
from blackdrez.server.node.hosting import HINT_BURST, HINT_RATE, GameRecords, Hosting
from blackdrez.server.node.leases import RENEWALS
from blackdrez.server.node.lobby import Lobby
from blackdrez.server.node.matchmaking import Matchmaker
from blackdrez.server.node.routing import Routing
from blackdrez.server.node.seams import REQUEST_FAILED, error_answer
from blackdrez.server.retry import Backoff
from blackdrez.server.stores import LeaseLost, Stores, StoreUnavailable
from blackdrez.server.stores.base import node_channel
from blackdrez.server.table.commands import Answer
from blackdrez.server.table.room import Room
from blackdrez.server.tasks import cancel_until_done

log = logging.getLogger("blackdrez.node")

LEASE_TTL = 1.0
"""Seconds a table's lease lasts unless its host renews it: a killed node's tables are adopted
about this long after the kill. Fencing (tokens checked by every write) makes a short lease safe;
what bounds it from below is the longest stall a live node must survive without losing its
tables (see RENEWALS), and work done on the event loop when leases are renewed in the loop (the
in-memory store): which is why hints and pars are computed in worker processes
(``blackdrez.server.hints``)."""

SOLE_LEASE_TTL = 30.0
"""The lease of a node whose store no other node shares (the in-memory store), unless set: no
other node can take its tables, so a lease lapsing after a stall (a loaded machine, a long
collection) would only make the node drop its own tables and adopt them again from its log, while
their players are told ``moving``."""

RECORD_RETENTION = 24 * 3600.0
"""Seconds a closed table's game record stays in the store (for audits and replays)."""

SWEEP_INTERVAL = 5.0
"""Seconds between sweeps for rooms that should be closed (see ``Room.should_close``)."""

RESTART = Backoff(first=0.1, cap=5.0)
"""Pauses before a background loop that failed is started again (:meth:`Node.keep_running`)."""
RESTART_QUIET = 60.0
"""Seconds a restarted loop must run before its next failure's pause starts from the first."""


TokenGenerations = Callable[[list[str]], Awaitable[dict[str, int]]]
"""The current token generation of each of these players who has an account."""


NOT_REPEATABLE = (v1.Act, v1.Undo, v1.AddBots)
"""Requests that change a table again each time they run: one forwarded to the table's node and
left unanswered closes its connection (4008) rather than answer an error that says nothing
changed (the others are harmless to send again: a second ``join`` or ``ready`` changes nothing)."""


class Node:
    """One server process's share of the game world (see ``blackdrez.server.node``)."""

    def __init__(
        self,
        store: Stores,
        metrics: Metrics,
        *,
        seed_source: Callable[[], str] = new_seed,
        clock: Clock | None = None,
        lease_ttl: float = LEASE_TTL,
        record_retention: float = RECORD_RETENTION,
        renewal_store: Callable[..., Stores] | None = None,
        hints: HintWorker | None = None,
        hint_rate: float = HINT_RATE,
        hint_burst: int = HINT_BURST,
        spawn_bot: SpawnBot | None = None,
        arena_schedule: Sequence[ArenaSchedule] = (),
    ) -> None:
        self.store = store
        self.id = store.node_id
        self.metrics = metrics
        self.clock: Clock = clock if clock is not None else SystemClock()
        """The clock every component reads (``blackdrez.server.node.clock``)."""
        self.clients: dict[str, Connection] = {}
        """The connection of each player connected here."""
        self.token_generations: TokenGenerations | None = None
        """Reads accounts' current token generations (:meth:`bind_records`): what a node whose
        bus was down checks its connections against (``_close_signed_out_meanwhile``)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._spawned: set[asyncio.Task[Any]] = set()
        """One-off tasks, kept until done so none is lost and every failure is logged."""
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop the node's tasks run in (:meth:`_spawn`), asked for once."""
        self.outbox = Outbox()
        """Every connection's frames, written once a turn (``blackdrez.server.connection``)."""
        self.fanout = Fanout(
            store,
            metrics,
            spawn=self._spawn,
            route=self.route,
            deliver_answer=self._deliver_answer,
            outbox=self.outbox,
        )
        self.hosting = Hosting(
            store,
            metrics,
            self.clock,
            fanout=self.fanout,
            bots=TableBots(self.clock, spawn_bot),
            spawn=self._spawn,
            scan_soon=self._scan_soon,
            lease_ttl=lease_ttl,
            record_retention=record_retention,
            renewal_store=renewal_store,
            seed_source=seed_source,
            hints=hints,
            hint_rate=hint_rate,
            hint_burst=hint_burst,
        )
        self.routing = Routing(
            store, self.hosting, self.fanout, spawn=self._spawn, scan_soon=self._scan_soon
        )
        self.lobby = Lobby(
            store, self.clock, self.hosting, route=self.routing.route, spawn=self._spawn
        )
        self.matchmaker = Matchmaker(
            store, self.clock, self.hosting, self.clients, spawn=self._spawn
        )
        self.arenas = ArenaHall(
            store, self.clock, self.matchmaker, spawn=self._spawn, schedule=arena_schedule
        )
        self.friends = Friendships(store, self.clock, self.clients, self.matchmaker, tell=self.tell)
        self.failover = Failover(
            store,
            metrics,
            self.clock,
            hosting=self.hosting,
            routing=self.routing,
            fanout=self.fanout,
        )

    @property
    def rooms(self) -> dict[str, Room]:
        """The rooms hosted here (``Hosting.rooms``)."""
        return self.hosting.rooms

    @property
    def seed_source(self) -> Callable[[], str]:
        """Makes the seed of each game started here (``Hosting.seed_source``)."""
        return self.hosting.seed_source

    @seed_source.setter
    def seed_source(self, source: Callable[[], str]) -> None:
        self.hosting.seed_source = source

    def bind_records(self, records: GameRecords, token_generations: TokenGenerations) -> None:
        """Keep records (the server opens the records database once the node is built):
        finished games go to ``records``, rated tables read their ratings from it, and after a
        bus outage the connections here are checked against ``token_generations``."""
        self.hosting.bind_records(records)
        self.token_generations = token_generations

    async def start(self) -> None:
        """Subscribe to this node's channels, start the background work, and take over at once
        the tables an earlier process of this node left (same node id)."""
        self.store.bus.on_recovered = self._on_bus_recovered
        self.store.health.listeners.append(self._on_store_back)
        await self.store.bus.subscribe(node_channel(self.id), self._on_node_message)
        await self.store.bus.subscribe(bus.HANDOVER_CHANNEL, self.failover.on_handover)
        await self.matchmaker.start()
        with contextlib.suppress(StoreUnavailable):  # (made at the next check then)
            await self.arenas.make_scheduled()
        loop = asyncio.get_running_loop()
        keep = self.keep_running
        self._tasks = [
            loop.create_task(self.hosting.drain_outbox()),  # (its queue's state is its own)
            loop.create_task(keep("heartbeat", self._heartbeat)),
            loop.create_task(keep("orphan scan", self.failover.adopt_orphans)),
            loop.create_task(keep("sweep", self._sweep)),
            loop.create_task(keep("matchmaker", self.matchmaker.run)),
            loop.create_task(keep("whereabouts", self.friends.note_whereabouts)),
            loop.create_task(keep("arena schedule", self.arenas.keep_scheduled)),
        ]
        renewals = self.hosting.leases.start(loop, keep)
        if renewals is not None:
            self._tasks.append(renewals)
        self._scan_soon()

    async def stop(self, reason: str = "server shutting down") -> None:
        """Stop hosting: hand every room over to the other nodes when the store is shared
        (they adopt it from its log at once), else close it. Then stop the background work."""
        for task in self._tasks[1:]:  # all but the outbox's drain, which goes on to the end
            task.cancel()
        await self.hosting.stop(reason)
        await cancel_until_done([*self._tasks, *self._spawned])
        self.hosting.hints.close()

    async def _settled(self) -> None:
        """Wait until what this node queued for the store has been written (read your own
        writes: ``Hosting.settled``)."""
        await self.hosting.settled()

    async def keep_running(self, name: str, loop: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``loop``, one of the node's background loops, for as long as the node runs.

        Each loop handles the failures it expects (the store unreachable, mostly); one that
        fails otherwise (a bug, an error of a client library no one foresaw) is logged, counted
        (``blackdrez_background_restarts``) and started again after a pause (:data:`RESTART`),
        never left dead: a node whose orphan scan died would answer ``moving`` for a dead
        node's tables for ever, one whose heartbeat died would look dead to the others while it
        serves. A loop that returns (the node stopping) is done."""
        delays = RESTART.delays()
        while True:
            started = time.monotonic()
            try:
                await loop()
                return
            except Exception:
                if self.hosting.stopping:
                    return
                log.exception("the node's %s failed: started again", name)
                self.metrics.restarts.labels(name).inc()
            if time.monotonic() - started > RESTART_QUIET:
                delays = RESTART.delays()  # it ran a while: a new failure, not the same one
            await asyncio.sleep(next(delays))

    def _spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coroutine`` as a task that is kept until done and whose failure is logged."""
        loop = self._loop
        if loop is None:  # (asked once: asking costs a system call, for fork safety)
            loop = self._loop = asyncio.get_running_loop()
        task = loop.create_task(coroutine)
        self._spawned.add(task)
        task.add_done_callback(self._reap)
        return task

    def _reap(self, task: asyncio.Task[Any]) -> None:
        self._spawned.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if isinstance(error, StoreUnavailable | TimeoutError | LeaseLost):
            log.debug("background task %s gave up: %r", task.get_coro(), error)
        elif error is not None:
            log.error("background task %s failed", task.get_coro(), exc_info=error)

    def _scan_soon(self) -> None:
        """Look for orphans now, and often for a while (``Failover.scan_soon``)."""
        self.failover.scan_soon()

    async def route(
        self, player: str, name: str, table: str, message: Any, *, bot: bool = False
    ) -> Answer:
        """Answer a table request here, or at the table's host (``Routing.route``)."""
        return await self.routing.route(player, name, table, message, bot=bot)

    async def _sweep(self) -> None:
        """Close every hosted room the rules say should be closed, in case its timer did not."""
        hosting = self.hosting
        while not hosting.stopping:
            await asyncio.sleep(SWEEP_INTERVAL)
            now = self.clock.time()
            for room in [r for r in hosting.rooms.values() if r.should_close(now)]:
                await hosting.tick(room)

    async def _heartbeat(self) -> None:
        """Tell the other nodes this one is alive (they look for orphans when one goes).

        After a store outage the node may have dropped out of the live nodes, and the news the
        others sent only to live nodes meanwhile (a sign-out, a replacement) never reached it,
        even with its bus up: once its first heartbeat after the outage is written (so that
        whatever is sent from then on reaches it) it reads what it missed, as after a bus
        outage."""
        outages = self.store.health.outages
        ttl = self.hosting.leases.ttl
        while not self.hosting.stopping:
            await self.store.health.wait_up()
            with contextlib.suppress(StoreUnavailable):
                sent = time.perf_counter()
                await self.store.presence.heartbeat(ttl)
                self.metrics.store_rtt.observe(time.perf_counter() - sent)
                if self.store.health.outages != outages:
                    outages = self.store.health.outages
                    self._spawn(self._close_signed_out_meanwhile())
                    self._spawn(self._close_replaced_meanwhile())
            await asyncio.sleep(ttl / RENEWALS)

    def _on_store_back(self) -> None:
        """The store answers again: renew leases and look for orphans now, not at the next
        period (every lease may have lapsed meanwhile)."""
        self.hosting.leases.renew_now()
        self._scan_soon()

    def _on_bus_recovered(self) -> None:
        """The bus is back after an outage: what was published meanwhile is lost, so catch the
        viewers of remote tables and the lobby's watchers up, and read the sign-outs and
        replacements missed."""
        self._spawn(self.fanout.catch_up())
        self._spawn(self.lobby.catch_up())
        self._spawn(self._close_signed_out_meanwhile())
        self._spawn(self._close_replaced_meanwhile())

    def _on_node_message(self, data: bytes) -> None:
        """A message on this node's channel: a forwarded request or its answer (routing), or
        news of a player's connection elsewhere."""
        try:
            message = bus.decode(data)
        except msgspec.DecodeError:
            log.warning("undecodable bus message dropped")
            return
        match message:
            case bus.Reply():
                self.routing.answered(message)
            case bus.Request():
                self._spawn(self.routing.serve_forward(message))
            case bus.SignedOut():
                self.close_signed_out(message.player, message.generation)
            case bus.Replaced():
                self.close_replaced(message.player, message.order, message.seated)
            case bus.Tell():
                client = self.clients.get(message.player)
                if client is not None and not client.closing:
                    client.send(message.message)
            case _:
                log.warning("unexpected %s on this node's channel", type(message).__name__)

    def attach(self, client: Connection) -> Connection | None:
        """Register a greeted client; return the older connection of the same player, if any."""
        older = self.clients.get(client.player)
        self.clients[client.player] = client
        self.metrics.connections.set(len(self.clients))
        self._spawn(self.friends.seen([client]))
        return older

    def close_signed_out(self, player: str, generation: int) -> None:
        """Close ``player``'s connection here if its token is older than ``generation`` (the
        account signed out everywhere; the connection that asked has the new token)."""
        client = self.clients.get(player)
        if client is not None and client.token.generation < generation:
            client.close(CloseCode.SIGNED_OUT, "signed out everywhere")

    async def _close_replaced_meanwhile(self) -> None:
        """After a bus outage: a ``Replaced`` published meanwhile was lost, so read the order of
        each connected player's latest connection and close those here that are older (the
        bus is subscribed again: a replacement after this read is heard)."""
        if not self.store.shared:
            return
        ordered = [c for c in self.clients.values() if c.order is not None]
        if not ordered:
            return
        try:
            latest = await self.store.players.latest_attaches([client.player for client in ordered])
            for client in ordered:
                newer, order = latest.get(client.player), client.order
                if newer is None or order is None or newer <= order:
                    continue
                if self.clients.get(client.player) is client and not client.closing:
                    _replaced_elsewhere(client, await self.store.players.tables(client.player))
        except StoreUnavailable:
            log.warning("bus back: players' newer connections elsewhere could not be checked")

    async def _close_signed_out_meanwhile(self) -> None:
        """After a bus outage: a ``SignedOut`` published meanwhile was lost, so read the token
        generation of every account connected here and close the connections on older tokens
        (the bus is subscribed again: a sign-out after this read is heard)."""
        if self.token_generations is None:
            return
        players = [client.player for client in self.clients.values() if client.token.generation]
        if not players:
            return
        try:
            generations = await self.token_generations(players)
        except Exception:  # the database's own errors: the tokens are refused at next hello
            log.warning("bus back: the accounts' sign-outs could not be checked", exc_info=True)
            return
        for player, generation in generations.items():
            self.close_signed_out(player, generation)

    async def sign_out_everywhere(self, player: str, generation: int) -> None:
        """Close the account's connections with older tokens, here and on every live node (a
        node of an older version drops the message: its connections stay open, but their
        tokens are refused at their next hello). Raises :class:`StoreUnavailable`."""
        self.close_signed_out(player, generation)
        await self._tell_other_nodes(bus.SignedOut(player=player, generation=generation))

    async def claim(self, client: Connection) -> None:
        """Make a greeted ``client`` its player's one connection across the nodes sharing the
        store (on this node :meth:`attach` did): the store orders it after every earlier one,
        and every other node closes the player's connection there if it is older, so of two
        hellos at once on two nodes the later in the store's order stays, whichever message
        arrives first. The tables where the player is seated are left to ``client`` until it
        watches them, as after a replacement on this node; the older connection's close does
        not count the player away there. Alone on its store (in memory) a node has nothing to
        do, nor has a new identity's first connection (its order is ``OLDEST`` already).
        Raises :class:`StoreUnavailable`: the other connections then stay open, and this one
        is ordered ``OLDEST`` (the player's next connection anywhere replaces it)."""
        if not self.store.shared or client.order is not None:
            return
        try:
            order = await self.store.players.next_attach(client.player)
        except StoreUnavailable:
            _ordered(client, OLDEST)
            raise
        _ordered(client, order)
        for table in client.seated:
            if table not in client.tables:
                client.left_to_me.setdefault(table, True)
        if client.closing:
            return  # replaced already: the newer connection tells the other nodes
        replaced = bus.Replaced(player=client.player, order=order, seated=client.seated)
        await self._tell_other_nodes(replaced)

    async def tell(self, player: str, message: Any) -> None:
        """Push ``message`` to ``player``'s connection: here, or on any other live node (a
        node of an older version drops it). Raises :class:`StoreUnavailable`."""
        client = self.clients.get(player)
        if client is not None and not client.closing:
            client.send(message)
        elif self.store.shared:
            await self._tell_other_nodes(bus.Tell(player=player, message=message))

    async def _tell_other_nodes(self, message: bus.BusMessage) -> None:
        """Publish ``message`` on every other live node's channel (a node of an older version
        drops a type it does not know). Raises :class:`StoreUnavailable`."""
        data = bus.encode(message)
        for node in await self.store.presence.live_nodes() - {self.id}:
            await self.store.bus.publish(node_channel(node), data)

    def close_replaced(self, player: str, order: int, seated: list[str]) -> None:
        """``player`` connected on another node, as number ``order``, seated at ``seated``:
        close their connection here if it is older (one whose order the store has not given yet
        is closed once it has, if it is older then: :meth:`claim`)."""
        client = self.clients.get(player)
        if client is None:
            return
        if client.order is None:
            if client.outranked is None or client.outranked[0] < order:
                client.outranked = (order, seated)
        elif client.order < order:
            _replaced_elsewhere(client, seated)

    async def detach(self, client: Connection) -> None:
        """Forget a closed client: its tables learn that the player is away. A newer connection
        of the same player (it replaced this one) answers for them instead, those it watches and
        those it was left (:attr:`Connection.left_to_me`) until it watches them."""
        if self.clients.get(client.player) is client:
            del self.clients[client.player]
        self.metrics.connections.set(len(self.clients))
        self.lobby.stop_watching(client)
        self.matchmaker.forget(client)
        await self.arenas.forget(client)
        await self.friends.gone(client)
        held = {table: watch.seat is not None for table, watch in client.tables.items()}
        held |= {t: seated for t, seated in client.left_to_me.items() if t not in held}
        for table, seated in held.items():
            if table in client.tables:
                await self.fanout.unwatch(client, table)
            if self.hosting.stopping:
                continue  # handed over (the new host counts everyone away)
            if seated and table in client.answered_elsewhere:
                continue  # the player's newer connection on another node answers for the seat
            newer = self.clients.get(client.player)
            if newer is not None:  # back already: the newer connection answers for the table
                if table not in newer.tables:  # until it watches it (it may never)
                    newer.left_to_me.setdefault(table, seated)
                continue
            await self.routing.gone_away(client.player, client.name, table, seated=seated)

    def act_soon(self, client: Connection, message: v1.Act) -> bool:
        """Serve an action on a table hosted here without a coroutine
        (:meth:`Hosting.act_soon`), if it can be: ``True`` when it is served (answered now, or
        once its append is settled: until then :attr:`Connection.acting`, and the client's
        next request waits for it); ``False``: :meth:`handle` it."""
        hosting = self.hosting
        table = message.table
        room = hosting.rooms.get(table)
        if room is None:
            return False
        player = client.player
        routing = self.routing

        def answered(answer: Answer) -> None:
            try:
                hosting.viewed_through(table, player, routing.id, routing.incarnation)
                self._send_replies(client, answer)
            finally:  # (whatever happens, the connection's next request is served)
                client.acting = False
                waiting = client.acted
                if waiting is not None:
                    client.acted = None
                    if not waiting.done():
                        waiting.set_result(None)

        client.acting = True  # (until answered: in memory, before ``act_soon`` returns)
        try:
            served = hosting.act_soon(room, player, client.name, message, client.bot, answered)
        except Exception:
            log.exception("request %r failed", message)
            served = error_answer(message, ErrorCode.INTERNAL, REQUEST_FAILED)
        if served is False:
            client.acting = False
            return False
        if served is not True:
            answered(served)
        return True

    async def acted(self, client: Connection) -> None:
        """Wait until ``client``'s action out to the store is answered (:meth:`act_soon`):
        what it asks next is answered after it."""
        waiting = client.acted
        if waiting is None:
            waiting = client.acted = asyncio.get_running_loop().create_future()
        await waiting

    async def handle(self, client: Connection, message: Any) -> None:
        """Serve one decoded request from ``client``."""
        try:
            if tracing.tracer is None:  # (the hot path: not even an empty block)
                if type(message) is v1.Act:  # most requests: straight to the table
                    answer = await self.routing.route(
                        client.player, client.name, message.table, message, bot=client.bot
                    )
                else:
                    answer = await self._dispatch(client, message)
            else:
                with tracing.span(
                    "blackdrez.request",
                    "server",
                    blackdrez_node=self.id,
                    blackdrez_message=type(message).__name__,
                    blackdrez_table=getattr(message, "table", None),
                ):
                    answer = await self._dispatch(client, message)
        except StoreUnavailable as error:
            log.debug("%s failed, the store is unavailable: %s", type(message).__name__, error)
            answer = error_answer(
                message, ErrorCode.UNAVAILABLE, "the lobby store cannot be reached"
            )
        except LeaseLost as error:
            # A new table's lease lapsed before it was written (the store was too slow): the
            # table never existed for anyone; the next try makes another.
            log.debug("%s failed, a lease lapsed meanwhile: %s", type(message).__name__, error)
            answer = error_answer(
                message, ErrorCode.UNAVAILABLE, "the store answered too late: retry"
            )
        except TimeoutError:
            if isinstance(message, NOT_REPEATABLE):
                # Forwarded, and no answer came: the table's node may have run it, and an error
                # (nothing changed) would have the player play it again. A lost connection says
                # "unknown": the client reconnects and resyncs, and sees.
                client.close(CloseCode.NO_ANSWER, "the table's node did not answer: resync")
                return
            answer = error_answer(message, ErrorCode.UNAVAILABLE, "the table's node did not answer")
        except Exception:
            log.exception("request %r failed", message)
            answer = error_answer(message, ErrorCode.INTERNAL, REQUEST_FAILED)
        if answer.watch is None and answer.unwatch is None:  # (most: replies only, no await)
            self._send_replies(client, answer)
        else:
            await self._deliver_answer(client, answer)

    async def _dispatch(self, client: Connection, message: Any) -> Answer:
        """The answer to one request: what needs no table here, table requests by routing."""
        if type(message) is v1.Act:  # most requests: straight to the table
            return await self.routing.route(
                client.player, client.name, message.table, message, bot=client.bot
            )
        match message:
            case v1.Ping():
                return Answer(replies=[v1.Pong(id=message.id, time=self.clock.time())])
            case v1.ListTables():
                tables = await self.lobby.list_tables()
                return Answer(replies=[v1.Tables(id=message.id, tables=tables)])
            case v1.WatchLobby():
                return await self.lobby.watch(client, message)
            case v1.UnwatchLobby():
                return self.lobby.unwatch(client, message)
            case v1.FindGame():
                return await self.matchmaker.find(client, message)
            case v1.CancelFind():
                return await self.matchmaker.cancel(client, message)
            case v1.CreateArena():
                return await self.arenas.create(client, message)
            case v1.JoinArena():
                return await self.arenas.join(client, message)
            case v1.LeaveArena():
                return await self.arenas.leave(client, message)
            case v1.WatchArena():
                return await self.arenas.watch(client, message)
            case v1.UnwatchArena():
                return await self.arenas.unwatch(client, message)
            case v1.ListArenas():
                return await self.arenas.listed(message)
            case v1.Follow():
                return await self.friends.follow(client, message)
            case v1.Unfollow():
                return await self.friends.unfollow(client, message)
            case v1.Block():
                return await self.friends.block(client, message)
            case v1.Unblock():
                return await self.friends.unblock(client, message)
            case v1.GetFriends():
                return await self.friends.friends(client, message)
            case v1.Challenge():
                return await self.friends.challenge(client, message)
            case v1.AnswerChallenge():
                return await self.friends.answer(client, message)
            case v1.CreateTable() | v1.QuickJoin() | v1.StartSolitaire() if self.hosting.stopping:
                return error_answer(message, ErrorCode.UNAVAILABLE, "this node is shutting down")
            case v1.CreateTable():
                problems = message.options.problems()
                if problems:
                    return error_answer(message, ErrorCode.BAD_MESSAGE, "; ".join(problems))
                return await self.lobby.create_and_sit(
                    client, message.options, message.id, message.spectator_chat
                )
            case v1.QuickJoin():
                return await self.lobby.quick_join(client, message)
            case v1.StartSolitaire():
                return await self.lobby.start_solitaire(client, message)
            case v1.GetDaily():
                return await self.lobby.daily(message)
            case v1.GetLeaderboard():
                return await self.lobby.leaderboard(message)
            case v1.GetRecord():
                return await self.lobby.kept_record(message)
            case v1.Hello():
                return error_answer(
                    message, ErrorCode.ALREADY_GREETED, "hello was already answered"
                )
            case _:
                table = getattr(message, "table", None)
                if not isinstance(table, str):
                    return error_answer(message, ErrorCode.UNKNOWN_TYPE, "unknown request")
                return await self.routing.route(
                    client.player, client.name, table, message, bot=client.bot
                )

    async def _deliver_answer(self, client: Connection, answer: Answer) -> None:
        """Send an answer's replies; start (or stop) the requester's watch of its table. The
        watch starts at the answer's event, before the replies go (no update of a table hosted
        here can come between), and the updates of a remote table this node already holds past
        that event follow the replies: a client never gets an update before the older answer
        it asked for."""
        watch = None
        if answer.watch is not None:
            table, seat, seq = answer.watch
            if client.closing:  # gone while a catch-up was being answered: nothing to watch
                await self.fanout.unfollow_if_unwatched(table)
            else:
                watch = self.fanout.start_watch(client, table, seat, seq)
        self._send_replies(client, answer)
        if watch is not None and table not in self.hosting.rooms:
            await self.fanout.catch_up_watch(client, table, watch)
        if answer.unwatch is not None:
            await self.fanout.unwatch(client, answer.unwatch)

    def _send_replies(self, client: Connection, answer: Answer) -> None:
        for reply in answer.replies:
            if isinstance(reply, v1.Error):
                self.metrics.errors.labels(reply.code).inc()
            client.send(reply)


def _ordered(client: Connection, order: int) -> None:
    """Give ``client`` its ``order``, and close it if a newer connection of its player on
    another node was heard of while the order was not known (``Node.close_replaced``)."""
    client.order = order
    if client.outranked is not None and client.outranked[0] > order:
        _replaced_elsewhere(client, client.outranked[1])


def _replaced_elsewhere(client: Connection, seated: list[str]) -> None:
    """Close ``client``: its player's newer connection on another node is the live one, and
    answers for the tables where it found them seated."""
    client.answered_elsewhere = frozenset(seated)
    client.close(CloseCode.REPLACED, "you connected again elsewhere")
