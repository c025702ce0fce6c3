"""A server node's process: the pieces wired together, started, and stopped.

Theory of operation
-------------------
:class:`GameServer` builds a node's pieces and runs them; it holds none of their logic:

* the store (``blackdrez.server.stores``) and the :class:`~blackdrez.server.node.Node` over it;
* ``blackdrez.server.session``: the WebSocket sessions (handshake, session tokens, accounts,
  the frame loop), the handler of every connection ``websockets`` accepts;
* ``blackdrez.server.http``: the plain HTTP of the same port (health, metrics, static files,
  the records API, ``/admin/`` through ``blackdrez.server.admin``) and the gate of each
  WebSocket handshake; it sees this object only as its narrow ``Served`` (:meth:`status`,
  :meth:`health`, the records API, :meth:`token_in_force`);
* with records (``db_url``), the records database, its accounts, API and the writer the node
  gives finished games to (``blackdrez.server.records``): a process of its own
  (``records.process``) unless the database is an in-memory SQLite or ``records_in_process``;
* background work: the idle sweeper, the loop lag probe, the store-lost notice, the bot ladder,
  and the bots a table's host adds (``bot_client``: the server imports no client).

A node listens before its store answers: while Redis is still starting (or refuses this client)
it logs one line, retries on the store's backoff, and answers every request, ``/healthz`` and
WebSocket handshakes included, with 503 ``starting``, so an orchestrator sees an unhealthy node
rather than a crash loop. A node that loses its store while it runs stays ``ok`` for
:data:`STORE_GRACE` seconds (a blip must not flap the load balancer), then answers ``/healthz``
and new WebSocket handshakes with 503 ``store_unreachable`` until the store answers again: it can
run no command, and a load balancer retrying a 503 elsewhere gives the player a node that can.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import gc
import logging
import os
import secrets
import signal
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve

from blackdrez.protocol import v1
from blackdrez.protocol.errors import CloseCode, ErrorCode
from blackdrez.server import hints, identity, tracing
from blackdrez.server.admin import AdminApi
from blackdrez.server.http.limits import AddressLimits
from blackdrez.server.http.responses import Health, HealthStatus, add_security_headers
from blackdrez.server.http.routes import OK, STARTING, STOPPING, STORE_UNREACHABLE, HttpRoutes
from blackdrez.server.metrics import Metrics
from blackdrez.server.node import LEASE_TTL, SOLE_LEASE_TTL, Node
from blackdrez.server.reading import ServerConnection as ReadingConnection
from blackdrez.server.records.accounts import Accounts
from blackdrez.server.records.api import RecordsApi
from blackdrez.server.records.db import DatabaseError, redact
from blackdrez.server.records.process import RecordsProcess, shared_by_processes
from blackdrez.server.records.store import RecordsStore
from blackdrez.server.records.writer import RecordsWriter
from blackdrez.server.retry import Backoff
from blackdrez.server.session import VERSION, OutageWarnings, Sessions, Tokens
from blackdrez.server.settings import Settings
from blackdrez.server.stores import StoreRefused, Stores, StoreUnavailable, open_stores
from blackdrez.server.stores.embedded import EmbeddedError, EmbeddedRedis
from blackdrez.server.tasks import cancel_until_done

log = logging.getLogger("blackdrez.server")

LOOP_PROBE_EVERY = 0.05
"""Seconds between the loop lag probe's timers (``blackdrez_loop_lag_seconds``)."""
BOT_THINK = 0.6
"""Seconds a bot the host added waits before each action, so people at the table can follow."""

STORE_GRACE = 3.0
"""Seconds a node may have lost its store and still answer ``/healthz`` ``ok``: a blip (a Redis
restart, a failover) must not flap the load balancer; past it, ``store_unreachable``."""
STORE_LOST = "this node cannot reach its store: another node may (reconnect there to play on)"
"""The ``error`` (``unavailable``, no ``id``) each connected client gets once per outage when
the node turns ``store_unreachable``: a client that can reach another node may move there,
keeping this connection until that node greets it (``blackdrez.clients.client`` does); if none does
(the store is down for every node), this one serves again once the store is back."""
STORE_WATCH_EVERY = 0.25
"""Seconds between two looks at the store's health for :data:`STORE_LOST`."""

STORE_WAIT_FIRST = 0.1
STORE_WAIT_CAP = 5.0
"""Backoff bounds (seconds) while the store refuses connections at start-up."""

Ladder = Callable[..., Coroutine[Any, Any, None]]
"""Runs the bot ladder: ``ladder(url, secret, tables, node_id)``
(``blackdrez.tools.ladder.run_ladder``)."""
BotClient = Callable[..., Coroutine[Any, Any, object]]
"""Plays one bot over the protocol: ``bot_client(url, table=, strategy=, invite=, name=, games=,
think=, token=)`` (``blackdrez.clients.bots.run_bot``)."""


class GameServer:
    """A running server node: ``await GameServer(settings).start()``, then ``stop()``."""

    def __init__(
        self,
        settings: Settings,
        store: Stores | None = None,
        bot_client: BotClient | None = None,
        ladder: Ladder | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self.store = store or open_stores(
            settings.redis_url,
            settings.node_id,
            wait_replicas=settings.redis_wait_replicas,
            wait_timeout_ms=settings.redis_wait_timeout_ms,
        )
        self.metrics.store_up.set_function(lambda: float(self.store.health.up))
        redis_url = settings.redis_url if store is None else None
        lease_ttl = settings.lease_ttl
        if lease_ttl is None:
            lease_ttl = LEASE_TTL if self.store.shared else SOLE_LEASE_TTL
        self.node = Node(
            self.store,
            self.metrics,
            lease_ttl=lease_ttl,
            record_retention=settings.record_retention,
            renewal_store=(
                functools.partial(open_stores, redis_url, settings.node_id) if redis_url else None
            ),
            hints=hints.HintWorker(settings.hint_workers, hint_budget=settings.hint_budget),
            hint_rate=settings.hints_per_second,
            hint_burst=settings.hint_burst,
            spawn_bot=self._spawn_bot if bot_client is not None else None,
            arena_schedule=settings.arena_schedule,
        )
        self.bot_client = bot_client
        """Runs one bot client; given by whoever starts the server (``blackdrez.tools.cli``
        passes ``blackdrez.clients.bots.run_bot``), since the server imports no client. Without
        it the node answers a request for bots with ``unavailable``."""
        self.ladder = ladder
        """Keeps ``ladder_tables`` rated tables of bots playing (``tools.ladder.run_ladder``,
        given by ``tools.cli``: the ladder plays over the protocol, as a client)."""
        self.records: RecordsStore | None = None
        self.api: RecordsApi | None = None
        self.writer: RecordsWriter | RecordsProcess | None = None
        self._ladder: asyncio.Task[None] | None = None
        self._bots: set[asyncio.Task[object]] = set()
        self.bot_think = BOT_THINK
        self._checks: set[asyncio.Task[None]] = set()
        """The check that the store kept its data, while it runs (:meth:`_check_store_kept`)."""
        self._check_again = False
        """The store came back while that check ran: it checks once more."""
        self.server: Server | None = None
        self.metrics_server: Server | None = None
        self.ready = False
        """True once the store answered and the node started; until then every request gets 503."""
        self.stopping = False
        self.store_grace = STORE_GRACE
        self._sweeper: asyncio.Task[None] | None = None
        self._lag_probe: asyncio.Task[None] | None = None
        self._store_watch: asyncio.Task[None] | None = None
        self.tokens = Tokens(settings, self.store, OutageWarnings(self.store))
        limits = AddressLimits(settings, self.store, self.metrics)
        self.sessions = Sessions(
            settings, self.node, self.metrics, self.tokens, limits, lambda: self.stopping
        )
        admin = AdminApi(settings, self.store, self.node, self.drain)
        self.routes = HttpRoutes(settings, self, self.metrics, limits, admin)
        self.finished = asyncio.Event()
        """Set once :meth:`stop` has finished (after a signal, or a drain)."""
        self._draining: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The port actually bound (useful with port 0)."""
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    @property
    def metrics_port(self) -> int | None:
        """The port of the metrics listener, when ``/metrics`` has one of its own."""
        if self.metrics_server is None:
            return None
        port: int = self.metrics_server.sockets[0].getsockname()[1]
        return port

    @property
    def secret(self) -> bytes:
        """The deployment's token secret (the store's), once the store answered."""
        return self.tokens.secret

    async def start(self) -> None:
        """Listen, wait for the store (retrying with backoff), then start the node. Raises
        :class:`StartError` (one line: what could not be done, where, why) for an address that
        cannot be listened on or a records database that cannot be opened."""
        s = self.settings
        with _listening(s.host, s.port):
            self.server = await serve(
                self.sessions.connection,
                s.host,
                s.port,
                process_request=self.routes.game_port,
                process_response=add_security_headers,
                compression="deflate" if s.compression else None,
                create_connection=ReadingConnection,
                max_size=s.max_frame_bytes,
                close_timeout=s.close_timeout,
                ping_interval=s.ping_interval,
                ping_timeout=s.ping_timeout,
                server_header=f"blackdrez/{VERSION}",
                reuse_port=s.reuse_port or None,
                backlog=s.listen_backlog,
            )
        if s.metrics_port is not None:
            with _listening(s.metrics_host, s.metrics_port, " (metrics)"):
                self.metrics_server = await serve(
                    _refuse_websocket,
                    s.metrics_host,
                    s.metrics_port,
                    process_request=self.routes.metrics_port,
                    process_response=add_security_headers,
                    server_header=f"blackdrez/{VERSION}",
                )
        try:
            self.tokens.secret = await self._wait_for_store()
        except StoreRefused as error:
            where = f"the Redis at {redact(s.redis_url)}" if s.redis_url else "the store"
            raise StartError(f"cannot use {where}: {error}") from None
        self.store.health.listeners.append(self._store_back)
        await self.store.start()  # after: its bus reader would log every refused attempt
        if s.db_url:
            try:
                await self._open_records(s.db_url)
            except (OSError, DatabaseError) as error:
                raise StartError(f"cannot open the records database: {_why(error)}") from None
        await self.node.start()
        self._sweeper = asyncio.get_running_loop().create_task(self.sessions.close_idle())
        self._lag_probe = asyncio.get_running_loop().create_task(self._probe_loop())
        self._store_watch = asyncio.get_running_loop().create_task(self._tell_store_lost())
        self.ready = True
        log.info("node %s listening on %s:%s", s.node_id, s.host, self.port)
        if self.metrics_server is not None:
            log.info("node %s: metrics on %s:%s", s.node_id, s.metrics_host, self.metrics_port)
        if s.ladder_tables:
            if self.ladder is None:
                raise ValueError("ladder_tables needs a ladder (tools.ladder.run_ladder)")
            self._ladder = asyncio.get_running_loop().create_task(
                self.ladder(self._own_url(), self.secret, s.ladder_tables, s.node_id)
            )

    async def _open_records(self, url: str) -> None:
        """Open the records database and wire it: accounts at ``hello``, the API, the writer
        of finished games (see ``blackdrez.server.records``): in a process of its own, unless
        told otherwise or no other process would see the database (an in-memory SQLite)."""
        self.records = await RecordsStore.open(url)
        self.records.clock = lambda: self.node.clock.time()  # a daily game unseals at day end
        accounts = Accounts(self.records, self.secret, token_lifetime=self.settings.token_lifetime)
        self.tokens.accounts = accounts
        self.api = RecordsApi(self.records, accounts)
        if self.settings.records_in_process or not shared_by_processes(url):
            writer = RecordsWriter(self.records, self.metrics)
            writer.start()
            self.writer = writer
        else:
            process = RecordsProcess(self.records, url, self.metrics)
            self.writer = process  # (stopped by stop() even if it does not start)
            await process.start()
        self.node.bind_records(self.writer, self.records.token_generations)

    def _own_url(self) -> str:
        """This node's WebSocket address, for the clients it runs itself (bots)."""
        host = "127.0.0.1" if self.settings.host in ("", "0.0.0.0", "::") else self.settings.host
        return f"ws://{host}:{self.port}/"

    def _store_back(self) -> None:
        """The store answers again: check that it kept its data (:meth:`_check_store_kept`)."""
        if self.stopping:
            return
        if self._checks:  # one check at a time: a store failing over comes back again and
            self._check_again = True  # again, and each check is a transaction (on a cluster,
            return  # a thread and a loop of redis-py's): the one running checks once more
        task = asyncio.get_running_loop().create_task(self._check_store_kept())
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _check_store_kept(self) -> None:
        """A store back from an outage without its data (a Redis restarted with no persistence,
        a replica promoted empty) lost every table, lobby record and session it held: say so,
        and write the token secret back at once, before a node started now makes a new one
        (which would refuse every session this node issued). The store back again meanwhile:
        once more (:attr:`_check_again`)."""
        lost = other = False
        while True:
            self._check_again = False
            try:
                before = await self.store.tokens.restore_secret(self.secret)
            except (StoreUnavailable, StoreRefused):
                before = self.secret  # down again: its next return checks again
            lost = lost or before is None
            other = other or before not in (None, self.secret)
            if not self._check_again:
                break
        if lost:
            log.error(
                "the store came back without its data (its token secret was gone; this node "
                "wrote it back): the tables, lobby and sessions it held are lost. Run Redis "
                "with persistence (appendonly yes), as the compose file does"
            )
        elif other:
            log.error(
                "the store holds another token secret than this node's (a node started while "
                "it was empty?): sessions issued here are refused by the other nodes; restart "
                "this node to take the stored secret"
            )

    async def _wait_for_store(self) -> bytes:
        """Read the shared secret, waiting while the store refuses: its health logs one line
        when it goes down and probes it with backoff until it answers."""
        delays = Backoff(first=STORE_WAIT_FIRST, cap=STORE_WAIT_CAP).delays()
        while True:
            try:
                return await self.store.tokens.shared_secret(secrets.token_bytes(32))
            except StoreUnavailable:
                if self.store.health.up:  # a refusal the health did not see: back off here
                    await asyncio.sleep(next(delays))
                await self.store.health.wait_up()

    def drain(self) -> None:
        """Start a graceful stop now, as for a rolling upgrade (see
        :mod:`blackdrez.server.admin`)."""
        if self._draining is None and not self.stopping:
            self._draining = asyncio.get_running_loop().create_task(self.stop())

    async def stop(self) -> None:
        """Stop accepting, tell every client, hand the tables over (or close them), close."""
        if self.stopping:
            await self.finished.wait()
            return
        self.stopping = True  # from here a new handshake and /healthz get 503 "stopping"
        background = [
            t
            for t in (
                self._sweeper,
                self._lag_probe,
                self._store_watch,
                self._ladder,
                *self._bots,
                *self._checks,
            )
            if t is not None
        ]
        for task in background:
            task.cancel()
        clients = list(self.node.clients.values())
        for client in clients:
            client.send(v1.Shutdown(reason="server shutting down", reconnect_after=1.0))
        if self.ready:
            await self.node.stop()
        await asyncio.gather(
            *(c.close_now(CloseCode.GOING_AWAY, "server shutting down") for c in clients),
            return_exceptions=True,
        )
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.server.wait_closed(), 5.0)
        if self.metrics_server is not None:
            self.metrics_server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.metrics_server.wait_closed(), 5.0)
        await cancel_until_done(background)
        if self.writer is not None:
            await self.writer.stop()
        if self.records is not None:
            await self.records.close()
        await self.store.close()
        self.finished.set()

    def _spawn_bot(self, table: str, strategy: str, invite: str | None, name: str) -> str:
        """Start a bot client that connects to this server like anyone else; return the player
        id it connects as (a session token made for it here: the seat held for it is its own).
        It stays seated for the table's next games, until the host removes it or the table
        closes."""
        assert self.bot_client is not None  # only installed as spawn_bot when given
        player = identity.new_player_id()
        token = identity.issue_token(self.secret, player, identity.clean_name(name))
        task = asyncio.get_running_loop().create_task(
            self.bot_client(
                self._own_url(),
                table=table,
                strategy=strategy,
                invite=invite,
                name=name,
                games=None,
                think=self.bot_think,
                token=token.text,
            )
        )
        self._bots.add(task)
        task.add_done_callback(self._bots.discard)
        task.add_done_callback(functools.partial(_bot_ended, table))
        return player

    async def _tell_store_lost(self) -> None:
        """Tell every connected client, once per store outage, while the node is
        ``store_unreachable`` (:data:`STORE_LOST`), those that connect during it included.
        Before, a node cut from its store while the others reached it held its players: their
        tables went on at another node without them (their turns timed out, their seats were
        freed), and nothing told them to leave."""
        notices = StoreLostNotices()
        while True:
            await asyncio.sleep(STORE_WATCH_EVERY)
            unreachable = self.status() == STORE_UNREACHABLE
            due = notices.due(unreachable, self.store.health.outages, self.node.clients)
            if due:
                notice = v1.Error(code=ErrorCode.UNAVAILABLE, message=STORE_LOST)
                for client in due:
                    client.send(notice)

    async def _probe_loop(self) -> None:
        """Observe how late the loop wakes for a timer (``blackdrez_loop_lag_seconds``): a loop
        busy for long stretches delays every frame that arrives meanwhile, before any handler
        (and the action latency histogram) sees it."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + LOOP_PROBE_EVERY
            await asyncio.sleep(LOOP_PROBE_EVERY)
            self.metrics.loop_lag.observe(max(0.0, loop.time() - due))

    def status(self) -> HealthStatus:
        """What ``/healthz`` says: ``starting`` until the store first answered, ``ok``,
        ``store_unreachable`` while the store has been lost for more than ``store_grace``
        seconds, ``stopping`` from a drain or signal on (whatever the store does: ``blackdrez
        drain`` waits on it)."""
        if self.stopping:
            return STOPPING
        if not self.ready:
            return STARTING
        if self.store.health.down_for() > self.store_grace:
            return STORE_UNREACHABLE
        return OK

    def health(self) -> Health:
        """``/healthz``'s body."""
        return Health(
            status=self.status(),
            node=self.settings.node_id,
            store="up" if self.store.health.up else "down",
            connections=len(self.node.clients),
            tables=len(self.node.rooms),
        )

    async def token_in_force(self, text: str) -> identity.Token | None:
        """The session token ``text`` if it is valid here (for the records API's viewer)."""
        return await self.tokens.in_force(text)


async def _refuse_websocket(ws: ServerConnection) -> None:
    """Never reached: the metrics listener answers every request in ``process_request``."""
    await ws.close(CloseCode.POLICY_VIOLATION, "no WebSocket here")


class StoreLostNotices:
    """Who has been told of the store outage going on (:data:`STORE_LOST`): each connection
    once per outage, whenever it connected. (A player who connected in the store's grace, and
    whose session was set up only once the node had told the others, was never told: it stayed
    at a node that could not serve it while its table went on elsewhere, found by the
    three-host test, ``tests/faults/test_hosts.py``.)"""

    def __init__(self) -> None:
        self._outage = -1
        self._told: dict[str, object] = {}
        """Each player told, with the connection they were told on."""

    def due(self, unreachable: bool, outage: int, clients: dict[str, Any]) -> list[Any]:
        """The connections to tell now: while ``unreachable``, those of ``clients`` (each
        player's connection) not yet told during ``outage``."""
        if not unreachable:
            self._told.clear()
            return []
        if outage != self._outage:
            self._outage, self._told = outage, {}
        due = [c for player, c in clients.items() if self._told.get(player) is not c]
        for player, client in clients.items():
            self._told[player] = client
        return due


class StartError(Exception):
    """The server could not start: the message says what, where and why, in one line."""


class ListenError(StartError):
    """The server could not listen on an address (say, the port is in use)."""


def _why(error: BaseException) -> str:
    """An error's reason in words: the system's for an ``OSError`` with a number."""
    if isinstance(error, OSError) and error.errno:
        return os.strerror(error.errno).lower()
    return str(error)


@contextlib.contextmanager
def _listening(host: str, port: int, what: str = "") -> Iterator[None]:
    """Turn an ``OSError`` of opening a listener into a :class:`ListenError` naming it."""
    try:
        yield
    except OSError as error:
        raise ListenError(f"cannot listen on {host}:{port}{what}: {_why(error)}") from None


async def run(
    settings: Settings, bot_client: BotClient | None = None, ladder: Ladder | None = None
) -> None:
    """Run a server until SIGTERM or SIGINT, then shut it down cleanly.

    Raises :class:`StartError` when it cannot start (an address cannot be listened on, the
    records database cannot be opened). A SIGTERM while the node still waits for its store
    stops it cleanly too.
    """
    logging.getLogger("websockets").setLevel(logging.WARNING)
    tracing.configure(settings.node_id)  # (only if the OTEL_* environment asks)
    embedded = None
    if settings.redis_url is None and settings.data_dir is not None:
        embedded = EmbeddedRedis(settings.data_dir / "redis")
        try:
            url = await asyncio.to_thread(embedded.open)
        except EmbeddedError as error:
            raise StartError(str(error)) from None
        settings = dataclasses.replace(settings, redis_url=url)
    try:
        await _run(settings, bot_client, ladder, embedded)
    finally:
        await asyncio.to_thread(tracing.stop)  # (the spans batched, sent)
        if embedded is not None and await asyncio.to_thread(embedded.close):
            log.debug("the Redis of %s was shut down", embedded.folder)


async def _run(
    settings: Settings,
    bot_client: BotClient | None,
    ladder: Ladder | None,
    embedded: EmbeddedRedis | None,
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = GameServer(settings, bot_client=bot_client, ladder=ladder)
    starting = loop.create_task(server.start())
    stopped = loop.create_task(stop.wait())
    await asyncio.wait([starting, stopped], return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if not starting.done():
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        await server.stop()
        return
    try:
        starting.result()
    except StartError:
        with contextlib.suppress(Exception):  # undo what started; the start error is the news
            await server.stop()
        raise
    # Fewer, cheaper garbage collections: what exists at start-up is never collectable, and a
    # busy node allocates many short-lived objects (measured: +36-50 % actions/s under load).
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 1000)
    records = f"records in {server.records.db.url}" if server.records else "no records"
    print(
        f"blackdrez {VERSION}: node {settings.node_id} on http://{settings.host}:{server.port}/ "
        f"({_lobby(settings, embedded)}, {records})",
        flush=True,
    )
    # A signal, or a drain through the admin API (which stops the server itself), ends the run.
    waits = [loop.create_task(stop.wait()), loop.create_task(server.finished.wait())]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for wait in waits:
        wait.cancel()
    await server.stop()  # returns once stopped, whoever started the stop


def _lobby(settings: Settings, embedded: EmbeddedRedis | None) -> str:
    """Where the node keeps its lobby, in words for its first line."""
    if embedded is not None:
        return f"state kept in {embedded.folder}"
    return "redis lobby" if settings.redis_url else "in-memory lobby, lost when it stops"


def _bot_ended(table: str, task: asyncio.Task[object]) -> None:
    """A bot client the server started has ended: say why in one line if it failed (it could
    not sit down, its table closed...), instead of asyncio's "never retrieved" traceback."""
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        log.info("a bot for table %s stopped: %r", table, error)
