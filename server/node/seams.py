"""What the node's components share without depending on one another.

Theory of operation
-------------------
The components (``fanout``, ``hosting``, ``routing``, ``lobby``, ``failover``) are built by
``Node`` in that order, each given the ones before it; none imports one built after it, so the
modules form no circle. What several of them need from a later one is passed to them as a
callable whose type is declared here (:data:`Spawn`, :class:`Route`), and what they all build
the same way lives here too: the answers refusing a request (:func:`error_answer` and its
kinds) and the pace of retries while the store is down (:data:`STORE_RETRY`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.retry import Backoff
from blackdrez.server.table.commands import Answer

STORE_RETRY = Backoff(first=0.05, cap=2.0)
"""The retry policy of the outbox and of a table whose log write failed."""

Spawn = Callable[[Coroutine[Any, Any, Any]], "asyncio.Task[Any]"]
"""Runs a coroutine as a background task the node keeps until done (its failure logged)."""
KeepRunning = Callable[[str, Callable[[], Coroutine[Any, Any, None]]], Coroutine[Any, Any, None]]
"""The node's supervision of one of its background loops (``Node.keep_running``): its name,
and the loop to run (started again if it fails)."""


REQUEST_FAILED = "the server failed on this request"
"""What an ``internal`` error says: a bug, logged where it happened."""


def error_answer(
    request: Any, code: ErrorCode, message: str, retry_after: float | None = None
) -> Answer:
    """The answer refusing ``request`` (``retry_after``: with ``rate_limited``)."""
    error = v1.Error(
        id=getattr(request, "id", None), code=code, message=message, retry_after=retry_after
    )
    return Answer(replies=[error])


def moving_answer(request: Any) -> Answer:
    return error_answer(request, ErrorCode.MOVING, "the table is moving to another node: try again")


def closed_answer(request: Any, table: str) -> Answer:
    """``not_found``; whoever still watched the table watches it no more."""
    answer = error_answer(request, ErrorCode.NOT_FOUND, f"table {table!r} is closed")
    answer.unwatch = table
    return answer


def refused(answer: Answer) -> bool:
    return any(isinstance(reply, v1.Error) for reply in answer.replies)


class Route(Protocol):
    """:meth:`Routing.route`, as the components that send a table request through it see it."""

    def __call__(
        self, player: str, name: str, table: str, message: Any, *, bot: bool = False
    ) -> Awaitable[Answer]:
        """Answer ``message`` for ``table``, here or at the table's host."""
        ...
