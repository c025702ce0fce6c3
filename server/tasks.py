"""Ending background tasks for good.

``task.cancel()`` asks once, and a request can be lost: on Python 3.11, redis-py now and then
lets a cancellation that lands during a command pass unnoticed, and ``asyncio.timeout`` can turn
one that lands as its own deadline passes into a ``TimeoutError``. A loop that lost it runs on
after its owner stopped, and whatever waits for every task (``asyncio.run``, a test's event
loop) then waits for ever. So an owner that stops cancels until its tasks are done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable

__all__ = ["cancel_until_done"]

log = logging.getLogger("blackdrez.tasks")

ASK_EVERY = 0.5
"""Seconds between cancellations of a task that is still running."""


async def cancel_until_done(tasks: Iterable[asyncio.Task[object]], patience: float = 10.0) -> None:
    """Cancel ``tasks`` and wait until every one is done, cancelling again each
    :data:`ASK_EVERY` s those that lost the request; after ``patience`` s give up on the rest
    and log them (a task that cannot be ended is a bug to see, not a stop to hang)."""
    pending = {task for task in tasks if not task.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    while pending and loop.time() < deadline:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=min(ASK_EVERY, deadline - loop.time()))
    for task in pending:
        log.error("task %s did not end when cancelled", task.get_name())
    for task in tasks:
        if task.done() and not task.cancelled():
            with contextlib.suppress(Exception):
                task.exception()  # retrieved: a failure was logged by its owner, if it matters
