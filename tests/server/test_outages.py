"""Real node processes through a same-id restart, a pause, and a Redis outage.

* A node restarted under its own id takes its earlier process's tables over at once, and its
  clients never hear ``not_found`` for them (they wait ``moving`` out).
* Bots finish every game after two nodes are paused past their leases in turn.
* While Redis is down the node writes a bounded number of log lines and burns little CPU (no
  retry storm, no rebuild loop), and every table resumes soon after Redis is back.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time

from clients.bots import BotResult, run_swarm
from clients.client import Client
from tests.redis_server import RedisServer
from tests.server.helpers import act_once, seat_and_start, wait_for
from tests.server.test_failover import (
    Nodes,
    _collect,
    assert_games_sound,
    lease_holders,
    node_command,
    wait_for_tables,
)

OUTAGE = 6.0
"""Seconds Redis stays down in the outage test: past the lease TTL, so every lease lapses."""


def start_node(port: int, redis_url: str, node_id: str, *extra: str) -> subprocess.Popen[bytes]:
    """One more node process (the compose file's command), with its output read and dropped."""
    process = subprocess.Popen(
        [*node_command(port=port, redis_url=redis_url, node_id=node_id), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    line = process.stdout.readline().decode()
    assert "blackdrez" in line, line
    threading.Thread(target=_collect, args=(process, []), daemon=True).start()
    return process


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def test_a_node_restarted_under_its_id_takes_its_tables_over_at_once(tmp_path) -> None:
    ttl = 60.0  # the old process's leases would keep its tables "moving" for a minute
    with RedisServer(appendonly=True, data_dir=tmp_path) as store:
        nodes = Nodes(store.url, 1, extra=("--lease-ttl", str(ttl)))
        url = nodes.urls[0]
        replacement = None
        players: list[Client] = []
        try:
            players = [
                await Client.connect(url, name=name, reconnect=True) for name in ("Host", "Guest")
            ]
            table = await seat_and_start(players[0], players[1:], turn_seconds=600)
            await act_once(players, table)
            before = await_holder = lease_holders(store.url)[table]
            assert before == "node0"
            nodes.processes[0].kill()
            nodes.processes[0].wait()
            restarted = time.monotonic()
            replacement = await asyncio.to_thread(
                start_node, nodes.ports[0], store.url, "node0", "--lease-ttl", str(ttl)
            )
            # The clients reconnect by themselves and resync; no request is told not_found.
            await act_once(players, table, timeout=ttl / 2)
            took = time.monotonic() - restarted
            assert await_holder == lease_holders(store.url)[table] == "node0"
            assert took < ttl / 2, "taken over at once, not when the old lease lapsed"
        finally:
            for player in players:
                await player.close()
            if replacement is not None:
                replacement.terminate()
                replacement.wait(10)
            nodes.stop()
    print(f"the restarted node served its table {took:.2f} s after it was started")


async def test_every_bot_game_finishes_after_both_nodes_are_paused_in_turn(tmp_path) -> None:
    """Node 0 is paused past its leases (node 1 adopts its tables), then node 1 is paused past
    its own and node 0 resumes with its stale copies, then node 1 resumes: the section 1
    scenario with bots playing every table."""
    tables = 6
    with RedisServer(appendonly=True, data_dir=tmp_path) as store:
        nodes = Nodes(store.url, 2)
        first, second = nodes.processes
        results: list[list[BotResult]] = []
        try:
            swarm = asyncio.create_task(
                run_swarm(nodes.urls, tables=tables, per_table=3, think=0.1, results=results)
            )
            await wait_for_tables(store.url, tables)
            await asyncio.sleep(1.0)
            assert not swarm.done()
            first.send_signal(signal.SIGSTOP)
            try:
                await wait_for(
                    lambda: set(lease_holders(store.url).values()) == {"node1"},
                    "node 1 adopts node 0's tables",
                )
                await asyncio.sleep(1.0)  # node 1's bots play on
                second.send_signal(signal.SIGSTOP)
                try:
                    await wait_for(lambda: not lease_holders(store.url), "node 1's leases lapse")
                finally:
                    first.send_signal(signal.SIGCONT)
                await asyncio.sleep(2.0)  # node 0 alone, with its stale copies
            finally:
                second.send_signal(signal.SIGCONT)
                first.send_signal(signal.SIGCONT)
            summary = await asyncio.wait_for(swarm, 180)
        finally:
            nodes.stop()
        assert_games_sound(store.url, summary, results, tables=tables)
        output = "".join(line for lines in nodes.output for line in lines)
        assert "Task exception was never retrieved" not in output
        assert "Traceback" not in output, output


async def test_a_redis_outage_is_waited_out_quietly_and_every_table_resumes(tmp_path) -> None:
    with RedisServer(appendonly=True, data_dir=tmp_path) as store:
        nodes = Nodes(store.url, 1)
        url = nodes.urls[0]
        node = nodes.processes[0]
        players: list[Client] = []
        try:
            tables = []
            for index in range(3):
                pair = [await Client.connect(url, name=f"P{index}{n}") for n in "AB"]
                players += pair
                # Nobody acts: every turn times out after a second, so a timer is always due.
                tables.append(await seat_and_start(pair[0], pair[1:], turn_seconds=1.0))
            watchers = dict(zip(tables, players[::2], strict=True))
            await asyncio.sleep(2.5)  # a few timeouts were played and logged
            lines_before = len(nodes.output[0])
            cpu_before = cpu_seconds(node.pid)
            store.stop()
            await asyncio.sleep(OUTAGE)
            cpu = cpu_seconds(node.pid) - cpu_before
            during = nodes.output[0][lines_before:]
            seqs = {table: watchers[table].tables[table].seq for table in tables}
            store.start()
            back = time.monotonic()
            resumed: dict[str, float] = {}

            def every_table_moved_on() -> bool:
                for table in tables:
                    if table not in resumed and watchers[table].tables[table].seq > seqs[table]:
                        resumed[table] = time.monotonic() - back
                return len(resumed) == len(tables)

            await wait_for(every_table_moved_on, "every table resumes", timeout=30)
        finally:
            for player in players:
                await player.close()
            nodes.stop()
    print(
        f"Redis down {OUTAGE:.0f} s: {len(during)} log lines, node CPU {cpu / OUTAGE:.1%}; "
        f"tables resumed after {', '.join(f'{t:.2f} s' for t in sorted(resumed.values()))}"
    )
    assert len(during) <= 10, "".join(during)
    assert cpu / OUTAGE < 0.25, f"the node burnt {cpu:.2f} s of CPU in {OUTAGE} s"
    assert max(resumed.values()) < 10, resumed
