"""Finished games into the records database: after the game, off the event loop, retried, once.

Theory of operation
-------------------
Where it runs. A node's records are written by a :class:`RecordsWriter` in a process of its own
(``blackdrez.server.records.process``: the node keeps a ``RecordsProcess``, which has this
class's interface, and sends it the games over a pipe), so that the writer's threads do not take
the GIL from the node's event loop (10-30 % of a node's throughput at its maximum). A node with
an in-memory SQLite database, or started with ``--records-in-process``, runs the writer in its
own process instead; what follows holds in both (the records process reports each batch to the
node through ``on_done``, see :class:`RecordsWriter`).

The node hands :meth:`RecordsWriter.submit` the games a command ended (``Outcome.games_over``)
only once that command's log entry is written: from then on the table's log in Redis holds the
game until its record is stored, so nothing depends on this process surviving. One worker task
takes the games in order, everything queued at once (up to :data:`MAX_BATCH`): it builds their
records (``verify.record_of``) and verifies them (``ingest.finished_game``: one replay each, a
millisecond or a few) in one hop to a worker thread, then writes them in one database call, each
game in a transaction of its own (``RecordsStore.put_games``). A table never waits for any of
this. Taking the backlog at once is what lets the writer keep up with a busy node: each hop back
to the event loop waits for a turn of it, and a node at full speed finishes a hundred games a
second (one game per hop kept up with five: the backlog grew without bound).

Catching up. The building and verifying run on a worker thread, and the writes on SQLite's
writer thread or PostgreSQL's (each statement a round trip): all of them need the GIL (the
node's, for a writer in the node's process; in the records process, little else wants it), and
take it back after every release (a statement, a read, a hash). While the event loop is busy
it gives the GIL up only when a waiting thread asks for it and the switch interval (5 ms by
default) has passed, so each of those steps can cost a thread 5 ms: with a loop running Python
non-stop, 100 games took 35 s to store on PostgreSQL and 45 s on SQLite, and a node held at
its maximum let its backlog grow for as long as the load lasted (1,153 games after 30 s on
PostgreSQL). So when more than :data:`MAX_BATCH` games are not yet stored the writer is
*behind*: the process's switch interval drops to :data:`CATCH_UP_SWITCH_INTERVAL` (the same
100 games: 1.6 s and 2.0 s) until no more than :data:`CAUGHT_UP` are left, then goes back to
what it was (``blackdrez_records_catching_up`` says when). Not always: a short interval makes
the loop hand the GIL over more often, which costs it CPU and tail latency when nothing is
behind (``docs/benchmarks.md``); nor while the database refuses the writes (an outage: the
games wait on the retry's backoff, not on the GIL), from the first failed write until one
succeeds.

A database error is retried on a capped backoff, from the game it stopped at, until the write
succeeds (or the writer stops): games are stored in the order they ended. A game the store
refuses for good (``InvalidGame``, ``GameIdConflict``: a bug, never a player) is logged and
dropped, since retrying the same game cannot help.

Exactly once: a game's id is ``{table}:{n}`` for the table's n-th game, the same whichever node
replays the log, and ``put_game`` changes nothing for an id already stored. So when a node dies
between a game's end and its record, the node that adopts the table replays the log, submits
every game that ended in it again, and only the missing ones are written; two nodes writing the
same game at once store it once too.

A table that closes gives its log up for a compact record (``Node._retire``): before that, the
node waits (:meth:`written`, until :data:`RETIRE_WAIT` after they began waiting) until the
table's games are stored. The bound counts from their submission, not from the call: the node
retires its closed tables one after another, and in a database outage each waiting its full
:data:`RETIRE_WAIT` from its turn would hold the last of N tables N times as long, and the
node's other store writes queued behind them.
Only a database outage longer than that, followed by this node's death before the database is
back, could lose a record.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterable

from blackdrez.games import verify
from blackdrez.protocol import v1
from blackdrez.server.metrics import Metrics
from blackdrez.server.records.ingest import InvalidGame, finished_game
from blackdrez.server.records.model import FinishedGame, SeatPlayer
from blackdrez.server.records.ratings import INITIAL, RATED_GAMES, provisional
from blackdrez.server.records.store import GameIdConflict, RecordsStore
from blackdrez.server.retry import Backoff
from blackdrez.server.table.room import GameOver

log = logging.getLogger("blackdrez.records")

RETRY = Backoff(first=0.1, cap=5.0)
"""How a failed write is retried."""
RETIRE_WAIT = 10.0
"""Seconds from when its games began waiting that a closing table waits for them to be stored
before its log is retired."""
STOP_WAIT = 5.0
"""Seconds a stopping writer keeps writing what is queued."""
MAX_BATCH = 64
"""The most games built, verified and written together."""
BUSY_BATCH = 16
"""A batch of this many games or more: the writer is busy, and gathers the next for longer
(``busy_gather``)."""
CAUGHT_UP = MAX_BATCH // 4
"""A writer behind (more than :data:`MAX_BATCH` games not stored) has caught up at this many."""
CATCH_UP_SWITCH_INTERVAL = 0.0005
"""The GIL switch interval (seconds) while a writer is behind (see "Catching up")."""


class _CatchUp:
    """The process's GIL switch interval, shortened while any writer is behind (several
    writers may share a process: a test's nodes)."""

    def __init__(self) -> None:
        self.behind: set[RecordsWriter] = set()
        self._saved = 0.0

    def set(self, writer: RecordsWriter, behind: bool) -> None:
        """Count ``writer`` behind or not; the interval follows whether any writer is."""
        was_any = bool(self.behind)
        if behind:
            self.behind.add(writer)
        else:
            self.behind.discard(writer)
        if self.behind and not was_any:
            self._saved = sys.getswitchinterval()
            sys.setswitchinterval(min(self._saved, CATCH_UP_SWITCH_INTERVAL))
        elif was_any and not self.behind:
            sys.setswitchinterval(self._saved)


_catch_up = _CatchUp()


def finished(game: GameOver) -> FinishedGame:
    """The verified :class:`FinishedGame` of a game that ended at a table (CPU-bound: call it
    in a worker thread); raises ``InvalidGame``."""
    record = verify.record_of(game.engine, game.actions)
    table = game.game_id.rpartition(":")[0]
    return finished_game(
        game_id=game.game_id,
        record=record,
        players=[
            SeatPlayer(seat=seat, player=player, name=name, bot=bot)
            for seat, player, name, bot in game.players
        ],
        started_at=game.started_at,
        ended_at=game.ended_at,
        rated=game.rated and record.game in RATED_GAMES,
        table=table,
        sealed_until=game.sealed_until,
        scored=game.scored,
        private=game.private,
        arena=game.arena,
    )


class TableWaits:
    """The games submitted and not yet stored (or dropped), by table, and the wait for a
    table's (:meth:`RecordsWriter.written`; the node's ``RecordsProcess`` keeps one too)."""

    def __init__(self) -> None:
        self._pending: collections.Counter[str] = collections.Counter()
        """Games submitted and not yet stored (or dropped), by table..."""
        self._since: dict[str, float] = {}
        """...since when (``time.monotonic()``: the first submission since none waited)."""
        self._changed = asyncio.Condition()

    def add(self, game: GameOver) -> None:
        """Count ``game`` submitted."""
        table = _table(game)
        self._pending[table] += 1
        self._since.setdefault(table, time.monotonic())

    async def done(self, games: Iterable[GameOver]) -> None:
        """Count ``games`` stored (or dropped), and wake the waits of their tables."""
        for game in games:
            table = _table(game)
            self._pending[table] -= 1
            if not self._pending[table]:
                del self._pending[table]
                del self._since[table]
        async with self._changed:
            self._changed.notify_all()

    async def written(self, table: str, timeout: float) -> bool:
        """Wait until every game submitted for ``table`` is stored (or dropped); ``False`` if
        that took longer than ``timeout`` seconds from when the table's games began waiting
        (the first submission since none waited; see the module docstring)."""
        since = self._since.get(table, time.monotonic())
        try:
            async with asyncio.timeout(since + timeout - time.monotonic()), self._changed:
                await self._changed.wait_for(lambda: not self._pending[table])
        except TimeoutError:
            log.warning("table %s retired before its games were stored", table)
            return False
        return True


Done = Callable[[list[GameOver], int, int], None]
"""Told the progress of a :class:`RecordsWriter`: ``on_done(games, written, failures)``."""


class RecordsWriter:
    """The records of finished games, written in the background (see the module docstring).

    ``on_done``, if given, is called at the end of each batch with the batch's games, in the
    order they ended, all of them done: stored now, stored already, or dropped for good (an
    ``InvalidGame``, a ``GameIdConflict``); and after each failed write attempt with none. Its
    ``written`` and ``failures`` are the totals so far (:attr:`written_count`,
    :attr:`failures`), not deltas: the records process sends them to the node with its
    acknowledgements (``blackdrez.server.records.process``)."""

    def __init__(
        self,
        store: RecordsStore,
        metrics: Metrics | None = None,
        on_done: Done | None = None,
        *,
        gather: float = 0.0,
        busy_gather: float | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.on_done = on_done
        self.gather = gather
        """Seconds to wait after a game for more to store with it (one transaction, one
        verification hop for all: ``blackdrez.server.records.process``'s writer)."""
        self.busy_gather = gather if busy_gather is None else busy_gather
        """...and after a batch of :data:`BUSY_BATCH` games or more: a busy node's games are
        stored in fewer, larger transactions (each commit writes every page it changed)."""
        self._last_batch = 0
        self.written_count = 0
        """Games this writer stored (a game already stored does not count)."""
        self.failures = 0
        """Write attempts that failed (and were retried)."""
        self._queue: asyncio.Queue[GameOver] = asyncio.Queue()
        self._waits = TableWaits()
        self._unstored = 0
        """Games submitted and not yet stored (or dropped): queued or being written."""
        self._failing = False
        """The last write failed: the database is down, and no GIL hurries it back."""
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        """Set by :meth:`stop`: what is gathered is stored without waiting for more."""

    def start(self) -> None:
        """Start the worker task."""
        self._stopping.clear()
        self._task = asyncio.get_running_loop().create_task(self._work())

    @property
    def worker(self) -> asyncio.Task[None] | None:
        """The worker task, once started: it ends only when stopped (or by a bug)."""
        return self._task

    async def stop(self) -> None:
        """Write what is queued (for at most :data:`STOP_WAIT` seconds), then stop."""
        self._stopping.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), STOP_WAIT)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._set_catching_up(False)

    def submit(self, games: Iterable[GameOver]) -> None:
        """Queue games that ended (their log entry is written) to be stored."""
        for game in games:
            self._waits.add(game)
            self._unstored += 1
            self._queue.put_nowait(game)
        if self._unstored > MAX_BATCH and not self._failing:
            self._set_catching_up(True)
        if self.metrics is not None:
            self.metrics.records_pending.set(self._queue.qsize())

    @property
    def catching_up(self) -> bool:
        """Whether this writer is behind (see "Catching up" in the module docstring)."""
        return self in _catch_up.behind

    def _set_catching_up(self, behind: bool) -> None:
        if behind == self.catching_up:
            return
        _catch_up.set(self, behind)
        if behind:
            log.info("records writer behind (%d games): catching up", self._unstored)
        else:
            log.info("records writer caught up")
        if self.metrics is not None:
            self.metrics.records_catching_up.set(int(behind))

    async def written(self, table: str, timeout: float = RETIRE_WAIT) -> bool:
        """Wait until every game submitted for ``table`` is stored (or dropped); ``False`` if
        that took longer than ``timeout`` seconds from when the table's games began waiting
        (the first submission since none waited; see the module docstring)."""
        return await self._waits.written(table, timeout)

    async def seat_ratings(self, game: str, players: list[str]) -> dict[str, v1.SeatRating]:
        """The current rating in ``game`` of each of ``players``, as a table shows it (the
        initial rating for a player not rated yet)."""
        return await seat_ratings(self.store, game, players)

    async def _work(self) -> None:
        while True:
            games = [await self._queue.get()]
            if self.gather and self._queue.qsize() < MAX_BATCH - 1:
                busy = self._last_batch >= BUSY_BATCH
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self._stopping.wait(), self.busy_gather if busy else self.gather
                    )
            while len(games) < MAX_BATCH and not self._queue.empty():
                games.append(self._queue.get_nowait())
            self._last_batch = len(games)
            try:
                await self._store(games)
                if self.on_done is not None:  # only once stored: not when stopped (or a bug)
                    self.on_done(games, self.written_count, self.failures)
            finally:
                self._unstored -= len(games)
                for _ in games:
                    self._queue.task_done()
                if self._unstored <= CAUGHT_UP:
                    self._set_catching_up(False)
                await self._waits.done(games)
                if self.metrics is not None:
                    self.metrics.records_pending.set(self._queue.qsize())

    async def _store(self, games: list[GameOver]) -> None:
        """Build, verify and write ``games`` in order (see the module docstring)."""
        built = await asyncio.to_thread(_finished_each, games)
        records = []
        for game, record in zip(games, built, strict=True):
            if isinstance(record, InvalidGame):
                log.error("game %s cannot be recorded: %s", game.game_id, record)
            else:
                records.append(record)
        delays = RETRY.delays()
        while records:
            try:
                outcomes, error = await self.store.put_games(records)
            except Exception as failed:  # the database's own errors: down, restarting, busy
                outcomes, error = [], failed
            for record, outcome in zip(records, outcomes, strict=False):
                if isinstance(outcome, GameIdConflict):
                    log.error("game %s not recorded: %s", record.id, outcome)
                elif outcome:
                    self.written_count += 1
                    if self.metrics is not None:
                        self.metrics.records_written.inc()
            records = records[len(outcomes) :]
            # Behind while writes fail (a database outage) is no reason to hurry: a shorter
            # switch interval would cost the event loop for as long as the outage lasts.
            self._failing = error is not None
            if self._failing or self._unstored > MAX_BATCH:
                self._set_catching_up(not self._failing)
            if error is not None:
                self.failures += 1
                if self.metrics is not None:
                    self.metrics.records_failures.inc()
                log.warning("storing game %s failed, will retry: %r", records[0].id, error)
                if self.on_done is not None:
                    self.on_done([], self.written_count, self.failures)
                await asyncio.sleep(next(delays))


async def seat_ratings(
    store: RecordsStore, game: str, players: list[str]
) -> dict[str, v1.SeatRating]:
    """The current rating in ``game`` of each of ``players`` in ``store``, as a table shows it
    (the initial rating for a player not rated yet): what :meth:`RecordsWriter.seat_ratings`
    and ``RecordsProcess.seat_ratings`` answer (reads stay in the node's process)."""
    stored = await store.ratings(game, players)
    ratings = {}
    for player in players:
        found = stored.get(player)
        ratings[player] = (
            v1.SeatRating(
                ordinal=found.ordinal,
                mu=found.mu,
                sigma=found.sigma,
                games=found.games,
                provisional=found.provisional,
            )
            if found is not None
            else v1.SeatRating(
                ordinal=INITIAL.ordinal,
                mu=INITIAL.mu,
                sigma=INITIAL.sigma,
                games=0,
                provisional=provisional(0),
            )
        )
    return ratings


def _finished_each(games: list[GameOver]) -> list[FinishedGame | InvalidGame]:
    """:func:`finished` of each game (in a worker thread), or why it cannot be recorded."""
    built: list[FinishedGame | InvalidGame] = []
    for game in games:
        try:
            built.append(finished(game))
        except InvalidGame as error:
            built.append(error)
    return built


def _table(game: GameOver) -> str:
    return game.game_id.rpartition(":")[0]
