"""Hostile input against a server hosting a live game: every frame gets a typed error or a
documented close, the server never crashes, and the live game ends exactly as its replay says."""

from __future__ import annotations

import asyncio
import contextlib
import random
import string
import urllib.request

import msgspec
import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from blackdrez.clients.client import Client, ServerError
from blackdrez.games.blackdrez import rules as blackdrez
from blackdrez.protocol import v1
from blackdrez.protocol.codec import SERVER_DECODERS, encode
from blackdrez.protocol.errors import CloseCode, ErrorCode
from blackdrez.protocol.handshake import Hello
from tests.server.helpers import game_over, play_out, seat_and_start
from tests.server.test_tables import _record_from_events

FRAMES = 10_000
CODES = {code.value for code in ErrorCode}
SERVER = SERVER_DECODERS[1]
UNMASKED = b"\x81\x02hi"
"""A text frame 'hi' sent without a mask, as no client may."""


def hostile_frame(rng: random.Random, table: str) -> str | bytes:
    """One malformed or hostile frame (never a valid request)."""
    kind = rng.randrange(10)
    if kind == 0:
        return rng.randbytes(rng.randrange(1, 200))
    if kind == 1:
        return "".join(rng.choice(string.printable) for _ in range(rng.randrange(1, 100)))
    if kind == 2:
        return msgspec.json.encode(_junk(rng, 3)).decode()
    if kind == 3:
        tag = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randrange(1, 12)))
        return msgspec.json.encode({"type": tag + "_x", "id": rng.randrange(10**6)}).decode()
    if kind == 4:
        message = rng.choice(
            [
                {"type": "join", "table": rng.randrange(-(10**9), 10**9)},
                {"type": "act", "table": table, "action": "hit"},
                {"type": "act", "table": table},
                {"type": "resync", "table": table, "since": "yesterday"},
                {"type": "create_table", "options": {"seats": "many"}},
                {"type": "create_table", "options": {"colour": "red"}},
                {"type": "ready", "table": table, "ready": "yes"},
                {"type": "start_solitaire", "game": "chess"},
                {"type": "leaderboard", "game": "blackdrez"},
            ]
        )
        return msgspec.json.encode(message).decode()
    if kind == 5:
        huge = rng.choice(["1" * 400, "-9" * 300, "1e999", "NaN"])
        return f'{{"type":"resync","table":"{table}","since":{huge},"id":{huge}}}'
    if kind == 6:
        depth = rng.randrange(100, 5000)
        return "[" * depth + "]" * depth
    if kind == 7:
        message = {"type": "act", "table": table, "action": {"type": rng.choice(["hit", "stand"])}}
        return msgspec.msgpack.encode(message)  # a spectator acting: not seated
    if kind == 8:
        return msgspec.msgpack.encode(_junk(rng, 3))
    action = {"type": rng.choice(["hit", "withdraw", "stand", "start_round", "bogus"])}
    if action["type"] == "start_round":
        action["seats"] = [0, 1, 2]
    return msgspec.json.encode({"type": "act", "table": "t" + "0" * 10, "action": action}).decode()


def _junk(rng: random.Random, depth: int) -> object:
    pick = rng.randrange(7 if depth else 4)
    if pick == 0:
        return rng.randrange(-(2**63), 2**63)
    if pick == 1:
        return rng.random() * 10 ** rng.randrange(-5, 300)
    if pick == 2:
        return "".join(rng.choice(string.printable) for _ in range(rng.randrange(20)))
    if pick == 3:
        return rng.choice([None, True, False])
    if pick in (4, 5):
        return [_junk(rng, depth - 1) for _ in range(rng.randrange(4))]
    return {f"k{i}": _junk(rng, depth - 1) for i in range(rng.randrange(4))}


async def fuzz_connection(port: int, table: str, count: int, seed: int) -> int:
    """Send ``count`` hostile frames on one greeted spectator connection; check every answer."""
    rng = random.Random(seed)
    answered = 0
    async with ws_connect(f"ws://127.0.0.1:{port}/", compression=None, max_size=2**22) as ws:
        await ws.send(encode(Hello(versions=[1], name="Mallory"), False))
        assert isinstance(SERVER.decode(await ws.recv()), v1.Welcome)
        await ws.send(encode(v1.Spectate(table=table, id=1), False))
        while not isinstance(SERVER.decode(await ws.recv()), v1.Joined):
            pass
        for _ in range(count):
            frame = hostile_frame(rng, table)
            await ws.send(frame)
            while True:
                reply = SERVER.decode(await ws.recv())
                if isinstance(reply, v1.Update | v1.Snapshot) and reply.id is None:
                    continue  # the live game's updates keep arriving meanwhile
                assert isinstance(reply, v1.Error), (frame, reply)
                assert reply.code in CODES
                answered += 1
                break
    return answered


async def test_ten_thousand_hostile_frames_against_a_live_game(make_server, connect) -> None:
    server = await make_server(max_frame_bytes=64 * 1024)
    a, b, c = [await connect(server, name=n) for n in "ABC"]
    table = await seat_and_start(a, [b, c], turn_seconds=60, decks=2)
    fuzzing = True

    async def slow_player(client: Client) -> None:
        state = client.tables[table]
        while not game_over(client, table):
            await client.wait_until(lambda: state.legal or game_over(client, table), timeout=60)
            if game_over(client, table):
                return
            await asyncio.sleep(0.15 if fuzzing else 0)
            while fuzzing and client.tables[table].view["stock"] < 30:
                await asyncio.sleep(0.05)  # keep the game alive until the fuzz is over
            # out of turn first: must be refused and change nothing
            others = [x for x in (a, b, c) if x is not client]
            try:
                await others[0].act(table, {"type": "hit"})
            except ServerError as error:
                assert error.code in (ErrorCode.NOT_YOUR_TURN, ErrorCode.NOT_IN_ROUND)
            else:
                raise AssertionError("an out-of-turn action was accepted")
            await play_one(client, table)

    players = asyncio.gather(*(slow_player(x) for x in (a, b, c)))
    per_connection = FRAMES // 4
    answered = await asyncio.gather(
        *(fuzz_connection(server.port, table, per_connection, seed) for seed in range(4))
    )
    fuzzing = False
    assert sum(answered) == FRAMES
    assert not game_over(a, table), "the game was live during the whole fuzz"
    await players

    final = a.tables[table].view
    record = _record_from_events(a.tables[table].events, final["seed"], seats=3)
    engine = blackdrez.BlackDrez.new(blackdrez.Config(seats=3, decks=2), record.seed)
    for seat, action in record.actions:
        engine.apply(seat, msgspec.convert(action, blackdrez.Action))
    assert msgspec.to_builtins(engine.view(None)) == final
    assert 'code="internal"' not in server.metrics.render().decode()

    # the server still serves everyone else
    fresh = [await connect(server, name=n) for n in ("D", "E")]
    other = await seat_and_start(fresh[0], fresh[1:])
    await asyncio.gather(*(play_out(x, other) for x in fresh))


async def play_one(client: Client, table: str) -> None:
    state = client.tables[table]
    view = msgspec.convert(state.view, blackdrez.View)
    legal = [msgspec.convert(x, blackdrez.Action) for x in state.legal]
    from blackdrez.games.blackdrez.bots import threshold

    seq = state.seq
    await client.act(table, threshold(view, legal))
    await client.wait_until(lambda: state.seq > seq)


async def test_hostile_first_frames_close_with_documented_codes(server) -> None:
    rng = random.Random(7)
    closes: dict[int, int] = {}
    for i in range(300):
        if i % 3 == 0:
            frame: str | bytes = encode(Hello(versions=[rng.randrange(2, 10**6)]), i % 2 == 0)
        else:
            frame = hostile_frame(rng, "t")
        async with ws_connect(f"ws://127.0.0.1:{server.port}/", compression=None) as ws:
            await ws.send(frame)
            try:
                reply = SERVER.decode(await ws.recv())
                assert isinstance(reply, v1.Error)
                assert reply.code in CODES
                await ws.recv()
            except ConnectionClosed:
                pass
            code = ws.close_code
        closes[code] = closes.get(code, 0) + 1
    assert set(closes) <= {CloseCode.HANDSHAKE_FAILED, CloseCode.UNSUPPORTED_VERSION}
    assert closes[CloseCode.UNSUPPORTED_VERSION] == 100


async def test_oversized_frames_close_with_1009_and_harm_nobody(make_server, connect) -> None:
    server = await make_server(max_frame_bytes=4096)
    a, b = [await connect(server, name=n) for n in "AB"]
    table = await seat_and_start(a, [b])
    for _ in range(5):
        victim = await connect(server, name="Big")
        await victim.send(v1.Act(table=table, action={"type": "hit", "pad": "x" * 10_000}))
        code, _ = await victim.closed
        assert code == CloseCode.MESSAGE_TOO_BIG
    await asyncio.gather(play_out(a, table), play_out(b, table))


async def test_the_closes_websockets_sends_for_a_bad_frame_are_counted_by_code(make_server) -> None:
    """The WebSocket layer sends these closes itself (1009 over ``max_frame_bytes``, 1007 for a
    text frame that is not UTF-8, 1002 for a frame that breaks the protocol), before or after
    ``hello``: ``blackdrez_closes_total`` missed them, though it counts the 1008 of a flood. A
    client closing with 1009 itself is not counted: the server only echoed it."""
    server = await make_server(max_frame_bytes=4096)
    url = f"ws://127.0.0.1:{server.port}/"
    async with ws_connect(url, compression=None) as ws:
        await ws.send(encode(Hello(versions=[1], name="Polite"), False))
        await ws.recv()
        await ws.close(CloseCode.MESSAGE_TOO_BIG, "the client's own close")
    for greeted, frame, code in (
        (False, "x" * 10_000, CloseCode.MESSAGE_TOO_BIG),
        (True, "x" * 10_000, CloseCode.MESSAGE_TOO_BIG),
        (True, b"\xff\xfe", CloseCode.INVALID_DATA),
        (False, UNMASKED, CloseCode.PROTOCOL_ERROR),
    ):
        async with ws_connect(url, compression=None) as ws:
            if greeted:
                await ws.send(encode(Hello(versions=[1], name="Mallory"), False))
                assert isinstance(SERVER.decode(await ws.recv()), v1.Welcome)
            if frame is UNMASKED:
                ws.transport.write(frame)  # (a client must mask its frames)
            else:
                await ws.send(frame, text=True)
            with contextlib.suppress(ConnectionClosed):
                await ws.recv()
            assert ws.close_code == code
    expected = {
        CloseCode.MESSAGE_TOO_BIG: 2,
        CloseCode.INVALID_DATA: 1,
        CloseCode.PROTOCOL_ERROR: 1,
    }
    deadline = asyncio.get_running_loop().time() + 10  # (counted as the handler ends)
    while any(closes(server, code) != count for code, count in expected.items()):
        assert asyncio.get_running_loop().time() < deadline, {
            c: closes(server, c) for c in expected
        }
        await asyncio.sleep(0.02)
    text = await asyncio.to_thread(read_metrics, server.port)
    assert 'blackdrez_closes_total{code="1009"} 2.0' in text
    assert 'blackdrez_closes_total{code="1007"} 1.0' in text
    assert 'blackdrez_closes_total{code="1002"} 1.0' in text


def read_metrics(port: int) -> str:
    """The text of the server's ``/metrics``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


async def test_the_closes_of_a_silent_client_and_of_a_stopping_server_are_counted(
    make_server,
) -> None:
    """The other closes a client can cause were not counted either: 4000 (no ``hello`` in
    time), 1011 (the WebSocket ping unanswered: a client that stopped reading) and 1001 (a
    connection opened while the server stops)."""
    server = await make_server(
        hello_timeout=0.3, ping_interval=0.2, ping_timeout=0.3, close_timeout=0.5
    )
    url = f"ws://127.0.0.1:{server.port}/"
    async with ws_connect(url, ping_interval=None) as ws:
        with contextlib.suppress(ConnectionClosed):
            await ws.recv()
        assert ws.close_code == CloseCode.HANDSHAKE_FAILED
    async with ws_connect(url, ping_interval=None, close_timeout=0.5) as ws:
        await ws.send(encode(Hello(versions=[1], name="Gone"), False))
        assert isinstance(SERVER.decode(await ws.recv()), v1.Welcome)
        ws.transport.pause_reading()  # no pong: the server's keepalive gives up on it
        deadline = asyncio.get_running_loop().time() + 10
        while closes(server, CloseCode.INTERNAL_ERROR) < 1:
            assert asyncio.get_running_loop().time() < deadline, "1011 not counted"
            await asyncio.sleep(0.05)
    assert closes(server, CloseCode.HANDSHAKE_FAILED) == 1
    limits = server.routes.limits
    too_fast = limits.too_fast

    async def stop_begins(*args):  # a stop begins between a handshake's checks and its handler
        server.stopping = True
        return await too_fast(*args)

    limits.too_fast = stop_begins
    try:
        async with ws_connect(url, ping_interval=None) as ws:
            with contextlib.suppress(ConnectionClosed):
                await ws.recv()
            assert ws.close_code == CloseCode.GOING_AWAY
        with pytest.raises(InvalidStatus) as refused:  # once stopping: no new handshake
            async with ws_connect(url, ping_interval=None):
                pass
        assert refused.value.response.status_code == 503
    finally:
        server.stopping = False
        limits.too_fast = too_fast
    assert closes(server, CloseCode.GOING_AWAY) == 1


def closes(server, code: int) -> float:
    """How many closes with ``code`` the server's metrics counted."""
    return server.metrics.closes.labels(str(int(code)))._value.get()


async def test_a_flood_is_closed_with_1008(make_server, connect) -> None:
    server = await make_server(messages_per_second=10.0, burst=10)
    bystander = await connect(server, name="Calm")
    flooder = await connect(server, name="Flood", pace=False)
    with_errors = 0
    for _ in range(200):
        try:
            await flooder.send(v1.Ping())
        except ConnectionClosed:
            break
    code, _ = await flooder.closed
    assert code == CloseCode.POLICY_VIOLATION
    with_errors = sum(
        isinstance(m, v1.Error) and m.code == ErrorCode.RATE_LIMITED for m in flooder.pushed
    )
    assert with_errors >= 1
    assert isinstance(await bystander.request(v1.Ping()), v1.Pong)
