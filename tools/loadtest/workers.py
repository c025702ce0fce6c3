"""The load's worker processes: each holds its share of the connections and counts.

Theory of operation
-------------------
The parent hands each worker a :class:`WorkerPlan`. The worker (its own process and event
loop, uvloop when installed) opens its connections at the plan's ramp rate, each bound to one of
the plan's 127.0.0.x source addresses, says ``hello``, and then plays its part: idle readers,
lobby watchers, bots seated at tables that play as soon as they have legal actions (paced to the
plan's action rate, if any), or raw echo connections. An act or a game restart refused with
``moving`` or ``unavailable`` (nothing changed, and no update may follow) is sent again after a
short capped delay with jitter (:data:`blackdrez.protocol.retry.RETRY`). It reports
:class:`Counters` every
:data:`PROGRESS_INTERVAL` seconds and a :class:`Window` (counters at the start and end of the
measurement window, latency samples inside it, and how late its own loop woke in it) when the
parent closes the window. The window's bounds are the parent's (``bounds``: its start and end on
the machine's monotonic clock, set before it opens the window): a worker notices the window
open and closed at its own progress ticks, but keeps only the samples of actions (and loop
probes) started inside those bounds. Without that, a worker still recording after the window's
end timed actions held up by another worker tearing its 600 connections down (seen: a dozen
actions of 50-66 ms just after the window, in one worker only). Once its connections are open
it collects and freezes what is left (``gc.freeze``) before letting the traffic start: the
collector then never walks them again.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import math
import os
import resource
import socket
import time
import urllib.parse
import urllib.request
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

import msgspec
from websockets.protocol import State

from blackdrez.protocol import v1
from blackdrez.protocol.codec import encode
from blackdrez.protocol.handshake import Hello
from blackdrez.protocol.retry import RETRY
from blackdrez.tools.loadtest.frames import (
    LEAN_DECODERS,
    LeanFrame,
    LeanView,
    choose_action,
    client_frame,
    echo_frame_size,
    masked_frame,
)

PROGRESS_INTERVAL = 0.25
"""Seconds between a worker's progress reports (and its checks of the parent's signals)."""
LAG_PROBE = 0.005
"""Seconds a worker's loop probe sleeps: how late it wakes is the worker's own loop lag, which
delays every latency sample it takes (reported so a run shows whether its clients stalled)."""
HANDSHAKES_IN_FLIGHT = 256
"""Connections a worker may be opening at once."""
BOT_CLIENT = "blackdrez-bot/loadtest"
RETRIED = frozenset({"moving", "unavailable"})
"""Refusals that changed nothing and may pass: the request is sent again
(blackdrez.protocol.retry)."""
RESTART_PATIENCE = 60.0
"""Seconds the host of a table tries to start its next game while the table or store is away."""


class LeanOptions(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The table options the load tool sets, and only those: a server of any version since the
    first (whose options refuse fields they do not know, like ``rated``) takes them."""

    seats: int = 4
    round_pause_seconds: float = 3.0


class LeanCreateTable(v1.Message, tag="create_table", kw_only=True):
    """``create_table`` with :class:`LeanOptions` (see there)."""

    id: int | None = None
    options: LeanOptions


class Refused(ConnectionError):
    """A set-up request was answered with an error (``code``)."""

    def __init__(self, message: str, code: str | None) -> None:
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------- plans and results


@dataclass(frozen=True)
class WorkerPlan:
    """What one worker process does."""

    index: int
    url: str
    idle: int = 0
    lobby: int = 0
    tables: int = 0
    seats: int = 4
    echo: int = 0
    echo_size: int = 200
    sources: tuple[str, ...] = ("127.0.0.1",)
    ramp_rate: float = 500.0
    action_rate: float = 0.0
    """Actions per second for this worker's bots together; 0: as fast as they can."""
    round_pause: float = 0.0
    binary: bool = True
    client_pings: bool = False
    cpus: tuple[int, ...] = ()
    deadline: float = 0.0
    """``time.monotonic()`` after which the worker stops whatever it is doing."""

    @property
    def connections(self) -> int:
        """How many connections this worker opens."""
        return self.idle + self.lobby + self.tables * self.seats + self.echo


@dataclass
class Counters:
    """A worker's running totals (cumulative, never reset)."""

    connected: int = 0
    failed: int = 0
    closed: int = 0
    frames: int = 0
    bytes: int = 0
    sent: int = 0
    actions: int = 0
    games: int = 0
    errors: int = 0
    disorder: int = 0
    """Updates whose ``seq`` did not increase: must stay 0."""


class Window(msgspec.Struct):
    """A worker's counters over the measurement window, and its latency samples (seconds)."""

    index: int
    seconds: float
    start: dict[str, int]
    end: dict[str, int]
    latencies: list[float]
    failures: dict[str, int]
    lags: list[float] = msgspec.field(default_factory=list)
    """How late (seconds) each of the worker's loop probes woke inside the window."""


# --------------------------------------------------------------------------- worker: connections


def _bound_socket(source: str) -> socket.socket:
    """A non-blocking TCP socket bound to ``source``; its port is chosen at connect time
    (IP_BIND_ADDRESS_NO_PORT), so each source address offers the whole ephemeral range."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_IP, getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24), 1)
    sock.setblocking(False)
    sock.bind((source, 0))
    return sock


class _Worker:
    """One worker process's connections, counters and latency samples."""

    def __init__(self, plan: WorkerPlan, measuring: Any, stopping: Any, bounds: Any = None) -> None:
        self.plan = plan
        self.counters = Counters()
        self.failures: dict[str, int] = {}
        self.latencies: list[float] = []
        self.lags: list[float] = []
        self.recording = False
        self._bounds = bounds
        self.window_from = -math.inf
        self.window_until = math.inf
        """The parent's window on ``time.perf_counter``'s clock: samples started in it count."""
        self.connections: list[Any] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self._measuring = measuring
        self._stopping = stopping
        parsed = urllib.parse.urlsplit(plan.url)
        self.host = parsed.hostname or "127.0.0.1"
        self.port = parsed.port or 80
        self._opened = 0
        self._gate = asyncio.Semaphore(HANDSHAKES_IN_FLIGHT)
        self._started = time.monotonic()
        self._next_action = 0.0
        self.ramped = asyncio.Event()
        """Set once every connection of this worker is open (or failed): traffic starts then."""

    # ----------------------------------------------------------- opening
    async def _pace_open(self) -> None:
        """Wait for this connection's turn under the ramp rate."""
        due = self._started + self._opened / self.plan.ramp_rate
        self._opened += 1
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)

    async def open(self, name: str) -> Any:
        """Open one connection (bound to the next source address) and say hello."""
        from websockets.asyncio.client import connect

        from blackdrez.server.reading import ClientConnection

        plan = self.plan
        await self._pace_open()
        source = plan.sources[self._opened % len(plan.sources)]
        async with self._gate:
            sock = _bound_socket(source)
            try:
                await asyncio.wait_for(
                    asyncio.get_running_loop().sock_connect(sock, (self.host, self.port)), 10.0
                )
                ws = await connect(
                    plan.url,
                    sock=sock,
                    compression=None,
                    proxy=None,
                    open_timeout=10.0,
                    ping_interval=20.0 if plan.client_pings else None,
                    max_size=2**22,
                    user_agent_header=None,
                    create_connection=ClientConnection,
                )
            except BaseException:
                sock.close()
                raise
            hello = Hello(versions=[1], name=name, client=BOT_CLIENT)
            await ws.send(encode(hello, plan.binary))
            welcome = LEAN_DECODERS[plan.binary].decode(await asyncio.wait_for(ws.recv(), 10.0))
            if welcome.type != "welcome":
                await ws.close()
                raise ConnectionError(f"hello refused: {welcome.code}")
        self.connections.append(ws)
        self.counters.connected += 1
        return ws

    def _failed(self, error: BaseException) -> None:
        self.counters.failed += 1
        self.note(f"{type(error).__name__}: {error}")

    def note(self, reason: str) -> None:
        """Count one failure or error reply by its reason (the report lists the top ones)."""
        reason = reason[:120]
        self.failures[reason] = self.failures.get(reason, 0) + 1

    def spawn(self, coroutine: Any) -> None:
        """Run a connection's coroutine; count it as failed if it raises."""
        task = asyncio.get_running_loop().create_task(self._guard(coroutine))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _guard(self, coroutine: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            await coroutine
        except ConnectionClosed:
            self.counters.closed += 1
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self._failed(error)

    # ----------------------------------------------------------- connection kinds
    async def reader(self, ws: Any) -> None:
        """Read and count every frame until the connection closes."""
        counters = self.counters
        async for frame in ws:
            counters.frames += 1
            counters.bytes += len(frame)

    async def idle(self, number: int) -> None:
        """An idle connection: hello, then read."""
        ws = await self.open(name=f"idle {number}")
        await self.reader(ws)

    async def lobby(self, number: int) -> None:
        """A lobby watcher: hello, ``watch_lobby``, then read the pushes."""
        ws = await self.open(name=f"lobby {number}")
        await ws.send(encode(v1.WatchLobby(id=1), self.plan.binary))
        self.counters.sent += 1
        await self.reader(ws)

    async def echo(self, number: int) -> None:
        """An echo client: send a frame, read its echo, again (latency = the round trip).

        It speaks raw WebSocket over an asyncio protocol (a fixed pre-masked frame out, bytes
        counted in), so that the client costs far less than the server it measures.
        """
        plan = self.plan
        await self._pace_open()
        source = plan.sources[self._opened % len(plan.sources)]
        loop = asyncio.get_running_loop()
        async with self._gate:
            sock = _bound_socket(source)
            try:
                await asyncio.wait_for(loop.sock_connect(sock, (self.host, self.port)), 10.0)
                protocol = _RawEcho(self, plan.echo_size, f"{self.host}:{self.port}")
                await loop.create_connection(lambda: protocol, sock=sock)
                await asyncio.wait_for(protocol.upgraded, 10.0)
            except BaseException:
                sock.close()
                raise
        self.connections.append(protocol)
        self.counters.connected += 1
        await self.ramped.wait()
        protocol.send()
        await protocol.lost

    async def table(self, number: int) -> None:
        """Seat ``plan.seats`` bots at a new table and have them play game after game."""
        plan = self.plan
        sockets = []
        for seat in range(plan.seats):
            try:
                sockets.append(await self.open(name=f"bot {number}.{seat}"))
            except Exception:
                self.counters.failed += plan.seats - seat - 1  # never opened: settled too
                raise
        bots = [_Bot(self, ws, seat == 0) for seat, ws in enumerate(sockets)]
        host = bots[0]
        options = LeanOptions(seats=plan.seats, round_pause_seconds=plan.round_pause)
        reply = await host.request(LeanCreateTable(options=options))
        table = reply.table["id"]
        for bot in bots[1:]:
            await bot.request(v1.JoinTable(table=table))
        for bot in bots:
            bot.table = table
            await bot.request(v1.SetReady(table=table))
        await self.ramped.wait()
        await host.request(v1.StartGame(table=table))
        for bot in bots:
            bot.playing = True
            bot.maybe_act()
        await asyncio.gather(*(bot.finished for bot in bots))

    async def pace(self) -> None:
        """Wait for the next action slot under ``plan.action_rate`` (no wait at full speed)."""
        rate = self.plan.action_rate
        if rate <= 0:
            return
        now = time.monotonic()
        slot = max(now, self._next_action)
        self._next_action = slot + 1.0 / rate
        if slot > now:
            await asyncio.sleep(slot - now)

    def sample(self, started: float, now: float) -> None:
        """A latency sample: what started at ``started`` (``time.perf_counter``) ended ``now``;
        kept if it started inside the parent's window."""
        if self.recording and self.window_from <= started < self.window_until:
            self.latencies.append(now - started)

    def _open_window(self) -> None:
        """The parent opened the window: take its bounds onto ``time.perf_counter``'s clock."""
        if self._bounds is not None:
            offset = time.monotonic() - time.perf_counter()
            self.window_from = self._bounds[0] - offset
            self.window_until = self._bounds[1] - offset
        self.recording = True

    async def probe_loop(self) -> None:
        """Record, while the window is open, how late this worker's event loop wakes."""
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(LAG_PROBE)
            if self.recording and self.window_from <= asked < self.window_until:
                self.lags.append(max(0.0, time.perf_counter() - asked - LAG_PROBE))

    def open_traffic(self) -> None:
        """Every connection is open: collect once and freeze what is left, then let the traffic
        start. What the ramp built lives for the whole run, and the collector would otherwise
        walk it again and again inside the window (measured: 14-44 ms of collection a second
        in each worker, and loop stalls up to 22 ms, in the first seconds of a window)."""
        gc.collect()
        gc.freeze()
        self.ramped.set()

    # ----------------------------------------------------------- running
    async def run(self, report: Any) -> None:
        """Open everything, report progress, hold until told to stop, then report the window."""
        plan = self.plan
        kinds = (
            [(self.echo, i) for i in range(plan.echo)]
            + [(self.table, i) for i in range(plan.tables)]
            + [(self.lobby, i) for i in range(plan.lobby)]
            + [(self.idle, i) for i in range(plan.idle)]
        )
        for kind, number in kinds:
            self.spawn(kind(number))
        self.spawn(self.probe_loop())
        start_snapshot: dict[str, int] | None = None
        window_start = 0.0
        window = Window(plan.index, 0.0, {}, {}, [], {})
        while time.monotonic() < plan.deadline:
            report(("progress", plan.index, time.monotonic(), asdict(self.counters)))
            settled = self.counters.connected + self.counters.failed >= plan.connections
            if settled and not self.ramped.is_set():
                self.open_traffic()
            if start_snapshot is None and self._measuring.is_set():
                start_snapshot, window_start = asdict(self.counters), time.monotonic()
                self._open_window()
            if self._stopping.is_set():
                break
            await asyncio.sleep(PROGRESS_INTERVAL)
        self.recording = False
        now = time.monotonic()
        if start_snapshot is not None:
            window = Window(
                plan.index,
                now - window_start,
                start_snapshot,
                asdict(self.counters),
                self.latencies,
                self.failures,
                self.lags,
            )
        else:
            window.failures = self.failures
            window.end = window.start = asdict(self.counters)
        report(("window", plan.index, msgspec.msgpack.encode(window)))
        for task in list(self.tasks):
            task.cancel()
        for ws in self.connections:
            with contextlib.suppress(Exception):
                ws.transport.abort()
        await asyncio.sleep(0.1)


class _RawEcho(asyncio.Protocol):
    """One raw echo connection: HTTP upgrade by hand, then one frame in flight at a time."""

    def __init__(self, worker: _Worker, size: int, host: str) -> None:
        self.worker = worker
        self.frame = masked_frame(b"x" * size)
        self.size = size
        self.echo_size = echo_frame_size(size)
        self.host = host
        self.transport: Any = None
        self.buffer = b""
        self.pending = 0
        self.sent_at = 0.0
        loop = asyncio.get_running_loop()
        self.upgraded: asyncio.Future[None] = loop.create_future()
        self.lost: asyncio.Future[None] = loop.create_future()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        key = base64.b64encode(os.urandom(16)).decode()
        transport.write(
            f"GET / HTTP/1.1\r\nHost: {self.host}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
        )

    def data_received(self, data: bytes) -> None:
        if not self.upgraded.done():
            self.buffer += data
            head, found, rest = self.buffer.partition(b"\r\n\r\n")
            if not found:
                return
            if b" 101 " not in head.split(b"\r\n", 1)[0]:
                self.upgraded.set_exception(ConnectionError("upgrade refused"))
                return
            self.upgraded.set_result(None)
            data = rest
        self.pending += len(data)
        if self.pending >= self.echo_size:
            self.pending -= self.echo_size
            worker = self.worker
            worker.counters.frames += 1
            worker.counters.bytes += self.size
            worker.sample(self.sent_at, time.perf_counter())
            self.send()

    def send(self) -> None:
        """Send the frame again."""
        self.sent_at = time.perf_counter()
        self.transport.write(self.frame)
        self.worker.counters.sent += 1

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.upgraded.done():
            self.upgraded.set_exception(exc or ConnectionError("closed"))
        if not self.lost.done():
            self.lost.set_result(None)


class _Bot:
    """One seat of a load-test table, driven by the frames its connection reads."""

    def __init__(self, worker: _Worker, ws: Any, host: bool) -> None:
        self.worker = worker
        self.ws = ws
        self.host = host
        self.binary = worker.plan.binary
        self.table: str | None = None
        self.playing = False
        self.last_seq = 0
        self.arrivals: deque[tuple[int, float]] = deque(maxlen=16)
        self.legal: list[dict[str, Any]] = []
        self.view: LeanView | None = None
        self.acting = False
        self.acted_at = 0
        self.sent_at = 0.0
        self.waiting_seq: int | None = None
        self._ids = 1
        self._pending: dict[int, asyncio.Future[LeanFrame]] = {}
        self._act_id = 0
        self._retry = RETRY.delays()
        self._restarting = False
        loop = asyncio.get_running_loop()
        self.finished: asyncio.Future[None] = loop.create_future()
        self._decode = LEAN_DECODERS[self.binary].decode
        self._transport = ws.transport
        # Every data frame the connection reads comes here at once, in the read's callback,
        # not through websockets' message queue and a coroutine woken per frame (see _on_frame).
        ws.recv_messages.put = self._on_frame
        self._reader = loop.create_task(self._read())

    async def request(self, message: v1.Message | LeanCreateTable) -> LeanFrame:
        """Send a request and wait for its reply (setup and restarts, not measured)."""
        self._ids += 1
        message = msgspec.structs.replace(message, id=self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[self._ids] = future
        self.send(message)
        reply = await asyncio.wait_for(future, 30.0)
        if reply.type == "error":
            tag = type(message).__struct_config__.tag
            raise Refused(f"{tag} refused: {reply.code}", reply.code)
        return reply

    def _on_frame(self, frame: Any) -> None:
        """One data frame read (websockets' frame; the server sends each message whole)."""
        now = time.perf_counter()
        data = frame.data
        counters = self.worker.counters
        counters.frames += 1
        counters.bytes += len(data)
        try:
            message = self._decode(data)
            if message.type == "update":
                self._on_update(message, now)
            elif message.id is not None:
                self._on_reply(message)
        except Exception as error:
            self.worker._failed(error)
            self._transport.abort()

    async def _read(self) -> None:
        """Wait for the connection's end (its frames go to :meth:`_on_frame`)."""
        try:
            await self.ws.wait_closed()
        finally:
            self.worker.counters.closed += 1
            if not self.finished.done():
                self.finished.set_result(None)

    def send(self, message: Any) -> None:
        """Write ``message`` as one masked client frame, now (websockets' ``send`` is a
        coroutine with a lock and a drain per frame; a bot sends one small frame at a time)."""
        if self.ws.protocol.state is State.OPEN:
            self._transport.write(client_frame(encode(message, self.binary)))
            self.worker.counters.sent += 1

    def _on_update(self, frame: LeanFrame, now: float) -> None:
        seq = frame.seq or 0
        if seq <= self.last_seq:
            self.worker.counters.disorder += 1
        self.last_seq = seq
        self.arrivals.append((seq, now))
        if self.waiting_seq is not None and seq >= self.waiting_seq:
            self._record(now)
        self.legal = frame.legal
        if frame.view is not None:
            self.view = frame.view
            if frame.view.phase == "over" and self.host and not self._restarting:
                self._restarting = True
                self.worker.counters.games += 1
                asyncio.get_running_loop().create_task(self._restart())
        self.maybe_act()

    def _on_reply(self, frame: LeanFrame) -> None:
        if frame.id == self._act_id:
            self.acting = False
            if frame.type == "error":
                self.worker.counters.errors += 1
                self.worker.note(f"act answered error {frame.code}")
                if frame.code in RETRIED:
                    self._act_again_later()
                    return
            else:
                self.worker.counters.actions += 1
                self._match(frame.seq or 0)
                self._retry = RETRY.delays()
            self.maybe_act()
            return
        if frame.type == "error":
            self.worker.counters.errors += 1
            self.worker.note(f"request answered error {frame.code}")
        future = self._pending.pop(frame.id or 0, None)
        if future is not None and not future.done():
            future.set_result(frame)

    def _match(self, seq: int) -> None:
        """Find the arrival of the update with ``seq`` (it normally came just before)."""
        for arrived_seq, arrived_at in reversed(self.arrivals):
            if arrived_seq == seq:
                self.worker.sample(self.sent_at, arrived_at)
                return
            if arrived_seq < seq:
                break
        self.waiting_seq = seq

    def _record(self, now: float) -> None:
        self.worker.sample(self.sent_at, now)
        self.waiting_seq = None

    def _act_again_later(self) -> None:
        """An act refused with nothing changed (the table moving, the store away): no update
        may follow, so act again on the same state after a short capped delay with jitter
        (:data:`blackdrez.protocol.retry.RETRY`), unless an update made this bot act meanwhile."""
        seq = self.last_seq

        def again() -> None:
            if self.last_seq == seq and not self.acting:
                self.acted_at = seq - 1  # the state acted on was refused: act on it again
            self.maybe_act()

        asyncio.get_running_loop().call_later(next(self._retry), again)

    def maybe_act(self) -> None:
        """Act if it is this bot's turn in a state it has not acted on yet."""
        if not self.playing or self.acting or not self.legal or self.last_seq <= self.acted_at:
            return
        if self.view is None or self.view.phase != "playing":
            return
        self.acting = True
        self.acted_at = self.last_seq
        action = choose_action(self.view, self.legal)
        if self.worker.plan.action_rate > 0:
            asyncio.get_running_loop().create_task(self._paced_act(action))
        else:
            self._act(action)

    async def _paced_act(self, action: dict[str, Any]) -> None:
        await self.worker.pace()
        self._act(action)

    def _act(self, action: dict[str, Any]) -> None:
        self._ids += 1
        self._act_id = self._ids
        message = v1.Act(id=self._ids, table=self.table, action=action)
        self.waiting_seq = None
        self.sent_at = time.perf_counter()
        self.send(message)

    async def _restart(self) -> None:
        """Start the next game (the host), trying again while the table or the store is away."""
        delays = RETRY.delays()
        deadline = time.monotonic() + RESTART_PATIENCE
        try:
            for request in (v1.SetReady(table=self.table), v1.StartGame(table=self.table)):
                while True:
                    try:
                        await self.request(request)
                        break
                    except Refused as refusal:
                        if refusal.code not in RETRIED or time.monotonic() > deadline:
                            raise
                    await asyncio.sleep(next(delays))
        except Exception as error:
            self.worker._failed(error)
        finally:
            self._restarting = False


def worker_main(
    plan: WorkerPlan, reports: Any, measuring: Any, stopping: Any, bounds: Any = None
) -> None:
    """Entry point of a worker process (``bounds``: the window's, see :class:`_Worker`)."""
    if plan.cpus:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, plan.cpus)
    raise_open_files()
    worker_holder: list[_Worker] = []

    async def main() -> None:
        worker = _Worker(plan, measuring, stopping, bounds)
        worker_holder.append(worker)
        await worker.run(reports.put)

    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())


def raise_open_files() -> None:
    """Raise the soft open-file limit to the hard one (if allowed)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
