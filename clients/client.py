"""An asyncio client for the BlackDrez protocol: handshake, request/reply by id, table state.

Use::

    client = await Client.connect("ws://127.0.0.1:8765/", name="Ann")
    joined = await client.request(v1.QuickJoin())
    table = client.tables[joined.table.id]
    await client.wait_until(lambda: table.legal)   # my turn
    await client.act(table.id, {"type": "hit"})

The client keeps, per table, the last snapshot or update applied (``TableState``): its event
number, view, legal actions and info. Updates are applied only in order: an update whose events do
not follow the last number held, or that has none but a later number, triggers a ``resync`` (no
gap, no duplicate), and a snapshot or update older than the last event held (an answer overtaken
by a later update on the way) is not applied: the client never goes back.

A request for a table that is moving between nodes is answered ``moving`` (nothing changed):
:meth:`Client.request` waits it out, sending the request again with backoff, so callers only see
real answers (``not_found`` is never a table in transit). Reconnections and retries follow the
policies of :mod:`blackdrez.protocol.retry`: a connection whose node died is re-opened at once at
the next
url; a refused request is tried again after at most a quarter second, with jitter. A
reconnection refused with HTTP 429 (too many new connections from this address) or 503 waits at
least the ``Retry-After`` the server gave before its next try.

Every message sent is paced to the limit the server announced in ``welcome.limits`` (a token
bucket of ``messages_per_second`` holding half its ``burst``, so that the network's jitter cannot
bunch them past the server's bucket): many requests at once wait their turn in the client instead
of being refused, and a refused one sent again joins the same queue rather than all of them at
the same moment. ``pace=False`` turns it off (tests of the server's own limits).

A request answered ``rate_limited`` (not executed: the connection, or the table's hints, went over
the server's limit) is sent again after the ``retry_after`` the server gave, at most
``rate_limit_retries`` times (:data:`RATE_LIMIT_RETRIES`; 0 turns it off); then, or when the
server asks for a longer wait than :data:`RATE_LIMIT_PATIENCE`, :class:`RateLimited` is raised.

A request whose connection drops before its reply raises :class:`ConnectionLost`: whether the
server carried it out is not known until the table is resynced. With ``reconnect=True`` every
table's legal actions are emptied at the drop (they may be stale) and come back with the resync,
so a bot waiting for ``legal`` acts again only on what the server says now.

A node that has lost its shared store says so once (an ``error`` ``unavailable`` with no
``id``): with ``reconnect=True`` the client then looks for a node that greets its session (the
other urls in turn, or the same url again behind a load balancer), and only once one has does it
let the old connection go and resync every table there (make before break): if only that node
lost the store (a network partition), its tables go on elsewhere and so does the player. If no
node greets it in :data:`MOVE_TRIES` rounds, it stays: the old node serves again once it
reaches the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidMessage, InvalidStatus

from blackdrez.protocol import v1
from blackdrez.protocol.codec import SERVER_DECODERS, encode
from blackdrez.protocol.errors import CloseCode, ErrorCode
from blackdrez.protocol.handshake import Hello
from blackdrez.protocol.retry import RECONNECT, RETRY, reconnect_delays

CLIENT_NAME = "blackdrez-py/0.1"
RECONNECT_TRIES = 15
"""Tries to re-open a dropped connection: 30 to 50 s in all with
:data:`blackdrez.protocol.retry.RECONNECT`."""
MOVE_TRIES = 8
"""Rounds of tries (every other url, on :data:`blackdrez.protocol.retry.RECONNECT`'s backoff: 8 to
16 s
in all) to move away from a node that lost its store before staying with it."""
MOVING_PATIENCE = 30.0
"""Seconds a request answered ``moving`` is retried before the error is raised: a table moves
to another node within a few seconds (its lease TTL and an adoption)."""
RATE_LIMIT_RETRIES = 3
"""Times a request answered ``rate_limited`` is sent again (after the wait the server gives)
before :class:`RateLimited` is raised; ``rate_limit_retries=0`` raises at once."""
RATE_LIMIT_PATIENCE = 10.0
"""The longest wait asked by ``rate_limited`` that a request sits out: a longer one (a minute
after too many sign-in attempts) is raised at once for the caller to decide."""
RESYNC_PATIENCE = 60.0
"""Seconds a table is resynced again after a reconnection or a gap while its host cannot answer
(a Redis restarted from its append-only file under load can take tens of seconds)."""
FINAL_CLOSE_CODES = frozenset(
    {
        CloseCode.UNSUPPORTED_VERSION,
        CloseCode.BAD_TOKEN,
        CloseCode.REPLACED,
        CloseCode.HANDSHAKE_FAILED,
        CloseCode.SIGNED_OUT,
    }
)
"""Closes after which reconnecting cannot help."""
MAX_RETRY_AFTER = 60.0
"""The longest wait a handshake's ``Retry-After`` may ask of a reconnecting client."""


def retry_after(header: str | None) -> float:
    """Seconds a ``Retry-After`` header in seconds asks for (0 without one, or a date; at
    most :data:`MAX_RETRY_AFTER`)."""
    try:
        seconds = float(header) if header is not None else 0.0
    except ValueError:
        return 0.0
    return 0.0 if math.isnan(seconds) else min(max(seconds, 0.0), MAX_RETRY_AFTER)


PASSING_STATUSES = frozenset({429, 500, 502, 503, 504})
"""HTTP answers to a handshake that say "not now": a node still starting (503 until its store
answers), a proxy with no node behind it yet, too many requests. Reconnecting tries again."""


async def _open(
    url: str, hello: Hello, binary: bool, options: dict[str, Any]
) -> tuple[ClientConnection, v1.Welcome]:
    ws = await connect(url, compression=None, max_size=2**22, **options)
    await ws.send(encode(hello, binary))
    reply = SERVER_DECODERS[1].decode(await ws.recv())
    if isinstance(reply, v1.Error):
        await ws.close()
        raise ServerError(reply)
    assert isinstance(reply, v1.Welcome), reply
    return ws, reply


class ServerError(Exception):
    """The server answered a request with ``error``."""

    def __init__(self, error: v1.Error) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.code = error.code
        self.error = error


class ConnectionLost(ConnectionError):
    """The connection dropped while a request waited for its reply: the server may or may not
    have carried it out (with ``reconnect=True``, the resync that follows says)."""


class RateLimited(ServerError):
    """The server answered ``rate_limited`` (the request was not executed) and the client did
    not, or no longer, wait to send it again."""

    def __init__(self, error: v1.Error, retry_after: float) -> None:
        super().__init__(error)
        self.retry_after = retry_after
        """Seconds after which the server will take the request."""


CHAT_HELD = 200
"""Chat lines a :class:`TableState` holds at most."""


@dataclass
class TableState:
    """What the client knows of one table."""

    id: str
    seq: int = 0
    seat: int | None = None
    info: v1.TableInfo | None = None
    view: Any = None
    legal: list[Any] = field(default_factory=list)
    deadline: float | None = None
    events: list[v1.Numbered] = field(default_factory=list)
    """Every event received, in order (the table's history as this client saw it)."""
    chat: list[v1.Numbered] = field(default_factory=list)
    """The table's chat lines (``said`` events), oldest first: the snapshot's, then each one
    received (the last :data:`CHAT_HELD`)."""


class Client:
    """A connected, greeted client (see the module docstring)."""

    def __init__(
        self,
        ws: ClientConnection,
        welcome: v1.Welcome,
        binary: bool,
        record: bool = False,
        *,
        url: str = "",
        versions: tuple[int, ...] = (1,),
        reconnect: bool = False,
        rate_limit_retries: int = RATE_LIMIT_RETRIES,
        pace: bool = True,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.ws = ws
        self.url = url
        self.urls = [url]
        """Where to reconnect, in turn (several nodes without a load balancer in front)."""
        self.versions = versions
        self.reconnect = reconnect
        self.rate_limit_retries = rate_limit_retries
        """Times a request answered ``rate_limited`` is sent again (0: never)."""
        self.pace = pace
        """Whether messages are paced to ``welcome.limits`` (see the module docstring)."""
        self._paced_until = 0.0  # the pacing's theoretical arrival time (GCRA)
        self._options = options or {}
        self.frames: list[str | bytes] | None = [] if record else None
        """With ``record=True``: every frame received after ``welcome``, as received."""
        self.welcome = welcome
        self.binary = binary
        self.token = welcome.token
        self.player = welcome.player
        self.tables: dict[str, TableState] = {}
        self.lobby: dict[str, v1.TableInfo] = {}
        self.pushed: list[Any] = []
        """Messages the server pushed that are neither updates nor replies (lobby, shutdown), and
        errors answering no request this client waits for (a frame written to :attr:`ws` by
        hand, a request that timed out)."""
        self.client_name = CLIENT_NAME
        self.reconnects = 0
        """How many times the connection was re-established."""
        self.reconnected_at = 0.0
        """``time.monotonic()`` of the last reconnection (0: none yet; for measurements)."""
        self.closed: asyncio.Future[tuple[int | None, str]] = (
            asyncio.get_running_loop().create_future()
        )
        """Resolves with the close code and reason once the client is closed for good."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._connected = asyncio.Event()
        self._connected.set()
        self._closing = False
        self.left: set[str] = set()
        """Tables this client left (``leave`` answered ``ok``): not resynced after a
        reconnection, where the server would answer that they are gone."""
        self.finding: v1.FindGame | None = None
        """The ``find_game`` this client queues with (sent again after a reconnection, which
        keeps the place), until a table is found or it cancels."""
        self.queued: v1.Queued | None = None
        """The server's answer to that ``find_game``."""
        self.matched: v1.MatchFound | None = None
        """The last table the matchmaking queue made for this player."""
        self.challenges: list[v1.Challenged | v1.ChallengeAnswered] = []
        """Challenges sent to this player, and answers to theirs, as pushed (oldest first)."""
        self.arenas: dict[str, v1.ArenaStandings] = {}
        """Each arena this client plays in or watches: its info and standings, as last
        answered or pushed."""
        self._moving: asyncio.Task[None] | None = None
        self._moved: tuple[str, ClientConnection, v1.Welcome] | None = None
        """A new connection, greeted, to switch to once the old one has ended."""
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._changed = asyncio.Condition()
        self._decoder = SERVER_DECODERS[welcome.version]
        self._reader = asyncio.get_running_loop().create_task(self._run())

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        name: str | None = None,
        token: str | None = None,
        binary: bool = False,
        versions: tuple[int, ...] = (1,),
        record: bool = False,
        reconnect: bool = False,
        client_name: str = CLIENT_NAME,
        also: tuple[str, ...] = (),
        rate_limit_retries: int = RATE_LIMIT_RETRIES,
        pace: bool = True,
        **options: Any,
    ) -> Client:
        """Open a connection, say hello and return the greeted client.

        With ``reconnect=True`` a dropped connection is re-opened with the session token (at
        once if its node died, then with backoff from 0.1 s up to 5 s, at most
        :data:`RECONNECT_TRIES` tries: :mod:`blackdrez.protocol.retry`) and every table held is
        resynced,
        so the client carries on where it was; a node that answers "not now" (503 while it
        starts, see :data:`PASSING_STATUSES`) is tried again too. ``also`` names other nodes to
        try in turn (for several nodes with no load balancer in front). A request answered
        ``rate_limited`` is sent again up to ``rate_limit_retries`` times, and messages are
        paced to the server's announced limit unless ``pace=False`` (see the module docstring).
        With ``token`` (a saved session) the player is who they were: ``welcome.tables`` lists
        their tables, and :meth:`resync` of each brings its state (seat, view, legal actions).
        """
        ws, welcome = await _open(
            url,
            Hello(versions=list(versions), name=name, token=token, client=client_name),
            binary,
            options,
        )
        client = cls(
            ws,
            welcome,
            binary,
            record,
            url=url,
            versions=versions,
            reconnect=reconnect,
            rate_limit_retries=rate_limit_retries,
            pace=pace,
            options=options,
        )
        client.client_name = client_name
        client.urls = [url, *(u for u in also if u != url)]
        return client

    async def close(self) -> None:
        """Close the connection for good (no reconnection)."""
        self._closing = True
        await self.ws.close()
        if self._moved is not None:  # greeted elsewhere, not switched to yet
            await self._moved[1].close()
        self._reader.cancel()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        if not self.closed.done():
            self.closed.set_result((self.ws.close_code, self.ws.close_reason or ""))

    async def drop(self) -> None:
        """Drop the connection without closing the client (tests, and to force a reconnect)."""
        self.ws.transport.abort()

    # ------------------------------------------------------------------ requests
    async def send(self, message: Any, timeout: float = 10.0) -> None:
        """Send a message without waiting for its reply (waiting for a reconnection if needed)."""
        if self.closed.done():
            raise self._closed_error()
        if not self._connected.is_set():
            connected = asyncio.ensure_future(self._connected.wait())
            try:
                await asyncio.wait(
                    (connected, self.closed), timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                connected.cancel()
            if self.closed.done():  # the reconnection gave up
                raise self._closed_error()
            if not self._connected.is_set():
                raise TimeoutError(f"not reconnected within {timeout} s")
        if self.pace:
            await self._wait_for_pace()
        try:
            await self.ws.send(encode(message, self.binary))
        except ConnectionClosed as closed:
            raise ConnectionLost(f"connection lost: {closed}") from None

    async def _wait_for_pace(self) -> None:
        """Wait until one more message keeps within the server's announced limit (a generic cell
        rate: each message books the next slot, so concurrent senders queue in order). A wait
        longer than :data:`RATE_LIMIT_PATIENCE` (a server whose limit is that slow) is not sat
        out: the message goes, and the server's ``rate_limited`` says what to do."""
        limits = self.welcome.limits
        if limits.messages_per_second <= 0:
            return
        interval = 1.0 / limits.messages_per_second
        tolerance = max(limits.burst // 2 - 1, 0) * interval
        now = time.monotonic()
        booked = max(self._paced_until, now)
        wait = booked - tolerance - now
        if wait > RATE_LIMIT_PATIENCE:
            return
        self._paced_until = booked + interval
        if wait > 0:
            await asyncio.sleep(wait)

    def _closed_error(self) -> ConnectionError:
        """What a request on a client closed for good raises: the close code and reason."""
        code, reason = self.closed.result()
        return ConnectionError(f"connection closed for good: {code} {reason}".rstrip())

    async def request(
        self, message: Any, timeout: float = 10.0, *, moving_patience: float = MOVING_PATIENCE
    ) -> Any:
        """Send a request with a fresh id and return its reply; raise ServerError on error.

        A table that is moving between nodes answers ``moving`` (nothing was changed): the
        request is sent again with backoff, for up to ``moving_patience`` seconds. A request
        answered ``rate_limited`` is sent again after the server's ``retry_after``, up to
        :attr:`rate_limit_retries` times, else :class:`RateLimited` is raised.
        """
        deadline = time.monotonic() + moving_patience
        delays = RETRY.delays()
        limited = 0
        while True:
            reply = await self._request_once(message, timeout)
            if not isinstance(reply, v1.Error):
                table = getattr(message, "table", None)
                if isinstance(message, v1.LeaveTable):
                    self.left.add(message.table)
                elif isinstance(table, str):
                    self.left.discard(table)  # (joined, watching or resynced again)
                return reply
            if reply.code == ErrorCode.RATE_LIMITED:
                wait = self._rate_limit_wait(reply)
                if limited >= self.rate_limit_retries or wait > RATE_LIMIT_PATIENCE:
                    raise RateLimited(reply, wait)
                limited += 1
                await asyncio.sleep(wait)
                continue
            if reply.code != ErrorCode.MOVING or time.monotonic() >= deadline:
                raise ServerError(reply)
            await asyncio.sleep(min(next(delays), deadline - time.monotonic()))

    def _rate_limit_wait(self, error: v1.Error) -> float:
        """Seconds to wait after ``error`` (``rate_limited``): the server's ``retry_after``, or
        from a server that gives none, the time its message limit takes to allow one more."""
        if error.retry_after is not None:
            return error.retry_after
        return 1.0 / self.welcome.limits.messages_per_second

    async def _request_once(self, message: Any, timeout: float) -> Any:
        message.id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[message.id] = future
        try:
            await self.send(message)
            return await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(message.id, None)
            if future.done() and not future.cancelled():
                future.exception()  # retrieved: a lost connection may have failed it unawaited
            else:
                future.cancel()

    async def act(self, table: str, action: Any) -> v1.Ok:
        """Play an action (a game Struct or its dict form) at a table."""
        if not isinstance(action, dict):
            action = msgspec.to_builtins(action)
        return await self.request(v1.Act(table=table, action=action))

    async def say(
        self, table: str, text: str | None = None, *, quick: v1.QuickMessage | None = None
    ) -> v1.Ok:
        """Write a line in ``table``'s chat: ``text``, or a canned ``quick`` line
        (``"good_game"``, ...: :data:`blackdrez.protocol.v1.QUICK_MESSAGES`)."""
        return await self.request(v1.Say(table=table, text=text, quick=quick))

    async def remove_spectator(self, table: str, player: str) -> v1.Ok:
        """As the host, send the spectator ``player`` away from ``table``."""
        return await self.request(v1.RemoveSpectator(table=table, player=player))

    async def report(self, table: str, seq: int, reason: str = "") -> v1.Ok:
        """Report the chat line numbered ``seq`` at ``table`` to the operators."""
        return await self.request(v1.Report(table=table, seq=seq, reason=reason))

    async def find_game(
        self, seats: int | None = None, *, rated: bool = False, bots_after: float | None = None
    ) -> v1.Queued:
        """Queue for a BlackDrez table (``seats`` 2 to 8, or ``None``: any): the server's
        ``queued``. :meth:`wait_for_match` then waits for the table; after a reconnection the
        client asks again by itself, which keeps its place."""
        finding = v1.FindGame(seats=seats, rated=rated, bots_after=bots_after)
        self.finding, self.matched = finding, None
        queued: v1.Queued = await self.request(finding)
        self.queued = queued
        return queued

    async def cancel_find(self) -> v1.Ok:
        """Leave the matchmaking queue."""
        self.finding = self.queued = None
        return await self.request(v1.CancelFind())

    async def wait_for_match(self, timeout: float | None = 120.0) -> v1.MatchFound:
        """Wait until the queue has made this player's table: its ``match_found`` (send
        ``join`` to watch it)."""
        found: v1.MatchFound = await self.wait_until(lambda: self.matched, timeout)
        return found

    async def create_arena(self, name: str, **options: Any) -> v1.Arena:
        """Make an arena (``v1.ArenaOptions``: ``minutes``, ``seats``, ``rated``,
        ``private``, ``starts_in``)."""
        made: v1.Arena = await self.request(
            v1.CreateArena(options=v1.ArenaOptions(name=name, **options))
        )
        return made

    async def join_arena(self, arena: str, invite: str | None = None) -> v1.Arena:
        """Play in ``arena``: queued for the next table there (:meth:`wait_for_match`); send
        it again after each game to be paired again. Its standings are kept in
        :attr:`arenas`."""
        self.matched = None
        joined: v1.Arena = await self.request(v1.JoinArena(arena=arena, invite=invite))
        return joined

    async def leave_arena(self, arena: str) -> v1.Ok:
        """Stop being paired in ``arena`` (the points stay)."""
        return await self.request(v1.LeaveArena(arena=arena))

    async def watch_arena(self, arena: str, invite: str | None = None) -> v1.Arena:
        """Follow ``arena``'s standings (kept in :attr:`arenas`)."""
        watched: v1.Arena = await self.request(v1.WatchArena(arena=arena, invite=invite))
        return watched

    async def follow(self, player: str) -> v1.Ok:
        """Follow ``player`` (see :meth:`friends`)."""
        return await self.request(v1.Follow(player=player))

    async def unfollow(self, player: str) -> v1.Ok:
        return await self.request(v1.Unfollow(player=player))

    async def block(self, player: str) -> v1.Ok:
        """Block ``player``: their challenges are refused, their chat lines are to be hidden."""
        return await self.request(v1.Block(player=player))

    async def unblock(self, player: str) -> v1.Ok:
        return await self.request(v1.Unblock(player=player))

    async def friends(self) -> v1.Friends:
        """Whom this player follows, each with where they are now, and whom they block."""
        found: v1.Friends = await self.request(v1.GetFriends())
        return found

    async def challenge(self, player: str, *, rated: bool = False) -> v1.ChallengeSent:
        """Challenge ``player`` to a table of two (their answer: ``match_found`` to both, or a
        ``challenge_answered`` in :attr:`challenges`)."""
        sent: v1.ChallengeSent = await self.request(v1.Challenge(player=player, rated=rated))
        return sent

    async def answer_challenge(self, challenge: str, accept: bool = True) -> v1.Ok:
        """Accept (then :meth:`wait_for_match`) or decline a challenge sent to this player."""
        if accept:
            self.matched = None
        return await self.request(v1.AnswerChallenge(challenge=challenge, accept=accept))

    async def _find_again(self, finding: v1.FindGame) -> None:
        """After a reconnection: queue again with the same choices (the place is kept)."""
        with contextlib.suppress(ServerError, ConnectionError, TimeoutError):
            queued = await self.request(finding)
            if self.finding is finding:
                self.queued = queued

    async def resync(self, table: str) -> Any:
        """Ask for what was missed at ``table`` since the last event held."""
        state = self.tables.setdefault(table, TableState(table))
        return await self.request(v1.Resync(table=table, since=state.seq))

    def _background(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _resync_until_done(self, table: str) -> None:
        """Resync a table, retrying while its host cannot answer (it may be moving), for up to
        :data:`RESYNC_PATIENCE` seconds."""
        deadline = time.monotonic() + RESYNC_PATIENCE
        delays = RETRY.delays()
        while time.monotonic() < deadline:
            try:
                await self.resync(table)
                return
            except ServerError as error:
                if error.code not in (ErrorCode.UNAVAILABLE, ErrorCode.MOVING):
                    return  # gone, or not ours any more: nothing to retry
            except (ConnectionError, TimeoutError):
                if self.closed.done():
                    return
            await asyncio.sleep(next(delays))

    async def wait_until(self, predicate: Callable[[], Any], timeout: float | None = 10.0) -> Any:
        """Wait until ``predicate()`` is true (checked after every message); return its value
        (``timeout`` ``None``: as long as it takes)."""
        async with asyncio.timeout(timeout):
            async with self._changed:
                while True:
                    value = predicate()
                    if value:
                        return value
                    if self.closed.done():
                        raise self._closed_error()
                    await self._changed.wait()

    # ------------------------------------------------------------------ reading
    async def _run(self) -> None:
        """Read until the connection closes; reconnect when asked to; then close for good.

        Whatever ends it (even an error nobody foresaw), the client is closed for good
        afterwards: ``closed`` resolves and every waiter wakes, so nobody waits forever on a
        client that stopped reading."""
        try:
            while True:
                await self._read()
                moved, self._moved = self._moved, None
                if moved is None:
                    self._connected.clear()
                code = self.ws.close_code
                for future in self._pending.values():
                    if not future.done():
                        future.set_exception(
                            ConnectionLost(f"connection lost: {code} {self.ws.close_reason}")
                        )
                for state in self.tables.values():
                    state.legal = []  # may be stale: the resync after reconnecting says
                    state.deadline = None
                if moved is not None:
                    self._greeted(*moved)
                    continue
                if self._closing or not self.reconnect or code in FINAL_CLOSE_CODES:
                    break
                if not await self._reopen():
                    break
        finally:
            self._connected.clear()
            if not self.closed.done():
                self.closed.set_result((self.ws.close_code, self.ws.close_reason or ""))
            async with self._changed:
                self._changed.notify_all()

    async def _reopen(self) -> bool:
        """Re-open the connection at the next url in turn, at once if its node died (see
        :func:`blackdrez.protocol.retry.reconnect_delays`); resync every table held."""
        delays = reconnect_delays(self.ws.close_code)
        told = 0.0  # the server's Retry-After, when it refused the last try with one
        for _ in range(RECONNECT_TRIES):
            await asyncio.sleep(max(next(delays), told))
            told = 0.0
            hello = Hello(versions=list(self.versions), token=self.token, client=self.client_name)
            self.url = self.urls[(self.urls.index(self.url) + 1) % len(self.urls)]
            try:
                self.ws, self.welcome = await _open(self.url, hello, self.binary, self._options)
            except ServerError:
                return False  # the server refuses this token: nothing to retry
            except InvalidStatus as refused:
                if refused.response.status_code in PASSING_STATUSES:
                    # e.g. a node started again at this address, not ready yet; or too many
                    # new connections from this address (429), for as long as it says
                    told = retry_after(refused.response.headers.get("Retry-After"))
                    continue
                return False  # refused for good (an origin not allowed...)
            except (OSError, ConnectionClosed, InvalidMessage, TimeoutError):
                continue  # nothing listens yet, or it went away during the handshake
            self._greeted(self.url, self.ws, self.welcome)
            return True
        return False

    def _greeted(self, url: str, ws: ClientConnection, welcome: v1.Welcome) -> None:
        """Carry on over a new connection, greeted: resync every table held."""
        self.url, self.ws, self.welcome = url, ws, welcome
        self.reconnects += 1
        self.reconnected_at = time.monotonic()
        self._connected.set()
        for table in {*(set(self.tables) - self.left), *self.welcome.tables}:
            self.tables.setdefault(table, TableState(table))
            self._background(self._resync_until_done(table))
        if self.finding is not None:
            self._background(self._find_again(self.finding))

    def _store_lost(self) -> None:
        """The node said it lost its store: look for another (see the module docstring)."""
        if self.reconnect and not self._closing and (self._moving is None or self._moving.done()):
            self._moving = asyncio.get_running_loop().create_task(self._move_elsewhere())
            self._tasks.add(self._moving)
            self._moving.add_done_callback(self._tasks.discard)

    async def _move_elsewhere(self) -> None:
        """Open a connection to another url (the same one when there is no other) that greets
        this session, then end the old connection: the reader switches to the new one."""
        old = self.ws
        hello = Hello(versions=list(self.versions), token=self.token, client=self.client_name)
        delays = RECONNECT.delays()
        for _ in range(MOVE_TRIES):
            for url in [u for u in self.urls if u != self.url] or [self.url]:
                if self.ws is not old or self._closing:
                    return  # it dropped meanwhile: the reader reconnects on its own
                try:
                    ws, welcome = await _open(url, hello, self.binary, self._options)
                except (
                    ServerError,
                    InvalidStatus,
                    OSError,
                    ConnectionClosed,
                    InvalidMessage,
                    TimeoutError,
                ):
                    continue  # this one cannot serve either (503 while it lost the store too)
                if self.ws is not old or self._closing:
                    await ws.close()
                    return
                self._moved = (url, ws, welcome)
                old.transport.abort()
                return
            await asyncio.sleep(next(delays))

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                if self.frames is not None:
                    self.frames.append(frame)
                message = self._decoder.decode(frame)
                self._receive(message)
                async with self._changed:
                    self._changed.notify_all()
        except ConnectionClosed:
            pass

    def _receive(self, message: Any) -> None:
        if isinstance(message, v1.Joined):
            state = self.tables.setdefault(message.table.id, TableState(message.table.id))
            state.seat = message.seat
            state.info = message.table
        elif isinstance(message, v1.Snapshot):
            self._apply_snapshot(message)
        elif isinstance(message, v1.Update):
            self._apply_update(message)
        elif isinstance(message, v1.Tables):
            self.lobby = {t.id: t for t in message.tables}
        elif isinstance(message, v1.Arena | v1.ArenaStandings):
            arena = message.arena
            self.arenas[arena.id] = v1.ArenaStandings(arena=arena, standings=message.standings)
            if isinstance(message, v1.ArenaStandings):
                self.pushed.append(message)
        elif isinstance(message, v1.Challenged | v1.ChallengeAnswered):
            self.challenges.append(message)
            self.pushed.append(message)
        elif isinstance(message, v1.MatchFound):
            self.matched, self.finding, self.queued = message, None, None
            self.pushed.append(message)
        elif isinstance(message, v1.LobbyUpdate):
            for info in message.tables:
                self.lobby[info.id] = info
            for gone in message.removed:
                self.lobby.pop(gone, None)
            self.pushed.append(message)
        elif getattr(message, "id", None) is None:
            self.pushed.append(message)
            if isinstance(message, v1.Error) and message.code == ErrorCode.UNAVAILABLE:
                self._store_lost()
        request_id = getattr(message, "id", None)
        if request_id is not None:
            future = self._pending.get(request_id)
            if future is not None and not future.done():
                future.set_result(message)
            elif isinstance(message, v1.Error):
                self.pushed.append(message)  # no request waits for it (a frame sent by hand)

    def _apply_snapshot(self, snapshot: v1.Snapshot) -> None:
        state = self.tables.setdefault(snapshot.table, TableState(snapshot.table))
        if snapshot.seq < state.seq:
            return  # older than what is held (an answer overtaken by a later update)
        state.seq = snapshot.seq
        state.seat = snapshot.seat
        state.info = snapshot.info
        state.view = snapshot.view
        state.legal = snapshot.legal
        state.deadline = snapshot.deadline
        state.chat = list(snapshot.chat)

    def _apply_update(self, update: v1.Update) -> None:
        state = self.tables.get(update.table)
        if state is None:
            return  # a snapshot will follow
        if update.seq < state.seq:
            return  # older than what is held (an answer overtaken by a later update)
        events = [e for e in update.events if e.seq > state.seq]
        if update.events and not events:
            return  # already held
        if update.seq > state.seq and (not events or events[0].seq != state.seq + 1):
            # Events were missed (even when this update has none of its own: only the table's
            # info changed after them): fetch them rather than take this number as held.
            self._background(self._resync_until_done(update.table))
            return
        state.events.extend(events)
        said = [e for e in events if isinstance(e.event, dict) and e.event.get("type") == "said"]
        if said:
            state.chat = [*state.chat, *said][-CHAT_HELD:]
        state.seq = max(state.seq, update.seq)
        state.view = update.view
        state.legal = update.legal
        state.deadline = update.deadline
        if update.info is not None:
            state.info = update.info
            state.seat = seat_of(update.info, self.player)


def seat_of(info: v1.TableInfo, player: str) -> int | None:
    """The seat ``player`` holds in ``info`` (``None``: none, e.g. watching)."""
    for index, seat in enumerate(info.seats):
        if seat is not None and seat.player == player:
            return index
    return None
