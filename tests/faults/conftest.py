"""Fixtures of the fault suite: a durable Redis or a Redis Cluster, node processes, CPU sampling,
figures.

Every test here is marked ``faults`` (``pytest tests/faults`` or ``pytest -m faults`` runs the
suite alone). Every process a test starts is stopped in teardown, whatever the outcome. Each test
fills its ``figures``; they are printed after the test, summed up at the end of the run, and,
when ``BD_FAULT_FIGURES`` names a file, appended to it as JSON lines (``benchmarks/faults.py``
reads them).

The store faults of nodes and players run twice: on one durable Redis (``[redis]``) and on the
session's Redis Cluster of 3 masters and 3 replicas (``[cluster]``, emptied first), through the
``store_url`` fixture. The faults of Redis itself (``test_redis.py``) pin it to one Redis;
``test_cluster.py`` kills a cluster's master.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from blackdrez.server.testing import netns
from blackdrez.server.testing.nodes import CpuSampler, NodeProcess, Nodes
from blackdrez.server.testing.redis_server import RedisServer

FIGURES_FILE = "BD_FAULT_FIGURES"
HERE = Path(__file__).parent
_collected: list[tuple[str, str, dict[str, Any]]] = []

LaunchNodes = Callable[..., Nodes]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.fspath).parents:
            item.add_marker(pytest.mark.faults)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call" or report.failed:
        item.stash[_outcome] = report.outcome
    return report


_outcome = pytest.StashKey[str]()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _collected:
        return
    terminalreporter.section("fault figures")
    for name, outcome, figures in _collected:
        shown = ", ".join(f"{key}: {value}" for key, value in figures.items())
        terminalreporter.write_line(f"{name} [{outcome}] {shown}")


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """The test's figures (name -> value), reported after the test whatever its outcome."""
    found: dict[str, Any] = {}
    yield found
    name = request.node.name
    outcome = request.node.stash.get(_outcome, "passed")
    print(f"\nFIGURES {name} [{outcome}]: " + json.dumps(found, default=str))
    _collected.append((name, outcome, found))
    path = os.environ.get(FIGURES_FILE)
    if path:
        with open(path, "a") as out:
            out.write(json.dumps({"test": name, "outcome": outcome, "figures": found}) + "\n")


@pytest.fixture
def durable_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis of its own with append-only persistence, synced before every reply: the tests
    SIGKILL it and then count every acknowledged action, which the compose file's ``everysec``
    does not promise across a kill of Redis (``server/testing/redis_server.py``)."""
    with RedisServer(appendonly=True, fsync="always", data_dir=tmp_path) as server:
        yield server


@pytest.fixture(params=["redis", "cluster"])
def store_url(request: pytest.FixtureRequest) -> str:
    """The URL the test's nodes run on: a durable Redis of the test's own, or the session's
    Redis Cluster emptied (``redis+cluster://``)."""
    if request.param == "redis":
        return request.getfixturevalue("durable_redis").url
    return request.getfixturevalue("redis_cluster_url_clean")


@pytest.fixture
def cpu() -> Iterator[CpuSampler]:
    """CPU sampling of the processes a test watches."""
    with CpuSampler() as sampler:
        yield sampler


@pytest.fixture
def launch_nodes(store_url: str, cpu: CpuSampler) -> Iterator[LaunchNodes]:
    """Start node processes on the test's store, ``store_url`` (``launch_nodes(2)``),
    CPU-sampled; all are stopped after the test (a failed test's report shows their last
    lines: ``tests/conftest.py``)."""
    started: list[Nodes] = []

    def launch(count: int, **options: Any) -> Nodes:
        nodes = Nodes(store_url, count, **options)
        started.append(nodes)
        for node in nodes:
            cpu.watch(node.node_id, node.pid)
        return nodes

    yield launch
    for nodes in started:
        nodes.stop()


def watch_again(cpu: CpuSampler, node: NodeProcess) -> None:
    """Follow a restarted node's new process under the same name."""
    cpu.watch(node.node_id, node.pid)


@pytest.fixture(scope="session")
def netns_ready() -> None:
    """Root and the tools, or a skip (a failure under CI); then the leftovers of crashed runs
    are deleted."""
    reason = netns.missing()
    if reason is not None:
        message = f"the tests in network namespaces cannot run here: {reason}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    swept = netns.sweep()
    if swept:
        print(f"\ndeleted what crashed runs left: {', '.join(swept)}")
