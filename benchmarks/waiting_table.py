"""What a table waiting for players costs its node (issue 9 section 2).

Usage::

    python benchmarks/waiting_table.py [--seconds 5] [--tables 1] [--grace 60]

Starts a server node (``python -m blackdrez.tools.cli serve``, in memory, on a free loopback port),
and at
each of ``--tables`` tables seats two players with no pause between rounds, starts the game, has
one player say ``ready: false`` and plays the round out: fewer than two seats can play the next
round, so the table waits for ``--grace`` seconds. For ``--seconds`` of that wait it reports the
node's CPU use (from ``/proc/<pid>/stat``), its RSS growth, and the updates a spectator of each
table received. A table that waits costs nothing: no CPU, no memory, no update.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from blackdrez.clients.client import Client  # noqa: E402
from blackdrez.protocol import v1  # noqa: E402
from blackdrez.server.testing.redis_server import free_port  # noqa: E402


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def waiting_table(url: str, grace: float) -> list[Client]:
    """One table left waiting for players; returns its spectator and players."""
    a, b, watcher = [await Client.connect(url, name=n) for n in ("A", "B", "Watcher")]
    options = v1.TableOptions(seats=2, round_pause_seconds=0.0, grace_seconds=grace)
    table = (await a.request(v1.CreateTable(options=options))).table.id
    await b.request(v1.JoinTable(table=table))
    for player in (a, b):
        await player.request(v1.SetReady(table=table))
    await a.request(v1.StartGame(table=table))
    await b.request(v1.SetReady(table=table, ready=False))
    await watcher.request(v1.Spectate(table=table))
    state = a.tables[table]
    await a.wait_until(lambda: state.view is not None)
    while state.view["phase"] == "playing" and state.view["round"] == 1:
        mover = next((p for p in (a, b) if p.tables[table].legal), None)
        if mover is None:
            await a.wait_until(lambda: any(p.tables[table].legal for p in (a, b)), timeout=2)
            continue
        seq = state.seq
        await mover.act(table, {"type": "withdraw"})
        await a.wait_until(lambda s=seq: state.seq > s)
    return [watcher, a, b]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--tables", type=int, default=1)
    parser.add_argument("--grace", type=float, default=60.0)
    args = parser.parse_args()
    port = free_port()
    node = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "blackdrez.tools.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--in-memory",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"ws://127.0.0.1:{port}/"
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        tables = [await waiting_table(url, args.grace) for _ in range(args.tables)]
        watchers = [clients[0] for clients in tables]
        seqs = [w.tables[next(iter(w.tables))].seq for w in watchers]
        cpu, rss, started = cpu_seconds(node.pid), rss_kib(node.pid), time.monotonic()
        await asyncio.sleep(args.seconds)
        elapsed = time.monotonic() - started
        cpu = cpu_seconds(node.pid) - cpu
        grown = rss_kib(node.pid) - rss
        updates = sum(
            w.tables[next(iter(w.tables))].seq - s for w, s in zip(watchers, seqs, strict=True)
        )
        print(f"tables waiting for players: {args.tables}, measured for {elapsed:.1f} s")
        print(f"node CPU: {100 * cpu / elapsed:.1f} %")
        print(f"node RSS growth: {grown / 1024:.1f} MiB ({grown / 1024 / elapsed:.2f} MiB/s)")
        print(f"events seen by the spectators meanwhile: {updates}")
        for clients in tables:
            for client in clients:
                await client.close()
    finally:
        node.terminate()
        try:
            node.wait(10)
        except subprocess.TimeoutExpired:
            node.kill()
            node.wait()


if __name__ == "__main__":
    asyncio.run(main())
