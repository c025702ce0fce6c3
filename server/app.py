"""The asyncio runtime: one port for WebSocket and plain HTTP, the handshake, limits, shutdown.

Theory of operation
-------------------
``websockets`` accepts every connection. A plain HTTP request (no ``Upgrade`` header) is answered
in ``process_request``: ``/healthz``, ``/metrics`` (unless ``metrics_port`` gives them a listener
of their own), the records API's GET routes under ``/api/`` (``blackdrez.server.records.api``, when
the
server keeps records) and the browser client's static files. A WebSocket handshake from a browser
page is refused there (403) unless its ``Origin`` names the request's own host and port or an
allowed origin; a handshake without ``Origin`` is not a browser's and passes. An accepted
connection is counted against its client address (the peer's, or from a trusted proxy the
``X-Forwarded-For`` hop it names) and closed with 4006 past ``max_connections_per_ip``.

How fast one client address may open new WebSocket connections, and send records API requests,
is limited by a token bucket per address and kind (``handshake_rate``/``handshake_burst``,
``api_rate``/``api_burst``): a ``hello`` with a token costs every node of a deployment work
(``Node.claim``) and an API request database reads. Past its limit a handshake is answered HTTP
429 with ``Retry-After`` (no WebSocket opens, nothing else is done for it), an API request 429
``rate_limited`` in the API's error shape; ``blackdrez_rate_limited_total`` counts both.
``/healthz``, ``/metrics`` and static files are never limited: an orchestrator polls them.

Every response, the WebSocket handshake's included, carries the security headers of
:func:`secure_headers`: a Content-Security-Policy allowing only this origin's scripts, styles and
WebSocket, no framing, ``nosniff`` and no referrer.

A WebSocket connection must then send ``hello`` within ``hello_timeout``; the server negotiates the
version, checks the session token (signature, lifetime from its first issue, the store's list of
revoked tokens, and with records its account's token generation) or issues one, and answers
``welcome``. After that every frame is decoded (JSON in text frames, MessagePack in binary frames),
rate-limited by a token bucket, and handed to the :class:`~blackdrez.server.node.Node`, except what
this
layer answers itself: ``logout`` (revoke the token, close), a ``start_solitaire`` past the player's
session cap, and the account requests (``sign_up``, ``sign_in``, ``sign_out_everywhere``: the HTTP
parser under this server takes GET only, so accounts are WebSocket messages here). With records,
finished games go from the node to a :class:`~blackdrez.server.records.writer.RecordsWriter`. Bad
frames get
a typed ``error`` and change nothing; a flood is closed with 1008, a frame over ``max_frame_bytes``
with 1009, a text frame that is not UTF-8 with 1007 and one breaking the protocol with 1002 (these
three by ``websockets``; all four are counted in ``blackdrez_closes_total``).

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
import http
import ipaddress
import logging
import math
import mimetypes
import os
import re
import secrets
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import msgspec
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from blackdrez.games import GAMES
from blackdrez.protocol import handshake, v1
from blackdrez.protocol.codec import CLIENT_DECODERS, FrameError, decode_hello, encode
from blackdrez.protocol.errors import CloseCode, ErrorCode
from blackdrez.server import hints, identity
from blackdrez.server.admin import PREFIX as ADMIN_PREFIX
from blackdrez.server.admin import AdminApi
from blackdrez.server.connection import OLDEST, Connection
from blackdrez.server.metrics import INVALID_MESSAGE, Metrics
from blackdrez.server.node import LEASE_TTL, RECORD_RETENTION, SOLE_LEASE_TTL, Node
from blackdrez.server.node.hosting import HINT_BURST, HINT_RATE, is_solitaire_id
from blackdrez.server.ratelimit import KeyedBuckets, TokenBucket
from blackdrez.server.records.accounts import AccountError, AccountErrorCode, Accounts, name_key
from blackdrez.server.records.api import ApiError, ErrorReply, RecordsApi
from blackdrez.server.records.db import DatabaseError, redact
from blackdrez.server.records.store import RecordsStore
from blackdrez.server.records.writer import RecordsWriter
from blackdrez.server.retry import Backoff
from blackdrez.server.stores import Store, StoreRefused, StoreUnavailable, open_store
from blackdrez.server.stores.embedded import EmbeddedError, EmbeddedRedis
from blackdrez.server.table.room import KEPT_EVENTS
from blackdrez.server.tasks import cancel_until_done

log = logging.getLogger("blackdrez.server")

VERSION = "0.1.0"
BOT_CLIENT_PREFIX = "blackdrez-bot"
"""A ``hello`` whose ``client`` starts so is a bot: marked as one at its seat."""
VIOLATION_WINDOW = 10.0
"""More than ``burst`` rate-limited messages within this many seconds close the connection."""
PROTOCOL_CLOSES = frozenset(
    (
        CloseCode.PROTOCOL_ERROR,
        CloseCode.INVALID_DATA,
        CloseCode.MESSAGE_TOO_BIG,
        CloseCode.INTERNAL_ERROR,
    )
)
"""The closes ``websockets`` sends by itself for a client's frame (or its keepalive ping left
unanswered: 1011): counted like the 1008 of a flood, which the server sends, in
``blackdrez_closes_total``."""
STATIC_DIR = Path(__file__).resolve().parent.parent / "clients" / "browser"
LOOP_PROBE_EVERY = 0.05
"""Seconds between the loop lag probe's timers (``blackdrez_loop_lag_seconds``)."""
LISTEN_BACKLOG = 2048
"""The game port's listen backlog: room for a reconnect storm (a failed node's players all
arriving at once) while the loop is busy; asyncio's default of 100 dropped the rest's SYNs."""
BOT_THINK = 0.6
"""Seconds a bot the host added waits before each action, so people at the table can follow."""

STORE_GRACE = 3.0
"""Seconds a node may have lost its store and still answer ``/healthz`` ``ok``: a blip (a Redis
restart, a failover) must not flap the load balancer; past it, ``store_unreachable``."""

STOPPING = "stopping"
"""``/healthz``'s status (503) from a drain or a signal until the node exits: its tables are
being handed over, so a new WebSocket handshake gets 503 as well (a load balancer tries another
node). The listener stays open until the handover is done, so ``blackdrez drain``, polling
``/healthz``, returns only once the node has gone."""
STORE_UNREACHABLE = "store_unreachable"
"""``/healthz``'s status (503) for a node that lost its store longer than the grace: it can run
no command, so new connections (their WebSocket handshakes get 503 too) had better go to a
node that can. Its connected players stay, told once (:data:`STORE_LOST`): their tables wait
for the store, or go on at another node if only this one lost it (a partition)."""
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

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
GAMES_MODULE = (
    "// Generated by the server from its games registry (games/): one entry per game folder.\n"
    "export const GAMES = "
    + msgspec.json.encode(
        [
            {"name": name, "display_name": spec.display_name, "solitaire": spec.solitaire}
            for name, spec in GAMES.items()
        ]
    ).decode()
    + ";\n"
    "export const GAME_NAMES = Object.fromEntries(GAMES.map((g) => [g.name, g.display_name]));\n"
    "export const SOLITAIRES = GAMES.filter((g) => g.solitaire).map((g) => g.name);\n"
).encode()
"""``/games.js``: the browser's list of games, from :data:`games.GAMES`."""
Ladder = Callable[..., Awaitable[None]]
"""Runs the bot ladder: ``ladder(url, secret, tables, node_id)``
(``blackdrez.tools.ladder.run_ladder``)."""
BotClient = Callable[..., Awaitable[object]]
"""Plays one bot over the protocol: ``bot_client(url, table=, strategy=, invite=, name=, games=,
think=, token=)`` (``blackdrez.clients.bots.run_bot``)."""
AccountRequest = v1.SignUp | v1.SignIn | v1.SignOutEverywhere
_ACCOUNT_ERRORS = {
    AccountErrorCode.INVALID_TOKEN: ErrorCode.BAD_TOKEN,
    AccountErrorCode.BAD_NAME: ErrorCode.BAD_NAME,
    AccountErrorCode.WEAK_PASSWORD: ErrorCode.WEAK_PASSWORD,
    AccountErrorCode.NAME_TAKEN: ErrorCode.NAME_TAKEN,
    AccountErrorCode.ALREADY_CLAIMED: ErrorCode.ALREADY_CLAIMED,
    AccountErrorCode.BAD_LOGIN: ErrorCode.BAD_LOGIN,
    AccountErrorCode.RATE_LIMITED: ErrorCode.RATE_LIMITED,
}
"""The wire's error code for each refused account request."""
DEFAULT_DB_URL = "sqlite:///blackdrez-data/records.db"
"""Where ``blackdrez serve`` keeps its records unless told otherwise (relative: to the working
directory)."""
API_PREFIX = "/api/"
LIMIT_TIMEOUT = 0.5
"""Seconds a handshake or API request waits for the store's shared rate limit before this
node's own decides (the store slow or away must not hold connections up)."""
HANDSHAKE_RATE = 20.0
HANDSHAKE_BURST = 400
"""New WebSocket connections per client address: a burst above ``max_connections_per_ip`` (a
bots swarm or a NAT's players reconnecting after a node restart open that many at once; the test
suite's servers take 300 from 127.0.0.1 in about two seconds), then 20 a second. Each ``hello``
with a token costs every node of a deployment work (``Node.claim``): a client looping connect,
``hello``, disconnect is held to that pace."""
API_RATE = 10.0
API_BURST = 100
"""Records API requests per client address: a records page asks a few, someone browsing pages
of games far fewer than 100 at once; each is database reads."""
MAX_ADDRESSES = 100_000
"""Client addresses each flood limit remembers at once (an address unseen long enough for its
bucket to refill is forgotten first; past this, the least recently seen)."""


@dataclass
class Settings:
    """Everything ``blackdrez serve`` can be told."""

    host: str = "127.0.0.1"
    port: int = 8765
    redis_url: str | None = None
    """``redis://...`` for one Redis, ``redis+cluster://host:port[,...]`` for a Redis Cluster."""
    data_dir: Path | None = None
    """Without ``redis_url``: the folder whose Redis (``blackdrez.server.stores.embedded``: started
    by the
    node unless already running, its append-only file in ``DATA/redis``) keeps the node's state
    across restarts (``blackdrez serve`` defaults to ``blackdrez-data``). ``None`` with no
    ``redis_url``: the in-memory store, for tests and benchmarks, lost when the process ends."""
    redis_wait_replicas: int = 0
    """Replicas that must hold each log entry before a command is acknowledged (Redis WAIT)."""
    redis_wait_timeout_ms: int = 100
    """How long a command waits for them; then it is answered ``unavailable``."""
    node_id: str = field(default_factory=lambda: "n" + secrets.token_hex(4))
    max_frame_bytes: int = 16 * 1024
    messages_per_second: float = 30.0
    burst: int = 60
    hello_timeout: float = 10.0
    idle_timeout: float = 900.0
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0
    send_buffer: int = 1024 * 1024
    """Bytes a client may leave unread before it is disconnected as too slow (4003)."""
    close_timeout: float = 10.0
    """Seconds a closing connection has to take its close frame before it is cut off."""
    token_lifetime: float = identity.TOKEN_LIFETIME
    """Seconds a session token is accepted, from its first issue (never renewed)."""
    max_connections_per_ip: int = 256
    """WebSocket connections one client address may hold at once (0: no cap); more get 4006."""
    handshake_rate: float = HANDSHAKE_RATE
    handshake_burst: int = HANDSHAKE_BURST
    """One client address may open ``handshake_burst`` WebSocket connections at once and
    ``handshake_rate`` a second after that; a handshake past it gets HTTP 429 (0: no limit)."""
    api_rate: float = API_RATE
    api_burst: int = API_BURST
    """One client address may send ``api_burst`` records API requests at once and ``api_rate`` a
    second after that; a request past it gets 429 ``rate_limited`` (0: no limit)."""
    trusted_proxies: list[str] = field(default_factory=list)
    """Addresses or networks (CIDR) of proxies whose ``X-Forwarded-For`` names the client."""
    max_solitaire_sessions: int = 10
    """Solitaire sessions one player may hold open at once (0: no cap)."""
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = None
    """Serve ``/metrics`` (and ``/healthz``) on this port only, not on the game port (0: any
    free port); ``None`` keeps them on the game port."""
    allowed_origins: list[str] | None = None
    """Origins accepted besides the page's own host (see :func:`origin_allowed`)."""
    compression: bool = False
    lease_ttl: float | None = None
    """Seconds a table's lease lasts unless its host renews it (how soon a dead node's tables
    move to another node); ``None``: ``LEASE_TTL`` on a shared store, ``SOLE_LEASE_TTL`` on one
    that no other node shares (nothing can move there)."""
    record_retention: float = RECORD_RETENTION
    """Seconds a closed table's compact game record is kept in the store."""
    listen_backlog: int = LISTEN_BACKLOG
    """Connections the kernel completes and queues for the node while it is not accepting
    (capped by ``net.core.somaxconn``); past it a client's SYN is dropped and retried 1 s later."""
    reuse_port: bool = False
    """Bind with ``SO_REUSEPORT``, so that several workers share the port
    (``blackdrez.server.workers``)."""
    static_dir: Path = STATIC_DIR
    admin_token: str | None = None
    """Enables the ``/admin/`` calls (drain, the admin view) for whoever sends this token."""
    db_url: str | None = None
    """The records database (finished games, accounts, ratings, the ``/api/`` routes):
    ``sqlite:///path`` or ``postgresql://...``; ``None`` keeps no records (``blackdrez serve``
    defaults to :data:`DEFAULT_DB_URL`)."""
    ladder_tables: int = 0
    """Rated tables of bots this node keeps playing (the bot ladder, ``blackdrez.tools.ladder``)."""
    hint_workers: int = hints.WORKERS
    """Processes computing the experts' hints and the pars (``blackdrez.server.hints``)."""
    hint_budget: float = hints.HINT_BUDGET
    """Seconds a hint waits for the expert before a quick bot answers."""
    hints_per_second: float = HINT_RATE
    hint_burst: int = HINT_BURST
    """A solitaire session may ask ``hint_burst`` hints at once, ``hints_per_second`` after."""

    def limits(self) -> v1.Limits:
        """The limits announced in ``welcome``."""
        return v1.Limits(
            max_frame_bytes=self.max_frame_bytes,
            messages_per_second=self.messages_per_second,
            burst=self.burst,
            idle_timeout_seconds=self.idle_timeout,
            replay_events=KEPT_EVENTS,
        )


class GameServer:
    """A running server node: ``await GameServer(settings).start()``, then ``stop()``."""

    def __init__(
        self,
        settings: Settings,
        store: Store | None = None,
        bot_client: BotClient | None = None,
        ladder: Ladder | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self.store = store or open_store(
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
            renewal_store=(lambda: open_store(redis_url, settings.node_id)) if redis_url else None,
            hints=hints.HintWorker(settings.hint_workers, hint_budget=settings.hint_budget),
            hint_rate=settings.hints_per_second,
            hint_burst=settings.hint_burst,
            spawn_bot=self._spawn_bot if bot_client is not None else None,
        )
        self.bot_client = bot_client
        self.ladder = ladder
        """Keeps ``ladder_tables`` rated tables of bots playing
        (``blackdrez.tools.ladder.run_ladder``,
        given by ``blackdrez.tools.cli``: the ladder plays over the protocol, as a client)."""
        """Runs one bot client; given by whoever starts the server (``blackdrez.tools.cli`` passes
        ``blackdrez.clients.bots.run_bot``), since the server imports no client. Without it the node
        answers a request for bots with ``unavailable``."""
        self.records: RecordsStore | None = None
        self.accounts: Accounts | None = None
        self.api: RecordsApi | None = None
        self.writer: RecordsWriter | None = None
        self._ladder: asyncio.Task[None] | None = None
        self._bots: set[asyncio.Task[object]] = set()
        self.bot_think = BOT_THINK
        self.secret = b""
        self._checks: set[asyncio.Task[None]] = set()
        self.server: Server | None = None
        self.metrics_server: Server | None = None
        self.ready = False
        """True once the store answered and the node started; until then every request gets 503."""
        self.stopping = False
        self.store_grace = STORE_GRACE
        self._sweeper: asyncio.Task[None] | None = None
        self._lag_probe: asyncio.Task[None] | None = None
        self._store_watch: asyncio.Task[None] | None = None
        self._limits = settings.limits()
        self._trusted = [ipaddress.ip_network(p, strict=False) for p in settings.trusted_proxies]
        self._per_address: Counter[str] = Counter()
        self._handshakes = _address_limit(settings.handshake_rate, settings.handshake_burst)
        self._api_requests = _address_limit(settings.api_rate, settings.api_burst)
        self._outages_warned: dict[str, int] = {}
        """Per warning of :meth:`_warn_once_per_outage`, the store outage it was logged in."""
        self.admin = AdminApi(self)
        self.finished = asyncio.Event()
        """Set once :meth:`stop` has finished (after a signal, or a drain)."""
        self._draining: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The port actually bound (useful with port 0)."""
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1]

    @property
    def metrics_port(self) -> int | None:
        """The port of the metrics listener, when ``/metrics`` has one of its own."""
        if self.metrics_server is None:
            return None
        return self.metrics_server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        """Listen, wait for the store (retrying with backoff), then start the node. Raises
        :class:`StartError` (one line: what could not be done, where, why) for an address that
        cannot be listened on or a records database that cannot be opened."""
        s = self.settings
        with _listening(s.host, s.port):
            self.server = await serve(
                self._connection,
                s.host,
                s.port,
                process_request=self._http,
                process_response=_secure,
                compression="deflate" if s.compression else None,
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
                    process_request=self._metrics_http,
                    process_response=_secure,
                    server_header=f"blackdrez/{VERSION}",
                )
        try:
            self.secret = await self._wait_for_store()
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
        self._sweeper = asyncio.get_running_loop().create_task(self._close_idle())
        self._lag_probe = asyncio.get_running_loop().create_task(self._probe_loop())
        self._store_watch = asyncio.get_running_loop().create_task(self._tell_store_lost())
        self.ready = True
        log.info("node %s listening on %s:%s", s.node_id, s.host, self.port)
        if self.metrics_server is not None:
            log.info("node %s: metrics on %s:%s", s.node_id, s.metrics_host, self.metrics_port)
        if s.ladder_tables:
            if self.ladder is None:
                raise ValueError("ladder_tables needs a ladder (blackdrez.tools.ladder.run_ladder)")
            self._ladder = asyncio.get_running_loop().create_task(
                self.ladder(self._own_url(), self.secret, s.ladder_tables, s.node_id)
            )

    async def _open_records(self, url: str) -> None:
        """Open the records database and wire it: accounts at ``hello``, the API, the writer
        of finished games (see ``blackdrez.server.records``)."""
        self.records = await RecordsStore.open(url)
        self.records.clock = lambda: self.node.clock.time()  # a daily game unseals at day end
        self.accounts = Accounts(
            self.records, self.secret, token_lifetime=self.settings.token_lifetime
        )
        self.api = RecordsApi(self.records, self.accounts)
        self.writer = RecordsWriter(self.records, self.metrics)
        self.writer.start()
        self.node.bind_records(self.writer, self.records.token_generations)

    def _own_url(self) -> str:
        """This node's WebSocket address, for the clients it runs itself (bots)."""
        host = "127.0.0.1" if self.settings.host in ("", "0.0.0.0", "::") else self.settings.host
        return f"ws://{host}:{self.port}/"

    def _store_back(self) -> None:
        """The store answers again: check that it kept its data (:meth:`_check_store_kept`)."""
        if not self.stopping:
            task = asyncio.get_running_loop().create_task(self._check_store_kept())
            self._checks.add(task)
            task.add_done_callback(self._checks.discard)

    async def _check_store_kept(self) -> None:
        """A store back from an outage without its data (a Redis restarted with no persistence,
        a replica promoted empty) lost every table, lobby record and session it held: say so,
        and write the token secret back at once, before a node started now makes a new one
        (which would refuse every session this node issued)."""
        try:
            before = await self.store.restore_secret(self.secret)
        except (StoreUnavailable, StoreRefused):
            return  # down again: its next return checks again
        if before is None:
            log.error(
                "the store came back without its data (its token secret was gone; this node "
                "wrote it back): the tables, lobby and sessions it held are lost. Run Redis "
                "with persistence (appendonly yes), as the compose file does"
            )
        elif before != self.secret:
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
                return await self.store.shared_secret(secrets.token_bytes(32))
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

    async def _close_idle(self) -> None:
        """Close connections that sent nothing for ``idle_timeout`` seconds (code 4005)."""
        timeout = self.settings.idle_timeout
        while True:
            await asyncio.sleep(min(30.0, timeout / 4))
            cutoff = time.monotonic() - timeout
            for client in list(self.node.clients.values()):
                if client.last_seen < cutoff:
                    client.close(CloseCode.IDLE_TIMEOUT, "idle for too long")

    async def _tell_store_lost(self) -> None:
        """Tell every connected client, once per store outage, when the node turns
        ``store_unreachable`` (:data:`STORE_LOST`). Before, a node cut from its store while the
        others reached it held its players: their tables went on at another node without them
        (their turns timed out, their seats were freed), and nothing told them to leave."""
        told = 0
        while True:
            await asyncio.sleep(STORE_WATCH_EVERY)
            outage = self.store.health.outages
            if outage != told and self._state() == STORE_UNREACHABLE:
                told = outage
                notice = v1.Error(code=ErrorCode.UNAVAILABLE, message=STORE_LOST)
                for client in list(self.node.clients.values()):
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

    def _count_close(self, code: int) -> None:
        self.metrics.closes.labels(str(int(code))).inc()

    def _count_protocol_close(self, ws: ServerConnection) -> None:
        """Count the close ``websockets`` sent on its own for a frame breaking the protocol:
        the handler only sees the connection closed (a client's own close, echoed, is not one)."""
        sent = ws.protocol.close_sent
        if sent and sent.code in PROTOCOL_CLOSES and not ws.protocol.close_rcvd_then_sent:
            self._count_close(sent.code)

    # ------------------------------------------------------------------ HTTP
    async def _http(self, connection: ServerConnection, request: Request) -> Response | None:
        if not self.ready:
            return self._health()  # starting: 503 to everything, WebSocket handshakes included
        if request.headers.get("Upgrade", "").lower() == "websocket":
            if self._state() in (STORE_UNREACHABLE, STOPPING):
                return self._health()  # a load balancer tries another node; a client, later
            address = self._address(connection, request)
            wait = await self._too_fast(self._handshakes, "handshake", address)
            if wait is not None:
                message = f"too many new connections from {address}: try again in {wait:g} s\n"
                return _too_many(message.encode(), "text/plain", wait)
            origins = request.headers.get_all("Origin")
            if not origins:
                return None  # not a browser: browsers always send Origin with a WebSocket
            host = request.headers.get_all("Host")
            allowed = self.settings.allowed_origins or []
            if len(origins) == 1 and origin_allowed(origins[0], host[0] if host else None, allowed):
                return None
            return _response(
                http.HTTPStatus.FORBIDDEN,
                f"origin not allowed: {' '.join(origins)}\n".encode(),
                "text/plain",
            )
        path = request.path.split("?", 1)[0]
        if path.startswith(ADMIN_PREFIX):
            return await self.admin.handle(request)
        if path == "/healthz":
            return self._health()
        if path == "/metrics" and self.metrics_server is None:
            return self._metrics()
        if path == "/games.js":
            return _response(http.HTTPStatus.OK, GAMES_MODULE, "text/javascript")
        if path.startswith(API_PREFIX):
            return await self._api(connection, request)
        return self._static(path)

    async def _api(self, connection: ServerConnection, request: Request) -> Response:
        """A GET of the records API (``docs/api.md``). The HTTP parser under the WebSocket
        server takes GET only: the account requests are WebSocket messages here."""
        if self.api is None:  # (as cheap as a static file: not counted against the limit)
            body = b'{"error": {"code": "not_found", "message": "this server keeps no records"}}'
            return _response(http.HTTPStatus.NOT_FOUND, body, "application/json")
        address = self._address(connection, request)
        wait = await self._too_fast(self._api_requests, "api", address)
        if wait is not None:
            error = ApiError(
                code=AccountErrorCode.RATE_LIMITED,
                message=f"too many requests from {address}: try again in {wait:g} s",
                retry_after=wait,
            )
            return _too_many(msgspec.json.encode(ErrorReply(error=error)), "application/json", wait)
        method = getattr(request, "method", "GET")
        if method not in ("GET", "HEAD"):  # (the method was not looked at: a POST got the GET)
            body = msgspec.json.encode(
                {"error": {"code": "method_not_allowed", "message": (
                    f"{method} is not served here: the API takes GET, and the account requests "
                    "are WebSocket messages on this server (claim, sign_in, sign_out_everywhere)"
                )}}
            )  # fmt: skip
            response = _response(http.HTTPStatus.METHOD_NOT_ALLOWED, body, "application/json")
            response.headers["Allow"] = "GET"
            return response
        try:
            viewer = await self._api_viewer(request.headers.get_all("Authorization"))
            if isinstance(viewer, Response):
                return viewer
            answer = await self.api.handle("GET", request.path, b"", address, viewer)
        except Exception:  # the database's own errors: say so, as the API's errors do
            log.warning("records API: %s failed", request.path, exc_info=True)
            body = (
                b'{"error": {"code": "unavailable", '
                b'"message": "the records database cannot be reached: try again"}}'
            )
            return _response(http.HTTPStatus.SERVICE_UNAVAILABLE, body, "application/json")
        headers = Headers([*answer.headers, ("Content-Length", str(len(answer.body)))])
        status = http.HTTPStatus(answer.status)
        return Response(status.value, status.phrase, headers, answer.body)

    def _address(self, connection: ServerConnection, request: Request) -> str:
        """The client address a request counts against (see :func:`client_address`)."""
        forwarded = request.headers.get_all("X-Forwarded-For")
        return client_address(connection.remote_address[0], forwarded, self._trusted)

    async def _too_fast(self, limit: KeyedBuckets | None, kind: str, address: str) -> float | None:
        """Spend one of ``address``'s requests of ``kind`` under ``limit``: ``None`` if it had
        one, else the seconds until it has (the refusal is counted). On a shared store the
        bucket is the store's, one for every node (a load balancer spreads an address over
        them all); while the store cannot be reached, this node's own."""
        if limit is None:
            return None
        wait: float | None = None
        if self.store.shared and self.store.health.up:  # (known down: no wait for it)
            with contextlib.suppress(StoreUnavailable, TimeoutError):
                async with asyncio.timeout(LIMIT_TIMEOUT):
                    wait = await self.store.take_token(kind, address, limit.rate, limit.burst)
        if wait is None:
            wait = 0.0 if limit.take(address, time.monotonic()) else limit.retry_after(address)
        if not wait:
            return None
        self.metrics.rate_limited.labels(kind).inc()
        return wait

    async def _api_viewer(self, authorization: list[str]) -> str | Response | None:
        """Who an API request comes from: the player of its ``Authorization: Bearer <token>``
        (checked as at ``hello``), ``None`` without one, or the 401 for a token not valid here
        (rather than answering as to anyone: a client would think their own games gone)."""
        if not authorization:
            return None
        scheme, _, text = authorization[0].partition(" ")
        token = None
        if len(authorization) == 1 and scheme.lower() == "bearer" and text.strip():
            token = await self._token_in_force(text.strip())
        if token is None:
            body = msgspec.json.encode(
                {"error": {"code": "invalid_token", "message": (
                    "the Authorization header's token is not valid here (forged, expired or "
                    "logged out); send 'Bearer <token>', the token hello returned, or none"
                )}}
            )  # fmt: skip
            return _response(http.HTTPStatus.UNAUTHORIZED, body, "application/json")
        return token.player

    def _metrics_http(self, connection: ServerConnection, request: Request) -> Response:
        """The metrics listener: ``/metrics`` and ``/healthz``, nothing else (no WebSocket)."""
        path = request.path.split("?", 1)[0]
        if path == "/metrics":
            return self._metrics()
        if path == "/healthz":
            return self._health()
        return _response(http.HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")

    def _state(self) -> str:
        """What ``/healthz`` says: ``starting`` until the store first answered, ``ok``,
        :data:`STORE_UNREACHABLE` while the store has been lost for more than ``store_grace``
        seconds, ``stopping`` from a drain or signal on (whatever the store does: ``blackdrez
        drain`` waits on it)."""
        if self.stopping:
            return STOPPING
        if not self.ready:
            return "starting"
        if self.store.health.down_for() > self.store_grace:
            return STORE_UNREACHABLE
        return "ok"

    def _health(self) -> Response:
        state = self._state()
        body = msgspec.json.encode(
            {
                "status": state,
                "node": self.settings.node_id,
                "store": "up" if self.store.health.up else "down",
                "connections": len(self.node.clients),
                "tables": len(self.node.rooms),
            }
        )
        healthy = state == "ok"
        status = http.HTTPStatus.OK if healthy else http.HTTPStatus.SERVICE_UNAVAILABLE
        return _response(status, body, "application/json")

    def _metrics(self) -> Response:
        return _response(http.HTTPStatus.OK, self.metrics.render(), "text/plain; version=0.0.4")

    def _static(self, path: str) -> Response:
        root = self.settings.static_dir.resolve()
        relative = "index.html" if path in ("/", "") else path.lstrip("/")
        target = (root / relative).resolve()
        if root not in target.parents or not target.is_file():
            return _response(http.HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
        kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        if target.suffix == ".js":
            kind = "text/javascript"
        return _response(http.HTTPStatus.OK, target.read_bytes(), kind)

    # ------------------------------------------------------------------ WebSocket
    async def _connection(self, ws: ServerConnection) -> None:
        if self.stopping:
            self._count_close(CloseCode.GOING_AWAY)
            await ws.close(CloseCode.GOING_AWAY, "server shutting down")
            return
        assert ws.request is not None
        address = self._address(ws, ws.request)
        self._per_address[address] += 1
        try:
            cap = self.settings.max_connections_per_ip
            if cap and self._per_address[address] > cap:
                self._count_close(CloseCode.TOO_MANY_CONNECTIONS)
                await ws.close(
                    CloseCode.TOO_MANY_CONNECTIONS, f"too many connections from {address}"
                )
                return
            await self._play(ws, address)
        finally:
            self._count_protocol_close(ws)
            self._per_address[address] -= 1
            if not self._per_address[address]:
                del self._per_address[address]

    async def _play(self, ws: ServerConnection, address: str) -> None:
        client = await self._greet(ws, address)
        if client is None:
            return
        older = self.node.attach(client)
        if older is not None:
            older.close(CloseCode.REPLACED, "you connected again elsewhere")
        try:
            try:
                await self.node.claim(client)
            except StoreUnavailable:  # the player's connections on other nodes stay open
                self._warn_once_per_outage(
                    "store unavailable: other nodes not told of a player's new connection"
                )
            await self._serve(client)
        except ConnectionClosed:
            pass
        finally:
            client.closing = True
            await self.node.detach(client)

    def _warn_once_per_outage(self, message: str) -> None:
        """Log ``message`` as a warning the first time in a store outage, at debug level after:
        every player coming back at once during an outage would write it per ``hello``."""
        outage = self.store.health.outages
        seen = self._outages_warned.get(message) == outage
        self._outages_warned[message] = outage
        log.log(logging.DEBUG if seen else logging.WARNING, message)

    async def _greet(self, ws: ServerConnection, address: str) -> Connection | None:
        s = self.settings
        try:
            frame = await asyncio.wait_for(ws.recv(), s.hello_timeout)
        except TimeoutError:
            self._count_close(CloseCode.HANDSHAKE_FAILED)
            await ws.close(CloseCode.HANDSHAKE_FAILED, "no hello in time")
            return None
        except ConnectionClosed:
            return None
        binary = isinstance(frame, bytes)

        async def refuse(code: ErrorCode, message: str, close: CloseCode, **extra: object) -> None:
            self.metrics.errors.labels(code).inc()
            self.metrics.closes.labels(str(int(close))).inc()
            with contextlib.suppress(ConnectionClosed):
                await ws.send(encode(v1.Error(code=code, message=message, **extra), binary))
                await ws.close(close, message[:100])

        try:
            hello = decode_hello(frame)
        except FrameError as error:
            await refuse(error.code, error.message, CloseCode.HANDSHAKE_FAILED)
            return None
        version = handshake.negotiate(hello.versions)
        if version is None:
            supported = list(handshake.SUPPORTED_VERSIONS)
            await refuse(
                ErrorCode.UNSUPPORTED_VERSION,
                f"this server speaks protocol versions {supported}, you offered {hello.versions}",
                CloseCode.UNSUPPORTED_VERSION,
                supported=supported,
            )
            return None
        if hello.token is not None:
            token = await self._token_in_force(hello.token)
            if token is None:
                await refuse(
                    ErrorCode.BAD_TOKEN,
                    "the session token is not valid here (forged, expired or logged out)",
                    CloseCode.BAD_TOKEN,
                )
                return None
        else:
            player = identity.new_player_id()
            token = identity.issue_token(self.secret, player, identity.clean_name(hello.name))
        player, name = token.player, token.name
        new_identity = hello.token is None  # seated nowhere, connected nowhere else
        try:
            tables = [] if new_identity else await self.store.player_tables(player)
        except StoreUnavailable:
            tables = []
        client = Connection(
            ws=ws,
            binary=binary,
            player=player,
            name=name,
            bucket=TokenBucket(s.messages_per_second, s.burst, time.monotonic()),
            max_buffer=s.send_buffer,
            bot=(hello.client or "").startswith(BOT_CLIENT_PREFIX),
            close_timeout=s.close_timeout,
            on_close=self._count_close,
            token=token,
            address=address,
            seated=tables,
            order=OLDEST if new_identity else None,
        )
        client.send(
            v1.Welcome(
                version=version,
                token=token.text,
                token_expires=token.expires(s.token_lifetime),
                player=player,
                name=name,
                limits=self._limits,
                server=f"blackdrez/{VERSION}",
                tables=tables,
            )
        )
        return client

    async def _token_in_force(self, text: str) -> identity.Token | None:
        """The token ``text`` if it is genuine (:meth:`_authenticate`) and not logged out (the
        store's list of ended tokens), else ``None``: for a ``hello`` and an API request alike.
        During a store outage a token is taken without the list (players come back, their
        tables wait for the store anyway); it is enforced again as soon as the store answers."""
        token = await self._authenticate(text)
        if token is None:
            return None
        try:
            revoked = await self.store.token_revoked(token.id)
        except StoreUnavailable:
            self._warn_once_per_outage(
                "store unavailable: token accepted without the revocation check"
            )
            revoked = False
        return None if revoked else token

    async def _authenticate(self, text: str) -> identity.Token | None:
        """The token of a ``hello`` if it is genuine, unexpired and, with records, not revoked
        by its account (a guest token of an identity since claimed, an account's older token
        generation). While the records database cannot be reached the account check waits for
        it to answer again, as the store's list of ended tokens does."""
        if self.accounts is None:
            return identity.read_token(self.secret, text, self.settings.token_lifetime)
        try:
            return await self.accounts.authenticate(text)
        except Exception:  # the database's own errors
            log.warning("records unavailable: token accepted without the account check")
            return identity.read_token(self.secret, text, self.settings.token_lifetime)

    async def _account(self, client: Connection, message: AccountRequest, address: str) -> None:
        """``sign_up``, ``sign_in``, ``sign_out_everywhere``: answered with ``session``."""
        accounts = self.accounts
        if accounts is None:
            self.metrics.errors.labels(ErrorCode.UNAVAILABLE).inc()
            client.send(
                v1.Error(
                    id=message.id,
                    code=ErrorCode.UNAVAILABLE,
                    message="this server keeps no records: no accounts",
                )
            )
            return
        try:
            if isinstance(message, v1.SignUp):
                # A claim hashes the password (64 MiB, most of a core): limited like a login
                accounts.limiter.check(name_key(message.name), address, time.time())
                session = await accounts.claim(client.token.text, message.name, message.password)
            elif isinstance(message, v1.SignIn):
                session = await accounts.login(message.name, message.password, address)
            else:
                session = await accounts.revoke(client.token.text)
        except AccountError as error:
            code = _ACCOUNT_ERRORS[error.code]
            self.metrics.errors.labels(code).inc()
            client.send(
                v1.Error(
                    id=message.id, code=code, message=error.message, retry_after=error.retry_after
                )
            )
            return
        except Exception:  # the database's own errors
            log.warning("account request failed", exc_info=True)
            self.metrics.errors.labels(ErrorCode.UNAVAILABLE).inc()
            client.send(
                v1.Error(
                    id=message.id,
                    code=ErrorCode.UNAVAILABLE,
                    message="the records database cannot be reached: try again",
                )
            )
            return
        if isinstance(message, v1.SignUp | v1.SignOutEverywhere):
            # The connection's own identity goes on with the new token (the old one is refused)
            client.token = (
                identity.read_token(self.secret, session.token, self.settings.token_lifetime)
                or client.token
            )
            client.name = session.name
        client.send(
            v1.Session(id=message.id, player=session.player, name=session.name, token=session.token)
        )
        if isinstance(message, v1.SignOutEverywhere):
            try:
                await self.node.sign_out_everywhere(session.player, client.token.generation)
            except StoreUnavailable:  # their tokens are refused all the same at their next hello
                log.warning("signed out everywhere: the other connections could not be told")

    async def _serve(self, client: Connection) -> None:
        s = self.settings
        decoder = CLIENT_DECODERS[1]
        ws = client.ws
        metrics = self.metrics
        while True:
            frame = await ws.recv()
            now = client.last_seen = time.monotonic()
            try:
                message = decoder.decode(frame)
            except FrameError as error:
                message = None
                metrics.count_message(INVALID_MESSAGE)
                reply = v1.Error(id=_request_id(frame), code=error.code, message=error.message)
            if not client.bucket.take(now):
                if now - client.violations_since > VIOLATION_WINDOW:
                    client.violations, client.violations_since = 0, now
                client.violations += 1
                if client.violations > s.burst:
                    metrics.closes.labels(str(int(CloseCode.POLICY_VIOLATION))).inc()
                    await _close_discarding(
                        ws, CloseCode.POLICY_VIOLATION, "message rate limit exceeded"
                    )
                    return
                reply = v1.Error(
                    id=getattr(message, "id", None),
                    code=ErrorCode.RATE_LIMITED,
                    message="too many messages: slow down",
                    retry_after=client.bucket.retry_after(),
                )
                message = None
            if message is None:
                metrics.errors.labels(reply.code).inc()
                client.send(reply)
                continue
            metrics.count_message(type(message).__struct_config__.tag)
            if isinstance(message, v1.Logout):
                if await self._logout(client, message):
                    return  # nothing sent after a logout is executed
                continue
            if isinstance(message, AccountRequest):
                await self._account(client, message, client.address)
                continue
            if isinstance(message, v1.StartSolitaire) and not await self._may_start(
                client, message
            ):
                continue
            await self.node.handle(client, message)

    async def _may_start(self, client: Connection, message: v1.StartSolitaire) -> bool:
        """Whether the player may open one more solitaire session; if not, say why."""
        cap = self.settings.max_solitaire_sessions
        if not cap:
            return True
        await self.node._settled()  # read your own writes: a session just left no longer counts
        try:
            tables = await self.store.player_tables(client.player)
        except StoreUnavailable:
            return True  # the node answers ``unavailable``: it cannot start a session either
        held = sum(1 for table in tables if is_solitaire_id(table))
        if held < cap:
            return True
        self.metrics.errors.labels(ErrorCode.TOO_MANY_SESSIONS).inc()
        client.send(
            v1.Error(
                id=message.id,
                code=ErrorCode.TOO_MANY_SESSIONS,
                message=f"you hold {held} solitaire sessions, the most allowed: leave one first",
            )
        )
        return False

    async def _logout(self, client: Connection, message: v1.Logout) -> bool:
        """End the client's token everywhere (until it would have expired), then close; return
        whether it did (when the store is unreachable the token stays valid)."""
        remaining = client.token.expires(self.settings.token_lifetime) - time.time()
        try:
            await self.store.revoke_token(client.token.id, max(remaining, 1.0))
        except StoreUnavailable:
            self.metrics.errors.labels(ErrorCode.UNAVAILABLE).inc()
            client.send(
                v1.Error(
                    id=message.id,
                    code=ErrorCode.UNAVAILABLE,
                    message="the session store cannot be reached: the token is still valid",
                )
            )
            return False
        client.send(v1.Ok(id=message.id))
        await client.close_now(CloseCode.NORMAL, "logged out")
        return True


async def _refuse_websocket(ws: ServerConnection) -> None:
    """Never reached: the metrics listener answers every request in ``process_request``."""
    await ws.close(CloseCode.POLICY_VIOLATION, "no WebSocket here")


async def _close_discarding(ws: ServerConnection, code: int, reason: str) -> None:
    """Close while discarding what the peer still sends: a flooder's unread frames would
    otherwise fill the receive queue and hold the closing handshake until its timeout."""
    closing = asyncio.get_running_loop().create_task(ws.close(code, reason))
    with contextlib.suppress(ConnectionClosed):
        while True:
            await ws.recv()
    await closing


def origin_allowed(origin: str, host: str | None, allowed: Sequence[str]) -> bool:
    """Whether a browser page from ``origin`` may open a WebSocket: the origin is one of
    ``allowed`` (compared exactly), or names the same host and port as the request's ``Host``
    header (the page this server, or the proxy in front of it, served), whatever the scheme."""
    if origin in allowed:
        return True
    page = urlsplit(origin)
    if page.scheme not in ("http", "https") or not page.hostname or host is None:
        return False
    default = 443 if page.scheme == "https" else 80
    target = urlsplit("//" + host)
    try:
        return (page.hostname, page.port or default) == (target.hostname, target.port or default)
    except ValueError:  # a port out of range
        return False


def client_address(peer: str, forwarded: Sequence[str], trusted: Sequence[Network]) -> str:
    """The address a connection counts against: its peer's, or, when the peer is a trusted
    proxy, the nearest address in ``X-Forwarded-For`` (read from the right) that is not one."""
    hops = [hop.strip() for header in forwarded for hop in header.split(",")]
    address = _plain_ip(peer)
    while hops and address is not None and any(address in network for network in trusted):
        hop = _plain_ip(hops.pop())
        if hop is None:  # the proxy's own entries are well formed: anything else is forged
            break
        address = hop
    return str(address if address is not None else peer)


def _plain_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``text`` as an address (an IPv4 address mapped into IPv6 as IPv4), or None."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class _JustTheId(msgspec.Struct):
    id: v1.RequestId | None = None


_id_decoders = (msgspec.json.Decoder(_JustTheId), msgspec.msgpack.Decoder(_JustTheId))


def _request_id(frame: str | bytes) -> int | None:
    """The ``id`` of a frame that failed validation, if it has a readable one (for the reply)."""
    try:
        return _id_decoders[isinstance(frame, bytes)].decode(frame).id
    except (msgspec.DecodeError, RecursionError):
        return None


_SAFE_HOST = re.compile(r"[A-Za-z0-9.\-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")


def secure_headers(host: str | None) -> list[tuple[str, str]]:
    """The security headers of every response. The browser client is plain ES modules and one
    stylesheet from this origin (no inline script or style, CSSOM only), images inline as
    ``data:`` (the icon), and one WebSocket back to the page's own host: ``'self'`` covers
    ``ws:``/``wss:`` in CSP 3, the explicit ``ws://host`` and ``wss://host`` older browsers.
    A ``Host`` that is not a plain host name and port is left out rather than echoed."""
    sockets = ""
    if host and _SAFE_HOST.fullmatch(host):
        sockets = f" ws://{host} wss://{host}"
    policy = (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src 'self'{sockets}; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    )
    return [
        ("Content-Security-Policy", policy),
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "no-referrer"),
        ("Cross-Origin-Opener-Policy", "same-origin"),
    ]


def _secure(connection: ServerConnection, request: Request, response: Response) -> None:
    """``process_response``: add the security headers to whatever is answered."""
    hosts = request.headers.get_all("Host")
    for name, value in secure_headers(hosts[0] if len(hosts) == 1 else None):
        response.headers[name] = value


def _address_limit(rate: float, burst: int) -> KeyedBuckets | None:
    """A flood limit per client address, or ``None`` for a rate or burst of 0 (no limit)."""
    return KeyedBuckets(rate, burst, MAX_ADDRESSES) if rate > 0 and burst > 0 else None


def _too_many(body: bytes, content_type: str, wait: float) -> Response:
    """A 429 whose ``Retry-After`` is ``wait`` seconds in whole seconds (rounded up: a client
    that waits that long is not refused again)."""
    response = _response(http.HTTPStatus.TOO_MANY_REQUESTS, body, content_type)
    response.headers["Retry-After"] = str(max(1, math.ceil(wait)))
    return response


def _response(status: http.HTTPStatus, body: bytes, content_type: str) -> Response:
    headers = Headers(
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-cache"),
        ]
    )
    return Response(status.value, status.phrase, headers, body)


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
