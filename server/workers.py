"""Several server processes on one port: ``blackdrez serve --workers N``.

Theory of operation
-------------------
One node runs one event loop, so it uses one core. To use every core of a machine, the
supervisor (the process ``blackdrez serve --workers N`` started) starts N worker processes that
each run a whole node (:func:`blackdrez.server.app.run`) on the same host and port, every listening
socket
bound with ``SO_REUSEPORT``, so that the kernel spreads new connections over the workers. The
workers are nodes like any other: each has its own node id (``ID-1`` to ``ID-N``) and they share
the tables through the configured Redis exactly as nodes on separate machines do (a request that
reaches a worker other than the table's host is forwarded to it, and the updates come back
through pub/sub). Given no ``--redis-url``, the supervisor opens the data folder's own Redis
(``blackdrez.server.stores.embedded``) before the workers start, hands them its address, and shuts
it down
after the last one stopped; with ``--in-memory`` there is nothing they could share, so
``--workers`` refuses to start.

The supervisor serves nothing itself. It restarts a worker that exits on its own, under the same
node id (the new process takes that worker's tables back at once, as a restarted node does); a
worker that exits within :data:`START_GRACE` seconds of its start (a port in use, a bad option)
stops them all, since starting it again would fail the same way. On SIGTERM or SIGINT it sends
SIGTERM to every worker and waits: each hands its tables over to the others as a node shutting
down does, the last one to nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import multiprocessing
import multiprocessing.connection
import signal
import sys
import time
from multiprocessing.process import BaseProcess
from typing import Any

from blackdrez.server.app import Settings, StartError, run
from blackdrez.server.stores.embedded import EmbeddedError, EmbeddedRedis

log = logging.getLogger("blackdrez.workers")

START_GRACE = 5.0
"""Seconds after its start within which a worker's exit stops them all instead of a restart."""
STOP_TIMEOUT = 20.0
"""Seconds the workers have to hand their tables over and exit before they are killed."""
RESTART_DELAY = 1.0
"""Seconds before a worker that exited is started again."""


class WorkersRefused(ValueError):
    """These settings cannot run several workers; the message says why, in one line."""


def worker_settings(settings: Settings, count: int) -> list[Settings]:
    """Each worker's settings: its own node id and metrics port, the shared port reused.

    Raises :class:`WorkersRefused` for settings that several workers cannot share.
    """
    if count < 1:
        raise WorkersRefused("--workers must be at least 1")
    if not settings.redis_url:
        raise WorkersRefused(
            "--workers needs a Redis (--redis-url, or the data folder's own): the workers "
            "share their tables through it, and --in-memory has none"
        )
    if settings.port == 0:
        raise WorkersRefused("--workers needs a fixed --port: port 0 would give each its own")
    workers = []
    for index in range(1, count + 1):
        metrics_port = settings.metrics_port
        if metrics_port:  # one listener per worker, so that each one can be scraped
            metrics_port += index - 1
        workers.append(
            dataclasses.replace(
                settings,
                node_id=f"{settings.node_id}-{index}",
                metrics_port=metrics_port,
                reuse_port=True,
            )
        )
    return workers


def _work(settings: Settings) -> None:
    """A worker process: one node until SIGTERM (the same as ``blackdrez serve`` alone)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when workers stop
    try:
        import uvloop
    except ImportError:
        runner: Any = asyncio.run
    else:
        runner = uvloop.run
    try:
        runner(run(settings))
    except StartError as error:
        print(f"blackdrez serve: {error}", file=sys.stderr, flush=True)
        sys.exit(2)


def supervise(settings: Settings, count: int) -> int:
    """Run ``count`` workers (see the module docstring) until SIGTERM or SIGINT; the exit code.

    Raises :class:`WorkersRefused` before starting anything if the settings do not allow it.
    """
    embedded = None
    if not settings.redis_url and settings.data_dir is not None:  # one Redis for them all
        worker_settings(dataclasses.replace(settings, redis_url="redis://"), count)  # checks
        embedded = EmbeddedRedis(settings.data_dir / "redis")
        try:
            url = embedded.open()
        except EmbeddedError as error:
            raise WorkersRefused(str(error)) from None
        settings = dataclasses.replace(settings, redis_url=url, data_dir=None)
    try:
        return _supervise(settings, count)
    finally:
        if embedded is not None:
            embedded.close()


def _supervise(settings: Settings, count: int) -> int:
    plans = worker_settings(settings, count)
    context = multiprocessing.get_context("spawn")
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    running: dict[int, tuple[BaseProcess, float]] = {}

    def start(index: int) -> None:
        process = context.Process(target=_work, args=(plans[index],), name=plans[index].node_id)
        process.start()
        running[index] = (process, time.monotonic())

    for index in range(count):
        start(index)
    print(
        f"blackdrez: {count} workers on http://{settings.host}:{settings.port}/ "
        f"(nodes {plans[0].node_id} to {plans[-1].node_id})",
        flush=True,
    )
    code = 0
    while not stopping:
        sentinels = [process.sentinel for process, _ in running.values()]
        multiprocessing.connection.wait(sentinels, timeout=0.5)
        for index, (process, started) in list(running.items()):
            if process.is_alive() or stopping:
                continue
            if time.monotonic() - started < START_GRACE:
                print(
                    f"blackdrez serve: worker {plans[index].node_id} exited at start "
                    f"(code {process.exitcode}): stopping every worker",
                    file=sys.stderr,
                    flush=True,
                )
                stopping, code = True, process.exitcode or 1
                break
            name = plans[index].node_id
            log.warning("worker %s exited (code %s): restarting it", name, process.exitcode)
            time.sleep(RESTART_DELAY)
            start(index)
    for process, _ in running.values():
        if process.is_alive():
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
    deadline = time.monotonic() + STOP_TIMEOUT
    for process, _ in running.values():
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()
    return code
