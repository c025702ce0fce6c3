"""A node's WebSocket sessions: the handshake, the session tokens, and the frame loop.

Theory of operation
-------------------
A connection the HTTP gate let through (``blackdrez.server.http.routes``) is counted against its
client address and closed with 4006 past ``max_connections_per_ip``. It must then send
``hello`` within ``hello_timeout``: :meth:`Sessions._greet` negotiates the version, checks the
session token (:class:`Tokens`: signature, lifetime from its first issue, the store's list of
revoked tokens, and with records its account's token generation) or issues one, and answers
``welcome``. The connection is then attached to the :class:`~blackdrez.server.node.Node`.

After that every frame is decoded (JSON in text frames, MessagePack in binary frames),
rate-limited by the connection's token bucket, and handed to the node, except what this layer
answers itself: ``logout`` (revoke the token, close), a ``start_solitaire`` past the player's
session cap, and the account requests (``sign_up``, ``sign_in``, ``sign_out_everywhere``: the
HTTP parser under this server takes GET only, so accounts are WebSocket messages here). Bad
frames get a typed ``error`` and change nothing; a flood is closed with 1008, a frame over
``max_frame_bytes`` with 1009, a text frame that is not UTF-8 with 1007 and one breaking the
protocol with 1002 (these three by ``websockets``; all four are counted in
``blackdrez_closes_total``). :meth:`Sessions._serve` is the hot path: per frame one decode, one
bucket take and one dispatch, nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import typing
from collections import Counter
from collections.abc import Callable

import msgspec
from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed

from blackdrez.protocol import handshake, v1
from blackdrez.protocol.codec import CLIENT_DECODERS, FrameError, decode_hello, encode
from blackdrez.protocol.errors import CloseCode, ErrorCode
from blackdrez.server import identity
from blackdrez.server.connection import OLDEST, Connection
from blackdrez.server.http.limits import AddressLimits
from blackdrez.server.metrics import INVALID_MESSAGE, Metrics
from blackdrez.server.node import Node
from blackdrez.server.node.hosting import is_solitaire_id
from blackdrez.server.ratelimit import TokenBucket
from blackdrez.server.records.accounts import AccountError, AccountErrorCode, Accounts, name_key
from blackdrez.server.settings import Settings
from blackdrez.server.stores import Stores, StoreUnavailable
from blackdrez.server.table.history import KEPT_EVENTS

log = logging.getLogger("blackdrez.server")

VERSION = "0.1.0"
"""This server's version, in ``welcome`` and its ``Server`` header."""
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
AccountRequest = v1.SignUp | v1.SignIn | v1.SignOutEverywhere
_SESSION_MESSAGES = frozenset({v1.Logout, v1.StartSolitaire, *typing.get_args(AccountRequest)})
"""The messages the session looks at before the node (by exact type, as the client's decoder
makes them)."""
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


def announced_limits(settings: Settings) -> v1.Limits:
    """The limits announced in ``welcome``."""
    return v1.Limits(
        max_frame_bytes=settings.max_frame_bytes,
        messages_per_second=settings.messages_per_second,
        burst=settings.burst,
        idle_timeout_seconds=settings.idle_timeout,
        replay_events=KEPT_EVENTS,
    )


ACCOUNT_CHECK_TIMEOUT = 2.0
"""Seconds a ``hello``'s account check waits for the records database (see
:meth:`Tokens.authenticate`)."""


class OutageWarnings:
    """Warnings logged once per store outage: every player coming back at once during an outage
    would write them per ``hello``."""

    def __init__(self, store: Stores) -> None:
        self.store = store
        self._seen: dict[str, int] = {}
        """Per warning, the store outage it was logged in."""

    def warn(self, message: str) -> None:
        """Log ``message`` as a warning the first time in a store outage, at debug level after."""
        outage = self.store.health.outages
        seen = self._seen.get(message) == outage
        self._seen[message] = outage
        log.log(logging.DEBUG if seen else logging.WARNING, message)


class Tokens:
    """Session tokens: signed with the store's shared ``secret`` (set once the store answered),
    checked against the store's revoked tokens and, with records, the ``accounts``."""

    def __init__(self, settings: Settings, store: Stores, warnings: OutageWarnings) -> None:
        self.settings = settings
        self.store = store
        self.warnings = warnings
        self.secret = b""
        self.accounts: Accounts | None = None
        self._checks: set[asyncio.Future[identity.Token | None]] = set()
        """Account checks under way (one still waiting for a silent database included)."""

    async def in_force(self, text: str) -> identity.Token | None:
        """The token ``text`` if it is genuine (:meth:`authenticate`) and not logged out (the
        store's list of ended tokens), else ``None``: for a ``hello`` and an API request alike.
        During a store outage a token is taken without the list (players come back, their
        tables wait for the store anyway); it is enforced again as soon as the store answers."""
        token = await self.authenticate(text)
        if token is None:
            return None
        try:
            revoked = await self.store.tokens.revoked(token.id)
        except StoreUnavailable:
            self.warnings.warn("store unavailable: token accepted without the revocation check")
            revoked = False
        return None if revoked else token

    async def authenticate(self, text: str) -> identity.Token | None:
        """The token of a ``hello`` if it is genuine, unexpired and, with records, not revoked
        by its account (a guest token of an identity since claimed, an account's older token
        generation). While the records database cannot be reached the account check waits for
        it to answer again, as the store's list of ended tokens does; one that does not answer
        within :data:`ACCOUNT_CHECK_TIMEOUT` (its link cut: the query waits, it does not fail)
        counts as not reached, so that a player moving here in a network cut is let in."""
        if self.accounts is None:
            return identity.read_token(self.secret, text, self.settings.token_lifetime)
        # In a task of its own, left to finish on its own past the timeout: a cancelled asyncpg
        # query waits for its connection to be given back to the pool, as long as the link.
        check = asyncio.ensure_future(self.accounts.authenticate(text))
        self._checks.add(check)
        check.add_done_callback(_forget_check(self._checks))
        try:
            return await asyncio.wait_for(asyncio.shield(check), ACCOUNT_CHECK_TIMEOUT)
        except Exception:  # the database's own errors, and its silence
            log.warning("records unavailable: token accepted without the account check")
            return identity.read_token(self.secret, text, self.settings.token_lifetime)


def _forget_check(
    checks: set[asyncio.Future[identity.Token | None]],
) -> Callable[[asyncio.Future[identity.Token | None]], None]:
    """A done callback: forget a finished account check, its outcome read (one given up on
    fails unheard)."""

    def forget(check: asyncio.Future[identity.Token | None]) -> None:
        checks.discard(check)
        if not check.cancelled():
            check.exception()

    return forget


class Sessions:
    """The WebSocket sessions of one node (see the module docstring): :meth:`connection` is
    the handler ``websockets`` runs for each connection; ``stopping`` says whether the node
    stops (a connection arriving then is closed with 1001)."""

    def __init__(
        self,
        settings: Settings,
        node: Node,
        metrics: Metrics,
        tokens: Tokens,
        limits: AddressLimits,
        stopping: Callable[[], bool],
    ) -> None:
        self.settings = settings
        self.node = node
        self.store = node.store
        self.metrics = metrics
        self.tokens = tokens
        self.limits = limits
        self.stopping = stopping
        self.per_address: Counter[str] = Counter()
        """WebSocket connections open per client address."""
        self._limits = announced_limits(settings)

    async def connection(self, ws: ServerConnection) -> None:
        """Run one WebSocket connection to its end."""
        if self.stopping():
            self._count_close(CloseCode.GOING_AWAY)
            await ws.close(CloseCode.GOING_AWAY, "server shutting down")
            return
        assert ws.request is not None
        address = self.limits.address(ws, ws.request)
        _forget_headers(ws)
        self.per_address[address] += 1
        try:
            cap = self.settings.max_connections_per_ip
            if cap and self.per_address[address] > cap:
                self._count_close(CloseCode.TOO_MANY_CONNECTIONS)
                await ws.close(
                    CloseCode.TOO_MANY_CONNECTIONS, f"too many connections from {address}"
                )
                return
            await self._play(ws, address)
        finally:
            self._count_protocol_close(ws)
            self.per_address[address] -= 1
            if not self.per_address[address]:
                del self.per_address[address]

    async def close_idle(self) -> None:
        """Close connections that sent nothing for ``idle_timeout`` seconds (code 4005)."""
        timeout = self.settings.idle_timeout
        while True:
            await asyncio.sleep(min(30.0, timeout / 4))
            cutoff = time.monotonic() - timeout
            for client in list(self.node.clients.values()):
                if client.last_seen < cutoff:
                    client.close(CloseCode.IDLE_TIMEOUT, "idle for too long")

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
                self.tokens.warnings.warn(
                    "store unavailable: other nodes not told of a player's new connection"
                )
            await self._serve(client)
        except ConnectionClosed:
            pass
        finally:
            client.closing = True
            await self.node.detach(client)

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

        async def refuse(error: v1.Error, close: CloseCode) -> None:
            self.metrics.errors.labels(error.code).inc()
            self.metrics.closes.labels(str(int(close))).inc()
            with contextlib.suppress(ConnectionClosed):
                await ws.send(encode(error, binary))
                await ws.close(close, error.message[:100])

        try:
            hello = decode_hello(frame)
        except FrameError as error:
            await refuse(
                v1.Error(code=error.code, message=error.message), CloseCode.HANDSHAKE_FAILED
            )
            return None
        version = handshake.negotiate(hello.versions)
        if version is None:
            supported = list(handshake.SUPPORTED_VERSIONS)
            offered = hello.versions
            message = f"this server speaks protocol versions {supported}, you offered {offered}"
            await refuse(
                v1.Error(code=ErrorCode.UNSUPPORTED_VERSION, message=message, supported=supported),
                CloseCode.UNSUPPORTED_VERSION,
            )
            return None
        if hello.token is not None:
            token = await self.tokens.in_force(hello.token)
            if token is None:
                message = "the session token is not valid here (forged, expired or logged out)"
                bad_token = v1.Error(code=ErrorCode.BAD_TOKEN, message=message)
                await refuse(bad_token, CloseCode.BAD_TOKEN)
                return None
        else:
            player = identity.new_player_id()
            name = identity.clean_name(hello.name)
            token = identity.issue_token(self.tokens.secret, player, name)
        player, name = token.player, token.name
        new_identity = hello.token is None  # seated nowhere, connected nowhere else
        try:
            tables = [] if new_identity else await self.store.players.tables(player)
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
            outbox=self.node.outbox,
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

    async def _serve(self, client: Connection) -> None:
        s = self.settings
        decoder = CLIENT_DECODERS[1]
        ws = client.ws
        metrics = self.metrics
        while True:
            frame = await ws.recv()
            if client.acting:  # its last action is out to the store: answers go in order
                await self.node.acted(client)
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
                    client.flush()
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
            kind = type(message)
            metrics.count_message(_wire_type(kind))
            if kind in _SESSION_MESSAGES:  # (not a table's: one look-up for those)
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
            elif kind is v1.Act and self.node.act_soon(client, message):
                continue  # (nearly every request: served without a coroutine)
            await self.node.handle(client, message)

    async def _may_start(self, client: Connection, message: v1.StartSolitaire) -> bool:
        """Whether the player may open one more solitaire session; if not, say why."""
        cap = self.settings.max_solitaire_sessions
        if not cap:
            return True
        await self.node._settled()  # read your own writes: a session just left no longer counts
        try:
            tables = await self.store.players.tables(client.player)
        except StoreUnavailable:
            return True  # the node answers ``unavailable``: it cannot start a session either
        held = sum(1 for table in tables if is_solitaire_id(table))
        if held < cap:
            return True
        self._refuse(
            client,
            message.id,
            ErrorCode.TOO_MANY_SESSIONS,
            f"you hold {held} solitaire sessions, the most allowed: leave one first",
        )
        return False

    async def _logout(self, client: Connection, message: v1.Logout) -> bool:
        """End the client's token everywhere (until it would have expired), then close; return
        whether it did (when the store is unreachable the token stays valid)."""
        remaining = client.token.expires(self.settings.token_lifetime) - time.time()
        try:
            await self.store.tokens.revoke(client.token.id, max(remaining, 1.0))
        except StoreUnavailable:
            self._refuse(
                client,
                message.id,
                ErrorCode.UNAVAILABLE,
                "the session store cannot be reached: the token is still valid",
            )
            return False
        client.send(v1.Ok(id=message.id))
        await client.close_now(CloseCode.NORMAL, "logged out")
        return True

    def _refuse(
        self,
        client: Connection,
        request: int | None,
        code: ErrorCode,
        text: str,
        retry_after: float | None = None,
    ) -> None:
        """Answer request ``request`` with an ``error`` of ``code``, counted in the metrics."""
        self.metrics.errors.labels(code).inc()
        client.send(v1.Error(id=request, code=code, message=text, retry_after=retry_after))

    async def _account(self, client: Connection, message: AccountRequest, address: str) -> None:
        """``sign_up``, ``sign_in``, ``sign_out_everywhere``: answered with ``session``."""
        accounts = self.tokens.accounts
        if accounts is None:
            self._refuse(
                client,
                message.id,
                ErrorCode.UNAVAILABLE,
                "this server keeps no records: no accounts",
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
            self._refuse(client, message.id, code, error.message, retry_after=error.retry_after)
            return
        except Exception:  # the database's own errors
            log.warning("account request failed", exc_info=True)
            self._refuse(
                client,
                message.id,
                ErrorCode.UNAVAILABLE,
                "the records database cannot be reached: try again",
            )
            return
        if isinstance(message, v1.SignUp | v1.SignOutEverywhere):
            # The connection's own identity goes on with the new token (the old one is refused)
            client.token = (
                identity.read_token(self.tokens.secret, session.token, self.settings.token_lifetime)
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

    def _count_close(self, code: int) -> None:
        self.metrics.closes.labels(str(int(code))).inc()

    def _count_protocol_close(self, ws: ServerConnection) -> None:
        """Count the close ``websockets`` sent on its own for a frame breaking the protocol:
        the handler only sees the connection closed (a client's own close, echoed, is not one)."""
        sent = ws.protocol.close_sent
        if sent and sent.code in PROTOCOL_CLOSES and not ws.protocol.close_rcvd_then_sent:
            self._count_close(sent.code)


async def _close_discarding(ws: ServerConnection, code: int, reason: str) -> None:
    """Close while discarding what the peer still sends: a flooder's unread frames would
    otherwise fill the receive queue and hold the closing handshake until its timeout."""
    closing = asyncio.get_running_loop().create_task(ws.close(code, reason))
    with contextlib.suppress(ConnectionClosed):
        while True:
            await ws.recv()
    await closing


_WIRE_TYPES: dict[type, str] = {}


def _wire_type(kind: type) -> str:
    """A message class's wire type (its tag; looked up once per class)."""
    tag = _WIRE_TYPES.get(kind)
    if tag is None:
        tag = _WIRE_TYPES[kind] = str(kind.__struct_config__.tag)  # type: ignore[attr-defined]
    return tag


class _JustTheId(msgspec.Struct):
    id: v1.RequestId | None = None


_json_id = msgspec.json.Decoder(_JustTheId)
_msgpack_id = msgspec.msgpack.Decoder(_JustTheId)


def _request_id(frame: str | bytes) -> int | None:
    """The ``id`` of a frame that failed validation, if it has a readable one (for the reply)."""
    try:
        if isinstance(frame, bytes):
            return _msgpack_id.decode(frame).id
        return _json_id.decode(frame).id
    except (msgspec.DecodeError, RecursionError):
        return None


def _forget_headers(ws: ServerConnection) -> None:
    """Let the handshake's headers go once the client's address is known: nothing reads them
    again (websockets neither), and a node of thousands of connections kept about 3 KiB each."""
    assert ws.request is not None
    ws.request.headers = Headers()
    if ws.response is not None:
        ws.response.headers = Headers()
