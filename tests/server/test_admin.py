"""The admin API: only with a token, only for whoever sends it; drain hands tables over."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
import redis.asyncio as aioredis

from blackdrez.clients.bots import play_table
from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.server.admin import DrainError, drain
from blackdrez.server.app import GameServer

TOKEN = "s3cret-admin-token"


def call(port: int, path: str, method: str = "GET", token: str | None = TOKEN) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", method=method, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def sample(server: GameServer, name: str) -> float | None:
    return server.metrics.registry.get_sample_value(name)


async def test_without_a_configured_token_there_is_no_admin_api(make_server) -> None:
    server = await make_server()
    status, _ = await asyncio.to_thread(call, server.port, "/admin/drain", "POST")
    assert status == 404
    assert not server.stopping


async def test_a_missing_or_wrong_token_is_refused_and_changes_nothing(make_server) -> None:
    server = await make_server(admin_token=TOKEN)
    for token, said in ((None, "admin token required"), ("wrong", "wrong admin token"),
                        (TOKEN + "x", "wrong admin token")):  # fmt: skip
        status, body = await asyncio.to_thread(call, server.port, "/admin/drain", "POST", token)
        assert (status, body) == (401, {"error": said})
    status, _ = await asyncio.to_thread(call, server.port, "/admin/drain", "GET")
    assert status == 405
    status, _ = await asyncio.to_thread(call, server.port, "/admin/nope")
    assert status == 404
    assert not server.stopping


async def test_drain_hands_the_tables_over_and_the_game_goes_on(make_server, redis_url_clean):
    """Node A hosts a game; ``drain`` stops A; B adopts the table; the players, who reconnect
    by themselves, play on at B."""
    a = await make_server(redis_url=redis_url_clean, admin_token=TOKEN, node_id="a")
    b = await make_server(redis_url=redis_url_clean, node_id="b")
    urls = [f"ws://127.0.0.1:{s.port}/" for s in (a, b)]
    admin_url = f"http://127.0.0.1:{a.port}"
    players = [
        await Client.connect(urls[0], name=n, reconnect=True, also=tuple(urls)) for n in "PQ"
    ]
    try:
        options = v1.TableOptions(seats=2, max_rounds=1, round_pause_seconds=0)
        table = (await players[0].request(v1.CreateTable(options=options))).table.id
        await players[1].request(v1.JoinTable(table=table))
        for player in players:
            await player.request(v1.SetReady(table=table))
        await players[0].request(v1.StartGame(table=table))
        assert table in a.node.rooms
        lines: list[str] = []
        took = await asyncio.to_thread(drain, admin_url, TOKEN, 30, lines.append)
        await asyncio.wait_for(a.finished.wait(), 10)
        assert lines[0] == "node a draining: 1 table(s) to hand over"
        assert took < 30
        await players[0].wait_until(lambda: table in b.node.rooms, 15)
        results = await asyncio.gather(*(play_table(p, table, timeout=60) for p in players))
        assert all(r.fair and r.final["phase"] == "over" for r in results)
        assert all(p.reconnects >= 1 for p in players)
        # the failover metrics of the dashboard
        assert sample(a, "blackdrez_tables_handed_over_total") == 1
        assert sample(b, "blackdrez_tables_adopted_total") == 1
        assert sample(b, "blackdrez_store_up") == 1
        assert sample(b, "blackdrez_store_rtt_seconds_count") >= 1
        with pytest.raises(DrainError):  # gone: nothing to drain
            await asyncio.to_thread(drain, admin_url, TOKEN, 5, lines.append)
    finally:
        for player in players:
            await player.close()


async def test_the_admin_view_across_two_nodes(make_server, redis_url_clean) -> None:
    """Tables of both nodes, with their host; a table's recent log; close a table hosted on
    the other node; remove a player; nodes with their load."""
    a = await make_server(redis_url=redis_url_clean, admin_token=TOKEN, node_id="a")
    b = await make_server(redis_url=redis_url_clean, node_id="b")
    ann = await Client.connect(f"ws://127.0.0.1:{a.port}/", name="Ann")
    bob = await Client.connect(f"ws://127.0.0.1:{b.port}/", name="Bob")
    cid = await Client.connect(f"ws://127.0.0.1:{b.port}/", name="Cid")
    try:
        on_a = (await ann.request(v1.CreateTable())).table.id
        on_b = (await bob.request(v1.CreateTable())).table.id
        await cid.request(v1.JoinTable(table=on_b))
        status, body = await asyncio.to_thread(call, a.port, "/admin/tables")
        assert status == 200
        hosts = {t["id"]: t["host_node"] for t in body["tables"]}
        assert hosts == {on_a: "a", on_b: "b"}

        status, body = await asyncio.to_thread(call, a.port, f"/admin/table?id={on_b}")
        assert status == 200 and body["table"]["host_node"] == "b"
        kinds = [entry["command"]["type"] for entry in body["recent"]]
        assert kinds[:3] == ["create", "join", "join"]
        assert body["recent"][1]["name"] == "Bob"
        logged, recent = body["log_entries"], body["recent"]
        assert logged == len(recent) >= 3
        async with aioredis.Redis.from_url(redis_url_clean) as raw:
            reads = (await raw.info("commandstats")).get("cmdstat_xrange", {}).get("calls", 0)
            status, body = await asyncio.to_thread(call, a.port, f"/admin/table?id={on_b}&limit=2")
            stats = await raw.info("commandstats")
        assert status == 200 and body["log_entries"] == logged, "the whole log counted"
        assert body["recent"] == recent[-2:], "its end"
        assert stats.get("cmdstat_xrange", {}).get("calls", 0) == reads, "not its whole log read"

        status, body = await asyncio.to_thread(call, a.port, "/admin/nodes")
        nodes = {n["id"]: n for n in body["nodes"]}
        assert nodes["a"]["tables"] == 1 and nodes["b"]["tables"] == 1
        assert nodes["b"]["players"] == 2 and nodes["a"]["connections"] == 1

        # remove Cid from the table hosted by b, through a
        path = f"/admin/remove?table={on_b}&player={cid.player}"
        status, body = await asyncio.to_thread(call, a.port, path, "POST")
        assert status == 200, body
        state = bob.tables[on_b]
        await bob.wait_until(
            lambda: (
                state.info and all(s is None or s.player != cid.player for s in state.info.seats)
            )
        )
        # close it: Bob sees it closed, and it is no longer listed
        path = f"/admin/close?table={on_b}&reason=cheating"
        status, body = await asyncio.to_thread(call, a.port, path, "POST")
        assert status == 200, body
        await bob.wait_until(lambda: state.info and state.info.status == "closed")
        closed = [e.event for e in state.events if e.event["type"] == "table_closed"]
        assert closed and closed[0]["reason"] == "cheating"
        for _ in range(50):
            status, body = await asyncio.to_thread(call, a.port, "/admin/tables")
            if [t["id"] for t in body["tables"]] == [on_a]:
                break
            await asyncio.sleep(0.1)
        assert [t["id"] for t in body["tables"]] == [on_a]

        # bad calls change nothing
        for path, code in (
            ("/admin/close", 400),
            ("/admin/close?table=tnope", 404),
            ("/admin/table?id=tnope", 404),
            ("/admin/table?id=x&limit=many", 400),
        ):
            method = "POST" if "close" in path else "GET"
            status, _ = await asyncio.to_thread(call, a.port, path, method)
            assert status == code, path
    finally:
        for client in (ann, bob, cid):
            await client.close()


async def test_drain_pointed_at_the_metrics_port_says_it_is_not_the_game_port(make_server) -> None:
    """The admin API is on the game port only: the metrics port (or any other HTTP server)
    answers, but not in JSON; ``blackdrez drain`` says so in one line and exits 1."""
    server = await make_server(admin_token=TOKEN, metrics_port=0)
    url = f"http://127.0.0.1:{server.metrics_port}"
    wrong = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "blackdrez.tools.cli", "drain", "--url", url, "--token", TOKEN],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert wrong.returncode == 1, wrong.stderr
    assert wrong.stderr == (
        f"blackdrez drain: {url} answered, but not as a BlackDrez game port does\n"
    )
    assert wrong.stdout == ""
    assert not server.stopping


async def test_the_drain_command_line(make_server) -> None:
    """``blackdrez drain``: says what it does, exits 0 once the node is gone; 1 when refused."""
    server = await make_server(admin_token=TOKEN)
    url = f"http://127.0.0.1:{server.port}"
    command = [sys.executable, "-m", "blackdrez.tools.cli", "drain", "--url", url]
    refused = await asyncio.to_thread(
        subprocess.run, [*command, "--token", "wrong"], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 1 and "refused the drain (401)" in refused.stderr
    assert "wrong admin token" in refused.stderr
    assert not server.stopping
    plain = await make_server()  # no --admin-token
    off = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "blackdrez.tools.cli", "drain", "--url", f"http://127.0.0.1:{plain.port}",
         "--token", TOKEN],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert off.returncode == 1 and "start the node with --admin-token" in off.stderr, off.stderr
    done = await asyncio.to_thread(
        subprocess.run,
        command,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BLACKDREZ_ADMIN_TOKEN": TOKEN},
    )
    assert done.returncode == 0, done.stderr
    assert f"node {server.settings.node_id} drained and exited" in done.stdout
    assert server.finished.is_set()
