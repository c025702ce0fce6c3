"""Load test: hold many WebSocket connections to a BlackDrez server and measure what it costs.

Theory of operation
-------------------
The parent process plans the load, optionally starts the server (and a Redis) itself, and starts
``--workers`` worker processes, each with its own event loop (uvloop when installed). Each worker
opens its share of the connections at a bounded rate (``--ramp-rate``), in one of four kinds:

* ``idle``: says ``hello`` and then only reads (server pings keep it alive);
* ``lobby``: says ``hello`` and ``watch_lobby``, then reads the lobby pushes;
* ``play``: bots seated ``--seats`` to a table; one creates it, the others join, every game is
  started again by its host as soon as it ends; each bot plays the ``threshold`` strategy when an
  ``update`` gives it legal actions (as fast as it can, or paced to ``--action-rate`` in total);
* ``echo``: no protocol at all, for the bare ``websockets`` echo baseline: send a frame, read the
  echo, again.

Once every connection is open (and ``--warmup`` seconds later) the parent opens the measurement
window for ``--duration`` seconds: workers snapshot their counters at its start and end, and keep
the latency samples taken inside it. The latency of an action is the time from sending ``act`` to
the arrival of the ``update`` frame whose ``seq`` equals the ``ok.seq`` of its answer (the server
sends the update before the ``ok``). The parent reads the server's RSS (``/proc/<pid>/status``)
before the first connection and while they are all held, and its CPU time over the window.

Every loop here is bounded in count and time, and the tool refuses any host but 127.0.0.x.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import ipaddress
import itertools
import json
import math
import multiprocessing
import os
import platform
import queue
import resource
import shlex
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgspec

MODES = ("idle", "lobby", "play", "echo")
PROGRESS_INTERVAL = 0.25
"""Seconds between a worker's progress reports (and its checks of the parent's signals)."""
HANDSHAKES_IN_FLIGHT = 256
"""Connections a worker may be opening at once."""
PORTS_PER_ADDRESS_SHARE = 0.6
"""Use another source address once one would need more than this share of the ephemeral ports."""
BOT_CLIENT = "blackdrez-bot/loadtest"
SETTLE_TIMEOUT = 30.0
"""Seconds a worker waits for the parent's next signal before giving up on its own."""


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


# --------------------------------------------------------------------------- lean wire decoding


class _SeatValue(msgspec.Struct):
    value: int | None = None


class _LeanView(msgspec.Struct):
    phase: str = ""
    to_act: int | None = None
    seats: list[_SeatValue] = []


class _Frame(msgspec.Struct):
    """Only what a load-test bot reads of a server frame (msgspec skips the rest fast)."""

    type: str
    id: int | None = None
    seq: int | None = None
    table: Any = None
    legal: list[dict[str, Any]] = []
    view: _LeanView | None = None
    code: str | None = None


_lean = {True: msgspec.msgpack.Decoder(_Frame), False: msgspec.json.Decoder(_Frame)}
_encoders = {True: msgspec.msgpack.Encoder(), False: msgspec.json.Encoder()}


def _encode(message: dict[str, Any], binary: bool) -> bytes | str:
    data = _encoders[binary].encode(message)
    return data if binary else data.decode()


def choose_action(view: _LeanView, legal: list[dict[str, Any]], threshold: int = 8) -> dict:
    """The ``threshold`` bot on a lean view: hit below ``threshold``, else stand, else withdraw."""
    kinds = {action.get("type") for action in legal}
    seat = view.to_act
    value = (view.seats[seat].value or 0) if seat is not None and seat < len(view.seats) else 0
    if "hit" in kinds and value < threshold:
        return {"type": "hit"}
    if "stand" in kinds:
        return {"type": "stand"}
    if "withdraw" in kinds:
        return {"type": "withdraw"}
    return legal[0]


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

    def __init__(self, plan: WorkerPlan, measuring: Any, stopping: Any) -> None:
        self.plan = plan
        self.counters = Counters()
        self.failures: dict[str, int] = {}
        self.latencies: list[float] = []
        self.recording = False
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
                )
            except BaseException:
                sock.close()
                raise
            hello = {"type": "hello", "versions": [1], "name": name, "client": BOT_CLIENT}
            await ws.send(_encode(hello, plan.binary))
            welcome = _lean[plan.binary].decode(await asyncio.wait_for(ws.recv(), 10.0))
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
        await ws.send(_encode({"type": "watch_lobby", "id": 1}, self.plan.binary))
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
        options = {"seats": plan.seats, "round_pause_seconds": plan.round_pause}
        reply = await host.request({"type": "create_table", "options": options})
        table = reply.table["id"]
        for bot in bots[1:]:
            await bot.request({"type": "join", "table": table})
        for bot in bots:
            bot.table = table
            await bot.request({"type": "ready", "table": table})
        await self.ramped.wait()
        await host.request({"type": "start", "table": table})
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
        start_snapshot: dict[str, int] | None = None
        window_start = 0.0
        window = Window(plan.index, 0.0, {}, {}, [], {})
        while time.monotonic() < plan.deadline:
            report(("progress", plan.index, time.monotonic(), asdict(self.counters)))
            if self.counters.connected + self.counters.failed >= plan.connections:
                self.ramped.set()
            if start_snapshot is None and self._measuring.is_set():
                start_snapshot, window_start = asdict(self.counters), time.monotonic()
                self.recording = True
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


def masked_frame(payload: bytes) -> bytes:
    """A client's binary WebSocket frame of ``payload`` (masked, as clients must)."""
    mask = os.urandom(4)
    size = len(payload)
    if size < 126:
        header = bytes([0x82, 0x80 | size])
    elif size < 65536:
        header = bytes([0x82, 0x80 | 126]) + size.to_bytes(2, "big")
    else:
        header = bytes([0x82, 0x80 | 127]) + size.to_bytes(8, "big")
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return header + mask + body


def echo_frame_size(size: int) -> int:
    """The length on the wire of the server's unmasked echo of a ``size``-byte frame."""
    return size + (2 if size < 126 else 4 if size < 65536 else 10)


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
            if worker.recording:
                worker.latencies.append(time.perf_counter() - self.sent_at)
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
        self.view: _LeanView | None = None
        self.acting = False
        self.acted_at = 0
        self.sent_at = 0.0
        self.waiting_seq: int | None = None
        self._ids = 1
        self._pending: dict[int, asyncio.Future[_Frame]] = {}
        self._act_id = 0
        self._restarting = False
        loop = asyncio.get_running_loop()
        self.finished: asyncio.Future[None] = loop.create_future()
        self._reader = loop.create_task(self._read())

    async def request(self, message: dict[str, Any]) -> _Frame:
        """Send a request and wait for its reply (setup and restarts, not measured)."""
        self._ids += 1
        message["id"] = self._ids
        future = asyncio.get_running_loop().create_future()
        self._pending[self._ids] = future
        await self.ws.send(_encode(message, self.binary))
        self.worker.counters.sent += 1
        reply = await asyncio.wait_for(future, 30.0)
        if reply.type == "error":
            raise ConnectionError(f"{message['type']} refused: {reply.code}")
        return reply

    async def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed

        decode = _lean[self.binary].decode
        counters = self.worker.counters
        try:
            async for data in self.ws:
                now = time.perf_counter()
                counters.frames += 1
                counters.bytes += len(data)
                frame = decode(data)
                if frame.type == "update":
                    self._on_update(frame, now)
                elif frame.id is not None:
                    self._on_reply(frame)
        except Exception as error:
            self.worker.counters.closed += 1
            if not isinstance(error, ConnectionClosed):
                self.worker._failed(error)
        finally:
            if not self.finished.done():
                self.finished.set_result(None)

    def _on_update(self, frame: _Frame, now: float) -> None:
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

    def _on_reply(self, frame: _Frame) -> None:
        if frame.id == self._act_id:
            self.acting = False
            if frame.type == "error":
                self.worker.counters.errors += 1
                self.worker.note(f"act answered error {frame.code}")
            else:
                self.worker.counters.actions += 1
                self._match(frame.seq or 0)
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
                if self.worker.recording:
                    self.worker.latencies.append(arrived_at - self.sent_at)
                return
            if arrived_seq < seq:
                break
        self.waiting_seq = seq

    def _record(self, now: float) -> None:
        if self.worker.recording:
            self.worker.latencies.append(now - self.sent_at)
        self.waiting_seq = None

    def maybe_act(self) -> None:
        """Act if it is this bot's turn in a state it has not acted on yet."""
        if not self.playing or self.acting or not self.legal or self.last_seq <= self.acted_at:
            return
        if self.view is None or self.view.phase != "playing":
            return
        self.acting = True
        self.acted_at = self.last_seq
        asyncio.get_running_loop().create_task(self._act(choose_action(self.view, self.legal)))

    async def _act(self, action: dict[str, Any]) -> None:
        await self.worker.pace()
        self._ids += 1
        self._act_id = self._ids
        message = {"type": "act", "id": self._ids, "table": self.table, "action": action}
        self.waiting_seq = None
        self.sent_at = time.perf_counter()
        with contextlib.suppress(Exception):
            await self.ws.send(_encode(message, self.binary))
            self.worker.counters.sent += 1

    async def _restart(self) -> None:
        try:
            await self.request({"type": "ready", "table": self.table})
            await self.request({"type": "start", "table": self.table})
        except Exception as error:
            self.worker._failed(error)
        finally:
            self._restarting = False


def _worker_main(plan: WorkerPlan, reports: Any, measuring: Any, stopping: Any) -> None:
    """Entry point of a worker process."""
    if plan.cpus:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, plan.cpus)
    _raise_open_files()
    worker_holder: list[_Worker] = []

    async def main() -> None:
        worker = _Worker(plan, measuring, stopping)
        worker_holder.append(worker)
        await worker.run(reports.put)

    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())


def _raise_open_files() -> None:
    """Raise the soft open-file limit to the hard one (if allowed)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# --------------------------------------------------------------------------- the server side


def check_loopback(url: str) -> tuple[str, int]:
    """Return the host and port of ``url``; refuse anything but a 127.0.0.x host."""
    parsed = urllib.parse.urlsplit(url)
    host = parsed.hostname or ""
    try:
        address = ipaddress.ip_address(host if host != "localhost" else "127.0.0.1")
    except ValueError:
        raise SystemExit(f"the load test targets 127.0.0.x only, not {host!r}") from None
    if not (address.version == 4 and address.is_loopback):
        raise SystemExit(f"the load test targets 127.0.0.x only, not {host!r}")
    return str(address), parsed.port or 80


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def rss_kib(pid: int) -> int:
    """The resident set size of process ``pid`` in KiB (``VmRSS`` in /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise ValueError(f"no VmRSS for process {pid}")


def involuntary_switches(pid: int) -> int:
    """How often process ``pid`` was preempted so far (other work wanted its CPU)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("nonvoluntary_ctxt_switches:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds used so far by process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def find_server_pid(port: int) -> int | None:
    """The process listening on TCP ``port`` (psutil), or ``None``."""
    try:
        import psutil
    except ImportError:
        return None
    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                return conn.pid
    return None


def _limit_files_then(cpus: str | None) -> Any:
    def prepare() -> None:
        _raise_open_files()
        if cpus:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, _cpu_list(cpus))

    return prepare


def start_process(
    command: list[str], cpus: str | None, log: Path, cwd: str | None = None
) -> subprocess.Popen[bytes]:
    """Start a server-like process pinned to ``cpus`` with the open-file limit raised."""
    with log.open("ab") as out:
        return subprocess.Popen(
            command,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_limit_files_then(cpus),
        )


def wait_listening(host: str, port: int, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait until something accepts TCP connections on ``host:port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the process exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), 0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {host}:{port} after {timeout} s")


def stop_process(process: subprocess.Popen[bytes] | None, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it lingers."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _cpu_list(text: str) -> tuple[int, ...]:
    cpus: list[int] = []
    for part in text.split(","):
        if "-" in part:
            low, high = part.split("-")
            cpus += range(int(low), int(high) + 1)
        elif part:
            cpus.append(int(part))
    return tuple(cpus)


# --------------------------------------------------------------------------- planning


def source_addresses(connections: int, wanted: int = 0) -> tuple[str, ...]:
    """127.0.0.x addresses to connect from: enough that none needs too many ephemeral ports."""
    if wanted <= 0:
        try:
            low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
            ports = high - low + 1
        except (OSError, ValueError):
            ports = 28232
        wanted = max(1, math.ceil(connections / (ports * PORTS_PER_ADDRESS_SHARE)))
    return tuple(f"127.0.0.{i}" for i in range(1, min(wanted, 250) + 1))


def split(total: int, parts: int) -> list[int]:
    """``total`` in ``parts`` near-equal whole shares."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def plan_workers(args: argparse.Namespace, url: str) -> list[WorkerPlan]:
    """Divide the connections between the workers."""
    total = args.connections
    lobby = round(total * args.lobby_share) if args.mode != "lobby" else total
    rest = total - lobby
    idle = tables = echo = 0
    if args.mode == "idle":
        idle = rest
    elif args.mode == "play":
        tables = rest // args.seats
        lobby += rest - tables * args.seats
    elif args.mode == "echo":
        echo = rest
    workers = max(1, args.workers)
    sources = source_addresses(total, args.source_addresses)
    cpus = _cpu_list(args.worker_cpus) if args.worker_cpus else ()
    deadline = time.monotonic() + args.ramp_timeout + args.warmup + args.duration + 30.0
    shares = zip(
        split(idle, workers),
        split(lobby, workers),
        split(tables, workers),
        split(echo, workers),
        strict=True,
    )
    return [
        WorkerPlan(
            index=i,
            url=url,
            idle=idle_n,
            lobby=lobby_n,
            tables=tables_n,
            seats=args.seats,
            echo=echo_n,
            echo_size=args.echo_size,
            sources=sources,
            ramp_rate=max(1.0, args.ramp_rate / workers),
            action_rate=args.action_rate / workers,
            round_pause=args.round_pause,
            binary=not args.text,
            client_pings=args.client_pings,
            cpus=cpus,
            deadline=deadline,
        )
        for i, (idle_n, lobby_n, tables_n, echo_n) in enumerate(shares)
    ]


# --------------------------------------------------------------------------- running a load


@dataclass
class Progress:
    """What the parent knows while the load runs."""

    phase: str = "starting"
    started: float = field(default_factory=time.monotonic)
    target: int = 0
    counters: dict[int, dict[str, int]] = field(default_factory=dict)
    samples: list[tuple[float, int, int, int]] = field(default_factory=list)
    """``(time, connected, frames, actions)`` totals, for rates and the timeline."""
    rss: int = 0

    def total(self, name: str) -> int:
        """A counter summed over the workers."""
        return sum(c.get(name, 0) for c in self.counters.values())

    def rate(self, index: int, seconds: float = 2.0) -> float:
        """Recent per-second rate of sample column ``index`` (1 connected, 2 frames, 3 actions)."""
        if len(self.samples) < 2:
            return 0.0
        last = self.samples[-1]
        first = next((s for s in self.samples if s[0] >= last[0] - seconds), self.samples[0])
        if last[0] <= first[0]:
            return 0.0
        return (last[index] - first[index]) / (last[0] - first[0])


def percentile(values: list[float], share: float) -> float | None:
    """The ``share`` quantile of sorted ``values`` (nearest rank), or ``None`` when empty."""
    if not values:
        return None
    return values[min(len(values) - 1, max(0, math.ceil(share * len(values)) - 1))]


def machine() -> dict[str, Any]:
    """The machine and versions a figure was measured on."""
    import websockets

    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    try:
        import uvloop

        loop = f"uvloop {uvloop.__version__}"
    except ImportError:
        loop = "asyncio"
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "websockets": websockets.version.version,
        "msgspec": msgspec.__version__,
        "loop": loop,
        "load_average": os.getloadavg()[0],
    }


class _Display:
    """A live progress display: rich when the output is a terminal, else nothing."""

    def __init__(self, enabled: bool) -> None:
        self.live: Any = None
        if enabled and sys.stdout.isatty():
            with contextlib.suppress(ImportError):
                from rich.live import Live

                self.live = Live(refresh_per_second=4, transient=True)
                self.live.start()

    def update(self, progress: Progress) -> None:
        """Redraw from ``progress``."""
        if self.live is None:
            return
        from rich.table import Table

        table = Table(title=f"blackdrez loadtest: {progress.phase}", show_header=False)
        elapsed = time.monotonic() - progress.started
        rows = [
            ("elapsed", f"{elapsed:.1f} s"),
            ("connections", f"{progress.total('connected')} / {progress.target}"),
            ("failed / closed", f"{progress.total('failed')} / {progress.total('closed')}"),
            ("frames/s", f"{progress.rate(2):,.0f}"),
            ("actions/s", f"{progress.rate(3):,.0f}"),
            ("server RSS", f"{progress.rss / 1024:,.1f} MiB" if progress.rss else "-"),
        ]
        for name, value in rows:
            table.add_row(name, value)
        self.live.update(table)

    def stop(self) -> None:
        """Remove the display."""
        if self.live is not None:
            self.live.stop()


def run_load(
    args: argparse.Namespace,
    url: str,
    server_pid: int | None,
    quiet: bool = False,
    on_measure: Any = None,
) -> dict[str, Any]:
    """Run one load against ``url`` and return its report (see :func:`main`)."""
    context = multiprocessing.get_context("spawn")
    reports = context.Queue()
    measuring, stopping = context.Event(), context.Event()
    plans = plan_workers(args, url)
    progress = Progress(target=sum(p.connections for p in plans))
    rss_before = rss_kib(server_pid) if server_pid else None
    processes = [
        context.Process(target=_worker_main, args=(plan, reports, measuring, stopping))
        for plan in plans
    ]
    for process in processes:
        process.start()
    display = _Display(not quiet)
    windows: dict[int, Window] = {}
    rss_held = cpu_start = cpu_end = None
    clients_start = clients_end = 0.0
    preempted_start = preempted_end = 0
    load_before = os.getloadavg()[0]
    window_start = window_end = 0.0
    progress.phase = "ramping"
    ramp_until = time.monotonic() + args.ramp_timeout
    hold_until = measure_until = math.inf
    hard_stop = plans[0].deadline + 10.0
    try:
        while len(windows) < len(plans) and time.monotonic() < hard_stop:
            _collect(reports, progress, windows)
            now = time.monotonic()
            if server_pid:
                with contextlib.suppress(OSError, ValueError):
                    progress.rss = rss_kib(server_pid)
            settled = progress.total("connected") + progress.total("failed") >= progress.target
            if progress.phase == "ramping" and (settled or now > ramp_until):
                progress.phase = "warming up"
                hold_until = now + args.warmup
            elif progress.phase == "warming up" and now >= hold_until:
                progress.phase = "measuring"
                clients_start = sum(cpu_seconds(p.pid) for p in processes if p.pid)
                if server_pid:
                    rss_held = rss_kib(server_pid)
                    cpu_start = cpu_seconds(server_pid)
                    preempted_start = involuntary_switches(server_pid)
                window_start = now
                measuring.set()
                if on_measure is not None:
                    on_measure()
                measure_until = now + args.duration
            elif progress.phase == "measuring" and now >= measure_until:
                progress.phase = "stopping"
                window_end = now
                clients_end = sum(cpu_seconds(p.pid) for p in processes if p.pid)
                if server_pid:
                    cpu_end = cpu_seconds(server_pid)
                    preempted_end = involuntary_switches(server_pid)
                    rss_held = max(rss_held or 0, rss_kib(server_pid))
                stopping.set()
            display.update(progress)
    finally:
        stopping.set()
        display.stop()
        for process in processes:
            process.join(15.0)
            if process.is_alive():
                process.kill()
                process.join()
    seconds = max(window_end - window_start, 1e-9)
    report = _report(
        args, url, plans, windows, progress, server_pid, rss_before, rss_held,
        (cpu_end - cpu_start) / seconds
        if cpu_start is not None and cpu_end is not None else None,
    )  # fmt: skip
    report["clients_cpu_share"] = (clients_end - clients_start) / seconds if window_end else None
    report["server_preempted_per_s"] = (preempted_end - preempted_start) / seconds
    report["load_average_before"] = load_before
    return report


def _collect(reports: Any, progress: Progress, windows: dict[int, Window]) -> None:
    """Take every queued worker report (waiting up to one progress interval for the first)."""
    timeout = PROGRESS_INTERVAL
    while True:
        try:
            item = reports.get(timeout=timeout)
        except queue.Empty:
            break
        timeout = 0.0
        if item[0] == "progress":
            progress.counters[item[1]] = item[3]
            progress.samples.append(
                (
                    item[2],
                    progress.total("connected"),
                    progress.total("frames"),
                    progress.total("actions"),
                )
            )
        elif item[0] == "window":
            windows[item[1]] = msgspec.msgpack.decode(item[2], type=Window)


def _report(
    args: argparse.Namespace,
    url: str,
    plans: list[WorkerPlan],
    windows: dict[int, Window],
    progress: Progress,
    server_pid: int | None,
    rss_before: int | None,
    rss_held: int | None,
    server_cpu: float | None,
) -> dict[str, Any]:
    def rate(name: str) -> float:
        return sum(
            (w.end.get(name, 0) - w.start.get(name, 0)) / w.seconds
            for w in windows.values()
            if w.seconds > 0
        )

    latencies = sorted(x for w in windows.values() for x in w.latencies)
    failures: dict[str, int] = {}
    for w in windows.values():
        for reason, count in w.failures.items():
            failures[reason] = failures.get(reason, 0) + count
    held = sum(w.start.get("connected", 0) - w.start.get("closed", 0) for w in windows.values())
    held_end = sum(w.end.get("connected", 0) - w.end.get("closed", 0) for w in windows.values())
    frames = rate("frames")
    per_connection = (
        (rss_held - rss_before) / held
        if rss_held is not None and rss_before is not None and held
        else None
    )
    t0 = progress.samples[0][0] if progress.samples else 0.0
    return {
        "url": url,
        "mode": args.mode,
        "connections_target": sum(p.connections for p in plans),
        "connections_held": held,
        "connections_held_at_end": held_end,
        "kinds": {
            "idle": sum(p.idle for p in plans),
            "lobby": sum(p.lobby for p in plans),
            "play_tables": sum(p.tables for p in plans),
            "seats": args.seats,
            "echo": sum(p.echo for p in plans),
        },
        "failed": sum(w.end.get("failed", 0) for w in windows.values()),
        "failures": dict(sorted(failures.items(), key=lambda kv: -kv[1])[:10]),
        "workers": len(plans),
        "source_addresses": list(plans[0].sources),
        "duration_s": args.duration,
        "window_s": statistics.median([w.seconds for w in windows.values()]) if windows else 0,
        "action_rate_target": args.action_rate,
        "server_pid": server_pid,
        "server_rss_before_kib": rss_before,
        "server_rss_held_kib": rss_held,
        "server_rss_per_connection_kib": per_connection,
        "server_cpu_share": server_cpu,
        "frames_per_s": frames,
        "bytes_per_s": rate("bytes"),
        "mean_frame_bytes": rate("bytes") / frames if frames else None,
        "sent_per_s": rate("sent"),
        "actions_per_s": rate("actions"),
        "games_per_s": rate("games"),
        "errors": sum(w.end.get("errors", 0) for w in windows.values()),
        "disorder": sum(w.end.get("disorder", 0) for w in windows.values()),
        "latency_ms": {
            "count": len(latencies),
            "p50": _ms(percentile(latencies, 0.50)),
            "p99": _ms(percentile(latencies, 0.99)),
            "p999": _ms(percentile(latencies, 0.999)),
            "max": _ms(latencies[-1] if latencies else None),
        },
        "timeline": [
            [round(t - t0, 2), connected, frames_total, actions]
            for t, connected, frames_total, actions in progress.samples[:: max(1, len(plans))]
        ],
        "machine": machine(),
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


# --------------------------------------------------------------------------- the echo baseline


def serve_echo(host: str, port: int) -> None:
    """Run a bare ``websockets`` echo server (compression off) until SIGTERM."""
    import signal

    from websockets.exceptions import ConnectionClosed

    async def handler(ws: Any) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for message in ws:
                await ws.send(message)

    async def main() -> None:
        from websockets.asyncio.server import serve

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        async with serve(handler, host, port, compression=None, ping_interval=None):
            await stop.wait()

    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())


def run_echo_baseline(
    args: argparse.Namespace, connections: int, size: int, quiet: bool = True
) -> dict[str, Any]:
    """Start a bare echo server, load it like ours (same connections and frame size), stop it."""
    host = "127.0.0.1"
    port = free_port(host)
    command = [sys.executable, "-m", "clients.loadtest", "--echo-server", "--port", str(port)]
    log = Path(args.server_log)
    process = start_process(command, args.server_cpus, log)
    try:
        wait_listening(host, port, process, 15.0)
        echo_args = argparse.Namespace(**vars(args))
        echo_args.mode, echo_args.connections, echo_args.echo_size = "echo", connections, size
        echo_args.lobby_share, echo_args.action_rate = 0.0, 0.0
        return run_load(echo_args, f"ws://{host}:{port}/", process.pid, quiet)
    finally:
        stop_process(process)


# --------------------------------------------------------------------------- profiling


def profile_summary(raw: Path, top: int = 40) -> dict[str, list[tuple[str, float]]]:
    """The top functions of a py-spy ``--format raw`` profile: by own time and by total time."""
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        samples += count
        frames = [_short_frame(frame) for frame in stack.split(";")]
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for frame in set(frames):
            total[frame] = total.get(frame, 0) + count

    def ranked(counts: dict[str, int]) -> list[tuple[str, float]]:
        best = sorted(counts.items(), key=lambda kv: -kv[1])[:top]
        return [(name, round(100.0 * count / max(samples, 1), 1)) for name, count in best]

    return {"own": ranked(own), "total": ranked(total), "samples": [("samples", samples)]}


def _short_frame(frame: str) -> str:
    """``func (path/to/module.py:12)`` as ``func (module.py)``."""
    name, _, where = frame.partition(" (")
    return f"{name} ({Path(where.split(':')[0]).name})" if where else name


def start_profiler(pid: int, out: Path, seconds: float) -> subprocess.Popen[bytes] | None:
    """Run ``py-spy record`` on ``pid`` for ``seconds`` (raw collapsed stacks), if installed."""
    spy = Path(sys.executable).with_name("py-spy")
    command = [
        str(spy) if spy.exists() else "py-spy", "record", "--pid", str(pid), "--duration",
        str(max(1, int(seconds))), "--rate", "200", "--format", "raw", "--output", str(out),
        "--nonblocking",
    ]  # fmt: skip
    try:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        return None


# --------------------------------------------------------------------------- output


def summary_lines(report: dict[str, Any]) -> list[str]:
    """A report as a few readable lines."""
    latency = report["latency_ms"]
    lines = [
        f"mode {report['mode']}: {report['connections_held']} of "
        f"{report['connections_target']} connections held ({report['failed']} failed), "
        f"{report['workers']} workers, {len(report['source_addresses'])} source address(es)",
    ]
    if report["server_rss_per_connection_kib"] is not None:
        lines.append(
            f"server RSS {report['server_rss_before_kib'] / 1024:.1f} -> "
            f"{report['server_rss_held_kib'] / 1024:.1f} MiB: "
            f"{report['server_rss_per_connection_kib']:.1f} KiB per connection"
        )
    if report["server_cpu_share"] is not None:
        lines.append(
            f"CPU: server {100 * report['server_cpu_share']:.0f}% of one core, load clients "
            f"{100 * (report.get('clients_cpu_share') or 0):.0f}%; server preempted "
            f"{report.get('server_preempted_per_s') or 0:.0f}/s; load average before "
            f"{report.get('load_average_before') or 0:.2f}"
        )
    lines.append(
        f"frames/s {report['frames_per_s']:,.0f} (mean {report['mean_frame_bytes'] or 0:.0f} B), "
        f"sent/s {report['sent_per_s']:,.0f}, actions/s {report['actions_per_s']:,.0f}, "
        f"games/s {report['games_per_s']:,.1f}, errors {report['errors']}, "
        f"disorder {report['disorder']}"
    )
    if latency["count"]:
        lines.append(
            f"latency ms (n={latency['count']}): p50 {latency['p50']:.2f}, "
            f"p99 {latency['p99']:.2f}, p999 {latency['p999']:.2f}, max {latency['max']:.2f}"
        )
    if "baseline" in report:
        base = report["baseline"]
        lines.append(
            f"echo baseline: {base['frames_per_s']:,.0f} frames/s of "
            f"{base['mean_frame_bytes'] or 0:.0f} B over {base['connections_held']} connections, "
            f"{base['server_rss_per_connection_kib'] or 0:.1f} KiB per connection; ours is "
            f"{100 * report['frames_vs_echo']:.0f}% of it"
        )
    if report.get("profile"):
        lines.append("server profile, own time: " + ", ".join(
            f"{name} {share}%" for name, share in report["profile"]["own"][:8]
        ))  # fmt: skip
    for reason, count in report["failures"].items():
        lines.append(f"  failure x{count}: {reason}")
    return lines


def timeline_chart(report: dict[str, Any], path: str) -> None:
    """A PNG of one run: connections held and frames/s over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["timeline"]
    times = [r[0] for r in rows]
    rates = [0.0] + [(b[2] - a[2]) / max(b[0] - a[0], 1e-9) for a, b in itertools.pairwise(rows)]
    figure, left = plt.subplots(figsize=(8, 4.5))
    left.plot(times, [r[1] for r in rows], color="tab:blue", label="connections")
    left.set_xlabel("seconds")
    left.set_ylabel("connections held", color="tab:blue")
    right = left.twinx()
    right.plot(times, rates, color="tab:orange", label="frames/s")
    right.set_ylabel("frames/s received by clients", color="tab:orange")
    left.set_title(f"blackdrez loadtest ({report['mode']})")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


# --------------------------------------------------------------------------- command line


def parser() -> argparse.ArgumentParser:
    """The ``blackdrez loadtest`` options."""
    p = argparse.ArgumentParser(
        prog="blackdrez loadtest",
        description="Hold many connections to a BlackDrez server on 127.0.0.x and measure it.",
    )
    p.add_argument("--url", default="ws://127.0.0.1:8765/", help="a ws://127.0.0.x URL")
    p.add_argument("-c", "--connections", type=int, default=100)
    p.add_argument("--mode", choices=MODES, default="idle")
    p.add_argument("--lobby-share", type=float, default=0.0, help="share of lobby watchers")
    p.add_argument("--seats", type=int, default=4, help="play: bots per table (2-8)")
    p.add_argument("--workers", type=int, default=2, help="worker processes")
    p.add_argument("--worker-cpus", help="pin workers to these CPUs, e.g. 1 or 0-1")
    p.add_argument("--ramp-rate", type=float, default=1000.0, help="new connections per second")
    p.add_argument("--ramp-timeout", type=float, default=120.0)
    p.add_argument("--warmup", type=float, default=2.0, help="seconds between ramp and window")
    p.add_argument("--duration", type=float, default=10.0, help="seconds measured")
    p.add_argument("--action-rate", type=float, default=0.0, help="play: total actions/s (0: max)")
    p.add_argument("--round-pause", type=float, default=0.0, help="play: table round pause")
    p.add_argument("--echo-size", type=int, default=200, help="echo: frame size in bytes")
    p.add_argument("--text", action="store_true", help="JSON text frames (default MessagePack)")
    p.add_argument("--client-pings", action="store_true", help="clients ping too (every 20 s)")
    p.add_argument("--source-addresses", type=int, default=0, help="127.0.0.x count (0: auto)")
    p.add_argument("--server-pid", type=int, help="the server process (default: found by port)")
    p.add_argument("--spawn-server", action="store_true", help="start the server, stop it after")
    p.add_argument("--server-cpus", help="with --spawn-server: pin it (e.g. 0)")
    p.add_argument("--server-rate", type=float, default=1000.0, help="spawned server's --rate")
    p.add_argument("--server-burst", type=int, default=1000, help="spawned server's --burst")
    p.add_argument("--server-arg", action="append", default=[], help="extra serve argument")
    store = p.add_mutually_exclusive_group()
    store.add_argument("--redis", action="store_true", help="spawned server uses a Redis it starts")
    store.add_argument("--redis-url", help="spawned server uses this Redis (it is not flushed)")
    p.add_argument("--server-dir", help="start the server from this source tree (default: .)")
    p.add_argument("--server-log", default="/tmp/blackdrez-loadtest-server.log")
    p.add_argument("--baseline", action="store_true", help="also run the bare echo baseline")
    p.add_argument("--profile", metavar="FILE", help="py-spy the server over the window (raw)")
    p.add_argument("--json", metavar="FILE", help="write the report as JSON")
    p.add_argument("--chart", metavar="FILE", help="write a PNG timeline of the run")
    p.add_argument("--quiet", action="store_true", help="no live display, no summary")
    p.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    return p


def _spawn_server(
    args: argparse.Namespace, redis_url: str | None
) -> tuple[subprocess.Popen[bytes], str]:
    host = "127.0.0.1"
    port = free_port(host)
    command = [
        sys.executable, "-m", "server.cli", "serve", "--host", host, "--port", str(port),
        "--rate", str(args.server_rate), "--burst", str(args.server_burst),
        "--max-connections-per-ip", "0",  # every load connection comes from this machine
    ]  # fmt: skip
    if redis_url:
        command += ["--redis-url", redis_url]
    for extra in args.server_arg:
        command += shlex.split(extra)
    process = start_process(command, args.server_cpus, Path(args.server_log), args.server_dir)
    wait_listening(host, port, process, 30.0)
    with contextlib.suppress(OSError):
        urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=5).read()
    return process, f"ws://{host}:{port}/"


def main(argv: list[str] | None = None) -> int:
    """Run a load test (see the module docstring); print a summary; write JSON and a chart."""
    args = parser().parse_args(argv)
    if args.echo_server:
        serve_echo("127.0.0.1", args.port)
        return 0
    if args.mode == "play" and not 2 <= args.seats <= 8:
        raise SystemExit("--seats must be 2 to 8")
    redis: Any = None
    server: subprocess.Popen[bytes] | None = None
    url = args.url
    try:
        if args.spawn_server:
            redis_url = args.redis_url
            if args.redis:
                from server.testing.redis_server import RedisServer

                redis = RedisServer()
                redis.start()
                redis_url = redis.url
                if args.worker_cpus:  # keep Redis off the server's core
                    with contextlib.suppress(OSError, AttributeError):
                        os.sched_setaffinity(redis.pid, _cpu_list(args.worker_cpus))
            server, url = _spawn_server(args, redis_url)
        _, port = check_loopback(url)
        pid = args.server_pid or (server.pid if server else find_server_pid(port))
        spies: list[subprocess.Popen[bytes]] = []

        def on_measure() -> None:
            if args.profile and pid:
                spy = start_profiler(pid, Path(args.profile), args.duration)
                if spy is not None:
                    spies.append(spy)

        report = run_load(args, url, pid, args.quiet, on_measure)
        report["command"] = ["blackdrez", "loadtest", *(argv or sys.argv[1:])]
        report["redis"] = bool(args.redis or args.redis_url)
        for spy in spies:
            with contextlib.suppress(subprocess.TimeoutExpired):
                spy.wait(30.0)
            if Path(args.profile).exists():
                report["profile"] = profile_summary(Path(args.profile))
        if args.baseline:
            size = round(report["mean_frame_bytes"] or args.echo_size)
            base = run_echo_baseline(args, report["connections_held"] or args.connections, size)
            report["baseline"] = {k: v for k, v in base.items() if k != "timeline"}
            report["frames_vs_echo"] = report["frames_per_s"] / max(base["frames_per_s"], 1e-9)
    finally:
        stop_process(server)
        if redis is not None:
            redis.close()
    if not args.quiet:
        print("\n".join(summary_lines(report)))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    if args.chart:
        timeline_chart(report, args.chart)
    return 0


if __name__ == "__main__":
    sys.exit(main())
