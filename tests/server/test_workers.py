"""``blackdrez serve --workers N``: N nodes on one port sharing Redis, or a clear refusal."""

from __future__ import annotations

import asyncio
import json
import sys
import urllib.request
from pathlib import Path

import pytest

from blackdrez.clients.bots import run_swarm
from blackdrez.server.app import Settings
from blackdrez.server.testing.default_server import redis_pid
from blackdrez.server.testing.nodes import NodeProcess
from blackdrez.server.testing.redis_server import free_port
from blackdrez.server.workers import WorkersRefused, worker_settings

pytestmark = pytest.mark.timeout(180)


def serve_workers(redis_url: str, port: int, count: int, *, cwd: Path | None = None) -> NodeProcess:
    """The supervisor of ``count`` workers on ``port``, started (it prints before they listen);
    ``redis_url`` empty: the data folder's Redis, the folder in ``cwd``."""
    command = [
        sys.executable, "-m", "blackdrez.tools.cli", "serve", "--port", str(port), "--workers",
        str(count),
        "--node-id", "w",
    ]  # fmt: skip
    if redis_url:
        command += ["--redis-url", redis_url]
    supervisor = NodeProcess(redis_url, "w", port=port, command=command, cwd=cwd)
    supervisor.start()
    return supervisor


def node_behind(port: int) -> str | None:
    """The node id that answers ``/healthz`` on a fresh connection to ``port`` (or ``None``)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
            return json.loads(answer.read())["node"]
    except OSError:
        return None  # not listening yet


async def nodes_seen(port: int, wanted: int, timeout: float = 90.0) -> set[str]:
    """The node ids met on new connections to ``port``, until ``wanted`` or ``timeout`` s."""
    seen: set[str] = set()
    async with asyncio.timeout(timeout):
        while len(seen) < wanted:
            node = await asyncio.to_thread(node_behind, port)
            if node is not None:
                seen.add(node)
            else:
                await asyncio.sleep(0.2)
    return seen


@pytest.mark.parametrize("store", ["redis", "data folder"])
async def test_two_workers_share_one_port_and_a_game_plays_across_them(
    store: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """On a Redis given, or on the data folder's own (which the supervisor shuts down after
    the workers, as a lone node does)."""
    port = free_port()
    redis_url = request.getfixturevalue("redis_url_clean") if store == "redis" else ""
    supervisor = serve_workers(redis_url, port, 2, cwd=tmp_path)
    try:
        assert await nodes_seen(port, 2) == {"w-1", "w-2"}
        # Four bots per table connect one by one: the kernel spreads them over both workers, so
        # most tables have players on the worker that does not host them (forwarded via Redis).
        summary = await run_swarm(f"ws://127.0.0.1:{port}/", tables=4, per_table=4)
        assert summary.games_finished == 4
        assert summary.unfair == 0 and not summary.inconsistent
    finally:
        supervisor.stop()
    assert supervisor._process is not None and supervisor._process.returncode == 0
    output = "".join(supervisor.output())
    assert "node w-1 on" in output and "node w-2 on" in output
    if store == "data folder":
        assert redis_pid(tmp_path / "blackdrez-data") is None, "its Redis outlived the workers"
        assert any((tmp_path / "blackdrez-data" / "redis").glob("appendonly*"))


def test_workers_in_memory_are_refused_with_the_reason(tmp_path) -> None:
    command = [
        sys.executable,
        "-m",
        "blackdrez.tools.cli",
        "serve",
        "--workers",
        "2",
        "--in-memory",
    ]
    supervisor = NodeProcess("", "w", command=command)
    supervisor.launch()
    assert supervisor._process is not None
    assert supervisor._process.wait(60) == 2
    output = "".join(supervisor.output())
    assert "--workers needs a Redis" in output and "--in-memory has none" in output


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        (Settings(port=8765), "needs a Redis"),
        (Settings(port=0, redis_url="redis://127.0.0.1:1/0"), "fixed --port"),
    ],
)
def test_settings_workers_cannot_share_are_refused(settings: Settings, reason: str) -> None:
    with pytest.raises(WorkersRefused, match=reason):
        worker_settings(settings, 2)


def test_each_worker_has_its_own_node_id_and_metrics_port_and_reuses_the_game_port() -> None:
    base = Settings(port=8765, redis_url="redis://127.0.0.1:1/0", node_id="n", metrics_port=9100)
    workers = worker_settings(base, 3)
    assert [w.node_id for w in workers] == ["n-1", "n-2", "n-3"]
    assert [w.metrics_port for w in workers] == [9100, 9101, 9102]
    assert all(w.port == 8765 and w.reuse_port for w in workers)
