"""Flood limits per client address: new WebSocket connections and records API requests.

A client looping connect, ``hello``, disconnect makes every node of a deployment work for it
(``Node.claim``), and each records API request is database reads: past a token bucket per
address both get HTTP 429 with ``Retry-After``. ``/healthz``, ``/metrics`` and static files are
never limited, and nobody else is touched.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import time
from pathlib import Path

import pytest
import redis
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidStatus

from blackdrez.protocol import v1
from blackdrez.protocol.codec import SERVER_DECODERS, encode
from blackdrez.protocol.handshake import Hello
from blackdrez.server.app import GameServer
from blackdrez.server.http.limits import LIMIT_TIMEOUT
from blackdrez.server.testing.redis_server import RedisServer
from tests.server.test_per_ip_cap import from_address

LEADERBOARD = "/api/v1/leaderboards/blackdrez"


async def connected(server: GameServer, source: str) -> socket.socket:
    """A TCP connection to the server from ``source``, made without blocking the loop (the
    server under test runs in it)."""
    sock = from_address(source)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", server.port))
    return sock


async def hello_from(
    server: GameServer, source: str = "127.0.0.1", forwarded: str | None = None
) -> int:
    """Open a WebSocket from ``source``, say hello and close: 101, or the HTTP status refusing
    the handshake."""
    sock = await connected(server, source)
    headers = {"X-Forwarded-For": forwarded} if forwarded else None
    try:
        async with ws_connect(
            f"ws://127.0.0.1:{server.port}/", sock=sock, additional_headers=headers
        ) as ws:
            await ws.send(encode(Hello(versions=[1]), False))
            assert isinstance(SERVER_DECODERS[1].decode(await ws.recv()), v1.Welcome)
    except InvalidStatus as refused:
        return refused.response.status_code
    return 101


async def refusal_from(server: GameServer, source: str = "127.0.0.1") -> tuple[int, dict, str]:
    """A handshake from ``source`` that the server refuses: status, headers, body."""
    sock = await connected(server, source)
    with pytest.raises(InvalidStatus) as refused:
        async with ws_connect(f"ws://127.0.0.1:{server.port}/", sock=sock):
            pass
    response = refused.value.response
    return response.status_code, dict(response.headers.raw_items()), response.body.decode()


async def handshake_status(server: GameServer, source: str = "127.0.0.1") -> int:
    """Open a WebSocket from ``source`` and close it at once (no ``hello``): 101, or the HTTP
    status refusing the handshake."""
    sock = await connected(server, source)
    try:
        async with ws_connect(f"ws://127.0.0.1:{server.port}/", sock=sock):
            pass
    except InvalidStatus as refused:
        return refused.response.status_code
    return 101


async def http_get(
    server: GameServer, path: str, source: str = "127.0.0.1"
) -> tuple[int, dict[str, str], bytes]:
    """GET ``path`` from ``source``: status, headers (lower-case names), body."""

    def fetch() -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection(
            "127.0.0.1", server.port, timeout=30, source_address=(source, 0)
        )
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            headers = {name.lower(): value for name, value in response.getheaders()}
            return response.status, headers, response.read()
        finally:
            connection.close()

    return await asyncio.to_thread(fetch)


def refused(server: GameServer, kind: str) -> float:
    return server.metrics.rate_limited.labels(kind)._value.get()


async def test_a_burst_of_handshakes_past_the_limit_gets_429_and_nobody_else_is_touched(
    make_server, connect
) -> None:
    server = await make_server(handshake_rate=2.0, handshake_burst=3)
    seated = await connect(server, name="Seated")  # from 127.0.0.1: one of its three
    table = (await seated.request(v1.CreateTable())).table.id
    assert [await hello_from(server) for _ in range(2)] == [101, 101]
    status, headers, body = await refusal_from(server)
    assert status == 429
    assert headers["Retry-After"] == "1"  # a token back within half a second: a whole second
    assert "too many new connections from 127.0.0.1" in body
    assert refused(server, "handshake") == 1
    assert await hello_from(server, source="127.0.0.2") == 101  # another address connects
    for path in ("/healthz", "/metrics", "/", LEADERBOARD):  # nothing else is limited
        assert (await http_get(server, path))[0] in (200, 404), path  # (no records: 404)
    # The player already connected from the flooding address plays on
    await seated.request(v1.SetReady(table=table, ready=True))
    assert seated.ws.close_code is None
    assert len(server.node.clients) == 1
    await asyncio.sleep(float(headers["Retry-After"]))
    assert await hello_from(server) == 101  # the address may connect again
    assert refused(server, "handshake") == 1


async def test_a_refused_handshake_opens_no_connection(make_server) -> None:
    server = await make_server(handshake_rate=0.1, handshake_burst=1)
    assert await hello_from(server) == 101
    for _ in range(20):
        assert (await refusal_from(server))[0] == 429
    assert refused(server, "handshake") == 20
    assert server.node.clients == {} and not server.sessions.per_address


async def test_behind_a_trusted_proxy_each_forwarded_address_has_its_own_limit(
    make_server,
) -> None:
    server = await make_server(
        handshake_rate=0.1, handshake_burst=1, trusted_proxies=["127.0.0.0/30"]
    )
    assert await hello_from(server, forwarded="192.0.2.1") == 101
    assert await hello_from(server, forwarded="192.0.2.1") == 429
    assert await hello_from(server, forwarded="192.0.2.2") == 101  # same proxy, another client


async def test_api_requests_past_the_limit_get_429_rate_limited(
    make_server, tmp_path: Path
) -> None:
    server = await make_server(
        db_url=f"sqlite:///{tmp_path / 'records.db'}", api_rate=2.0, api_burst=3
    )
    assert [(await http_get(server, LEADERBOARD))[0] for _ in range(3)] == [200, 200, 200]
    status, headers, body = await http_get(server, LEADERBOARD)
    assert status == 429
    assert headers["retry-after"] == "1"
    assert headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert error["code"] == "rate_limited"
    assert 0 < error["retry_after"] <= 0.5
    assert "too many requests from 127.0.0.1" in error["message"]
    assert refused(server, "api") == 1
    for _ in range(20):  # an orchestrator's polls and the static files are never limited
        for path in ("/healthz", "/metrics", "/", "/games.js"):
            assert (await http_get(server, path))[0] == 200, path
    assert await hello_from(server) == 101  # nor is the WebSocket by the API's limit
    assert (await http_get(server, LEADERBOARD, source="127.0.0.2"))[0] == 200
    await asyncio.sleep(error["retry_after"])
    assert (await http_get(server, LEADERBOARD))[0] == 200
    assert refused(server, "api") == 1


async def test_a_server_without_records_answers_its_api_404_without_spending_the_limit(
    make_server,
) -> None:
    """With ``--db-url none`` every ``/api/`` path is a 404 that costs nothing to answer: a
    browser polling the leaderboard there is told the server keeps no records, never 429."""
    server = await make_server(api_rate=2.0, api_burst=3)
    answers = [await http_get(server, LEADERBOARD) for _ in range(10)]
    assert {status for status, _, _ in answers} == {404}
    assert all(b"keeps no records" in body for _, _, body in answers)
    assert refused(server, "api") == 0


async def test_the_default_limits_leave_a_browser_and_a_bots_swarm_alone(make_server) -> None:
    server = await make_server()
    codes = await asyncio.gather(*(hello_from(server) for _ in range(256)))
    assert set(codes) == {101}
    assert refused(server, "handshake") == 0


async def test_the_python_client_waits_the_retry_after_of_a_refused_reconnection(
    make_server,
) -> None:
    """A client reconnecting (its connection lost) into the limit is told when to come back:
    it waits that long instead of trying again on its own faster backoff, each try one more
    refusal (and, for a swarm of bots behind one address, the limit never clearing)."""
    from blackdrez.clients.client import Client

    server = await make_server(handshake_rate=0.5, handshake_burst=2)
    client = await Client.connect(f"ws://127.0.0.1:{server.port}/", name="Ann", reconnect=True)
    try:
        assert await hello_from(server) == 101  # the address's last token
        server.node.clients[client.player].ws.transport.abort()  # lost, as a dropped network link
        async with asyncio.timeout(10):
            while client.reconnects < 1:
                await asyncio.sleep(0.05)
        assert refused(server, "handshake") == 1
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("2", 2.0), ("0.5", 0.5), (None, 0.0), ("-3", 0.0), ("nan", 0.0), ("9999", 60.0),
     ("Wed, 21 Oct 2026 07:28:00 GMT", 0.0)],
)  # fmt: skip
def test_a_retry_after_header_is_read_as_a_bounded_wait(header: str | None, seconds: float) -> None:
    from blackdrez.clients.client import retry_after

    assert retry_after(header) == seconds


async def test_nodes_sharing_a_redis_share_each_addresss_buckets(
    make_server, redis_url_clean: str, tmp_path: Path
) -> None:
    """Behind a load balancer an address's handshakes and API requests are spread over every
    node: with a bucket per node it had N times the limit. On a shared store the buckets are
    the store's (timed by Redis's clock), one per address for every node, and each lives only
    until it would be full again."""
    nodes = [
        await make_server(
            redis_url=redis_url_clean,
            db_url=f"sqlite:///{tmp_path / f'records-{n}.db'}",
            handshake_rate=0.2,
            handshake_burst=2,
            api_rate=0.2,
            api_burst=2,
        )
        for n in range(2)
    ]
    first, second = nodes
    assert [await hello_from(first), await hello_from(second)] == [101, 101]
    assert [await hello_from(first), await hello_from(second)] == [429, 429]
    status, headers, _ = await refusal_from(second)
    assert status == 429 and 1 <= int(headers["Retry-After"]) <= 5
    assert await hello_from(second, source="127.0.0.2") == 101  # another address: its own
    assert [(await http_get(node, LEADERBOARD))[0] for node in nodes] == [200, 200]
    assert [(await http_get(node, LEADERBOARD))[0] for node in nodes] == [429, 429]
    assert [refused(node, "handshake") for node in nodes] == [1, 2]
    assert [refused(node, "api") for node in nodes] == [1, 1]
    raw = redis.Redis.from_url(redis_url_clean)
    try:
        keys = sorted(key.decode() for key in raw.scan_iter("bd:limit:*"))
        assert keys == [
            "bd:limit:api:{127.0.0.1}",
            "bd:limit:handshake:{127.0.0.1}",
            "bd:limit:handshake:{127.0.0.2}",
        ]
        for key in keys:  # (full again in at most burst / rate = 10 s)
            assert 0 < raw.pttl(key) <= 10_000, key
    finally:
        raw.close()


async def test_a_node_cut_off_from_its_redis_limits_with_its_own_buckets(make_server) -> None:
    """The shared buckets are in the store: while it cannot be reached (before the node calls
    itself unhealthy), a node limits with buckets of its own rather than not at all, and does
    not hold handshakes up waiting for it."""
    with RedisServer() as store:
        server = await make_server(redis_url=store.url, handshake_rate=0.2, handshake_burst=2)
        store.stop()
        opened = [await handshake_status(server) for _ in range(3)]
    assert opened == [101, 101, 429]
    assert refused(server, "handshake") == 1


async def test_a_node_whose_redis_is_paused_holds_no_handshake_up_past_half_a_second(
    make_server,
) -> None:
    """A frozen Redis (SIGSTOP: connections open, nothing answers) would hold every handshake
    for the store's command timeout: a handshake waits at most ``LIMIT_TIMEOUT`` for the shared
    bucket, then this node's own decides; once the node sees Redis gone, at once."""
    with RedisServer() as store:
        server = await make_server(redis_url=store.url, handshake_rate=0.2, handshake_burst=2)
        store.pause()
        try:
            took, opened = [], []
            for _ in range(3):
                started = time.monotonic()
                opened.append(await handshake_status(server))
                took.append(time.monotonic() - started)
        finally:
            store.resume()
    assert opened == [101, 101, 429]
    assert max(took) < LIMIT_TIMEOUT + 0.4, took
