"""The server side of a load: starting and stopping the server, and reading it in ``/proc``.

Theory of operation
-------------------
The load tool may start the server itself (``--spawn-server``, optionally pinned to CPUs, with a
raised open-file limit) or find it by its listening port. While the load runs it reads the
server's resident memory (``/proc/<pid>/status``), CPU time and involuntary context switches:
figures from the kernel, not from the server's own account.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from blackdrez.tools.loadtest.workers import raise_open_files


def check_loopback(url: str) -> tuple[str, int]:
    """Return the host and port of ``url``; refuse anything but a 127.0.0.x host."""
    parsed = urllib.parse.urlsplit(url)
    host = parsed.hostname or ""
    try:
        address = ipaddress.ip_address(host if host != "localhost" else "127.0.0.1")
    except ValueError:
        raise SystemExit(f"the load test targets 127.0.0.x only, not {host!r}") from None
    if not (address.version == 4 and address.is_loopback):
        raise SystemExit(f"the load test targets 127.0.0.x only, not {host!r}")
    return str(address), parsed.port or 80


def rss_kib(pid: int) -> int:
    """The resident set size of process ``pid`` in KiB (``VmRSS`` in /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise ValueError(f"no VmRSS for process {pid}")


def involuntary_switches(pid: int) -> int:
    """How often process ``pid`` was preempted so far (other work wanted its CPU)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("nonvoluntary_ctxt_switches:"):
            return int(line.split()[1])
    return 0


def steal_seconds() -> dict[str, float]:
    """Seconds the hypervisor has run something else while each CPU wanted to run (the
    ``steal`` column of ``/proc/stat``), so far, by CPU (``cpu0``...); empty off Linux."""
    stolen = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/stat").read_text().splitlines():
            fields = line.split()
            if fields[0].startswith("cpu") and fields[0] != "cpu" and len(fields) > 8:
                stolen[fields[0]] = int(fields[8]) / os.sysconf("SC_CLK_TCK")
    return stolen


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds used so far by process ``pid``."""
    return sum(cpu_split(pid))


def cpu_split(pid: int) -> tuple[float, float]:
    """The user and the system CPU seconds used so far by process ``pid``: where a cost lies
    (the process's own code, or the kernel's work for its system calls and sockets)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def find_server_pid(port: int) -> int | None:
    """The process listening on TCP ``port`` (psutil), or ``None``."""
    try:
        import psutil
    except ImportError:
        return None
    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                return conn.pid
    return None


def _limit_files_then(cpus: str | None) -> Any:
    def prepare() -> None:
        raise_open_files()
        if cpus:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, cpu_list(cpus))

    return prepare


def start_process(
    command: list[str],
    cpus: str | None,
    log: Path,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a server-like process pinned to ``cpus`` with the open-file limit raised."""
    with log.open("ab") as out:
        return subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_limit_files_then(cpus),
        )


def wait_listening(host: str, port: int, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait until something accepts TCP connections on ``host:port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the process exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), 0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {host}:{port} after {timeout} s")


def favour(pid: int) -> str:
    """Let process ``pid`` run before the load's workers on a core it shares with them: the
    real-time policy ``SCHED_FIFO`` at its lowest priority, else (not permitted) nice -10.
    Returns what was set, ``""`` if neither was permitted.

    For a part of the system under test (a Redis) that has to share a core with the bots on a
    small machine: at equal priority the scheduler may run a bot's worker for milliseconds while
    the part waits, and the load tool reports that wait as the server's latency. Safe for a
    process that mostly waits (the kernel also keeps 5% of each second from real-time tasks)."""
    try:
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(1))
        return "SCHED_FIFO 1"
    except (OSError, AttributeError):
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, pid, -10)
        return "nice -10"
    except OSError:
        return ""


def cpu_list(text: str) -> tuple[int, ...]:
    cpus: list[int] = []
    for part in text.split(","):
        if "-" in part:
            low, high = part.split("-")
            cpus += range(int(low), int(high) + 1)
        elif part:
            cpus.append(int(part))
    return tuple(cpus)


SERVER_HISTOGRAMS = {
    "action": "blackdrez_action_seconds",
    "loop_lag": "blackdrez_loop_lag_seconds",
}
"""The server's own histograms a load reads over its window: ``action``, from receiving an
``act`` to handing its update to the connections (the store's round trip included);
``loop_lag``, how late its event loop woke for a timer (what a frame arriving at a random moment
waits before the node reads it, outside ``action``)."""


def server_histograms(url: str, timeout: float = 2.0) -> dict[str, dict[float, float]]:
    """The server's :data:`SERVER_HISTOGRAMS` so far from its ``/metrics``: by short name,
    cumulative counts by upper bound in seconds (``inf`` last). Empty, or missing a name, when
    the server does not serve them on its game port."""
    from prometheus_client.parser import text_string_to_metric_families

    host, port = check_loopback(url)
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=timeout) as reply:
            text = reply.read().decode()
    except (OSError, ValueError):
        return {}
    names = {name: short for short, name in SERVER_HISTOGRAMS.items()}
    found = {}
    for family in text_string_to_metric_families(text):
        if family.name in names:
            found[names[family.name]] = {
                float(sample.labels["le"]): sample.value
                for sample in family.samples
                if sample.name.endswith("_bucket")
            }
    return found


def histogram_window(
    start: dict[float, float] | None, end: dict[float, float] | None
) -> dict[str, Any] | None:
    """A histogram over a window, from :func:`server_histograms` at its start and end: how
    many, the share over 10 ms, and the bucket bound the p99 is at most (ms)."""
    if not start or not end or set(start) != set(end):
        return None
    bounds = sorted(end)
    counts = [end[b] - start[b] for b in bounds]
    total = counts[-1]
    if total <= 0:
        return None
    at_10ms = next((c for b, c in zip(bounds, counts, strict=True) if b >= 0.01), total)
    p99 = quantile_bound(dict(zip(bounds, counts, strict=True)), 0.99)
    return {
        "count": int(total),
        "share_over_10ms": 1 - at_10ms / total,
        "p99_at_most_ms": None if p99 is None else round(1000 * p99, 3),
    }


def quantile_bound(buckets: dict[float, float], share: float) -> float | None:
    """The upper bound (s) of the bucket of a cumulative histogram (counts by upper bound,
    ``inf`` last) holding quantile ``share``; ``None`` if past the last finite bound or empty."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    total = buckets[bounds[-1]]
    found = next(b for b in bounds if buckets[b] >= share * total)
    return None if found == float("inf") else found


def records_children(pid: int, wait: float = 3.0) -> list[int]:
    """The records process(es) the server ``pid`` started (``blackdrez.server.records.process``),
    waiting up to ``wait`` seconds for the first: an older server, or one without records or
    with them in its own process, has none."""
    try:
        import psutil
    except ImportError:
        return []
    deadline = time.monotonic() + wait
    while True:
        found = []
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    if "blackdrez.server.records.process" in " ".join(child.cmdline()):
                        found.append(child.pid)
        if found or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)
