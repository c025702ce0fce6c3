"""One port for HTTP and WebSocket: health, metrics, static files; origins; slow readers; exit."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import msgspec
import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from blackdrez.clients.client import Client
from blackdrez.games import GAMES
from blackdrez.protocol import v1
from blackdrez.protocol.codec import encode
from blackdrez.protocol.errors import CloseCode
from blackdrez.protocol.handshake import Hello
from blackdrez.server.app import STORE_GRACE
from blackdrez.server.settings import STATIC_DIR
from blackdrez.server.testing.redis_server import RedisServer, free_port
from tests.server.helpers import play_out, seat_and_start, wait_for


def fetch(port: int, path: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


async def test_health_and_metrics_on_the_game_port(server, connect) -> None:
    client = await connect(server, name="Ann")
    await client.request(v1.CreateTable())
    for _ in range(3):  # each type counted on its own (the counter of a type is kept)
        await client.request(v1.ListTables())
    status, kind, body = await asyncio.to_thread(fetch, server.port, "/healthz")
    assert (status, kind) == (200, "application/json")
    assert b'"connections":1' in body and b'"tables":1' in body
    status, kind, body = await asyncio.to_thread(fetch, server.port, "/metrics")
    assert status == 200 and kind.startswith("text/plain")
    text = body.decode()
    assert "blackdrez_connections 1.0" in text
    assert 'blackdrez_tables{game="blackdrez"} 1.0' in text
    assert 'blackdrez_messages_in_total{type="create_table"} 1.0' in text
    assert 'blackdrez_messages_in_total{type="list_tables"} 3.0' in text
    assert "blackdrez_action_seconds_bucket" in text


LAG_BUCKET = 'blackdrez_loop_lag_seconds_bucket{le="0.1"}'


async def test_the_loop_lag_histogram_counts_a_loop_held_up(server) -> None:
    """``blackdrez_loop_lag_seconds``: how late the node's loop woke for its probe's timer. A
    handler that holds the loop 0.3 s shows as one probe late by about that much."""

    def late_count() -> float:
        _, _, body = fetch(server.port, "/metrics")
        lines = [line for line in body.decode().splitlines() if line[:1] != "#"]
        figures = dict(line.rsplit(" ", 1) for line in lines)
        assert LAG_BUCKET in figures, "no loop lag histogram"  # (a StopIteration would hang)
        return float(figures["blackdrez_loop_lag_seconds_count"]) - float(figures[LAG_BUCKET])

    await asyncio.sleep(0.2)  # a few probes on time
    before = await asyncio.to_thread(late_count)
    time.sleep(0.3)  # the loop held up, as by a long handler
    await asyncio.sleep(0.2)
    assert await asyncio.to_thread(late_count) >= before + 1  # (a slow machine may add more)


def _connected_while_not_accepting(port: int, count: int) -> int:
    """Open ``count`` TCP connections at once to a listener that is not accepting (its loop
    held up) and count those the kernel completed: at most the listen backlog. The others'
    SYNs are dropped, and their clients wait a second for a retry, then three more."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", port))
            sockets.append(sock)
        time.sleep(0.3)  # (loopback: a handshake takes microseconds; a retried SYN, 1 s)
        return sum(1 for sock in sockets if _established(sock))
    finally:
        for sock in sockets:
            sock.close()


def _established(sock: socket.socket) -> bool:
    try:
        sock.getpeername()
    except OSError:
        return False
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0


async def test_a_burst_of_connections_is_queued_by_the_listen_backlog(make_server) -> None:
    """A node restarting or failing over sends its players to the others all at once: a
    thousand handshakes may arrive while a node's loop is busy. The listen backlog
    (``--listen-backlog``, default 2048, capped by the kernel's ``somaxconn``) queues them; with
    asyncio's default of 100 the rest of the burst had its SYNs dropped and waited 1 s or more."""
    server = await make_server()
    # The loop is held up by this synchronous call, as by a long stretch of work.
    assert _connected_while_not_accepting(server.port, 600) == 600
    small = await make_server(listen_backlog=50)
    assert _connected_while_not_accepting(small.port, 200) <= 60


async def test_messages_are_counted_by_wire_type_and_bad_frames_under_one_label(server) -> None:
    """``blackdrez_messages_in_total`` names a message as the protocol does (``join``, not the
    class ``JoinTable``), and every frame that is no known message counts as ``invalid``: the
    label values are the protocol's few, whatever a client makes up."""
    async with ws_connect(f"ws://127.0.0.1:{server.port}/") as ws:
        await ws.send(encode(Hello(versions=[1], name="Ann"), binary=False))
        await ws.recv()  # welcome
        await ws.send(json.dumps({"type": "join", "id": 1, "table": "nope"}))
        await ws.send(json.dumps({"type": "ready", "id": 2, "table": "nope", "ready": True}))
        for made_up in ("JoinTable", "bogus-1", "bogus-2", "x" * 200):
            await ws.send(json.dumps({"type": made_up, "id": 3}))
        await ws.send("not json at all")
        await ws.send(json.dumps({"id": 4}))  # no type
        await ws.send(json.dumps({"type": "ping", "id": 5}))
        while msgspec.json.decode(await ws.recv()).get("id") != 5:
            pass
    _, _, body = await asyncio.to_thread(fetch, server.port, "/metrics")
    counted = dict(
        re.findall(r'^blackdrez_messages_in_total\{type="([^"]*)"\} (\S+)$', body.decode(), re.M)
    )
    assert counted == {"join": "1.0", "ready": "1.0", "ping": "1.0", "invalid": "6.0"}


async def test_static_files_and_no_escape_from_their_folder(server, tmp_path) -> None:
    (tmp_path / "index.html").write_text("<h1>BlackDrez</h1>")
    (tmp_path / "app.js").write_text("export {};")
    server.settings.static_dir = tmp_path
    status, kind, body = await asyncio.to_thread(fetch, server.port, "/")
    assert (status, kind, body) == (200, "text/html", b"<h1>BlackDrez</h1>")
    status, kind, _ = await asyncio.to_thread(fetch, server.port, "/app.js")
    assert (status, kind) == (200, "text/javascript")
    for path in ("/../pyproject.toml", "/%2e%2e/pyproject.toml", "/nope.css"):
        status, _, _ = await asyncio.to_thread(fetch, server.port, path)
        assert status == 404


async def test_the_browser_reads_the_game_list_from_the_registry(server) -> None:
    status, kind, body = await asyncio.to_thread(fetch, server.port, "/games.js")
    assert (status, kind) == (200, "text/javascript")
    listed = re.search(r"^export const GAMES = (.*);$", body.decode(), re.MULTILINE)
    assert listed is not None
    assert json.loads(listed.group(1)) == [
        {
            "name": name,
            "display_name": spec.display_name,
            "solitaire": spec.solitaire,
            "rules": spec.rules_text,
        }
        for name, spec in GAMES.items()
    ]
    for module in ("lobby.js", "app.js", "help.js"):
        source = (STATIC_DIR / module).read_text(encoding="utf-8")
        assert 'from "./games.js"' in source
        assert '"Blackjack Piles"' not in source, f"{module} names a game itself"


async def test_the_origin_allow_list(make_server) -> None:
    server = await make_server(allowed_origins=["https://play.example"])
    url = f"ws://127.0.0.1:{server.port}/"
    with pytest.raises(InvalidStatus) as refused:
        async with ws_connect(url, origin="https://evil.example"):
            pass
    assert refused.value.response.status_code == 403
    async with ws_connect(url, origin="https://play.example"):
        pass
    async with ws_connect(url):  # not a browser: no Origin header
        pass


async def test_a_client_too_far_behind_is_disconnected_with_4003(make_server, connect) -> None:
    """A spectator that stops reading while a busy table goes on is cut off; the players are
    not slowed down."""
    server = await make_server(send_buffer=16 * 1024, messages_per_second=1e6, burst=10**6)
    a, b = [await connect(server, name=n) for n in "AB"]
    table = await seat_and_start(a, [b])
    reader = socket.socket()
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window fills fast
    reader.connect(("127.0.0.1", server.port))
    async with ws_connect(
        f"ws://127.0.0.1:{server.port}/",
        sock=reader,
        compression=None,
        max_queue=1,
        max_size=2**20,
    ) as stuck:
        await stuck.send(encode(Hello(versions=[1], name="Stuck"), False))
        await stuck.recv()
        await stuck.send(encode(v1.Spectate(table=table), False))
        # stop reading: websockets pauses the socket once its one-message queue is full
        slow = server.node.clients[
            next(p for p, c in server.node.clients.items() if c.name == "Stuck")
        ]
        for _ in range(3000):
            if slow.closing:
                break
            await a.request(v1.SetReady(table=table, ready=False))
            await a.request(v1.SetReady(table=table, ready=True))
        assert slow.closing, "the slow client was disconnected"
        await asyncio.gather(play_out(a, table), play_out(b, table))
        with pytest.raises(ConnectionClosed):
            while True:
                await stuck.recv()
        assert stuck.close_code == CloseCode.SLOW_CONSUMER


async def test_idle_connections_are_closed_with_4005(make_server, connect) -> None:
    server = await make_server(idle_timeout=0.4)
    client = await connect(server, name="Sleepy")
    code, _ = await asyncio.wait_for(client.closed, 3)
    assert code == CloseCode.IDLE_TIMEOUT


async def test_sigterm_tells_clients_and_exits_cleanly() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "blackdrez.tools.cli", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        line = await asyncio.to_thread(process.stdout.readline)
        assert f"127.0.0.1:{port}" in line.decode(), line
        client = await Client.connect(f"ws://127.0.0.1:{port}/", name="Ann")
        await client.request(v1.CreateTable())
        process.send_signal(signal.SIGTERM)
        code, _ = await asyncio.wait_for(client.closed, 10)
        assert code == CloseCode.GOING_AWAY
        assert any(isinstance(m, v1.Shutdown) for m in client.pushed)
        assert await asyncio.to_thread(process.wait, 10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_a_node_that_lost_its_store_is_unhealthy_after_a_grace_and_ok_once_it_is_back(
    make_server, connect
) -> None:
    """A node whose Redis is gone can run no command: past a short grace (a blip does not
    flap the load balancer) ``/healthz`` says ``store_unreachable`` with 503 and a new
    WebSocket handshake gets 503 too (a load balancer tries another node), while the players
    already connected stay and ``/metrics`` still answers. Once Redis answers: ``ok`` again."""
    with RedisServer() as redis_server:
        server = await make_server(redis_url=redis_server.url)
        ann = await connect(server, name="Ann")

        async def health() -> tuple[int, dict[str, object]]:
            status, _, body = await asyncio.to_thread(fetch, server.port, "/healthz")
            return status, json.loads(body)

        status, body = await health()
        assert (status, body["status"], body["store"]) == (200, "ok", "up")
        await asyncio.to_thread(redis_server.stop)
        await wait_for(lambda: not server.store.health.up, "the node sees its store gone")
        status, body = await health()
        assert (status, body["status"], body["store"]) == (200, "ok", "down"), "a blip"
        lost = time.monotonic()
        while (answer := await health())[0] == 200:
            assert time.monotonic() - lost < 30, "never unhealthy"
            await asyncio.sleep(0.1)
        assert time.monotonic() - lost >= STORE_GRACE - 0.5
        assert answer == (
            503,
            {"status": "store_unreachable", "node": server.settings.node_id, "store": "down",
             "connections": 1, "tables": 0},
        )  # fmt: skip
        with pytest.raises(InvalidStatus) as refused:
            async with ws_connect(f"ws://127.0.0.1:{server.port}/"):
                pass
        assert refused.value.response.status_code == 503
        assert isinstance(await ann.request(v1.Ping()), v1.Pong), "the connected stay"
        status, _, _ = await asyncio.to_thread(fetch, server.port, "/metrics")
        assert status == 200

        await asyncio.to_thread(redis_server.start)
        while (answer := await health())[0] != 200:
            assert time.monotonic() - lost < 60, f"never healthy again: {answer}"
            await asyncio.sleep(0.1)
        assert (answer[1]["status"], answer[1]["store"]) == ("ok", "up")
        again = await connect(server, token=ann.token)
        assert again.player == ann.player


async def test_a_stopping_node_answers_503_stopping_until_its_tables_are_handed_over(
    make_server, connect
) -> None:
    """During a drain or a stop the game port stays open while the tables are handed over:
    ``/healthz`` says ``stopping`` (503) and a new WebSocket handshake gets the same 503, so a
    load balancer sends players elsewhere and ``blackdrez drain`` waits for the whole handover;
    the port closes only once it is done."""
    server = await make_server()
    ann = await connect(server, name="Ann")
    await seat_and_start(ann, [await connect(server, name="Bob")])
    handover = asyncio.Event()
    node_stop = server.node.stop

    async def slow_handover() -> None:
        await handover.wait()
        await node_stop()

    server.node.stop = slow_handover
    port = server.port
    stopping = asyncio.create_task(server.stop())
    await wait_for(lambda: server.stopping, "the stop begins")
    status, _, body = await asyncio.to_thread(fetch, server.port, "/healthz")
    assert (status, json.loads(body)["status"]) == (503, "stopping")
    with pytest.raises(InvalidStatus) as refused:
        async with ws_connect(f"ws://127.0.0.1:{server.port}/"):
            pass
    assert refused.value.response.status_code == 503
    handover.set()
    await stopping
    with pytest.raises(OSError):
        await asyncio.to_thread(fetch, port, "/healthz")
