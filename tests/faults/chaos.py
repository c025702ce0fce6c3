"""The chaos soak: the whole deployment played for a set time while its parts fail at random.

Theory of operation
-------------------
The same processes as the compose deployment, without Docker: a Redis with its append-only
file, a PostgreSQL for the records, three node processes on them, and a load balancer in front
(:mod:`blackdrez.server.testing.balancer`, where compose has nginx). Players connect through the
balancer
only, in :data:`LANES` lanes: each lane opens a BlackDrez table of two or three players, plays
its game to the end with the fault suite's players (:mod:`tests.faults.players`: every
acknowledged action and the last view recorded), and opens the next, until the time is up.

Meanwhile one fault at a time strikes, chosen at random (a seeded ``random.Random``, so a run can
be repeated): a node killed (SIGKILL) and started again, paused (SIGSTOP) for up to four seconds
(past its one-second lease), or restarted gracefully (SIGTERM); Redis paused, or killed and
started again from its file; PostgreSQL stopped as by a crash (immediate shutdown) and started
again; the balancer killed and started again. Between two faults, a quiet gap of a few seconds.

At the end every fault is healed, the last games finish, and the fault suite's history checker
(:func:`tests.faults.history.check_history`) reads every table's log: no acknowledged action
lost or doubled, no stale write, every game finished and every player's last view the log's end,
every table closed and its keys given a lifetime, no unhandled error in any node's output. Then
the records: every finished game is in PostgreSQL exactly once.

``python -m tests.faults.chaos --minutes 30`` runs it by hand and prints its figures as JSON;
``tests/faults/test_chaos.py`` runs three minutes of it in the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import random
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from blackdrez.clients.bots import BotResult
from blackdrez.server.records.store import RecordsStore
from blackdrez.server.testing.balancer import Balancer
from blackdrez.server.testing.nodes import CpuSampler, NodeProcess, Nodes
from blackdrez.server.testing.postgres_server import PostgresServer
from blackdrez.server.testing.redis_server import RedisServer
from tests.faults.history import check_history, tables_in_store, wait_closed
from tests.faults.players import (
    STRATEGIES,
    close_all,
    fault_options,
    open_table,
    play,
)

LANES = 6
"""Tables played at once."""
NODES = 3
GAP = (2.0, 6.0)
"""Seconds of quiet between two faults (uniform)."""
GAME_DEADLINE = 240.0
"""Seconds one game may take, faults included, before its players give up (and it is reported)."""
NODE_OPTIONS = ["--handshake-burst", "0", "--max-connections-per-ip", "0"]
"""Every player comes through the balancer, from one address."""


@dataclass
class Soak:
    """The running deployment and what the soak saw."""

    redis: RedisServer
    postgres: PostgresServer
    database: str
    nodes: Nodes
    balancer: Balancer
    rng: random.Random
    cpu: CpuSampler
    faults: collections.Counter[str] = field(default_factory=collections.Counter)
    results: list[BotResult] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    open_failures: int = 0
    reconnects: int = 0

    # ------------------------------------------------------------------ faults
    async def strike(self) -> None:
        """One fault, chosen at random, struck and healed."""
        kind, act = self.rng.choice(list(self._faults().items()))
        self.faults[kind] += 1
        await act()

    def _faults(self) -> dict[str, Callable[[], Any]]:
        rng = self.rng
        node = rng.choice(list(self.nodes))

        async def node_killed() -> None:
            node.kill()
            await asyncio.sleep(rng.uniform(0.2, 2.0))
            await self.start(node)

        async def node_paused() -> None:
            node.pause()
            await asyncio.sleep(rng.uniform(0.3, 4.0))
            node.resume()

        async def node_restarted() -> None:
            await asyncio.to_thread(node.stop)
            await self.start(node)

        async def redis_paused() -> None:
            self.redis.pause()
            await asyncio.sleep(rng.uniform(0.3, 3.0))
            self.redis.resume()

        async def redis_killed() -> None:
            self.redis.kill()
            await asyncio.sleep(rng.uniform(0.0, 1.0))
            await asyncio.to_thread(self.redis.start)

        async def database_crashed() -> None:
            await asyncio.to_thread(self.postgres.crash)
            await asyncio.sleep(rng.uniform(0.5, 4.0))
            await asyncio.to_thread(self.postgres.start)

        async def balancer_killed() -> None:
            await asyncio.to_thread(self.balancer.restart, rng.uniform(0.0, 2.0))

        return {
            "node killed": node_killed,
            "node paused": node_paused,
            "node restarted": node_restarted,
            "redis paused": redis_paused,
            "redis killed": redis_killed,
            "database crashed": database_crashed,
            "balancer killed": balancer_killed,
        }

    async def start(self, node: NodeProcess) -> None:
        await asyncio.to_thread(node.start)
        self.cpu.watch(node.node_id, node.pid)

    async def inject(self, until: float) -> None:
        while time.monotonic() < until:
            await asyncio.sleep(self.rng.uniform(*GAP))
            if time.monotonic() < until:
                await self.strike()

    # ------------------------------------------------------------------ players
    async def lane(self, index: int, until: float) -> None:
        """Play table after table through the balancer until ``until``."""
        while time.monotonic() < until:
            seats = 2 + (index % 2)
            options = fault_options(seats=seats, max_rounds=6, turn_seconds=30.0)
            try:
                table = await open_table([self.balancer.url], options)
            except Exception:  # the opening hit a fault: its clients are closed; next one
                self.open_failures += 1
                await asyncio.sleep(1.0)
                continue
            self.tables.append(table.id)
            try:
                results = await asyncio.gather(
                    *(
                        play(
                            client,
                            table.id,
                            strategy=STRATEGIES[i % len(STRATEGIES)],
                            think=0.05,
                            deadline=GAME_DEADLINE,
                        )
                        for i, client in enumerate(table.clients)
                    )
                )
                self.results += results
                self.reconnects += sum(client.reconnects for client in table.clients)
            finally:
                await close_all(table.clients)

    async def heal(self) -> None:
        """Every part running again (a fault cut short by the end of the soak)."""
        if self.redis.running:
            self.redis.resume()
        else:
            await asyncio.to_thread(self.redis.start)
        await asyncio.to_thread(self.postgres.start)
        for node in self.nodes:
            if node.running:
                node.resume()
            else:
                await self.start(node)
        if not self.balancer.running:
            await asyncio.to_thread(self.balancer.start)

    # ------------------------------------------------------------------ checks
    async def stored_games(self) -> set[str]:
        store = await RecordsStore.open(self.database)
        try:
            return {row["id"] for row in await store.db.fetch("SELECT id FROM games")}
        finally:
            await store.close()


TABLE_ID = re.compile(r"\bt[0-9a-f]{10}\b")
"""A table id, as problems name it (what the nodes logged of it is printed with them)."""


async def run(minutes: float, seed: int, figures: dict[str, Any]) -> list[str]:
    """Run the soak (see the module docstring); fill ``figures``, return every problem."""
    rng = random.Random(seed)
    started = time.monotonic()
    with (
        # a crash must keep what each acknowledged (everysec: Redis's last 2 s may be lost)
        RedisServer(appendonly=True, fsync="always") as redis_server,
        PostgresServer(durable=True) as postgres,
        CpuSampler() as cpu,
    ):
        database = postgres.create_schema()
        nodes = Nodes(redis_server.url, NODES, extra=NODE_OPTIONS, db_url=database)
        with nodes, Balancer(nodes.ports) as balancer:
            for node in nodes:
                cpu.watch(node.node_id, node.pid)
            soak = Soak(redis_server, postgres, database, nodes, balancer, rng, cpu)
            until = started + minutes * 60
            lanes = [asyncio.create_task(soak.lane(i, until)) for i in range(LANES)]
            try:
                await soak.inject(until)
                await soak.heal()
                await asyncio.wait_for(asyncio.gather(*lanes), GAME_DEADLINE + 60)
            finally:
                for task in lanes:
                    task.cancel()
            # (and the tables of openings a fault broke off: they close by themselves, their
            # players gone, within two graces; their keys are checked with the others)
            broken_off = await tables_in_store(redis_server.url) - set(soak.tables)
            await wait_closed(redis_server.url, [*soak.tables, *broken_off], timeout=120)
            history = await check_history(redis_server.url, soak.results, nodes=nodes)
            problems = list(history.problems)
            for table in sorted({t for p in problems for t in TABLE_ID.findall(p)})[:3]:
                told = [f"{n.node_id}: {ln}" for n in nodes for ln in n.output() if table in ln]
                print(f"--- what the nodes said of {table} ---\n" + "".join(told[-30:]))
            finished = {f"{r.table}:1" for r in soak.results if r.final is not None and r.table}
            stored: set[str] = set()
            for _ in range(120):  # a record waits for the database the fault took away
                stored = await soak.stored_games()
                if finished <= stored:
                    break
                await asyncio.sleep(0.5)
            missing = sorted(finished - stored)
            if missing:
                problems.append(f"{len(missing)} finished game(s) not stored: {missing[:5]}")
            figures.update(
                {
                    "minutes": round((time.monotonic() - started) / 60, 1),
                    "seed": seed,
                    "faults": dict(soak.faults),
                    "faults injected": sum(soak.faults.values()),
                    "tables opened": len(soak.tables),
                    "table openings refused by a fault": soak.open_failures,
                    "tables of openings broken off": len(broken_off),
                    "client reconnects": soak.reconnects,
                    "games stored": len(finished & stored),
                    "games not stored": len(missing),
                    **history.figures,
                }
            )
            for name in cpu.names():
                stats = cpu.stats(name)
                figures[f"{name} CPU % mean/max"] = f"{stats.mean:.0f}/{stats.peak:.0f}"
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    with contextlib.suppress(KeyboardInterrupt):
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        problems = asyncio.run(run(args.minutes, args.seed, figures))
        print(json.dumps(figures, indent=2, default=str))
        for problem in problems:
            print("PROBLEM", problem)
        raise SystemExit(1 if problems else 0)


if __name__ == "__main__":
    main()
