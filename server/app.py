"""The asyncio runtime: one port for WebSocket and plain HTTP, the handshake, limits, shutdown.

Theory of operation
-------------------
``websockets`` accepts every connection. A plain HTTP request (no ``Upgrade`` header) is answered
in ``process_request``: ``/healthz``, ``/metrics`` and the browser client's static files. A
WebSocket connection must send ``hello`` within ``hello_timeout``; the server negotiates the
version, checks or issues the session token and answers ``welcome``. After that every frame is
decoded (JSON in text frames, MessagePack in binary frames), rate-limited by a token bucket, and
handed to the :class:`~server.node.Node`. Bad frames get a typed ``error`` and change nothing; a
flood is closed with 1008, a frame over ``max_frame_bytes`` with 1009 (by ``websockets``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import http
import logging
import mimetypes
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from protocol import handshake, v1
from protocol.codec import CLIENT_DECODERS, FrameError, decode_hello, encode
from protocol.errors import CloseCode, ErrorCode
from server import identity
from server.connection import Client
from server.metrics import Metrics
from server.node import LEASE_TTL, RECORD_RETENTION, Node
from server.ratelimit import TokenBucket
from server.room import LOG_SIZE
from server.stores import Store, StoreUnavailable, open_store

log = logging.getLogger("blackdrez.server")

VERSION = "0.1.0"
BOT_CLIENT_PREFIX = "blackdrez-bot"
"""A ``hello`` whose ``client`` starts so is a bot: marked as one at its seat."""
VIOLATION_WINDOW = 10.0
"""More than ``burst`` rate-limited messages within this many seconds close the connection."""
STATIC_DIR = Path(__file__).resolve().parent.parent / "clients" / "browser"


@dataclass
class Settings:
    """Everything ``blackdrez serve`` can be told."""

    host: str = "127.0.0.1"
    port: int = 8765
    redis_url: str | None = None
    """``redis://...`` for one Redis, ``redis+cluster://host:port[,...]`` for a Redis Cluster."""
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
    allowed_origins: list[str] | None = None
    compression: bool = False
    lease_ttl: float = LEASE_TTL
    """Seconds a table's lease lasts unless its host renews it (how soon a dead node's tables
    move to another node)."""
    record_retention: float = RECORD_RETENTION
    """Seconds a closed table's compact game record is kept in the store."""
    static_dir: Path = STATIC_DIR

    def limits(self) -> v1.Limits:
        """The limits announced in ``welcome``."""
        return v1.Limits(
            max_frame_bytes=self.max_frame_bytes,
            messages_per_second=self.messages_per_second,
            burst=self.burst,
            idle_timeout_seconds=self.idle_timeout,
            replay_events=LOG_SIZE,
        )


class GameServer:
    """A running server node: ``await GameServer(settings).start()``, then ``stop()``."""

    def __init__(self, settings: Settings, store: Store | None = None) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self.store = store or open_store(
            settings.redis_url,
            settings.node_id,
            wait_replicas=settings.redis_wait_replicas,
            wait_timeout_ms=settings.redis_wait_timeout_ms,
        )
        self.node = Node(
            self.store,
            self.metrics,
            lease_ttl=settings.lease_ttl,
            record_retention=settings.record_retention,
        )
        self.node.spawn_bot = self._spawn_bot
        self._bots: set[asyncio.Task[object]] = set()
        self.secret = b""
        self.server: Server | None = None
        self.stopping = False
        self._limits = settings.limits()

    @property
    def port(self) -> int:
        """The port actually bound (useful with port 0)."""
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        """Connect the store, start the node and listen."""
        await self.store.start()
        self.secret = await self.store.shared_secret(secrets.token_bytes(32))
        await self.node.start()
        self._sweeper = asyncio.get_running_loop().create_task(self._close_idle())
        s = self.settings
        self.server = await serve(
            self._connection,
            s.host,
            s.port,
            process_request=self._http,
            origins=[*s.allowed_origins, None] if s.allowed_origins else None,
            compression="deflate" if s.compression else None,
            max_size=s.max_frame_bytes,
            ping_interval=s.ping_interval,
            ping_timeout=s.ping_timeout,
            server_header=f"blackdrez/{VERSION}",
        )
        log.info("node %s listening on %s:%s", s.node_id, s.host, self.port)

    async def stop(self) -> None:
        """Stop accepting, tell every client, close cleanly."""
        if self.stopping:
            return
        self.stopping = True
        self._sweeper.cancel()
        for bot in list(self._bots):
            bot.cancel()
        if self.server is not None:
            self.server.close(close_connections=False)
        clients = list(self.node.clients.values())
        for client in clients:
            client.send(v1.Shutdown(reason="server shutting down", reconnect_after=1.0))
        await self.node.stop()
        await asyncio.gather(
            *(c.close_now(CloseCode.GOING_AWAY, "server shutting down") for c in clients),
            return_exceptions=True,
        )
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.server.wait_closed(), 5.0)
        await self.store.close()

    def _spawn_bot(self, table: str, strategy: str, invite: str | None) -> None:
        """Start a bot client that connects to this server like anyone else."""
        from clients.bots import run_bot

        host = "127.0.0.1" if self.settings.host in ("", "0.0.0.0", "::") else self.settings.host
        task = asyncio.get_running_loop().create_task(
            run_bot(f"ws://{host}:{self.port}/", table=table, strategy=strategy, invite=invite)
        )
        self._bots.add(task)
        task.add_done_callback(self._bots.discard)

    async def _close_idle(self) -> None:
        """Close connections that sent nothing for ``idle_timeout`` seconds (code 4005)."""
        timeout = self.settings.idle_timeout
        while True:
            await asyncio.sleep(min(30.0, timeout / 4))
            cutoff = time.monotonic() - timeout
            for client in list(self.node.clients.values()):
                if client.last_seen < cutoff:
                    self.metrics.closes.labels(str(int(CloseCode.IDLE_TIMEOUT))).inc()
                    client.close(CloseCode.IDLE_TIMEOUT, "idle for too long")

    # ------------------------------------------------------------------ HTTP
    def _http(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return None
        path = request.path.split("?", 1)[0]
        if path == "/healthz":
            body = msgspec.json.encode(
                {
                    "status": "stopping" if self.stopping else "ok",
                    "node": self.settings.node_id,
                    "connections": len(self.node.clients),
                    "tables": len(self.node.rooms),
                }
            )
            status = http.HTTPStatus.SERVICE_UNAVAILABLE if self.stopping else http.HTTPStatus.OK
            return _response(status, body, "application/json")
        if path == "/metrics":
            return _response(http.HTTPStatus.OK, self.metrics.render(), "text/plain; version=0.0.4")
        return self._static(path)

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
            await ws.close(CloseCode.GOING_AWAY, "server shutting down")
            return
        client = await self._greet(ws)
        if client is None:
            return
        older = self.node.attach(client)
        if older is not None:
            older.close(CloseCode.REPLACED, "you connected again elsewhere")
        try:
            await self._serve(client)
        except ConnectionClosed:
            pass
        finally:
            client.closing = True
            await self.node.detach(client)

    async def _greet(self, ws: ServerConnection) -> Client | None:
        s = self.settings
        try:
            frame = await asyncio.wait_for(ws.recv(), s.hello_timeout)
        except TimeoutError:
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
            known = identity.read_token(self.secret, hello.token)
            if known is None:
                await refuse(
                    ErrorCode.BAD_TOKEN, "the session token is not valid here", CloseCode.BAD_TOKEN
                )
                return None
            player, name = known
            token = identity.issue_token(self.secret, player, name)  # a fresh lifetime
        else:
            player, name = identity.new_player_id(), identity.clean_name(hello.name)
            token = identity.issue_token(self.secret, player, name)
        try:
            tables = await self.store.player_tables(player)
        except StoreUnavailable:
            tables = []
        client = Client(
            ws=ws,
            binary=binary,
            player=player,
            name=name,
            bucket=TokenBucket(s.messages_per_second, s.burst, time.monotonic()),
            max_buffer=s.send_buffer,
            bot=(hello.client or "").startswith(BOT_CLIENT_PREFIX),
        )
        client.send(
            v1.Welcome(
                version=version,
                token=token,
                player=player,
                name=name,
                limits=self._limits,
                server=f"blackdrez/{VERSION}",
                tables=tables,
            )
        )
        return client

    async def _serve(self, client: Client) -> None:
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
                )
                message = None
            if message is None:
                metrics.errors.labels(reply.code).inc()
                client.send(reply)
                continue
            metrics.messages_in.labels(type(message).__name__).inc()
            await self.node.handle(client, message)


async def _close_discarding(ws: ServerConnection, code: int, reason: str) -> None:
    """Close while discarding what the peer still sends: a flooder's unread frames would
    otherwise fill the receive queue and hold the closing handshake until its timeout."""
    closing = asyncio.get_running_loop().create_task(ws.close(code, reason))
    with contextlib.suppress(ConnectionClosed):
        while True:
            await ws.recv()
    await closing


class _JustTheId(msgspec.Struct):
    id: v1.RequestId | None = None


_id_decoders = (msgspec.json.Decoder(_JustTheId), msgspec.msgpack.Decoder(_JustTheId))


def _request_id(frame: str | bytes) -> int | None:
    """The ``id`` of a frame that failed validation, if it has a readable one (for the reply)."""
    try:
        return _id_decoders[isinstance(frame, bytes)].decode(frame).id
    except (msgspec.DecodeError, RecursionError):
        return None


def _response(status: http.HTTPStatus, body: bytes, content_type: str) -> Response:
    headers = Headers(
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-cache"),
        ]
    )
    return Response(status.value, status.phrase, headers, body)


async def run(settings: Settings) -> None:
    """Run a server until SIGTERM or SIGINT, then shut it down cleanly."""
    logging.getLogger("websockets").setLevel(logging.WARNING)
    server = GameServer(settings)
    await server.start()
    # Fewer, cheaper garbage collections: what exists at start-up is never collectable, and a
    # busy node allocates many short-lived objects (measured: +36-50 % actions/s under load).
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 1000)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(
        f"blackdrez {VERSION}: node {settings.node_id} on http://{settings.host}:{server.port}/ "
        f"({'redis' if settings.redis_url else 'in-memory'} lobby)",
        flush=True,
    )
    await stop.wait()
    await server.stop()
