"""A hint worker's job that takes a known, long time: the expert's move after a pause.

It runs in the node's worker process (``server.hints``), which imports it by name, so it lives
in a module of its own. A test uses it to hold a hint for longer than a lease lasts.
"""

from __future__ import annotations

import time
from typing import Any

from server.table.assist import HintJob, expert_hint

PAUSE = 2.0
"""Seconds the job waits before it asks the expert: longer than the 1 s lease of the tests."""


def slow_expert_hint(job: HintJob) -> Any:
    """The expert's move for ``job``, :data:`PAUSE` seconds late."""
    time.sleep(PAUSE)
    return expert_hint(job)
