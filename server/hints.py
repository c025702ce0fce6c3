"""The hint worker: the experts' moves and the par scores, computed off the event loop.

Theory of operation
-------------------
A hint shows the *expert's* move (:func:`blackdrez.server.table.assist.expert_hint`), and the Blue
Jacket
expert plans for about a second of CPU; a par is a bounded perfect-information search of the same
order. Run on the node's event loop, either would hold up every table of the node (and, with the
in-memory store, the lease renewals that run in the loop). So both run in a small pool of worker
processes (:class:`HintWorker`), started on first use with the ``spawn`` method (the node has
threads: a fork could copy a held lock), and the node awaits them through ``run_in_executor``:
the loop goes on serving everything else meanwhile.

Bounds, so that a flood costs the node nothing it cannot afford:

* at most ``queue`` jobs are in the pool at once, *counting* jobs whose caller stopped waiting
  (a running process cannot be interrupted); past that a hint is answered at once by the quick
  bot (:func:`blackdrez.server.table.assist.quick_hint`, tens of milliseconds) and a par waits its
  turn;
* a hint waits at most ``hint_budget`` seconds (well under a forwarded request's patience,
  ``REMOTE_TIMEOUT``); past that it is answered by the quick bot too. The reply's ``by`` says
  which bot gave the move: ``expert``, or the quick bot's name;
* moves already computed are remembered (:data:`REMEMBERED` of them, by job): asking again in the
  same position costs nothing;
* ahead of the question: once a session has asked for a hint, the host asks the worker for the
  next position's move as soon as a move is made (:meth:`HintWorker.ahead`), so that the next
  hint is usually ready when it is asked (the expert's second of CPU spent while the player
  thinks); a job computed ahead takes one place of ``queue`` and leaves one free for questions,
  and a question for a position being computed waits for that job rather than start another.
  The pool is started (and its process's imports done) when a session may first ask
  (:meth:`HintWorker.warm`), not at the first hint;
* a worker process that dies (killed, out of memory) breaks the pool: that hint is answered by
  the quick bot, and the next job starts a new pool;
* how often one table may ask is the host's business (a token bucket per table,
  ``blackdrez.server.node.hosting``): past it the request gets ``rate_limited`` and nothing changes.

Everything a worker runs is a pure function of its arguments (``blackdrez.server.table.assist``), so
the
hint is exactly the expert's move for what the player sees, and a par is the same wherever it is
computed.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
import multiprocessing
from collections.abc import Callable
from typing import Any

from blackdrez.server.table.assist import HintJob, expert_hint, par_of, quick_hint

log = logging.getLogger("blackdrez.hints")

HINT_BUDGET = 1.5
"""Seconds a hint waits for the expert before the quick bot answers."""
WORKERS = 1
"""Worker processes per node: a node is one event loop, so one core; the experts get one more."""
QUEUE = 4
"""Jobs in the pool at most (running or waiting), abandoned ones included."""
REMEMBERED = 256
"""Expert moves remembered, by job."""


class HintWorker:
    """A lazily started process pool for experts' moves and par scores (module docstring)."""

    def __init__(
        self,
        workers: int = WORKERS,
        queue: int = QUEUE,
        hint_budget: float = HINT_BUDGET,
        expert: Callable[[HintJob], Any] = expert_hint,
        ahead: bool = True,
    ) -> None:
        self.workers = workers
        self.expert = expert
        """What a worker runs for a hint (a module-level function: it is sent by name)."""
        self.queue = queue
        self.hint_budget = hint_budget
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._busy = 0
        """Jobs submitted whose process has not finished (waited for or not)."""
        self._moves: collections.OrderedDict[bytes, Any] = collections.OrderedDict()
        self._coming: dict[bytes, asyncio.Future[Any]] = {}
        """Jobs in the pool by key: a question for one of them waits for it."""
        self.computes_ahead = ahead
        """Whether :meth:`ahead` computes anything (off where jobs run inline: tests)."""
        self._warming: asyncio.Future[Any] | None = None

    def _executor(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None:
            context = multiprocessing.get_context("spawn")
            self._pool = concurrent.futures.ProcessPoolExecutor(self.workers, mp_context=context)
        return self._pool

    def _submit(self, function: Any, *args: Any) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor(), function, *args)
        self._busy += 1

        def done(finished: asyncio.Future[Any]) -> None:
            self._busy -= 1
            if not finished.cancelled():
                finished.exception()  # retrieved: an abandoned job's failure is not an error

        future.add_done_callback(done)
        return future

    def warm(self) -> None:
        """Start the pool now if it is not (a worker's start and imports take a second or two:
        not to be paid by the first hint)."""
        if not self.computes_ahead or self._pool is not None or self._busy >= self.queue:
            return
        with contextlib.suppress(Exception):  # (a pool that cannot start: the next job says so)
            self._warming = self._submit(_ready)

    def ahead(self, job: HintJob) -> None:
        """Have the expert's move for ``job`` computed now, before it is asked for (see the
        module docstring): nothing if it is known or coming, or the pool has no room to spare."""
        if not self.computes_ahead:
            return
        key = job.key()
        if key in self._moves or key in self._coming or self._busy >= self.queue - 1:
            return
        try:
            self._expert(key, job)
        except concurrent.futures.BrokenExecutor:  # a dead worker: a new pool at the next job
            self._pool = None

    def _expert(self, key: bytes, job: HintJob) -> asyncio.Future[Any]:
        """The expert's job for ``job`` in the pool: remembered when done, waited for by any
        question for it meanwhile."""
        future = self._submit(self.expert, job)
        pool = self._pool
        self._coming[key] = future

        def done(finished: asyncio.Future[Any]) -> None:
            if self._coming.get(key) is finished:
                del self._coming[key]
            if finished.cancelled():
                return
            error = finished.exception()
            if error is None:
                self._remember(key, finished.result())
            elif isinstance(error, concurrent.futures.BrokenExecutor) and self._pool is pool:
                self._pool = None  # started again at the next job

        future.add_done_callback(done)
        return future

    def _remember(self, key: bytes, move: Any) -> None:
        self._moves[key] = move
        self._moves.move_to_end(key)
        if len(self._moves) > REMEMBERED:
            self._moves.popitem(last=False)

    async def move(self, job: HintJob) -> tuple[Any, str]:
        """The expert's move for ``job`` and ``"expert"``; or, when the pool is full or the
        expert does not answer within the budget, the quick bot's move and its name."""
        key = job.key()
        if key in self._moves:
            self._moves.move_to_end(key)
            return self._moves[key], "expert"
        future = self._coming.get(key)
        if future is not None or self._busy < self.queue:
            try:
                if future is None:
                    future = self._expert(key, job)
                move = await asyncio.wait_for(asyncio.shield(future), self.hint_budget)
            except TimeoutError:
                log.info("%s expert late (over %.1f s): quick hint", job.game, self.hint_budget)
            except concurrent.futures.BrokenExecutor:
                log.error("the hint worker died: started again at the next job")
                self._pool = None
            else:
                self._remember(key, move)
                return move, "expert"
        return quick_hint(job)

    async def par(self, game: str, dump: bytes) -> dict[str, Any] | None:
        """The par of the finished game ``game`` whose engine dumped ``dump`` (see
        :func:`blackdrez.server.table.assist.par_of`): waits its turn when the pool is full."""
        while self._busy >= self.queue:
            await asyncio.sleep(0.05)
        try:
            return await self._submit(par_of, game, dump)
        except concurrent.futures.BrokenExecutor:
            self._pool = None  # started again at the next job
            raise

    def close(self) -> None:
        """Stop the worker processes (running jobs are abandoned)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _ready() -> None:
    """A worker's first job (:meth:`HintWorker.warm`): its imports done, nothing computed."""
