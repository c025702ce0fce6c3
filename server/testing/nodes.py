"""Server node processes on one Redis, and what they cost in CPU while they run.

Theory of operation
-------------------
A :class:`NodeProcess` runs ``python -m blackdrez.tools.cli serve --redis-url URL --node-id ID``
(the
compose file's node command, on a free loopback port) and keeps every line it prints with the time
it arrived, read by a thread so that a node never blocks on a full pipe. It can be killed
(SIGKILL), paused (SIGSTOP), resumed (SIGCONT) and started again with the same id and port, as a
crash and a restart by a supervisor would do. :class:`Nodes` is a group of them, closed together.

:class:`CpuSampler` reads each watched process's CPU time (user + system, from
``/proc/PID/stat``) a few times a second, so a caller can ask how busy a node was between two
instants: its mean and its peak CPU percentage over the sampling periods in that window.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from blackdrez.server.testing.launcher import OneProcess, stop_process
from blackdrez.server.testing.redis_cluster import direct_client
from blackdrez.server.testing.redis_server import free_port

START_TIMEOUT = 30.0
"""Seconds a node may take to print its first line (a loaded machine imports slowly)."""
STOP_TIMEOUT = 10.0
SAMPLE_PERIOD = 0.25
"""Seconds between two CPU readings."""


def node_command(
    *,
    port: int,
    redis_url: str,
    node_id: str,
    host: str = "127.0.0.1",
    db_url: str = "none",
    extra: Sequence[str] = (),
) -> list[str]:
    """The compose file's node command for this machine: this Python, a loopback port, and
    the records database ``db_url`` (``none``: no records, rather than a file in the working
    directory)."""
    return [
        sys.executable, "-m", "blackdrez.tools.cli", "serve",
        "--host", host,
        "--port", str(port),
        "--redis-url", redis_url,
        "--node-id", node_id,
        "--db-url", db_url,
        *extra,
    ]  # fmt: skip


def serving(line: str) -> bool:
    """Whether ``line`` is what ``blackdrez serve`` prints once it listens (a node, or the
    supervisor of ``--workers``): not its refusals ("blackdrez serve: cannot listen on ...")."""
    return line.startswith("blackdrez ") and " on http://" in line


_launched: list[weakref.ref[NodeProcess]] = []


def launched_since(count: int) -> list[NodeProcess]:
    """The node processes made after the first ``count`` made in this Python process (and
    still referenced): the test suite reports the last lines of those a failed test made."""
    return [node for ref in _launched[count:] if (node := ref()) is not None]


def launched_count() -> int:
    """How many node processes this Python process made so far (see :func:`launched_since`)."""
    return len(_launched)


class NodeProcess(OneProcess):
    """One server node process (see the module docstring); not started until :meth:`start`."""

    def __init__(
        self,
        redis_url: str,
        node_id: str,
        *,
        port: int | None = None,
        db_url: str = "none",
        extra: Sequence[str] = (),
        command: Sequence[str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.redis_url = redis_url
        self.cwd = cwd
        """The folder the node runs in (``None``: this process's)."""
        self.node_id = node_id
        self.port = port or free_port()
        self.command = (
            list(command)
            if command
            else node_command(
                port=self.port, redis_url=redis_url, node_id=node_id, db_url=db_url, extra=extra
            )
        )
        self.lines: list[tuple[float, str]] = []
        """Every line the node printed, with its arrival time (``time.monotonic()``)."""
        self.starts = 0
        """How many times a process was started for this node."""
        self._process: subprocess.Popen[bytes] | None = None
        self._first_line = 0
        _launched.append(weakref.ref(self))

    @property
    def url(self) -> str:
        """The node's WebSocket URL."""
        return f"ws://127.0.0.1:{self.port}/"

    def start(self) -> None:
        """Start the node and wait until it says it serves; a node that fails to start raises."""
        self.launch()
        self.wait_started()

    def launch(self) -> None:
        """Start the node's process without waiting for it (see :meth:`wait_started`)."""
        if self.running:
            return
        self._first_line = len(self.lines)
        process = subprocess.Popen(
            self.command,
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._process = process
        self.starts += 1
        threading.Thread(target=self._collect, args=(process,), daemon=True).start()

    def wait_started(self) -> None:
        """Wait until the launched node says it serves; kill it and raise if it does not."""
        first = self._first_line
        deadline = time.monotonic() + START_TIMEOUT
        while not any(serving(line) for _, line in self.lines[first:]):
            if not self.running or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(
                    f"node {self.node_id} did not start:\n" + "".join(self.output()[first:])
                )
            time.sleep(0.02)

    def _collect(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            self.lines.append((time.monotonic(), raw.decode(errors="replace")))

    def output(self) -> list[str]:
        """Every line printed so far, by every process started for this node."""
        return [line for _, line in self.lines]

    def lines_between(self, start: float, end: float) -> list[str]:
        """The lines that arrived between two ``time.monotonic()`` instants."""
        return [line for at, line in self.lines if start <= at <= end]

    def kill(self) -> None:
        """Kill the node at once (SIGKILL), as a crash would."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def pause(self) -> None:
        """Freeze the node (SIGSTOP): its sockets stay open but it does nothing."""
        if self.running:
            assert self._process is not None
            self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Let a paused node run again (SIGCONT)."""
        if self.running:
            assert self._process is not None
            self._process.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        """Kill the node and start it again with the same id and port."""
        self.kill()
        self.start()

    def terminate(self) -> None:
        """Ask the node to shut down (SIGTERM, as a supervisor does) without waiting."""
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGCONT)  # a paused node cannot act on SIGTERM
            process.terminate()

    def stop(self) -> None:
        """Stop the node (SIGTERM, then SIGKILL if it lingers) and wait for it to exit."""
        stop_process(self._process, STOP_TIMEOUT)


class Nodes:
    """Several nodes on one Redis, named ``{prefix}0``, ``{prefix}1``...; started at once."""

    def __init__(
        self,
        redis_url: str,
        count: int,
        *,
        extra: Sequence[str] = (),
        prefix: str = "node",
        db_url: str = "none",
    ) -> None:
        self.nodes = [
            NodeProcess(redis_url, f"{prefix}{index}", db_url=db_url, extra=extra)
            for index in range(count)
        ]
        try:
            for node in self.nodes:
                node.launch()
            for node in self.nodes:
                node.wait_started()
        except BaseException:
            self.stop()
            raise

    @property
    def urls(self) -> list[str]:
        """Every node's WebSocket URL, in order."""
        return [node.url for node in self.nodes]

    @property
    def ports(self) -> list[int]:
        """Every node's port, in order."""
        return [node.port for node in self.nodes]

    def __getitem__(self, index: int) -> NodeProcess:
        return self.nodes[index]

    def __iter__(self) -> Iterator[NodeProcess]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def stop(self) -> None:
        """Stop every node: SIGTERM to all, then SIGKILL to those that linger."""
        for node in self.nodes:
            node.terminate()
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> Nodes:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def cpu_seconds(pid: int) -> float | None:
    """The CPU time (user + system) a process has used, or ``None`` if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            raw = stat.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces: the other fields follow its ")".
    fields = raw[raw.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def resident_bytes(pid: int) -> int | None:
    """The memory a process holds (its resident set), or ``None`` if it is gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
    except OSError:
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class CpuStats:
    """How busy one process was over a window: percentages of one core."""

    mean: float
    peak: float
    samples: int


class CpuSampler:
    """Samples the CPU time of named processes in a thread until closed (a context manager).

    Processes are followed by name, so a node restarted under a new pid keeps its series.
    """

    def __init__(self, period: float = SAMPLE_PERIOD) -> None:
        self.period = period
        self._pids: dict[str, int] = {}
        self._series: dict[str, list[tuple[float, float]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def watch(self, name: str, pid: int | None) -> None:
        """Sample the process ``pid`` under ``name`` from now on (replacing an earlier pid)."""
        with self._lock:
            if pid is None:
                self._pids.pop(name, None)
            else:
                self._pids[name] = pid
            self._series.setdefault(name, [])

    def _run(self) -> None:
        last: dict[str, tuple[int, float, float]] = {}
        while not self._stop.wait(self.period):
            now = time.monotonic()
            with self._lock:
                pids = dict(self._pids)
            for name, pid in pids.items():
                used = cpu_seconds(pid)
                if used is None:
                    continue
                before = last.get(name)
                last[name] = (pid, now, used)
                if before is None or before[0] != pid:
                    continue
                share = 100.0 * (used - before[2]) / max(now - before[1], 1e-6)
                with self._lock:
                    self._series[name].append((now, share))

    def stats(self, name: str, start: float = 0.0, end: float = float("inf")) -> CpuStats:
        """Mean and peak CPU percentage of ``name`` over the periods that ended in the window."""
        with self._lock:
            shares = [share for at, share in self._series.get(name, []) if start <= at <= end]
        if not shares:
            return CpuStats(mean=0.0, peak=0.0, samples=0)
        return CpuStats(mean=sum(shares) / len(shares), peak=max(shares), samples=len(shares))

    def names(self) -> list[str]:
        """The names watched so far."""
        with self._lock:
            return sorted(self._series)

    def close(self) -> None:
        """Stop sampling."""
        self._stop.set()
        self._thread.join(timeout=5)

    def __enter__(self) -> CpuSampler:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def lease_holders(redis_url: str) -> dict[str, str]:
    """The node id holding each leased table (a lease names node, incarnation and token), on one
    Redis or a Redis Cluster."""
    holders = {}
    with direct_client(redis_url) as direct:
        for key in direct.scan_iter("bd:t:*:lease"):
            holder = direct.get(key)  # may expire between the scan and the read
            if holder is not None:
                node_id = holder.decode().rsplit("/", 2)[0]
                holders[key.decode().split("{")[1].split("}")[0]] = node_id
    return holders
