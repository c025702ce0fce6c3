"""Several real server processes on one Redis: a node killed with SIGKILL, Redis restarted.

The nodes run the compose file's command (``blackdrez serve --redis-url ...``; see
:mod:`blackdrez.server.testing.nodes`).
Bots play tables spread over the nodes; every table must finish with consistent results, and
every action a bot saw acknowledged must be in its table's log.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Iterator

import pytest

from blackdrez.clients.bots import BotResult, SwarmSummary, run_swarm
from blackdrez.clients.client import Client, ServerError
from blackdrez.protocol import v1
from blackdrez.server.table.commands import Resume, decode_entry, rebuild
from blackdrez.server.table.records import decode_table_record, record_log
from blackdrez.server.testing.nodes import Nodes, lease_holders
from blackdrez.server.testing.redis_cluster import direct_client
from blackdrez.server.testing.redis_server import RedisServer
from tests.server.helpers import play_out, seat_and_start


@pytest.fixture
def durable_redis(tmp_path) -> Iterator[RedisServer]:
    """A Redis with append-only persistence, as in the compose file."""
    with RedisServer(appendonly=True, data_dir=str(tmp_path)) as server:
        yield server


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


def live_nodes(redis_url: str) -> set[str]:
    """The nodes whose heartbeat has not lapsed (by Redis's clock)."""
    with direct_client(redis_url) as direct:
        seconds, micros = direct.time()
        now = seconds * 1000 + micros // 1000
        return {m.decode() for m in direct.zrangebyscore("bd:nodes", f"({now}", "+inf")}


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
        rebuild(log)  # raises if the log diverged anywhere
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
        nodes[0].kill()
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
        failures = tracebacks(nodes)
    assert not failures, "a node failed on a request:\n" + "\n".join(failures)
    assert_games_sound(durable_redis.url, summary, results, tables=10)


def tracebacks(nodes: Nodes) -> list[str]:
    """Every traceback the nodes printed, with the line before it (what was being done)."""
    found = []
    for node in nodes:
        lines = node.output()
        for at, line in enumerate(lines):
            if line.startswith("Traceback"):
                end = next((i for i in range(at + 1, len(lines)) if not lines[i][:1].isspace()), at)
                found.append("".join(lines[max(0, at - 1) : end + 1]))
    return found


async def test_a_request_for_a_table_of_a_node_gone_silent_is_not_forwarded_to_it(
    durable_redis: RedisServer,
) -> None:
    """A host that stopped heartbeating but whose lease has not lapsed yet (the two lapse in
    either order) is not sent requests: they would wait REMOTE_TIMEOUT for a dead node. The
    other node answers ``moving`` at once, which the client retries until the table is
    adopted. The lease is made to outlive the heartbeat here by removing its TTL."""
    nodes = Nodes(durable_redis.url, 2)
    host = viewer = None
    try:
        host = await Client.connect(nodes.urls[0], name="Host")
        joined = await host.request(v1.CreateTable(options=v1.TableOptions(seats=2)))
        table = joined.table.id
        viewer = await Client.connect(nodes.urls[1], name="Viewer")
        nodes[0].pause()
        with direct_client(durable_redis.url) as direct:
            direct.persist(f"bd:t:{{{table}}}:lease")
        deadline = time.monotonic() + 30
        while "node0" in live_nodes(durable_redis.url):
            assert time.monotonic() < deadline, "node0's heartbeat lapsed"
            await asyncio.sleep(0.05)
        codes = []
        while time.monotonic() < deadline and codes[-1:] != ["moving"]:
            with pytest.raises(ServerError) as refused:
                await viewer.request(v1.Spectate(table=table), timeout=30, moving_patience=0)
            codes.append(refused.value.code)
        assert codes[-1] == "moving", f"answers while the host was silent: {codes}"
    finally:
        for client in (host, viewer):
            if client is not None:
                await client.close()
        nodes[0].resume()
        nodes.stop()


async def test_a_client_whose_node_is_killed_carries_on_at_another_of_its_urls(
    durable_redis: RedisServer,
) -> None:
    """The client of a killed node reconnects to the next url it was given, resyncs, and plays
    its game to the end once the table is adopted (the reconnection's timing is measured by
    benchmarks/scaleout.py, not asserted)."""
    nodes = Nodes(durable_redis.url, 2)
    clients: list[Client] = []
    try:
        ann = await Client.connect(nodes.urls[0], name="Ann", reconnect=True, also=(nodes.urls[1],))
        bob = await Client.connect(nodes.urls[1], name="Bob", reconnect=True)
        clients += [ann, bob]
        table = await seat_and_start(ann, [bob])
        assert lease_holders(durable_redis.url)[table] == "node0"
        nodes[0].kill()
        killed = time.monotonic()
        await ann.wait_until(lambda: ann.reconnects == 1, timeout=30)
        assert ann.url == nodes.urls[1]
        reconnected = ann.reconnected_at - killed
        deadline = time.monotonic() + 30
        while lease_holders(durable_redis.url).get(table) != "node1":
            assert time.monotonic() < deadline, "node1 adopted the table"
            await asyncio.sleep(0.05)
        resumed = [c.tables[table] for c in clients]
        await ann.wait_until(lambda: all(s.seq == resumed[1].seq for s in resumed), timeout=30)
        await asyncio.gather(*(play_out(c, table) for c in clients))
    finally:
        for client in clients:
            await client.close()
        nodes.stop()
    print(f"reconnected {reconnected:.3f} s after the kill")
    assert ann.tables[table].view == bob.tables[table].view
    seqs = [e.seq for e in ann.tables[table].events]
    assert seqs == list(range(seqs[0], seqs[-1] + 1)), "no gap, no duplicate"
