"""Version negotiation, identity and the session token."""

from __future__ import annotations

import time

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from blackdrez.clients.client import Client, ServerError
from blackdrez.protocol import v1
from blackdrez.protocol.codec import SERVER_DECODERS, encode
from blackdrez.protocol.errors import CloseCode, ErrorCode
from blackdrez.protocol.handshake import Hello, negotiate


def test_negotiation_picks_the_highest_common_version() -> None:
    assert negotiate([1, 2, 3], [1, 2]) == 2
    assert negotiate([7], [1]) is None
    assert negotiate([], [1]) is None


async def raw_first_reply(server, frame) -> tuple[object, int | None]:
    async with connect(f"ws://127.0.0.1:{server.port}/", compression=None) as ws:
        await ws.send(frame)
        reply = SERVER_DECODERS[1].decode(await ws.recv())
        with pytest.raises(ConnectionClosed):
            await ws.recv()
        return reply, ws.close_code


@pytest.mark.parametrize("binary", [False, True])
async def test_welcome_in_the_clients_encoding(server, connect, binary: bool) -> None:
    client = await connect(server, name="  Ann \x00 ", binary=binary)
    assert client.welcome.version == 1
    assert client.welcome.name == "Ann"
    assert client.player.startswith("p_")
    assert client.welcome.limits.max_frame_bytes == server.settings.max_frame_bytes
    pong = await client.request(v1.Ping())
    assert isinstance(pong, v1.Pong)


async def test_unsupported_version_is_refused_with_4001(server) -> None:
    reply, code = await raw_first_reply(server, encode(Hello(versions=[99, 100]), False))
    assert isinstance(reply, v1.Error)
    assert reply.code == ErrorCode.UNSUPPORTED_VERSION
    assert reply.supported == [1]
    assert code == CloseCode.UNSUPPORTED_VERSION


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ('{"type": "ping"}', ErrorCode.HELLO_REQUIRED),
        ("not json", ErrorCode.BAD_FRAME),
        ('{"type": "hello", "versions": "one"}', ErrorCode.BAD_MESSAGE),
        (b"\xc1\xc1", ErrorCode.BAD_FRAME),
    ],
)
async def test_a_bad_first_message_closes_with_4000(server, frame, code) -> None:
    reply, close = await raw_first_reply(server, frame)
    assert isinstance(reply, v1.Error)
    assert reply.code == code
    assert close == CloseCode.HANDSHAKE_FAILED


async def test_a_forged_token_is_refused_with_4002(server, connect) -> None:
    client = await connect(server, name="Ann")
    payload, signature = client.token.split(".")
    forged = payload + "." + ("A" if signature[0] != "A" else "B") + signature[1:]
    with pytest.raises(ServerError) as refused:
        await Client.connect(f"ws://127.0.0.1:{server.port}/", token=forged)
    assert refused.value.code == ErrorCode.BAD_TOKEN


async def test_the_token_brings_back_the_same_player_and_seats(server, connect) -> None:
    first = await connect(server, name="Ann")
    joined = await first.request(v1.CreateTable(options=v1.TableOptions(seats=2)))
    await first.close()
    again = await connect(server, token=first.token, name="Someone else")
    assert again.player == first.player
    assert again.welcome.name == "Ann"
    assert again.welcome.tables == [joined.table.id]


async def test_a_second_connection_replaces_the_first(server, connect) -> None:
    first = await connect(server, name="Ann")
    await connect(server, token=first.token)
    code, _ = await first.closed
    assert code == CloseCode.REPLACED


async def test_a_request_on_a_connection_closed_for_good_fails_at_once(server, connect) -> None:
    """A client the server closed for good (here replaced: 4004) does not wait out a request's
    timeout for a reconnection that cannot come: it says at once that it is closed, and why."""
    first = await connect(server, name="Ann")
    await connect(server, token=first.token)
    await first.closed
    started = time.monotonic()
    with pytest.raises(ConnectionError, match="4004"):
        await first.request(v1.Ping(), timeout=30.0)
    assert time.monotonic() - started < 1.0


async def test_hello_twice_is_an_error_not_a_crash(server, connect) -> None:
    client = await connect(server)
    await client.send(Hello(versions=[1]))
    error = await client.wait_until(
        lambda: next((m for m in client.pushed if isinstance(m, v1.Error)), None)
    )
    assert error.code == ErrorCode.ALREADY_GREETED
    assert isinstance(await client.request(v1.Ping()), v1.Pong)


async def test_a_connection_holds_no_handshake_headers_once_greeted(server, connect) -> None:
    """The request's and the response's headers are read once (the client's address) and let
    go: about 3 KiB a connection that a node of thousands of players would otherwise keep."""
    client = await connect(server, name="Ann")
    ws = server.node.clients[client.player].ws
    assert ws.request is not None and ws.response is not None
    assert len(ws.request.headers) == 0 and len(ws.response.headers) == 0
    assert isinstance(await client.request(v1.Ping()), v1.Pong)
