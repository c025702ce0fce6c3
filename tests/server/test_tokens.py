"""Session tokens: a lifetime counted from the first issue, and revocation by ``logout``."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
import redis.asyncio as aioredis

from blackdrez.clients.client import Client, ServerError
from blackdrez.protocol import v1
from blackdrez.protocol.codec import SERVER_DECODERS
from blackdrez.protocol.errors import CloseCode, ErrorCode
from blackdrez.server import identity
from blackdrez.server.stores.base import StoreUnavailable
from tests.redis_server import RedisServer

SECRET = b"k" * 32


def test_a_token_is_valid_for_its_lifetime_from_its_issue_and_no_longer() -> None:
    token = identity.issue_token(SECRET, "p_1", "Ann", now=1000.0)
    assert token.issued == 1000.0
    read = identity.read_token(SECRET, token.text, lifetime=60.0, now=1059.0)
    assert read == token
    assert read.expires(60.0) == 1060.0
    assert identity.read_token(SECRET, token.text, lifetime=60.0, now=1060.5) is None


def test_each_token_has_its_own_id_and_a_forged_one_reads_as_nothing() -> None:
    first = identity.issue_token(SECRET, "p_1", "Ann", now=1000.0)
    second = identity.issue_token(SECRET, "p_1", "Ann", now=1001.0)
    assert first.id != second.id
    assert identity.read_token(b"other" * 8, first.text, lifetime=60.0, now=1000.0) is None
    assert identity.read_token(SECRET, "x.y", lifetime=60.0, now=1000.0) is None


async def test_hello_with_a_token_gives_back_the_same_token_and_its_expiry(server, connect):
    first = await connect(server, name="Ann")
    lifetime = server.settings.token_lifetime
    assert first.welcome.token_expires == pytest.approx(time.time() + lifetime, abs=5)
    await first.close()
    again = await connect(server, token=first.token)
    assert again.welcome.token == first.token
    assert again.welcome.token_expires == first.welcome.token_expires


async def test_coming_back_does_not_extend_a_tokens_life(make_server, connect) -> None:
    """Today's token, presented again and again, still ends its lifetime after its first issue."""
    server = await make_server(token_lifetime=1.5)
    client = await connect(server, name="Ann")
    token, issued = client.token, time.time()
    while time.time() < issued + 1.0:  # keep coming back, always with the latest token
        await client.close()
        client = await connect(server, token=token)
        token = client.token
        await asyncio.sleep(0.2)
    await asyncio.sleep(max(0.0, issued + 1.5 - time.time()) + 0.2)
    with pytest.raises(ServerError) as refused:
        await Client.connect(f"ws://127.0.0.1:{server.port}/", token=token)
    assert refused.value.code == ErrorCode.BAD_TOKEN


async def test_logout_ends_the_token_and_the_connection(server, connect) -> None:
    client = await connect(server, name="Ann", record=True)
    await client.send(v1.Logout(id=1))
    await client.send(v1.CreateTable(id=2))  # sent before the close: never executed
    code, reason = await asyncio.wait_for(client.closed, 5)
    assert code == CloseCode.NORMAL and "logged out" in reason
    replies = [SERVER_DECODERS[1].decode(frame) for frame in client.frames]
    assert [type(reply) for reply in replies] == [v1.Ok] and replies[0].id == 1
    with pytest.raises(ServerError) as refused:
        await Client.connect(f"ws://127.0.0.1:{server.port}/", token=client.token)
    assert refused.value.code == ErrorCode.BAD_TOKEN
    assert not server.node.rooms
    other = await connect(server, name="Bob")  # other players are not touched
    assert isinstance(await other.request(v1.Ping()), v1.Pong)


async def test_a_token_ended_on_one_node_is_refused_by_every_node(
    make_server, connect, redis_url_clean: str
) -> None:
    one = await make_server(redis_url=redis_url_clean, node_id="one")
    two = await make_server(redis_url=redis_url_clean, node_id="two")
    client = await connect(one, name="Ann")
    await client.request(v1.Logout())
    for node in (one, two):
        with pytest.raises(ServerError) as refused:
            await Client.connect(f"ws://127.0.0.1:{node.port}/", token=client.token)
        assert refused.value.code == ErrorCode.BAD_TOKEN
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        keys = [key async for key in raw.scan_iter("bd:revoked:*")]
        assert len(keys) == 1
        left = await raw.pttl(keys[0]) / 1000
    remaining = client.welcome.token_expires - time.time()
    assert remaining - 60 < left <= remaining + 1  # the list forgets it when it would expire


async def test_during_a_store_outage_a_token_is_accepted_unchecked(make_server, connect) -> None:
    """Players can come back while the store is away; a revocation holds again once it is back."""
    with RedisServer(appendonly=True) as redis_server:
        server = await make_server(redis_url=redis_server.url)
        ann = await connect(server, name="Ann")
        bob = await connect(server, name="Bob")
        await bob.request(v1.Logout())
        await ann.close()
        redis_server.stop()
        again = await connect(server, token=ann.token)
        assert again.player == ann.player
        redis_server.start()  # with its data (append-only file): Bob's logout still stands
        deadline = time.monotonic() + 15  # until the node sees the store back (it probes it)
        while True:
            try:
                comeback = await Client.connect(f"ws://127.0.0.1:{server.port}/", token=bob.token)
            except ServerError as refused:
                assert refused.code == ErrorCode.BAD_TOKEN
                break
            await comeback.close()
            assert time.monotonic() < deadline, "the revocation did not hold again"
            await asyncio.sleep(0.1)
        await server.stop()


async def test_a_storm_of_hellos_during_a_store_outage_logs_each_warning_once(
    make_server, connect, caplog: pytest.LogCaptureFixture
) -> None:
    """Every player of a node comes back while its store is away: the log says once that
    tokens are accepted unchecked and that other nodes are not told, not once per hello (a
    reconnection storm wrote two warning lines per connection), and says it again at the next
    outage."""
    with RedisServer() as redis_server:
        server = await make_server(redis_url=redis_server.url)
        server.store_grace = 60.0  # still taking handshakes while its store is down
        ann = await connect(server, name="Ann")
        for outage in (1, 2):
            redis_server.stop()
            for _ in range(6):
                await (await connect(server, token=ann.token)).close()
            warnings = [r.message for r in caplog.records if r.levelno >= logging.WARNING]
            for said in ("accepted without the revocation check", "other nodes not told"):
                assert sum(said in line for line in warnings) == outage, warnings
            redis_server.start()
            await server.store.health.wait_up()
        await server.stop()


async def test_logout_while_the_store_is_away_changes_nothing(make_server, connect) -> None:
    with RedisServer() as redis_server:
        server = await make_server(redis_url=redis_server.url)
        ann = await connect(server, name="Ann")
        redis_server.stop()
        with pytest.raises(ServerError) as refused:
            await ann.request(v1.Logout())
        assert refused.value.code == ErrorCode.UNAVAILABLE
        assert isinstance(await ann.request(v1.Ping()), v1.Pong)  # still connected
        redis_server.start()
        deadline = time.monotonic() + 15
        while True:  # until the node reaches the store again
            try:
                assert not await server.store.tokens.revoked(ann.token.rpartition(".")[2])
                break
            except StoreUnavailable:
                assert time.monotonic() < deadline, "the store did not come back"
                await asyncio.sleep(0.1)
        again = await Client.connect(f"ws://127.0.0.1:{server.port}/", token=ann.token)
        assert again.player == ann.player
        await server.stop()


async def test_a_logout_the_store_cannot_take_is_refused_and_the_token_stays_valid(
    server, connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = await connect(server, name="Ann")

    async def unreachable(token_id: str, seconds: float) -> None:
        raise StoreUnavailable("down")

    monkeypatch.setattr(server.store.tokens, "revoke", unreachable)
    with pytest.raises(ServerError) as refused:
        await client.request(v1.Logout())
    assert refused.value.code == ErrorCode.UNAVAILABLE
    assert "still valid" in refused.value.error.message
    monkeypatch.undo()
    again = await Client.connect(f"ws://127.0.0.1:{server.port}/", token=client.token)
    assert again.player == client.player
    await again.close()
