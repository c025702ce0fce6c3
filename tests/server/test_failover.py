"""Several real server processes on one Redis: a node killed with SIGKILL, Redis restarted.

The nodes run exactly the command the compose file runs (``blackdrez serve --redis-url ...``).
Bots play tables spread over the nodes; every table must finish with consistent results, and
every action a bot saw acknowledged must be in its table's log.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from clients.bots import BotResult, SwarmSummary, run_swarm
from protocol import v1
from server.hosting import Resume, decode_entry, decode_table_record, record_log, replay
from server.testing.redis_cluster import direct_client
from tests.redis_server import RedisServer, free_port

ROOT = Path(__file__).resolve().parents[2]


def node_command(*, port: int, redis_url: str, node_id: str) -> list[str]:
    """The compose file's node command, pointed at this machine's Redis and a free port."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    command = list(compose["services"]["node1"]["command"])
    for option, value in (
        ("--host", "127.0.0.1"),
        ("--port", str(port)),
        ("--redis-url", redis_url),
        ("--node-id", node_id),
    ):
        command[command.index(option) + 1] = value
    assert command[0] == "blackdrez"
    return [sys.executable, "-m", "server.cli", *command[1:]]


def _collect(process: subprocess.Popen[bytes], lines: list[str]) -> None:
    for raw in process.stdout:
        lines.append(raw.decode(errors="replace"))


class Nodes:
    """Server node processes on one Redis."""

    def __init__(self, redis_url: str, count: int, extra: tuple[str, ...] = ()) -> None:
        self.redis_url = redis_url
        self.ports = [free_port() for _ in range(count)]
        self.processes: list[subprocess.Popen[bytes]] = []
        for index, port in enumerate(self.ports):
            command = [
                *node_command(port=port, redis_url=redis_url, node_id=f"node{index}"),
                *extra,
            ]
            self.processes.append(
                subprocess.Popen(
                    command,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )
            )
        self.output: list[list[str]] = []
        for process in self.processes:
            line = process.stdout.readline().decode()
            assert "blackdrez" in line, line
            lines = [line]
            self.output.append(lines)
            # keep reading: a node blocked on a full pipe would look like a hung server
            threading.Thread(target=_collect, args=(process, lines), daemon=True).start()

    @property
    def urls(self) -> list[str]:
        return [f"ws://127.0.0.1:{port}/" for port in self.ports]

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def durable_redis(tmp_path) -> Iterator[RedisServer]:
    """A Redis with append-only persistence, as in the compose file."""
    with RedisServer(appendonly=True, data_dir=str(tmp_path)) as server:
        yield server


def lease_holders(redis_url: str) -> dict[str, str]:
    """The node id holding each leased table (a lease names node, incarnation and token)."""
    holders = {}
    with direct_client(redis_url) as direct:
        for key in direct.scan_iter("bd:t:*:lease"):
            holder = direct.get(key)  # may expire between the scan and the read
            if holder is not None:
                node_id = holder.decode().rsplit("/", 2)[0]
                holders[key.decode().split("{")[1].split("}")[0]] = node_id
    return holders


async def wait_for_tables(redis_url: str, count: int, timeout: float = 60.0) -> None:
    """Wait until ``count`` tables are hosted (a loaded machine creates them slowly)."""
    deadline = time.monotonic() + timeout
    while len(lease_holders(redis_url)) < count:
        assert time.monotonic() < deadline, "the tables were not all created in time"
        await asyncio.sleep(0.1)


def table_log(redis_url: str, table: str) -> list[bytes]:
    """A table's whole log: its stream while it is open, else its retired game record's."""
    with direct_client(redis_url) as direct:
        entries = [fields[b"e"] for _, fields in direct.xrange(f"bd:t:{{{table}}}:log")]
        record = direct.get(f"bd:t:{{{table}}}:game")
    if not entries and record:
        return record_log(decode_table_record(record))
    return entries


def played_on_after_adoption(redis_url: str, table: str) -> bool:
    """Whether the table's log shows it adopted by another node and then played further."""
    commands = [decode_entry(data).command for data in table_log(redis_url, table)]
    resumed = [i for i, command in enumerate(commands) if isinstance(command, Resume)]
    return bool(resumed) and any(isinstance(c, v1.Act) for c in commands[resumed[0] :])


def check_acknowledged_actions_are_logged(redis_url: str, tables: list[list[BotResult]]) -> int:
    """Every action a bot saw acknowledged is an ``act`` entry of its player in the log, once;
    and the log replays from the table's creation to its end."""
    checked = 0
    for bots in tables:
        table = bots[0].table
        log = table_log(redis_url, table)
        replay(log)  # raises if the log diverged anywhere
        entries = [decode_entry(data) for data in log]
        logged = collections.Counter(
            (entry.player, entry.seq) for entry in entries if isinstance(entry.command, v1.Act)
        )
        for bot in bots:
            for seq in bot.acked:
                assert logged[bot.player, seq] == 1, f"acked action {seq} of {table} logged" + (
                    f" {logged[bot.player, seq]} times"
                )
                checked += 1
    return checked


def assert_games_sound(
    redis_url: str, summary: SwarmSummary, results: list[list[BotResult]], tables: int
) -> None:
    """Every game finished, consistently and fairly, and no acknowledged action was lost."""
    assert summary.games_finished == tables
    assert summary.inconsistent == []
    assert summary.unfair == 0
    assert check_acknowledged_actions_are_logged(redis_url, results) == summary.actions


async def test_a_killed_node_loses_nothing(durable_redis: RedisServer) -> None:
    nodes = Nodes(durable_redis.url, 3)
    results: list[list[BotResult]] = []
    try:
        swarm = asyncio.create_task(
            run_swarm(nodes.urls, tables=50, per_table=3, think=0.1, results=results)
        )
        await wait_for_tables(durable_redis.url, 50)
        await asyncio.sleep(1.0)
        holders = lease_holders(durable_redis.url)
        victims = {table for table, node in holders.items() if node == "node0"}
        assert victims, "the node to kill hosts some tables"
        assert not swarm.done()
        nodes.processes[0].send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        resumed_after = None
        while time.monotonic() - killed_at < 20:
            now_held = lease_holders(durable_redis.url)
            if all(now_held.get(t, "node0") != "node0" for t in victims):
                resumed_after = time.monotonic() - killed_at
                break
            await asyncio.sleep(0.05)
        assert resumed_after is not None, "the killed node's tables were adopted"
        summary = await asyncio.wait_for(swarm, 120)
    finally:
        nodes.stop()
    print(f"tables of the killed node resumed after {resumed_after:.2f} s")
    assert_games_sound(durable_redis.url, summary, results, tables=50)
    assert any(played_on_after_adoption(durable_redis.url, t) for t in victims), (
        "games were in progress on the killed node and went on elsewhere"
    )


async def test_a_redis_restart_mid_game_is_survived(durable_redis: RedisServer) -> None:
    nodes = Nodes(durable_redis.url, 2)
    results: list[list[BotResult]] = []
    try:
        swarm = asyncio.create_task(
            run_swarm(nodes.urls, tables=10, per_table=3, think=0.1, results=results)
        )
        await wait_for_tables(durable_redis.url, 10)
        await asyncio.sleep(0.5)
        assert not swarm.done(), "the games are still being played when Redis goes down"
        await asyncio.to_thread(durable_redis.restart)
        summary = await asyncio.wait_for(swarm, 120)
    finally:
        nodes.stop()
    assert_games_sound(durable_redis.url, summary, results, tables=10)
