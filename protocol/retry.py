"""When to try again: the one backoff policy, for the server's store calls and for clients.

Theory of operation
-------------------
Nothing retries in a tight loop, nor in step with others. :class:`Backoff` gives capped
exponential delays with jitter; each caller names its first delay and its cap. It lives here, below
both the server and the clients, because the clients' policies are part of how the protocol is
meant to be used: what a client does when its node dies.

* **A connection lost without a close frame** (1006: its node died) is re-opened at once at the
  next url, after a random spread of at most :data:`RECONNECT_SPREAD` so that the clients of a
  dead node do not all arrive in the same instant; further tries, and any closed connection (a
  node shutting down says when to come back; a rate limit must not be retried at once), wait on
  :data:`RECONNECT` (0.1 s doubling to 5 s).
* **A request answered** ``unavailable`` **or** ``moving`` (its table is between nodes, or the
  store is away; nothing changed) is sent again on :data:`RETRY`: 50 ms doubling to 0.25 s. A
  killed node's tables return about a lease (1 s) after its death, so a short cap finds them soon
  after; the cap and the jitter bound what a crowd of retrying clients costs the surviving nodes
  (at most one refused request per client every 0.125-0.25 s, spread out, each answered without
  work: the table is not hosted, or the store is known to be down).
"""

from __future__ import annotations

import random
from collections.abc import Iterator


class Backoff:
    """Capped exponential delays with jitter: ``first``, doubling, never above ``cap``.

    Each delay is drawn uniformly from its upper half ("equal jitter"): never much shorter than
    the plan, never in step with other waiters.
    """

    def __init__(self, first: float = 0.05, cap: float = 2.0, factor: float = 2.0) -> None:
        self.first = first
        self.cap = cap
        self.factor = factor

    def delays(self) -> Iterator[float]:
        """An endless series of delays in seconds."""
        planned = self.first
        while True:
            yield planned * random.uniform(0.5, 1.0)
            planned = min(planned * self.factor, self.cap)


def reconnect_delays(close_code: int | None) -> Iterator[float]:
    """Delays before each try to re-open a connection closed with ``close_code``: the first at
    once (within the spread) if the connection was lost without a close frame, else on
    :data:`RECONNECT`."""
    later = RECONNECT.delays()
    if close_code in (ABNORMAL_CLOSURE, None):
        yield random.uniform(0.0, RECONNECT_SPREAD)
    yield from later


ABNORMAL_CLOSURE = 1006
"""The close code a WebSocket library reports for a connection lost without a close frame."""
RECONNECT_SPREAD = 0.05
"""Seconds over which the first reconnection after a node's death is spread (uniformly)."""
RECONNECT = Backoff(first=0.1, cap=5.0)
"""Delays between further reconnection tries."""
RETRY = Backoff(first=0.05, cap=0.25)
"""Delays between tries of a request answered ``unavailable`` or ``moving``."""
