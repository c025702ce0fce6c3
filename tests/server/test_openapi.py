"""The node's HTTP routes described in OpenAPI 3.1 (issue 38): the committed document is what the
code makes, it validates with openapi-spec-validator, it names every route the node answers
(records, health, metrics, admin) with docs/api.md's examples, the node serves it at
/api/v1/openapi.json, and schemathesis run against a live node with records finds no 5xx and no
response (4xx included) that the document does not describe."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any, cast

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from openapi_spec_validator import validate
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from blackdrez.server.admin import AdminApi
from blackdrez.server.http import openapi
from blackdrez.server.records import api
from blackdrez.server.records.store import RecordsStore
from blackdrez.server.settings import Settings
from tests.records.games import finished

DOCUMENT = json.loads(openapi.PATH.read_text("utf-8"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]
EXAMPLES = 40
"""Hypothesis examples per operation (bounded: the suite's time)."""


def test_the_committed_document_is_what_the_code_makes() -> None:
    assert openapi.check(), f"{openapi.PATH} is stale: run `{openapi.REGENERATE}` and commit it"


def test_it_validates_as_openapi_3_1() -> None:
    validate(DOCUMENT)
    assert DOCUMENT["openapi"] == "3.1.0"


def test_every_route_the_node_answers_is_described() -> None:
    paths = DOCUMENT["paths"]
    names = {"games": "{id}", "players": "{id}", "leaderboards": "{game}"}
    for pattern, (method, _) in api._ROUTES.items():
        if method != "GET":  # the account calls are WebSocket messages on a node
            continue
        path = "/api/v1/" + "/".join(names[pattern[0]] if p == "*" else p for p in pattern)
        assert list(paths[path]) == ["get"], path
    admin = AdminApi(Settings(port=0), cast(Any, None), cast(Any, None), lambda: None)
    for name, route in admin.routes.items():
        assert list(paths[f"/admin/{name}"]) == [route.method.lower()], name
    for path in ("/healthz", "/metrics", openapi.SERVED_AT):
        assert list(paths[path]) == ["get"]
    games = paths["/api/v1/games"]["get"]
    assert {p["name"] for p in games["parameters"]} == {
        "player", "game", "arena", "before", "limit"
    }  # fmt: skip
    example = games["responses"]["200"]["content"]["application/json"]["examples"]["example1"]
    assert example["value"]["games"][0]["id"] == "s_k9:1", "docs/api.md's example"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def fill(url: str) -> None:
    """A records database with games of every kind the lists show."""
    store = await RecordsStore.open(url)
    try:
        for n in range(3):
            await store.put_game(finished(f"t_a:{n}", players=["ann", "bob"], seats=2,
                                          ended_at=1e9 + n, rated=True))  # fmt: skip
        await store.put_game(finished("t_p:1", players=["ann", "cy"], seats=2, private=True))
        await store.put_game(finished("t_r:1", players=["bob", "cy"], seats=2, arena="ar1"))
        await store.put_game(finished("s_b:1", "blue_jacket", players=["ann"]))
        await store.put_game(finished("s_j:1", "blackjack_piles", players=["bob"]))
    finally:
        await store.close()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A live node (its own process) with records: its base URL."""
    folder = tmp_path_factory.mktemp("openapi")
    db = f"sqlite:///{folder / 'records.db'}"
    asyncio.run(fill(db))
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "blackdrez.tools.cli", "serve", "--in-memory", "--port",
         str(port), "--db-url", db, "--data-dir", str(folder / "data")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as answer:
                if answer.status == 200:
                    break
        except OSError:
            pass
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        assert time.monotonic() < deadline, "the node did not start"
        time.sleep(0.2)
    yield base
    process.terminate()
    process.wait(30)


def test_the_node_serves_the_document(node: str) -> None:
    with urllib.request.urlopen(f"{node}{openapi.SERVED_AT}", timeout=10) as answer:
        assert answer.headers["Content-Type"] == "application/json"
        assert answer.read() == openapi.PATH.read_bytes()


@pytest.fixture(scope="module")
def described(node: str) -> Any:
    """The document as schemathesis reads it, without the admin calls (no token here, and one
    of them stops the node) and without /metrics (the Prometheus text has no schema)."""
    schema = schemathesis.openapi.from_dict(DOCUMENT)
    return schema.exclude(path_regex="^/(admin/|metrics)")


schema = schemathesis.pytest.from_fixture("described")


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_schemathesis_finds_nothing_the_document_does_not_say(case: Any, node: str) -> None:
    case.call_and_validate(base_url=node, checks=CHECKS)
