"""The docker-compose deployment, run for real: bot tables through the load balancer while a node
is SIGKILLed, a node is stopped gracefully and Redis restarts.

Everything runs in containers built from the repository's own Dockerfile and compose file, on a
machine that cannot pull images (``deploy/offline.py`` makes stand-ins: see ``conftest.py``). The
test talks to 127.0.0.1 only: the load balancer, and Redis through ``compose.test.yml``, both
published on loopback. After each fault every game must end, the bots' views must agree, every
fairness proof must check, and every action a bot saw acknowledged must be in its table's log.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator

import pytest
import redis
import yaml

from blackdrez.clients.bots import BotResult, SwarmSummary, run_swarm
from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.server.stores.base import parse_holder
from blackdrez.server.table.commands import Resume, decode_entry
from tests.deploy.harness import COMPOSE_FILE, Deployment, compose_profiles, output, run

# The first test includes building every image.
pytestmark = [pytest.mark.deploy, pytest.mark.timeout(1200)]
TABLES = 6
"""Tables per fault: spread over the three nodes by the load balancer."""
SWARM = dict(per_table=3, think=0.3, round_pause=1.0)
"""Games of about 15 s: long enough to be in progress when the fault hits."""
GAME_TIMEOUT = 240.0
MOVE_TIMEOUT = 30.0
DEFAULT = "default"
"""The name these tests give the services that belong to no profile."""
_COMPOSE = yaml.safe_load(COMPOSE_FILE.read_text())
PROFILES = [DEFAULT, *compose_profiles(_COMPOSE)]
"""Every profile the compose file defines (branches that add one are tested once merged)."""


def _target(port: str | int | dict) -> str:
    """The container port of a ``ports:`` entry, short (``HOST:IP:80``) or long form."""
    return str(port["target"]) if isinstance(port, dict) else str(port).rsplit(":", 1)[-1]


LOAD_BALANCERS = sorted(
    name
    for name, definition in _COMPOSE["services"].items()
    if any(_target(port) == "80" for port in definition.get("ports", []))
)
"""Every service that publishes container port 80: a load balancer in front of nodes."""


@pytest.fixture(scope="module")
def store(deployment: Deployment) -> Iterator[redis.Redis]:
    """A direct connection to the deployment's Redis (published on 127.0.0.1 by the test)."""
    assert deployment.published("redis", 6379) == ("127.0.0.1", deployment.redis_port)
    with redis.Redis(host="127.0.0.1", port=deployment.redis_port, socket_timeout=10) as client:
        yield client


@pytest.fixture(scope="module")
def lb_url(deployment: Deployment) -> str:
    return f"ws://127.0.0.1:{deployment.lb_port}/"


def fetch(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read()


# ---------------------------------------------------------------------------- reading Redis
def lease_holders(store: redis.Redis) -> dict[str, str]:
    """Which node hosts each table now (tables with a live lease)."""
    holders = {}
    for key in store.scan_iter("bd:t:*:lease"):
        holder = store.get(key)  # may expire between the scan and the read
        if holder is not None:
            node, _, _ = parse_holder(holder.decode())
            holders[key.decode().split("{")[1].split("}")[0]] = node
    return holders


def log_commands(store: redis.Redis, table: str) -> list[object]:
    return [decode_entry(f[b"e"]).command for _, f in store.xrange(f"bd:t:{{{table}}}:log")]


def log_summary(store: redis.Redis, table: str) -> str:
    """A table's log, one line per entry (what a failure needs to be understood)."""
    lines = [f"log of {table}:"]
    for _, fields in store.xrange(f"bd:t:{{{table}}}:log"):
        entry = decode_entry(fields[b"e"])
        lines.append(
            f"  seq {entry.seq} at {entry.now:.3f} {type(entry.command).__name__} "
            f"{entry.player} {entry.command}"[:200]
        )
    return "\n".join(lines)


def playing(store: redis.Redis, table: str) -> bool:
    """Whether a seat has acted at ``table``: its game is in progress (its set-up is done)."""
    return any(isinstance(command, v1.Act) for command in log_commands(store, table))


def played_on_after_adoption(store: redis.Redis, table: str) -> bool:
    """Whether the table's log shows it adopted by another node and then played further."""
    commands = log_commands(store, table)
    resumed = [i for i, command in enumerate(commands) if isinstance(command, Resume)]
    return bool(resumed) and any(isinstance(c, v1.Act) for c in commands[resumed[0] :])


def unlogged_acknowledgements(store: redis.Redis, tables: list[list[BotResult]]) -> list[str]:
    """Every action a bot saw acknowledged that is not an ``act`` of its player in the log."""
    lost = []
    for bots in tables:
        table = bots[0].table
        entries = [decode_entry(f[b"e"]) for _, f in store.xrange(f"bd:t:{{{table}}}:log")]
        logged = {(e.player, e.seq) for e in entries if isinstance(e.command, v1.Act)}
        lost += [
            f"{table}: {bot.player} event {seq}"
            for bot in bots
            for seq in bot.acked
            if (bot.player, seq) not in logged
        ]
    return lost


def assert_sound(store: redis.Redis, summary: SwarmSummary, results: list[list[BotResult]]) -> None:
    """Every game ended, consistently and fairly, and no acknowledged action was lost."""
    assert summary.games_finished == TABLES
    assert summary.inconsistent == []
    unfair = {bot.table: bot.problem for bots in results for bot in bots if not bot.fair}
    assert not unfair, f"every fairness proof checks: {unfair}\n" + "\n".join(
        log_summary(store, table) for table in unfair
    )
    assert sum(len(bot.acked) for bots in results for bot in bots) == summary.actions > 0
    assert unlogged_acknowledgements(store, results) == []


async def games_in_progress(store: redis.Redis, before: set[str], swarm: asyncio.Task) -> set[str]:
    """Wait until the swarm's new tables are all being played; return them."""
    deadline = time.monotonic() + GAME_TIMEOUT
    while True:
        assert not swarm.done(), swarm.exception() or "the swarm ended before the fault"
        new = set(lease_holders(store)) - before
        if len(new) >= TABLES and all(playing(store, table) for table in new):
            return new
        assert time.monotonic() < deadline, f"{len(new)} of {TABLES} tables in play in time"
        await asyncio.sleep(0.2)


async def moved_away(store: redis.Redis, tables: set[str], node: str, since: float) -> float:
    """Wait until another node holds every one of ``tables``; seconds since ``since``."""
    deadline = time.monotonic() + MOVE_TIMEOUT
    while True:
        holders = lease_holders(store)
        if all(holders.get(table, node) != node for table in tables):
            return time.monotonic() - since
        assert time.monotonic() < deadline, f"{node}'s tables did not move: {holders}"
        await asyncio.sleep(0.02)


def busiest_node(store: redis.Redis, tables: set[str]) -> tuple[str, set[str]]:
    """The node hosting most of ``tables``, and those tables."""
    holders = lease_holders(store)
    hosted: dict[str, set[str]] = {}
    for table in tables:
        if table in holders:
            hosted.setdefault(holders[table], set()).add(table)
    node = max(hosted, key=lambda n: len(hosted[n]))
    return node, hosted[node]


# ---------------------------------------------------------------------------- tests
@pytest.mark.parametrize("profile", PROFILES)
def test_every_service_of_the_profile_runs(deployment: Deployment, profile: str) -> None:
    """Each profile's services (``default``: those in no profile) run, healthy where checked."""
    services = [
        name
        for name, definition in deployment.compose["services"].items()
        if profile in (definition.get("profiles") or [DEFAULT])
        and name not in deployment.unavailable
    ]
    assert services, f"no service of {profile} can run here: {deployment.unavailable}"
    if deployment.unavailable:
        print(f"left out, their images cannot be had here: {deployment.unavailable}")
    states = deployment.wait_ready()
    for service in services:
        definition = deployment.compose["services"][service]
        checked = definition.get("healthcheck", {"disable": not definition.get("build")})
        expected = ("running", "exited 0") if checked.get("disable") else ("healthy", "exited 0")
        assert states[service] in expected, (service, states[service])


@pytest.mark.parametrize("balancer", LOAD_BALANCERS)
async def test_bot_tables_play_to_the_end_through_the_load_balancer(
    deployment: Deployment, balancer: str
) -> None:
    """Every load balancer of every profile (a service publishing port 80) serves whole games."""
    host, port = deployment.published(balancer, 80)
    assert host == "127.0.0.1"
    results: list[list[BotResult]] = []
    summary = await asyncio.wait_for(
        run_swarm(f"ws://{host}:{port}/", 3, results=results, **SWARM), GAME_TIMEOUT
    )
    assert summary.games_finished == 3
    assert summary.inconsistent == []
    unfair = {bot.table: bot.problem for bots in results for bot in bots if not bot.fair}
    assert not unfair, f"every fairness proof checks: {unfair}"
    assert summary.actions > 0


async def test_the_bots_profile_runs_a_bot_arena_anyone_can_watch(
    deployment: Deployment, lb_url: str
) -> None:
    """The ``arena`` service of the bots profile (issue 37): its arena is listed through the
    load balancer, anyone may watch it, and its standings move as its bots play."""
    watcher = await Client.connect(lb_url, name="Arena watcher")
    try:
        arena = None
        deadline = time.monotonic() + GAME_TIMEOUT
        while arena is None and time.monotonic() < deadline:
            listed = await watcher.request(v1.ListArenas())
            arena = next((a for a in listed.arenas if a.name == "Bot arena"), None)
            if arena is None:
                await asyncio.sleep(1.0)
        printed = output(deployment.container("arena"))
        assert arena is not None, f"the bot arena is not listed; its service said: {printed}"
        await watcher.watch_arena(arena.id)
        await watcher.wait_until(
            lambda: any(s.games for s in watcher.arenas[arena.id].standings), GAME_TIMEOUT
        )
        standings = watcher.arenas[arena.id].standings
        assert len(standings) == 8 and all(s.bot for s in standings), standings
    finally:
        await watcher.close()


def test_published_ports_bind_loopback_only(deployment: Deployment) -> None:
    published = []
    for service, container in deployment.containers().items():
        for port, bindings in (container["NetworkSettings"]["Ports"] or {}).items():
            for binding in bindings or []:
                published.append((service, port, binding["HostIp"]))
    assert ("lb", "80/tcp", "127.0.0.1") in published
    assert all(host == "127.0.0.1" for _, _, host in published), published


def test_the_load_balancer_serves_the_lobby_and_every_node_is_healthy(
    deployment: Deployment,
) -> None:
    status, page = fetch(f"http://127.0.0.1:{deployment.lb_port}/")
    assert status == 200 and b"<html" in page.lower()
    seen = set()
    for _ in range(12):  # least_conn spreads idle requests over the nodes
        status, body = fetch(f"http://127.0.0.1:{deployment.lb_port}/healthz")
        health = json.loads(body)
        assert (status, health["status"]) == (200, "ok")
        seen.add(health["node"])
    assert seen <= {"node1", "node2", "node3"} and seen


def test_the_bots_profile_plays_its_tables_to_the_end(deployment: Deployment) -> None:
    code = deployment.wait_exit("bots", timeout=GAME_TIMEOUT)
    printed = output(deployment.container("bots"))
    assert code == 0, printed
    assert "mismatches: 0" in printed and "every pot and ranking agrees" in printed


def test_a_node_refused_by_protected_mode_waits_unhealthy_then_serves(
    deployment: Deployment,
) -> None:
    """The stand-in Redis as Debian builds it (protected mode on): the node says so, once."""
    node_image = deployment.containers()["node1"]["Image"]
    redis_image = deployment.compose["services"]["redis"]["image"]
    network = deployment.containers()["redis"]["HostConfig"]["NetworkMode"]
    names = ("blackdreztest-guarded-redis", "blackdreztest-waiting-node")
    try:
        run(["docker", "run", "-d", "--name", names[0], "--network", network, redis_image,
             "redis-server", "--protected-mode", "yes"])  # fmt: skip
        # Serving first (from inside, where protected mode lets it answer): a node that meets it
        # still starting has its connection reset, which is not what this test is about.
        deadline = time.monotonic() + 30
        while (
            b"PONG"
            not in subprocess.run(
                ["docker", "exec", names[0], "redis-cli", "ping"], capture_output=True
            ).stdout
        ):
            assert time.monotonic() < deadline, output(names[0])
            time.sleep(0.2)
        run(["docker", "run", "-d", "--name", names[1], "--network", network, node_image,
             "blackdrez", "serve", "--host", "0.0.0.0", "--port", "8765",
             "--redis-url", f"redis://{names[0]}:6379/0", "--node-id", "waiting"])  # fmt: skip
        probe = (
            "import sys, urllib.request, urllib.error\n"
            "try: urllib.request.urlopen('http://127.0.0.1:8765/healthz', timeout=5)\n"
            "except urllib.error.HTTPError as e: sys.exit(e.code // 100)\n"
            "except OSError: sys.exit(9)\n"
        )

        def health() -> int:
            probed = subprocess.run(
                ["docker", "exec", names[1], "python", "-c", probe], capture_output=True
            )
            return probed.returncode

        deadline = time.monotonic() + 60
        while health() != 5:  # 503: listening, not ready
            assert time.monotonic() < deadline, output(names[1])
            time.sleep(0.5)
        time.sleep(3)  # several attempts
        logged = output(names[1])
        lines = [line for line in logged.splitlines() if "redis" in line.lower()]
        assert len(lines) == 1 and "protected mode" in lines[0], logged
        assert "Traceback" not in logged
        assert health() == 5
        run(["docker", "exec", names[0], "redis-cli", "config", "set", "protected-mode", "no"])
        deadline = time.monotonic() + 60
        while health() != 0:
            assert time.monotonic() < deadline, output(names[1])
            time.sleep(0.5)
    finally:
        subprocess.run(["docker", "rm", "-f", "-v", *names], capture_output=True)


async def test_games_survive_a_killed_node_a_graceful_stop_and_a_redis_restart(
    deployment: Deployment, store: redis.Redis, lb_url: str
) -> None:
    async def fault_mid_game(fault) -> tuple[SwarmSummary, list[list[BotResult]], object]:
        before = set(lease_holders(store))
        results: list[list[BotResult]] = []
        swarm = asyncio.create_task(run_swarm(lb_url, TABLES, results=results, **SWARM))
        tables = await games_in_progress(store, before, swarm)
        measured = await fault(tables)
        try:
            summary = await asyncio.wait_for(swarm, GAME_TIMEOUT)
        except TimeoutError:  # a game stalled: say where
            holders = lease_holders(store)
            logs = "\n".join(log_summary(store, t) for t in sorted(tables))
            raise AssertionError(f"a game stalled; hosts {holders}\n{logs}") from None
        assert_sound(store, summary, results)
        return summary, results, measured

    # 1. SIGKILL the node hosting most tables: the others adopt them from their logs.
    async def kill(tables: set[str]) -> tuple[str, set[str], float]:
        node, victims = busiest_node(store, tables)
        run(["docker", "kill", "--signal", "KILL", deployment.container(node)])
        return node, victims, await moved_away(store, victims, node, time.monotonic())

    _, _, (killed, victims, adopted_after) = await fault_mid_game(kill)
    assert any(played_on_after_adoption(store, t) for t in victims), "games went on elsewhere"
    run(["docker", "start", deployment.container(killed)])
    await asyncio.to_thread(deployment.wait_ready)

    # 2. Stop a node gracefully: it hands its tables over at once (timed from its SIGTERM).
    async def stop(tables: set[str]) -> tuple[str, float]:
        node, leaving = busiest_node(store, tables)
        container = deployment.container(node)
        since = time.time()
        stopping = asyncio.create_task(asyncio.to_thread(deployment.run, "stop", node))
        await moved_away(store, leaving, node, time.monotonic())
        moved_at = time.time()
        await stopping
        return node, moved_at - signalled_at(container, since, signal=15)

    _, _, (stopped, handed_over_after) = await fault_mid_game(stop)
    state = deployment.containers()[stopped]["State"]
    assert (state["Status"], state["ExitCode"]) == ("exited", 0), "a clean exit"
    assert handed_over_after < adopted_after, "a handover needs no lease to expire"
    deployment.run("start", stopped)
    await asyncio.to_thread(deployment.wait_ready)

    # 3. Restart Redis (gracefully: its append-only file is complete): games go on. Last, as
    # after a Redis restart each connection a node pooled fails once ("unavailable"), which the
    # bots' table set-up does not retry (their moves do).
    async def restart_redis(tables: set[str]) -> float:
        started = time.monotonic()
        await asyncio.to_thread(
            run, ["docker", "restart", "-t", "10", deployment.container("redis")]
        )
        return time.monotonic() - started

    _, _, redis_restart = await fault_mid_game(restart_redis)
    print(
        f"\nSIGKILLed {killed}: its {len(victims)} tables adopted after {adopted_after:.2f} s; "
        f"graceful stop of {stopped}: its tables moved {handed_over_after:.2f} s after its "
        f"SIGTERM; Redis restart took {redis_restart:.1f} s"
    )


def signalled_at(container: str, since: float, signal: int) -> float:
    """When (epoch seconds) the engine sent ``signal`` to ``container``, after ``since``."""
    events = run(
        ["docker", "events", "--since", f"{since:.3f}", "--until", f"{time.time():.3f}",
         "--filter", f"container={container}", "--filter", "event=kill",
         "--format", "{{json .}}"]
    )  # fmt: skip
    for line in events.splitlines():
        event = json.loads(line)
        if event["Actor"]["Attributes"].get("signal") == str(signal):
            return event["timeNano"] / 1e9
    raise AssertionError(f"no signal {signal} sent to {container}: {events}")
