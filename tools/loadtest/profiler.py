"""Profiling the server over the measurement window with py-spy, and summarising it.

Theory of operation
-------------------
``--profile FILE`` starts ``py-spy record --format raw`` on the server for the window's
length; :func:`profile_summary` folds the raw stacks into the functions that take the most time
on their own (self) and with what they call (total), so a report names the hot spots.

Only samples of the thread holding the GIL count (``py-spy --gil``): the question is where the
server's CPU goes, and a thread waiting for the GIL is not using any, yet without ``--gil``
py-spy shows it busy in the call that gave the GIL up (a 0.8 µs ``os.urandom`` showed as 18 µs
per action while the records' threads held the GIL). ``--profile-waits`` counts them too, to
see where threads wait.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def profile_summary(raw: Path, top: int = 40) -> dict[str, list[tuple[str, float]]]:
    """The top functions of a py-spy ``--format raw`` profile: by own time and by total time."""
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        samples += count
        frames = [_short_frame(frame) for frame in stack.split(";")]
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for frame in set(frames):
            total[frame] = total.get(frame, 0) + count

    def ranked(counts: dict[str, int]) -> list[tuple[str, float]]:
        best = sorted(counts.items(), key=lambda kv: -kv[1])[:top]
        return [(name, round(100.0 * count / max(samples, 1), 1)) for name, count in best]

    return {"own": ranked(own), "total": ranked(total), "samples": [("samples", samples)]}


def _short_frame(frame: str) -> str:
    """``func (path/to/module.py:12)`` as ``func (module.py)``."""
    name, _, where = frame.partition(" (")
    return f"{name} ({Path(where.split(':')[0]).name})" if where else name


def profiler_command(pid: int, out: Path, seconds: float, waits: bool = False) -> list[str]:
    """The ``py-spy record`` command for ``pid`` over ``seconds``: raw collapsed stacks of the
    thread holding the GIL, or with ``waits`` of every thread not idle (see the module
    docstring)."""
    spy = Path(sys.executable).with_name("py-spy")
    command = [
        str(spy) if spy.exists() else "py-spy", "record", "--pid", str(pid), "--duration",
        str(max(1, int(seconds))), "--rate", "200", "--format", "raw", "--output", str(out),
        "--nonblocking",
    ]  # fmt: skip
    return command if waits else [*command, "--gil"]


def start_profiler(
    pid: int, out: Path, seconds: float, waits: bool = False
) -> subprocess.Popen[bytes] | None:
    """Run :func:`profiler_command` on ``pid``, if py-spy is installed."""
    command = profiler_command(pid, out, seconds, waits)
    try:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        return None
