"""A node started before its Redis answers: one clear line, unhealthy, then healthy once it does.

This is what a container orchestrator sees when Redis is still starting (or refuses clients):
the node must neither die with a traceback nor crash-loop. It listens at once, answers
``/healthz`` with 503 while it waits, retries with backoff, and serves as soon as Redis answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from blackdrez.clients.bots import run_swarm
from tests.redis_server import RedisServer, free_port

WAIT = 30.0
"""Generous bound for anything a loaded machine does slowly."""


class NodeProcess:
    """``blackdrez serve`` in a subprocess, its merged output collected line by line."""

    def __init__(self, redis_port: int) -> None:
        self.port = free_port()
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [
                sys.executable, "-m", "blackdrez.tools.cli", "serve",
                "--host", "127.0.0.1", "--port", str(self.port),
                "--redis-url", f"redis://127.0.0.1:{redis_port}/0", "--node-id", "early",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self.lines.append(raw.decode(errors="replace"))

    def health(self) -> tuple[int, dict[str, object]] | None:
        """The ``/healthz`` status and body, or ``None`` while nothing listens."""
        url = f"http://127.0.0.1:{self.port}/healthz"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())
        except OSError:
            return None

    def wait_for_health(self, status: int) -> dict[str, object]:
        """Wait until ``/healthz`` answers ``status``; return its body."""
        deadline = time.monotonic() + WAIT
        while True:
            assert self.process.poll() is None, "".join(self.lines)
            answer = self.health()
            if answer is not None and answer[0] == status:
                return answer[1]
            assert time.monotonic() < deadline, f"no {status} from /healthz: {answer}"
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def nodes() -> Iterator[list[NodeProcess]]:
    started: list[NodeProcess] = []
    yield started
    for node in started:
        node.stop()


def redis_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if "redis" in line.lower()]


async def test_a_node_waits_unhealthy_for_a_refusing_redis_then_serves(nodes) -> None:
    redis_port = free_port()  # nothing listens there yet: connections are refused
    node = NodeProcess(redis_port)
    nodes.append(node)
    body = await asyncio.to_thread(node.wait_for_health, 503)
    assert body["status"] == "starting"
    await asyncio.sleep(4.0)  # several retries with backoff
    assert node.process.poll() is None, "the node waits instead of dying"
    assert (await asyncio.to_thread(node.health) or (0,))[0] == 503
    output = "".join(node.lines)
    assert "Traceback" not in output
    waiting = redis_lines(node.lines)
    assert len(waiting) == 1, f"one clear line, not one per attempt: {waiting}"
    assert "refused" in waiting[0] and "waiting" in waiting[0], waiting[0]

    redis = RedisServer()
    redis.port = redis_port  # the address the node keeps trying
    with redis:
        body = await asyncio.to_thread(node.wait_for_health, 200)
        assert body["status"] == "ok"
        summary = await asyncio.wait_for(
            run_swarm(f"ws://127.0.0.1:{node.port}/", tables=2, per_table=2), WAIT
        )
        assert summary.games_finished == 2 and summary.unfair == 0
        assert summary.inconsistent == []
        node.stop()
    assert node.process.returncode == 0
    assert "Traceback" not in "".join(node.lines)


async def test_a_node_still_waiting_for_redis_stops_cleanly(nodes) -> None:
    node = NodeProcess(free_port())
    nodes.append(node)
    await asyncio.to_thread(node.wait_for_health, 503)
    node.process.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(node.process.wait, WAIT) == 0
    assert "Traceback" not in "".join(node.lines)
