"""Shared pytest fixtures. Add new fixtures below the existing ones, one concern each."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from blackdrez.server.testing.diagnose import clock_offset, describe
from blackdrez.server.testing.nodes import launched_count, launched_since
from blackdrez.server.testing.postgres_server import PostgresServer
from blackdrez.server.testing.redis_cluster import LocalCluster
from blackdrez.server.testing.redis_server import RedisServer

# Server processes the tests start keep no records unless the test names a database: no
# blackdrez-data/ folder in the working directory, no file shared by unrelated tests.
os.environ.setdefault("BLACKDREZ_DB_URL", "none")


ALONE = tuple(Path(__file__).parent / part for part in ("faults", "deploy"))
"""The folders whose tests run one at a time (``tests/run.py``): the fault suite's timings and
CPU figures, the deployment's Docker would suffer beside other tests."""

BROWSER = Path(__file__).parent / "browser"
"""The browser tests: ``tests/run.py`` runs them two at a time, apart from the others (two
Chromiums keep both cores busy: 9:55 against 13:27 one at a time, measured 2026-12-07), but
for those marked ``alone`` (a bound on a time that another Chromium would stretch)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``alone`` the tests of the folders in :data:`ALONE`, ``browser`` those of
    :data:`BROWSER` that are not ``alone`` already."""
    for item in items:
        if any(folder in item.path.parents for folder in ALONE):
            item.add_marker(pytest.mark.alone)
        elif BROWSER in item.path.parents and item.get_closest_marker("alone") is None:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One real Redis server for the whole session; tests must not stop it (start their own)."""
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def redis_url(redis_server: RedisServer) -> str:
    """The session Redis server's URL; its data is shared between tests (see redis_url_clean)."""
    return redis_server.url


@pytest.fixture
def redis_url_clean(redis_url: str) -> str:
    """The session Redis server's URL, emptied (FLUSHALL) before the test."""
    with redis.Redis.from_url(redis_url) as client:
        client.flushall()
    return redis_url


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One real PostgreSQL server for the whole session (started on first use); each test that
    needs a database makes its own with ``create_schema()`` or ``create_database()``."""
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[LocalCluster]:
    """One real Redis Cluster (3 masters, 3 replicas) for the session; tests must not kill its
    nodes (a test that does starts a cluster of its own)."""
    with LocalCluster() as cluster:
        yield cluster


@pytest.fixture
def redis_cluster_url_clean(redis_cluster: LocalCluster) -> str:
    """The session cluster's ``redis+cluster://`` URL, every master emptied first."""
    for index in redis_cluster.master_indexes():
        with redis.Redis(port=redis_cluster.nodes[index].port) as client:
            client.flushall()
    return redis_cluster.url


_CLOCK_OFFSET = clock_offset()
"""The wall clock against the monotonic one when the run began (:func:`describe` says how far
it moved since: a stepped clock moves every deadline of a room)."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test that ran an in-process server (a fixture named ``server``) reports what
    the server held when it failed (``blackdrez.server.testing.diagnose``): a wait that timed
    out then says whether a deadline, a lock, a connection or the writes were stuck."""
    report = yield
    if report.when == "call" and report.failed:
        server = getattr(item, "funcargs", {}).get("server")
        if server is not None and getattr(server, "node", None) is not None:
            try:
                state = describe(server, _CLOCK_OFFSET)
            except Exception as error:  # a report must not fail for a diagnosis
                state = f"(no diagnosis: {error!r})"
            report.sections.append(("the server's state", state))
    if report.when in ("setup", "call") and report.failed:
        for node in launched_since(item.stash.get(_nodes_before, launched_count())):
            tail = "".join(node.output()[-NODE_LINES:]) or "(nothing printed)\n"
            report.sections.append((f"the last lines of node {node.node_id}", tail))
    return report


NODE_LINES = 60
"""How many of its last lines a node process a failed test made shows in the report."""

_nodes_before = pytest.StashKey[int]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Note how many node processes were made before the test (its fixtures' and its own
    come after: ``pytest_runtest_makereport`` shows a failed test's)."""
    item.stash[_nodes_before] = launched_count()
