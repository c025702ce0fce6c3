"""The records writer in a process of its own: finished games stored off the node's GIL.

Theory of operation
-------------------
Why a process. A :class:`~blackdrez.server.records.writer.RecordsWriter` builds and verifies
the games in a worker thread and writes them on the database's threads: each of those takes the
GIL from the node's event loop (the handoffs, a replay of 0.3-3 ms per game, SQLite's or the
driver's Python), and at a node's maximum load that cost 10-30 % of its throughput. So a node
whose records database other processes can open too (PostgreSQL, a SQLite file: every database
but an in-memory SQLite) runs the writer in a child process, ``python -m
blackdrez.server.records.process``: :class:`RecordsProcess` stands for it in the node, with the
writer's interface (``submit``, ``written``, ``seat_ratings``, ``stop``, the counts), and the
node's event loop does no more for a game than pickle it. The reads (``seat_ratings``, the API)
stay on the node's own :class:`~blackdrez.server.records.store.RecordsStore`.
``--records-in-process`` (``Settings.records_in_process``) keeps the writer in the node's process.

The pipes. Both ways, a message is a frame: its length in 4 bytes (big-endian), then its pickle.
The node writes on the child's standard input first the database URL (never on the command line,
where any user of the machine could read a PostgreSQL password), then one frame per
:meth:`RecordsProcess.submit`: the list of its :class:`~blackdrez.server.table.room.GameOver`.
It never waits for the pipe to drain: the event loop never waits for the records (what the child
has not read yet waits in the pipe's buffer, as it waited in the writer's queue). The child runs
a ``RecordsWriter`` (its batching, verifying, retrying, catching up: the writer's module
docstring) and answers on its standard output, after each batch, ``(ids, written, failures)``:
the ids of the batch's games, in order, each *done* (stored now, stored already, or dropped for
good: an ``InvalidGame`` or ``GameIdConflict``, which it logs), and its totals of games written
and of failed attempts (also sent after each failed attempt, with no ids, so that
``blackdrez_records_failures_total`` moves during an outage). The node counts the differences
into :attr:`RecordsProcess.written_count`, :attr:`RecordsProcess.failures` and its metrics. The
child's log records come back on the same pipe (a frame holding the record's fields, a traceback
as text), and the node logs them as its own: with its format (JSON lines with the node's id) and
its handlers; the child's standard error is the node's, for what Python itself writes there.

Exactly once, in order. The node keeps each game submitted until the child acknowledges it, in
the order submitted (the order they ended), and that is what ``written(table)`` waits on (bounded
by ``RETIRE_WAIT`` from the submission, as the writer's). A child that exits unexpectedly (killed,
out of memory, a bug) is replaced, on the writer's ``RETRY`` backoff while children keep exiting
without storing anything (:attr:`RecordsProcess.restarts` counts them, and a warning says each),
and the new child is sent every game not acknowledged, in order: those the old one had stored
are found stored already (a game's id is ``{table}:{n}``, and ``put_game`` changes nothing for an
id already stored), so each game is stored once, and in the order it ended.

A database the child cannot open (down, unreachable: a node may start while it is) is tried
again on the writer's backoff, the games kept in order meanwhile and each failure counted and
logged as a failed write is (``storing game ID failed, will retry``): the child does not exit
for it.

Stopping. :meth:`RecordsProcess.stop` closes the child's standard input: the child reads the
games still in the pipe, writes what is queued for at most ``STOP_WAIT`` (the writer's ``stop``),
closes its database, acknowledges and exits; past :data:`EXIT_WAIT` more it is killed. The child
ignores SIGINT and SIGTERM (a Ctrl-C or a service manager signals the whole process group): it
stops when the node closes the pipe, on purpose or by dying.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import pickle
import signal
import struct
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from blackdrez.protocol import v1
from blackdrez.server.metrics import Metrics
from blackdrez.server.records.db import DatabaseError, sqlite_path
from blackdrez.server.records.store import RecordsStore
from blackdrez.server.records.writer import (
    MAX_BATCH,
    RETIRE_WAIT,
    RETRY,
    STOP_WAIT,
    RecordsWriter,
    TableWaits,
    seat_ratings,
)
from blackdrez.server.table.room import GameOver

log = logging.getLogger("blackdrez.records")

GATHER = 0.05
"""Seconds the child waits after a game for more: a busy node's games are then stored a batch at
a time (one transaction: each commit writes every page it touched), and a quiet node's a
twentieth of a second later than they could be."""
BUSY_GATHER = 0.5
"""...and after a batch of ``writer.BUSY_BATCH`` games or more (a node finishing dozens of games
a second): batches of 30 to 64 games (``writer.MAX_BATCH``) rather than about 10. Measured
(``benchmarks/records_process.py``, 140 games/s, 3 pairs taking turns): 2,870 -> 2,430 µs of
the child's CPU a game (each pair 12-16 % lower); beside a node at its maximum, 1.97 -> 1.87
ms (``docs/benchmarks.md``, "Records under load")."""

CHILD = "blackdrez.server.records.process"
"""The module the child runs (``python -m``)."""
HEADER = struct.Struct(">I")
"""A frame's length, before its pickle."""
EXIT_WAIT = 5.0
"""Seconds a stopping child has, past ``STOP_WAIT``, to close its database and exit before it is
killed."""

Ack = tuple[list[str], int, int]
"""The child's acknowledgement: the ids done, in order; its totals written and failed."""


def frame(message: object) -> bytes:
    """``message`` as a frame: its pickle's length (4 bytes, big-endian), then its pickle."""
    payload = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(payload)) + payload


async def receive(reader: asyncio.StreamReader) -> object:
    """The next frame's message; ``EOFError`` once the other end closed the pipe (or died in the
    middle of a frame)."""
    try:
        (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
        payload = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise EOFError from None
    return pickle.loads(payload)


def shared_by_processes(url: str) -> bool:
    """Whether another process opening ``url`` finds the same database: any but an in-memory
    SQLite's (``sqlite:///:memory:``)."""
    path = sqlite_path(url)
    return path is None or str(path) not in ("", ":memory:")


class RecordsProcess:
    """The records of finished games, written by a child process (see the module docstring):
    ``await start()``, then as a :class:`~blackdrez.server.records.writer.RecordsWriter`."""

    def __init__(self, store: RecordsStore, url: str, metrics: Metrics | None = None) -> None:
        self.store = store
        """The node's own store, for the reads (:meth:`seat_ratings`)."""
        self.url = url
        """The database the child writes to (the same as ``store``'s)."""
        self.metrics = metrics
        self.written_count = 0
        """Games the children stored (a game already stored does not count)."""
        self.failures = 0
        """Write attempts of the children that failed (and were retried)."""
        self.restarts = 0
        """Children started again after one exited unexpectedly."""
        self._unacked: collections.deque[GameOver] = collections.deque()
        """The games submitted and not acknowledged, in the order submitted."""
        self._waits = TableWaits()
        self._child: asyncio.subprocess.Process | None = None
        self._counted = (0, 0)
        """The running child's totals (written, failures) already counted."""
        self._supervisor: asyncio.Task[None] | None = None
        self._stopping = False

    async def start(self) -> None:
        """Start the child, and the task that reads its acknowledgements (and replaces it)."""
        self._child = await self._spawn()
        self._supervisor = asyncio.get_running_loop().create_task(self._supervise())
        self._supervisor.add_done_callback(_supervisor_ended)

    @property
    def pid(self) -> int | None:
        """The running child's process id (``None`` while it is being replaced)."""
        return self._child.pid if self._child is not None else None

    @property
    def catching_up(self) -> bool:
        """Never: the child's threads take no GIL from the node (its writer catches up in its
        own process)."""
        return False

    @property
    def _unstored(self) -> int:
        """Games submitted and not yet stored (or dropped), as ``RecordsWriter._unstored``."""
        return len(self._unacked)

    def submit(self, games: Iterable[GameOver]) -> None:
        """Send games that ended (their log entry is written) to the child, to be stored."""
        games = list(games)
        if not games:
            return
        try:
            message = frame(games)
        except Exception:  # a bug: a game that cannot be pickled cannot be stored
            log.exception("games %s cannot be sent to the records process", _ids(games))
            return
        for game in games:
            self._waits.add(game)
        self._unacked.extend(games)
        child = self._child
        if child is not None and child.stdin is not None and not child.stdin.is_closing():
            child.stdin.write(message)  # never drained: the pipe's buffer is the queue
        if self.metrics is not None:
            self.metrics.records_pending.set(len(self._unacked))

    async def written(self, table: str, timeout: float = RETIRE_WAIT) -> bool:
        """Wait until every game submitted for ``table`` is stored (or dropped); ``False`` if
        that took longer than ``timeout`` seconds from when the table's games began waiting
        (as :meth:`RecordsWriter.written`)."""
        return await self._waits.written(table, timeout)

    async def seat_ratings(self, game: str, players: list[str]) -> dict[str, v1.SeatRating]:
        """The current rating in ``game`` of each of ``players``, as a table shows it (the
        initial rating for a player not rated yet), read in the node's process."""
        return await seat_ratings(self.store, game, players)

    async def stop(self) -> None:
        """Let the child write what is queued (for at most ``STOP_WAIT`` seconds), then stop."""
        self._stopping = True
        supervisor, child = self._supervisor, self._child
        if supervisor is None:
            return
        if child is not None and child.returncode is None and child.stdin is not None:
            child.stdin.close()  # after what is buffered: the child reads it all, then stops
            done, _ = await asyncio.wait({supervisor}, timeout=STOP_WAIT + EXIT_WAIT)
            if not done:
                log.warning("the records process did not stop in time: killed")
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
                await child.wait()
        supervisor.cancel()  # (done already, unless a child was being replaced)
        await asyncio.wait({supervisor})

    async def _spawn(self) -> asyncio.subprocess.Process:
        """Start a child, send it the URL and every game not acknowledged, in order."""
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            CHILD,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert child.stdin is not None
        self._counted = (0, 0)
        child.stdin.write(frame(self.url))
        games = list(self._unacked)
        for first in range(0, len(games), MAX_BATCH):
            child.stdin.write(frame(games[first : first + MAX_BATCH]))
        return child

    async def _supervise(self) -> None:
        """Read the child's acknowledgements until it exits; replace it unless stopping."""
        delays = RETRY.delays()
        while not self._stopping:
            child = self._child
            if child is not None:
                stored_any = await self._read(child)
                code = await child.wait()
                if self._stopping:
                    return
                self._child = None
                log.warning(
                    "the records process %d exited (%s) with %d games not acknowledged: "
                    "starting another",
                    child.pid,
                    code,
                    len(self._unacked),
                )
                if stored_any:
                    delays = RETRY.delays()
            await asyncio.sleep(next(delays))
            if self._stopping:
                return
            try:
                self._child = await self._spawn()
            except OSError as error:
                log.error("cannot start the records process, will retry: %r", error)
                continue
            self.restarts += 1

    async def _read(self, child: asyncio.subprocess.Process) -> bool:
        """Take ``child``'s messages until it closes its output; whether it acknowledged any
        game."""
        assert child.stdout is not None
        acknowledged = False
        while True:
            try:
                message = await receive(child.stdout)
            except EOFError:
                return acknowledged
            except Exception:  # a bug: not our frames
                log.exception("the records process sent a message that does not read: killed")
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
                return acknowledged
            if isinstance(message, dict):
                _log(message)
            elif isinstance(message, tuple):
                ids, written, failures = message
                acknowledged = acknowledged or bool(ids)
                await self._acknowledge(ids, written, failures)

    async def _acknowledge(self, ids: list[str], written: int, failures: int) -> None:
        """Count the games of ``ids`` done, and the child's new writes and failures."""
        done = [game for game in map(self._take, ids) if game is not None]
        new_written, new_failures = written - self._counted[0], failures - self._counted[1]
        self._counted = (written, failures)
        self.written_count += new_written
        self.failures += new_failures
        if self.metrics is not None:
            if new_written:
                self.metrics.records_written.inc(new_written)
            if new_failures:
                self.metrics.records_failures.inc(new_failures)
            self.metrics.records_pending.set(len(self._unacked))
        if done:
            await self._waits.done(done)

    def _take(self, game_id: str) -> GameOver | None:
        """The game ``game_id`` acknowledged: the first not acknowledged (the child keeps the
        order), out of those not acknowledged."""
        if self._unacked and self._unacked[0].game_id == game_id:
            return self._unacked.popleft()
        for index, game in enumerate(self._unacked):  # never expected: the order is kept
            if game.game_id == game_id:
                del self._unacked[index]
                return game
        log.error("the records process acknowledged game %s, which it was not sent", game_id)
        return None


def _ids(games: list[GameOver]) -> str:
    return ", ".join(game.game_id for game in games)


def _log(fields: dict[str, Any]) -> None:
    """Log a record of the child's as the node's own (its handlers, its format)."""
    record = logging.makeLogRecord(fields)
    logger = logging.getLogger(record.name)
    if logger.isEnabledFor(record.levelno):
        logger.handle(record)


def _supervisor_ended(task: asyncio.Task[None]) -> None:
    """Say why the task that keeps a child ended, if a bug ended it."""
    if not task.cancelled() and task.exception() is not None:
        log.error("the records process is no longer kept", exc_info=task.exception())


# ---------------------------------------------------------------------------------- the child
class _Forward(logging.Handler):
    """Sends each log record to the node, as the fields of a record (see the module docstring);
    to standard error once the node is gone."""

    def __init__(self, send: Callable[[object], bool]) -> None:
        super().__init__()
        self.send = send
        self.fallback = logging.StreamHandler(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                if record.levelno < logging.ERROR:  # as the node's ``logs.OneLine``
                    message = f"{message}: {record.exc_info[1]!r}"
                else:
                    message += "\n" + "".join(traceback.format_exception(*record.exc_info))
            fields = {
                "name": record.name,
                "msg": message,
                "levelno": record.levelno,
                "levelname": record.levelname,
                "pathname": record.pathname,
                "filename": record.filename,
                "module": record.module,
                "lineno": record.lineno,
                "funcName": record.funcName,
                "created": record.created,
                "msecs": record.msecs,
                "process": record.process,
                "processName": "records",
                "threadName": record.threadName,
            }
            if not self.send(fields):
                self.fallback.handle(record)
        except Exception:
            self.handleError(record)


class _Output(asyncio.Protocol):
    """The child's output pipe: set :attr:`closed` once it is closed (all written, or the node
    gone)."""

    def __init__(self) -> None:
        self.closed = asyncio.Event()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()


async def _child(output_fd: int) -> int:
    """The child's work (see the module docstring); its exit status."""
    loop = asyncio.get_running_loop()
    source = asyncio.StreamReader()
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(source), os.fdopen(0, "rb", buffering=0)
    )
    output = _Output()
    transport, _ = await loop.connect_write_pipe(
        lambda: output, os.fdopen(output_fd, "wb", buffering=0)
    )

    def send(message: object) -> bool:
        if transport.is_closing():  # the node is gone: it will stop this process
            return False
        transport.write(frame(message))
        return True

    root = logging.getLogger()
    root.handlers[:] = [_Forward(send)]
    root.setLevel(logging.INFO)
    status = await _write(source, send)
    transport.close()  # once what is written is sent
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(output.closed.wait(), EXIT_WAIT)
    return status


async def _write(source: asyncio.StreamReader, send: Callable[[object], bool]) -> int:
    """Open the database the node names, then store the games it sends until it closes the
    pipe; the exit status. A database that cannot be opened (down, unreachable) is tried again
    on the writer's backoff, the games meanwhile kept in order, each failure counted and said
    as a failed write is: ``storing game ID failed, will retry``."""
    try:
        url = await receive(source)
    except EOFError:
        return 0
    assert isinstance(url, str)
    waiting: list[GameOver] = []
    sink: list[Callable[[list[GameOver]], None]] = [waiting.extend]
    reading = asyncio.get_running_loop().create_task(
        _read_games(source, lambda games: sink[0](games))
    )
    failures = 0
    delays = RETRY.delays()
    while True:
        try:
            store = await RecordsStore.open(url)
            break
        except (OSError, DatabaseError) as error:
            failures += 1
            if waiting:
                log.warning("storing game %s failed, will retry: %r", waiting[0].game_id, error)
            elif failures == 1:
                log.warning("the records process cannot open the records database: %s", error)
            send(([], 0, failures))
            await asyncio.wait({reading}, timeout=next(delays))
            if reading.done():  # the node closed the pipe: it is stopping
                return 0

    def done(games: list[GameOver], written: int, failures: int) -> None:
        send(([game.game_id for game in games], written, failures))

    writer = RecordsWriter(store, on_done=done, gather=GATHER, busy_gather=BUSY_GATHER)
    writer.failures = failures
    writer.start()
    writer.submit(waiting)
    sink[0] = writer.submit
    worker = writer.worker
    assert worker is not None
    try:
        await asyncio.wait({reading, worker}, return_when=asyncio.FIRST_COMPLETED)
        if worker.done():  # a bug: the node starts another process and sends it the games
            bug = None if worker.cancelled() else worker.exception()
            log.error("the records writer stopped", exc_info=bug)
            reading.cancel()
            return 1
        await writer.stop()
        return 0
    finally:
        await store.close()


async def _read_games(
    source: asyncio.StreamReader, submit: Callable[[list[GameOver]], None]
) -> None:
    """Submit the games of each frame until the node closes the pipe."""
    while True:
        try:
            games = await receive(source)
        except EOFError:
            return
        assert isinstance(games, list)
        submit(games)


def main() -> int:
    """The child: ``python -m blackdrez.server.records.process``, started by the node."""
    for sig in (signal.SIGINT, signal.SIGTERM):  # the node's closing the pipe stops it
        signal.signal(sig, signal.SIG_IGN)
    output_fd = os.dup(1)
    os.dup2(2, 1)  # a stray print goes to standard error, never between the frames
    return asyncio.run(_child(output_fd))


if __name__ == "__main__":
    sys.exit(main())
