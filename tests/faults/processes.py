"""A node's hint worker processes, found and watched through ``/proc`` (Linux).

The node starts its hint workers (``blackdrez.server.hints``) with multiprocessing's ``spawn``
method: each
is a child process whose command line runs ``spawn_main``. A scenario holds them (SIGSTOP) or
waits for them to finish their jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

from blackdrez.server.testing.nodes import cpu_seconds


def children(pid: int) -> list[int]:
    """Every descendant of the process ``pid``."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                for child in (task / "children").read_text().split():
                    found += [int(child), *children(int(child))]
    return found


def hint_workers(pid: int) -> list[int]:
    """The hint worker processes of the node process ``pid``."""
    workers = []
    for child in children(pid):
        with contextlib.suppress(OSError):
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                workers.append(child)
    return workers


def signal_all(pids: list[int], signal: int) -> None:
    """Send ``signal`` to each process still there."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal)


def cpu_used(pids: list[int]) -> float:
    """The CPU seconds the processes used so far (those gone count nothing)."""
    return sum(cpu_seconds(pid) or 0.0 for pid in pids)


async def until_busy(pids: list[int], since: float, timeout: float = 30.0) -> None:
    """Wait until the processes have used CPU beyond ``since`` (a job is running)."""
    deadline = time.monotonic() + timeout
    while cpu_used(pids) <= since:
        assert time.monotonic() < deadline, "the hint worker never started the job"
        await asyncio.sleep(0.02)


async def until_idle(pids: list[int], timeout: float = 60.0) -> None:
    """Wait until the processes stop using CPU for a second (their jobs are done)."""
    deadline = time.monotonic() + timeout
    last = None
    while (used := cpu_used(pids)) != last:
        assert time.monotonic() < deadline, "the hint worker kept computing"
        last = used
        await asyncio.sleep(1.0)
