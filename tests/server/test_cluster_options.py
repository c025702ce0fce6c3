"""``blackdrez serve`` options for a Redis Cluster and for WAIT: refused when wrong, applied when
right (a node started with them serves on the cluster and waits for a replica)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any

import pytest

from blackdrez.clients.client import Client
from blackdrez.server.app import GameServer
from blackdrez.server.stores.redis_cluster import ClusterLink
from blackdrez.tools import cli
from tests.games.test_cli import run
from tests.server.helpers import play_out, seat_and_start


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["--redis-url", "redis+cluster://h:port"], "--redis-url: bad node 'h:port'"),
        (["--redis-url", "redis+cluster://h:1/2"], "--redis-url: a Redis Cluster URL names"),
        (["--redis-url", "redis://h:1/0", "--redis-wait-replicas", "-1"], "0 or more"),
        (["--redis-wait-replicas", "1"], "--redis-wait-replicas needs --redis-url"),
        (["--redis-url", "redis://h:1/0", "--redis-wait-timeout-ms", "0"], "from 1 to 1999"),
        (["--redis-url", "redis://h:1/0", "--redis-wait-timeout-ms", "2000"], "from 1 to 1999"),
    ],
)
def test_serve_refuses_bad_cluster_and_wait_options(
    capsys: pytest.CaptureFixture[str], argv: list[str], complaint: str
) -> None:
    code, _, err = run(capsys, "serve", *argv)
    assert code == 2
    assert complaint in err


def test_serve_help_documents_the_cluster_url_and_wait(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "serve", "--help")
    assert code == 0
    assert "redis+cluster://" in out
    assert "--redis-wait-replicas" in out and "--redis-wait-timeout-ms" in out


def _finish(main: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine that never waits (the patched ``run``) to its end."""
    with contextlib.suppress(StopIteration):
        main.send(None)


async def test_a_node_on_the_cluster_with_wait_plays_a_game(
    make_server, connect, redis_cluster_url_clean: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    captured = {}

    async def keep(
        settings, **_injected
    ):  # the settings the command line made, served in this loop
        captured["settings"] = settings

    monkeypatch.setattr("blackdrez.server.app.run", keep)
    monkeypatch.setattr(cli, "_run_async", _finish)
    argv = ["serve", "--redis-url", redis_cluster_url_clean, "--redis-wait-replicas", "1"]
    argv += ["--redis-wait-timeout-ms", "300"]
    assert cli.main(argv) == 0
    settings = captured["settings"]
    server: GameServer = await make_server(
        redis_url=settings.redis_url,
        redis_wait_replicas=settings.redis_wait_replicas,
        redis_wait_timeout_ms=settings.redis_wait_timeout_ms,
    )
    assert isinstance(server.store.link, ClusterLink)
    assert (server.store.logs.wait_replicas, server.store.logs.wait_timeout_ms) == (1, 300)
    players: list[Client] = [await connect(server, name=n) for n in ("Ann", "Bob")]
    table = await seat_and_start(players[0], players[1:])
    await asyncio.gather(*(play_out(player, table) for player in players))
    assert players[0].tables[table].view["phase"] == "over"
