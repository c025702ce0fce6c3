"""The group commit's own Redis connection (``blackdrez.server.stores.resp``): the pure RESP core on
plain
bytes, then the connection on a real Redis: replies in order, an error reply fails its own call
only, a timeout or a lost connection fails every waiting call and no late reply is ever taken for
another call's, and the URL's password and database are used."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.exceptions
import uvloop

from blackdrez.server.stores.redis_link import CommitLink
from blackdrez.server.stores.resp import Incomplete, RespConnection, pack, parse, supports
from blackdrez.server.testing.redis_server import RedisServer


def test_a_command_is_an_array_of_bulk_strings() -> None:
    assert pack(["SET", b"k\r\n", 12]) == b"*3\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$2\r\n12\r\n"
    assert pack(["GET", "é"]) == b"*2\r\n$3\r\nGET\r\n$2\r\n\xc3\xa9\r\n"


def test_every_length_and_argument_kind_is_packed_alike() -> None:
    """Lengths below 1024 take a prepared header, longer ones a formatted one; a subclass of
    str, int or bytes (a bool, an enum member) packs as its base type."""
    for size in (0, 1, 1023, 1024, 70000):
        assert pack([b"x" * size]) == b"*1\r\n$%d\r\n%s\r\n" % (size, b"x" * size)

    class Name(str):
        pass

    assert pack([True, Name("k"), bytearray(b"v")[:0] or b"v"]) == (
        b"*3\r\n$1\r\n1\r\n$1\r\nk\r\n$1\r\nv\r\n"
    )


def test_an_argument_of_another_type_is_refused() -> None:
    with pytest.raises(TypeError):
        pack(["SET", "k", 1.5])  # type: ignore[list-item]


def test_every_reply_type_is_parsed_and_the_next_reply_found() -> None:
    replies = b":-12\r\n+OK\r\n$5\r\na\r\nbc\r\n$-1\r\n*-1\r\n*3\r\n:1\r\n*1\r\n$0\r\n\r\n:0\r\n"
    found, start = [], 0
    while start < len(replies):
        reply, start = parse(replies, start)
        found.append(reply)
    assert found == [-12, b"OK", b"a\r\nbc", None, None, [1, [b""], 0]]


def test_an_error_reply_is_redis_pys_exception_returned_not_raised() -> None:
    reply, end = parse(b"-NOSCRIPT No matching script.\r\n:1\r\n")
    assert isinstance(reply, redis.exceptions.NoScriptError)
    assert parse(b"-READONLY no\r\n")[0].__class__ is redis.exceptions.ReadOnlyError
    assert parse(b"-ERR wrong\r\n")[0].__class__ is redis.exceptions.ResponseError
    assert end == len(b"-NOSCRIPT No matching script.\r\n")


def test_every_cut_reply_is_incomplete() -> None:
    whole = b"*2\r\n$3\r\nabc\r\n*2\r\n:7\r\n+x\r\n"
    assert parse(whole) == ([b"abc", [7, b"x"]], len(whole))
    for cut in range(len(whole)):
        with pytest.raises(Incomplete):
            parse(whole[:cut])


@pytest.mark.parametrize("junk", [b"?what\r\n", b"$x\r\nab\r\n", b"*2\r\n:1\r\n!\r\n"])
def test_bytes_that_are_not_resp_are_refused(junk: bytes) -> None:
    with pytest.raises(redis.exceptions.InvalidResponse):
        parse(junk)


def test_only_plain_tcp_and_unix_urls_are_handled() -> None:
    assert supports("redis://127.0.0.1:6379/0") and supports("unix:///tmp/redis.sock")
    assert not supports("rediss://example.com") and not supports("redis+cluster://h:1")


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    """A Redis of this test's own, which it may pause, kill or give a password."""
    with RedisServer() as server:
        yield server


async def test_pipelined_calls_are_answered_in_order_and_an_error_fails_its_own(
    redis_url_clean: str,
) -> None:
    connection = await RespConnection.open(redis_url_clean, 2.0)
    try:
        calls = [
            connection.call(["SET", "k", "v"], 2.0),
            connection.call(["INCR", "k"], 2.0),
            connection.call(["GET", "k"], 2.0),
            connection.call(["EVAL", "return {1, 'two', {3}}", 0], 2.0),
        ]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        assert outcomes[0] == b"OK" and outcomes[2] == b"v" and outcomes[3] == [1, b"two", [3]]
        assert isinstance(outcomes[1], redis.exceptions.ResponseError)
        assert not connection.lost
    finally:
        connection.close()


async def test_a_callback_gets_its_reply_in_order_among_futures_and_the_failure_after(
    redis_url_clean: str,
) -> None:
    connection = await RespConnection.open(redis_url_clean, 2.0)
    heard: list[object] = []
    try:
        first = connection.call(["SET", "cb", "1"], 2.0)
        connection.call_then(["INCR", "cb"], 2.0, heard.append)
        connection.call_then(["HGET", "cb", "x"], 2.0, heard.append)  # wrong type: an error
        last = connection.call(["GET", "cb"], 2.0)
        assert await first == b"OK" and await last == b"2"
        assert heard[0] == 2 and isinstance(heard[1], redis.exceptions.ResponseError)
        assert not connection.lost
    finally:
        connection.close()
    connection.call_then(["PING"], 2.0, heard.append)  # closed: told at once
    assert isinstance(heard[2], redis.exceptions.ConnectionError)


async def test_a_large_reply_arriving_in_pieces_is_whole(redis_url_clean: str) -> None:
    connection = await RespConnection.open(redis_url_clean, 2.0)
    try:
        value = bytes(range(256)) * 4096  # 1 MiB: many reads
        assert await connection.call(["SET", "big", value], 2.0) == b"OK"
        replies = await asyncio.gather(*(connection.call(["GET", "big"], 5.0) for _ in range(3)))
        assert replies == [value] * 3
    finally:
        connection.close()


async def test_a_timeout_fails_every_waiting_call_and_no_late_reply_is_taken(
    private_redis: RedisServer,
) -> None:
    connection = await RespConnection.open(private_redis.url, 2.0)
    private_redis.pause()
    try:
        slow = [connection.call(["INCR", "n"], 0.2), connection.call(["GET", "n"], 5.0)]
        outcomes = await asyncio.gather(*slow, return_exceptions=True)
    finally:
        private_redis.resume()
    assert [type(o) for o in outcomes] == [redis.exceptions.TimeoutError] * 2
    assert connection.lost
    with pytest.raises(redis.exceptions.TimeoutError):
        await connection.call(["PING"], 2.0)  # at once, on the closed connection
    fresh = await RespConnection.open(private_redis.url, 2.0)
    try:
        assert await fresh.call(["SET", "n", "fresh"], 2.0) == b"OK"
        assert await fresh.call(["GET", "n"], 2.0) == b"fresh"
    finally:
        fresh.close()


async def test_a_lost_connection_fails_every_waiting_call(private_redis: RedisServer) -> None:
    connection = await RespConnection.open(private_redis.url, 2.0)
    private_redis.pause()
    waiting = [connection.call(["PING"], 30.0) for _ in range(3)]
    await asyncio.sleep(0.1)  # the commands are out
    await asyncio.to_thread(private_redis.kill)
    outcomes = await asyncio.wait_for(asyncio.gather(*waiting, return_exceptions=True), 10)
    assert [type(o) for o in outcomes] == [redis.exceptions.ConnectionError] * 3
    assert connection.lost


async def test_a_refused_connection_raises(private_redis: RedisServer) -> None:
    private_redis.stop()
    with pytest.raises(OSError):
        await RespConnection.open(private_redis.url, 2.0)


async def test_the_urls_password_and_database_are_used(private_redis: RedisServer) -> None:
    with redis.Redis(port=private_redis.port) as admin:
        admin.config_set("requirepass", "s3cret")
    url = f"redis://:s3cret@127.0.0.1:{private_redis.port}/3"
    connection = await RespConnection.open(url, 2.0)
    try:
        assert await connection.call(["SET", "where", "db3"], 2.0) == b"OK"
    finally:
        connection.close()
    with redis.Redis(port=private_redis.port, password="s3cret", db=3) as db3:
        assert db3.get("where") == b"db3"
    with pytest.raises(redis.exceptions.AuthenticationError):
        await RespConnection.open(f"redis://:wrong@127.0.0.1:{private_redis.port}/3", 2.0)


def test_it_works_on_uvloop_the_nodes_event_loop(redis_url_clean: str) -> None:
    async def round_trip() -> Any:
        connection = await RespConnection.open(redis_url_clean, 2.0)
        try:
            return await connection.call(["ECHO", "on uvloop"], 2.0)
        finally:
            connection.close()

    assert uvloop.run(round_trip()) == b"on uvloop"


def test_a_reply_that_came_while_the_loop_was_held_is_read_before_the_timeout_judges(
    redis_url_clean: str,
) -> None:
    """When a timer's callback held the loop past a call's timeout (or the process was paused
    there), the reply sitting unread in the socket settles the call: the loop (uvloop, whose
    libuv reads the sockets before it runs the timers that fell due meanwhile) never lets the
    timeout close the connection first, which would fail every append out, logged by Redis or
    not. This guards that order, which the commit link relies on. A reply that truly did not
    come still times out."""

    async def held_past_the_timeout() -> tuple[Any, Any, bool]:
        connection = await RespConnection.open(redis_url_clean, 2.0)
        try:
            answered = connection.call(["ECHO", "sent before the pause"], 0.2)
            got: list[Any] = []
            connection.call_then(["ECHO", "and its follower"], 0.2, got.append)
            # a timer's callback holds the loop: Redis answers meanwhile, the timeouts fall due
            asyncio.get_running_loop().call_later(0.01, time.sleep, 0.6)
            first = await answered
            for _ in range(200):  # its reply may come in a read of its own (a loaded machine)
                if got:
                    break
                await asyncio.sleep(0.01)
            return first, got[0], connection.lost  # (timed out: an exception, and lost)
        finally:
            connection.close()

    first, second, lost = uvloop.run(held_past_the_timeout())
    assert (first, second, lost) == (b"sent before the pause", b"and its follower", False)

    async def no_reply() -> BaseException:
        connection = await RespConnection.open(redis_url_clean, 2.0)
        try:
            blocked = connection.call(["BLPOP", "never-pushed", "5"], 0.2)
            asyncio.get_running_loop().call_later(0.01, time.sleep, 0.4)
            with pytest.raises(redis.exceptions.TimeoutError) as error:
                await blocked
            return error.value
        finally:
            connection.close()

    assert "within 0.2 s" in str(uvloop.run(no_reply()))


async def test_a_link_closed_while_it_connects_leaves_no_connection_open(
    redis_url_clean: str,
) -> None:
    """A node stopping while a call of its own link's was connecting (an adoption's read of a
    log, on a node stopping): the connection came up after the link was closed, was kept, and
    the data folder's Redis, which shuts down only once no other client is left, outlived the
    node's graceful stop."""
    link = CommitLink(redis_url_clean, "return 1")
    admin = redis.Redis.from_url(redis_url_clean)
    try:
        before = len(admin.client_list())
        calling = asyncio.ensure_future(link.command(["PING"]))
        await asyncio.sleep(0)  # the call is opening its connection
        link.close()
        with pytest.raises(redis.exceptions.ConnectionError):
            await calling
        deadline = time.monotonic() + 5
        while len(admin.client_list()) > before and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert len(admin.client_list()) == before, "a connection of the closed link is open"
        with pytest.raises(redis.exceptions.ConnectionError):
            await link.command(["PING"])
    finally:
        link.close()
        admin.close()


async def test_calls_that_find_no_connection_together_open_one(redis_url_clean: str) -> None:
    """Two reads of an adopting node's (two tables at once) on a link not yet connected: each
    opened a connection, the link kept the second, and the first stayed open after the link was
    closed (the data folder's Redis outlived its node's graceful stop)."""
    link = CommitLink(redis_url_clean, "return 1")
    admin = redis.Redis.from_url(redis_url_clean)
    try:
        before = len(admin.client_list())
        replies = await asyncio.gather(*(link.command(["PING"]) for _ in range(3)))
        assert replies == [b"PONG"] * 3
        assert len(admin.client_list()) == before + 1, "one connection for the three calls"
        link.close()
        deadline = time.monotonic() + 5
        while len(admin.client_list()) > before and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert len(admin.client_list()) == before, "a connection of the closed link is open"
    finally:
        link.close()
        admin.close()
