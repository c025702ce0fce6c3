"""Finished games into the records database: after the game, off the event loop, retried, once.

Theory of operation
-------------------
The node hands :meth:`RecordsWriter.submit` the games a command ended (``Outcome.games_over``)
only once that command's log entry is written: from then on the table's log in Redis holds the
game until its record is stored, so nothing depends on this process surviving. One worker task
takes the games in order; for each it builds the record (``verify.record_of``) and verifies it
(``ingest.finished_game``: one replay, a millisecond or a few) in a worker thread, then writes it
(``RecordsStore.put_game``). A table never waits for any of this.

A database error is retried on a capped backoff until the write succeeds (or the writer stops); a
game the store refuses for good (``InvalidGame``, ``GameIdConflict``: a bug, never a player) is
logged and dropped, since retrying the same game cannot help.

Exactly once: a game's id is ``{table}:{n}`` for the table's n-th game, the same whichever node
replays the log, and ``put_game`` changes nothing for an id already stored. So when a node dies
between a game's end and its record, the node that adopts the table replays the log, submits
every game that ended in it again, and only the missing ones are written; two nodes writing the
same game at once store it once too.

A table that closes gives its log up for a compact record (``Node._retire``): before that, the
node waits (:meth:`written`, bounded by :data:`RETIRE_WAIT`) until the table's games are stored.
Only a database outage longer than that, followed by this node's death before the database is
back, could lose a record.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Iterable

from games import verify
from protocol import v1
from server.metrics import Metrics
from server.records.ingest import InvalidGame, finished_game
from server.records.model import FinishedGame, SeatPlayer
from server.records.ratings import INITIAL, RATED_GAMES, provisional
from server.records.store import GameIdConflict, RecordsStore
from server.retry import Backoff
from server.table.room import GameOver

log = logging.getLogger("blackdrez.records")

RETRY = Backoff(first=0.1, cap=5.0)
"""How a failed write is retried."""
RETIRE_WAIT = 10.0
"""Seconds a closing table waits for its games to be stored before its log is retired."""
STOP_WAIT = 5.0
"""Seconds a stopping writer keeps writing what is queued."""


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
    )


class RecordsWriter:
    """The records of finished games, written in the background (see the module docstring)."""

    def __init__(self, store: RecordsStore, metrics: Metrics | None = None) -> None:
        self.store = store
        self.metrics = metrics
        self.written_count = 0
        """Games this writer stored (a game already stored does not count)."""
        self.failures = 0
        """Write attempts that failed (and were retried)."""
        self._queue: asyncio.Queue[GameOver] = asyncio.Queue()
        self._pending: collections.Counter[str] = collections.Counter()
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the worker task."""
        self._task = asyncio.get_running_loop().create_task(self._work())

    async def stop(self) -> None:
        """Write what is queued (for at most :data:`STOP_WAIT` seconds), then stop."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), STOP_WAIT)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def submit(self, games: Iterable[GameOver]) -> None:
        """Queue games that ended (their log entry is written) to be stored."""
        for game in games:
            self._pending[_table(game)] += 1
            self._queue.put_nowait(game)
        if self.metrics is not None:
            self.metrics.records_pending.set(self._queue.qsize())

    async def written(self, table: str, timeout: float = RETIRE_WAIT) -> bool:
        """Wait until every game submitted for ``table`` is stored (or dropped); ``False`` if
        that took longer than ``timeout`` seconds."""
        try:
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(lambda: not self._pending[table])
        except TimeoutError:
            log.warning("table %s retired before its games were stored", table)
            return False
        return True

    async def seat_ratings(self, game: str, players: list[str]) -> dict[str, v1.SeatRating]:
        """The current rating in ``game`` of each of ``players``, as a table shows it (the
        initial rating for a player not rated yet)."""
        stored = await self.store.ratings(game, players)
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

    async def _work(self) -> None:
        while True:
            game = await self._queue.get()
            try:
                await self._store(game)
            finally:
                table = _table(game)
                self._pending[table] -= 1
                if not self._pending[table]:
                    del self._pending[table]
                async with self._changed:
                    self._changed.notify_all()
                self._queue.task_done()
                if self.metrics is not None:
                    self.metrics.records_pending.set(self._queue.qsize())

    async def _store(self, game: GameOver) -> None:
        try:
            record = await asyncio.to_thread(finished, game)
        except InvalidGame as error:
            log.error("game %s cannot be recorded: %s", game.game_id, error)
            return
        delays = RETRY.delays()
        while True:
            try:
                if await self.store.put_game(record):
                    self.written_count += 1
                    if self.metrics is not None:
                        self.metrics.records_written.inc()
                return
            except GameIdConflict as error:
                log.error("game %s not recorded: %s", game.game_id, error)
                return
            except Exception as error:  # the database's own errors: down, restarting, busy
                self.failures += 1
                if self.metrics is not None:
                    self.metrics.records_failures.inc()
                log.warning("storing game %s failed, will retry: %r", game.game_id, error)
                await asyncio.sleep(next(delays))


def _table(game: GameOver) -> str:
    return game.game_id.rpartition(":")[0]
