"""Hint worker jobs for tests: the expert's move after a known pause, and a worker that dies.

They run in the node's worker process (``blackdrez.server.hints``), which imports them by name, so
they
live in a module of their own. A test holds a hint for longer than a lease lasts with the first,
and kills the worker process with the second.
"""

from __future__ import annotations

import os
import time
from typing import Any

from blackdrez.server.table.assist import HintJob, expert_hint

PAUSE = 2.0
"""Seconds the job waits before it asks the expert: longer than the 1 s lease of the tests."""


def slow_expert_hint(job: HintJob) -> Any:
    """The expert's move for ``job``, :data:`PAUSE` seconds late."""
    time.sleep(PAUSE)
    return expert_hint(job)


def dying_expert_hint(job: HintJob) -> Any:
    """End the worker process at once, as a crash or the kernel's OOM killer would."""
    os._exit(1)
