"""The Swarm stack (``deploy/stack.yml``) deployed for real with ``docker stack deploy``.

On a single-node swarm (``docker swarm init`` on the engine the compose test uses, or one started
here), with the images ``deploy/offline.py`` provides where no registry answers and the project's
image built from the Dockerfile: the stack comes up, bot tables play through its load balancer,
and while they play the node service is scaled to four, then updated in a rolling update (every
node drained and replaced, one at a time), then the node task hosting the most tables is killed
(SIGKILL: Swarm starts a new one). After each, the fault suite's history checker: every game
finished, nothing acknowledged lost or done twice, every log replays. Last, ``docker stack rm``
removes it all. Redis is published to the test on a port of its own (``stack.test.yml``), so
that the checker reads the tables' logs.

The stack file is kept in step with docker-compose.yml here too: the same images, store commands,
environment and health checks (see the comment at the top of ``deploy/stack.yml``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from blackdrez.server.testing.nodes import lease_holders
from tests.deploy.conftest import LOG_DIR, engine_with_images
from tests.deploy.harness import (
    COMPOSE_FILE,
    ROOT,
    exclusive,
    run,
)
from tests.faults.history import finish_and_check
from tests.faults.players import (
    Table,
    fault_options,
    first_event_after,
    mark_fault,
    open_tables,
    play_tables,
)
from tests.redis_server import free_port

pytestmark = [pytest.mark.deploy, pytest.mark.timeout(1500)]

STACK_FILE = ROOT / "deploy" / "stack.yml"
TEST_FILE = Path(__file__).resolve().parent / "stack.test.yml"
STACK = "bdswarmtest"
IMAGE = "blackdrez-server:swarm-test"
READY_TIMEOUT = 180.0
CONVERGE_TIMEOUT = 300.0
TABLES = 4
RESUME_BOUND = 20.0
"""Seconds within which the tables of a killed node go on (its successor, under the same node
id, takes its leases at once; else another node adopts them after the lease's TTL)."""


def docker(*args: str, timeout: float = 120.0, env: dict[str, str] | None = None) -> str:
    """A docker command's output (an assertion error with its output if it fails)."""
    return run(["docker", *args], timeout=timeout, env=env)


class Stack:
    """The stack deployed under :data:`STACK`, and what the test reaches of it."""

    def __init__(self) -> None:
        self.lb_port = free_port()
        self.redis_port = free_port()
        self.env = {
            **os.environ,
            "BLACKDREZ_IMAGE": IMAGE,
            "BLACKDREZ_PORT": str(self.lb_port),
            "BLACKDREZ_TEST_REDIS_PORT": str(self.redis_port),
        }

    @property
    def url(self) -> str:
        """The players' WebSocket address: the balancer's published port."""
        return f"ws://127.0.0.1:{self.lb_port}/"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def deploy(self) -> None:
        # The images are local (built here, or by deploy/offline.py): no registry to ask.
        docker(
            "stack", "deploy", "--resolve-image", "never", "-c", str(STACK_FILE),
            "-c", str(TEST_FILE), STACK, env=self.env,
        )  # fmt: skip

    def tasks(self, service: str) -> list[dict[str, Any]]:
        """The running tasks of ``service`` (``docker service ps``), with their container."""
        lines = docker(
            "service", "ps", f"{STACK}_{service}", "--filter", "desired-state=running",
            "--format", "{{json .}}", "--no-trunc",
        ).splitlines()  # fmt: skip
        return [json.loads(line) for line in lines if line.strip()]

    def node_containers(self) -> dict[str, str]:
        """Each running node's id (``node-SLOT``) and its container."""
        ids = docker(
            "ps", "-q", "--filter", f"label=com.docker.swarm.service.name={STACK}_node"
        ).split()
        if not ids:
            return {}
        found = {}
        for container in json.loads(docker("inspect", *ids)):
            env = dict(item.split("=", 1) for item in container["Config"]["Env"])
            if container["State"]["Running"]:
                found[env["BLACKDREZ_NODE_ID"]] = container["Id"]
        return found

    def health(self) -> dict[str, Any] | None:
        """``/healthz`` through the balancer (whichever node answers), or None."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.lb_port}/healthz", timeout=3) as r:
                return dict(json.load(r))
        except (OSError, ValueError):
            return None

    def wait_nodes(self, count: int, timeout: float = READY_TIMEOUT) -> set[str]:
        """Wait until ``count`` node tasks run and the balancer has reached each of them; the
        node ids that answered."""
        deadline = time.monotonic() + timeout
        seen: set[str] = set()
        while True:
            running = set(self.node_containers())
            answer = self.health()
            if answer is not None and answer.get("status") == "ok":
                seen.add(answer["node"])
            if len(running) == count and running <= seen:
                return running
            assert time.monotonic() < deadline, (
                f"{count} nodes not serving in {timeout:.0f} s: running {sorted(running)}, "
                f"answered {sorted(seen)}\n{self.logs()}"
            )
            time.sleep(0.3)

    def update_state(self) -> str:
        """The node service's update state (``completed``, ``updating``, ``rollback_...``)."""
        inspected = json.loads(docker("service", "inspect", f"{STACK}_node"))[0]
        return str((inspected.get("UpdateStatus") or {}).get("State", ""))

    def logs(self, tail: int = 30) -> str:
        """The last lines of every service's output."""
        parts = []
        for service in ("node", "lb", "redis", "records"):
            done = subprocess.run(
                ["docker", "service", "logs", "--tail", str(tail), f"{STACK}_{service}"],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            parts.append(f"--- {service} ---\n{done.stdout}{done.stderr}")
        return "\n".join(parts)

    def remove(self) -> float:
        """``docker stack rm``, then wait until none of its containers, networks or configs
        remain; delete its volumes. The seconds it took."""
        started = time.monotonic()
        subprocess.run(["docker", "stack", "rm", STACK], capture_output=True, timeout=120)
        deadline = time.monotonic() + 120
        label = f"label=com.docker.stack.namespace={STACK}"
        while True:
            left = [
                docker("ps", "-aq", "--filter", label).split(),
                docker("network", "ls", "-q", "--filter", label).split(),
                docker("config", "ls", "-q", "--filter", label).split(),
            ]
            if not any(left):
                break
            assert time.monotonic() < deadline, f"left after docker stack rm: {left}"
            time.sleep(1)
        for volume in docker("volume", "ls", "-q", "--filter", label).split():
            subprocess.run(["docker", "volume", "rm", "-f", volume], capture_output=True)
        return time.monotonic() - started


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """The stack deployed on a single-node swarm, removed afterwards (and the swarm left, if
    this fixture made it)."""
    with exclusive(), contextlib.ExitStack() as cleanup:
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        engine, _ = engine_with_images(cleanup, LOG_DIR, "the swarm deployment")
        docker("build", "-q", "-t", IMAGE, "--build-arg", "OFFLINE=1", str(ROOT), timeout=900)
        prepared_s = time.monotonic() - started
        swarm = docker("info", "--format", "{{.Swarm.LocalNodeState}}").strip()
        if swarm != "active":
            docker("swarm", "init", "--advertise-addr", "127.0.0.1")
            cleanup.callback(
                lambda: subprocess.run(
                    ["docker", "swarm", "leave", "--force"], capture_output=True, timeout=60
                )
            )
        deployed = Stack()
        deployed.remove()  # what a crashed run left
        cleanup.callback(deployed.remove)
        cleanup.callback(lambda: (LOG_DIR / "swarm.log").write_text(deployed.logs(2000)))
        started = time.monotonic()
        deployed.deploy()
        nodes = deployed.wait_nodes(3)
        print(
            f"\n{engine}; images {prepared_s:.0f} s; stack up and every node reached through the "
            f"balancer in {time.monotonic() - started:.0f} s: {sorted(nodes)}"
        )
        yield deployed


async def play_through(
    stack: Stack,
    during: Any,
    figures: dict[str, Any],
    rounds: int = 12,
    think: float = 0.15,
    count: int = TABLES,
    gate: asyncio.Event | None = None,
) -> list[str]:
    """Open ``count`` tables through the balancer, play them (``rounds`` rounds, ``think``
    seconds before each action; while ``gate`` is clear the players wait), run
    ``during(tables)`` (the fault) once the games are under way, let them end and check the
    history: the problems."""
    tables = await open_tables([stack.url], count, fault_options(max_rounds=rounds))
    playing = asyncio.create_task(play_tables(tables, think=think, deadline=240, gate=gate))
    await asyncio.sleep(1.0)
    fault = mark_fault(tables)
    await during(tables)
    return await finish_and_check(stack.redis_url, tables, playing, fault, figures, resumes=None)


def busiest(stack: Stack, tables: list[Table]) -> tuple[str, list[Table]]:
    """The node holding the most of ``tables``, and those tables."""
    holders = lease_holders(stack.redis_url)
    counts: dict[str, list[Table]] = {}
    for table in tables:
        if table.id in holders:
            counts.setdefault(holders[table.id], []).append(table)
    node = max(counts, key=lambda n: len(counts[n]))
    return node, counts[node]


async def test_scaling_the_nodes_while_games_play_loses_nothing(stack: Stack) -> None:
    """``docker service scale`` to four nodes mid-game: the fourth is reached through the
    balancer, the games go on and end with nothing lost; then back to three."""
    figures: dict[str, Any] = {}

    async def scale(tables: list[Table]) -> None:
        started = time.monotonic()
        await asyncio.to_thread(docker, "service", "scale", "--detach", f"{STACK}_node=4")
        nodes = await asyncio.to_thread(stack.wait_nodes, 4)
        figures["4 nodes serving after s"] = round(time.monotonic() - started, 1)
        figures["nodes"] = sorted(nodes)

    problems = await play_through(stack, scale, figures)
    await asyncio.to_thread(docker, "service", "scale", "--detach", f"{STACK}_node=3")
    await asyncio.to_thread(stack.wait_nodes, 3)
    print(f"\nscale: {figures}")
    assert not problems, "\n".join(problems)


async def test_a_rolling_update_of_the_nodes_while_games_play_loses_no_game(stack: Stack) -> None:
    """``docker service update --force`` of the node service mid-game (the stack's update
    policy: one node at a time, stop-first): each old task drains, handing its tables over,
    before its successor starts; every game ends, nothing lost."""
    figures: dict[str, Any] = {}
    before = await asyncio.to_thread(stack.node_containers)
    gate = asyncio.Event()
    gate.set()

    async def update(tables: list[Table]) -> None:
        # The players wait from the update's start until a drain has handed a table over: how
        # soon Swarm stops the first task varies (a CI run once found every game over by then),
        # and a game held mid-game must be handed over, not merely end on its old node.
        gate.clear()
        try:
            started = time.monotonic()
            await asyncio.to_thread(
                docker, "service", "update", "--detach", "--force", "--no-resolve-image",
                "--update-delay", "1s", "--update-monitor", "3s", f"{STACK}_node",
            )  # fmt: skip
            deadline = time.monotonic() + CONVERGE_TIMEOUT
            holders = await asyncio.to_thread(lease_holders, stack.redis_url)
            moved: set[str] = set()
            while (state := await asyncio.to_thread(stack.update_state)) != "completed":
                assert not state.startswith("rollback"), f"the update rolled back: {state}"
                assert time.monotonic() < deadline, f"the update did not complete: {state}"
                now = await asyncio.to_thread(lease_holders, stack.redis_url)
                moved |= {t for t, node in now.items() if holders.get(t, node) != node}
                holders.update(now)
                if moved and not gate.is_set():
                    figures["first handover after s"] = round(time.monotonic() - started, 1)
                    figures["games going then"] = sum(not t.over() for t in tables)
                    gate.set()
                await asyncio.sleep(0.5)
        finally:
            gate.set()  # (also when the update fails: the players go on to the end)
        figures["rolling update s"] = round(time.monotonic() - started, 1)
        figures["tables handed over to another node"] = len(moved)
        figures["games going at its end"] = sum(not t.over() for t in tables)
        assert moved, f"no table was handed over while the games waited: {figures}"

    # More and slower games, so that the later drains find some too (the update takes about
    # 50 s).
    problems = await play_through(stack, update, figures, rounds=60, think=1.0, count=6, gate=gate)
    after = await asyncio.to_thread(stack.node_containers)
    replaced = [node for node in before if before[node] != after.get(node)]
    figures["nodes replaced"] = f"{len(replaced)}/{len(before)}"
    print(f"\nrolling update: {figures}")
    assert sorted(after) == sorted(before), (before, after)
    assert len(replaced) == len(before), f"not every node was replaced: {before} -> {after}"
    assert not problems, "\n".join(problems)


async def test_a_node_task_killed_mid_game_is_replaced_and_its_tables_go_on(stack: Stack) -> None:
    """The node task holding the most tables is SIGKILLed: Swarm starts a new task in its slot
    (the same node id), its tables go on within :data:`RESUME_BOUND`, nothing lost."""
    figures: dict[str, Any] = {}

    async def kill(tables: list[Table]) -> None:
        node, hit = await asyncio.to_thread(busiest, stack, tables)
        container = (await asyncio.to_thread(stack.node_containers))[node]
        fault = mark_fault(hit)
        await asyncio.to_thread(docker, "kill", container)
        resumed = await first_event_after(fault.going, fault.at, fault.seqs, RESUME_BOUND)
        figures["killed"] = node
        figures["its tables resumed"] = f"{len(resumed)}/{len(fault.going)}"
        if resumed:
            figures["resume s max"] = round(max(resumed.values()), 2)
        assert len(resumed) == len(fault.going), f"tables stalled after the kill: {figures}"
        replaced = await asyncio.to_thread(stack.wait_nodes, 3)
        figures["replaced, same ids"] = sorted(replaced)
        assert (await asyncio.to_thread(stack.node_containers))[node] != container

    problems = await play_through(stack, kill, figures)
    print(f"\nkill: {figures}")
    assert not problems, "\n".join(problems)


def test_the_stack_keeps_in_step_with_the_compose_file() -> None:
    """The stores, their commands, health checks, the nodes' command and environment are the
    compose file's (bar what Swarm does its own way: see deploy/stack.yml's header)."""
    compose = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    swarm = yaml.safe_load(STACK_FILE.read_text())["services"]
    for name in ("redis", "records"):
        for key in ("image", "command", "environment", "healthcheck", "volumes"):
            assert swarm[name].get(key) == compose[name].get(key), (name, key)
    assert swarm["lb"]["image"] == compose["lb"]["image"]
    node, composed = swarm["node"], compose["node1"]
    flags = composed["command"]
    mine = node["command"]
    for flag in ("--host", "--port", "--redis-url"):
        assert mine[mine.index(flag) + 1] == flags[flags.index(flag) + 1], flag
    assert {k: v for k, v in node["environment"].items() if k != "BLACKDREZ_NODE_ID"} == (
        composed["environment"]
    )
    assert "{{.Task.Slot}}" in node["environment"]["BLACKDREZ_NODE_ID"]
    balancer = (ROOT / "deploy" / "nginx-swarm.conf").read_text()
    for line in (ROOT / "deploy" / "nginx.conf").read_text().splitlines():
        if line.strip().startswith(("proxy_", "worker_", "listen")) and "proxy_pass" not in line:
            assert line.strip() in balancer, f"nginx-swarm.conf lacks nginx.conf's {line.strip()}"
