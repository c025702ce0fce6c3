"""Reading clients' frames without websockets' parser (``blackdrez.server.reading``): every frame
reaches the session as websockets would give it, whatever the reads cut, and anything unusual is
websockets' (its errors and close codes)."""

from __future__ import annotations

import asyncio
import collections
import os
import struct
import sys

import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.frames import CloseCode

from blackdrez.protocol import v1
from blackdrez.protocol.codec import SERVER_DECODERS, encode
from blackdrez.protocol.handshake import Hello
from blackdrez.server.reading import ServerConnection, _Frames


def masked(payload: bytes, opcode: int = 0x1, fin: bool = True, mask: bool = True) -> bytes:
    """One client frame (masked unless told not to)."""
    first = (0x80 if fin else 0) | opcode
    size = len(payload)
    if size < 126:
        header = bytes((first, (0x80 if mask else 0) | size))
    elif size < 65536:
        header = struct.pack("!BBH", first, (0x80 if mask else 0) | 126, size)
    else:
        header = struct.pack("!BBQ", first, (0x80 if mask else 0) | 127, size)
    if not mask:
        return header + payload
    key = os.urandom(4)
    return header + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def reader_of(server) -> ServerConnection:
    """The server's side of the one connection it has."""
    (connection,) = server.server.connections
    assert isinstance(connection, ServerConnection)
    return connection


async def greeted(server):
    ws = await ws_connect(f"ws://127.0.0.1:{server.port}/", compression=None)
    await ws.send(encode(Hello(versions=[1], name="Reader"), False))
    welcome = SERVER_DECODERS[1].decode(await ws.recv())
    assert isinstance(welcome, v1.Welcome)
    return ws


def pings(count: int, start: int = 1) -> bytes:
    return b"".join(
        masked(encode(v1.Ping(id=n), False).encode()) for n in range(start, start + count)
    )


async def pongs(ws, count: int) -> list[int]:
    ids = []
    for _ in range(count):
        reply = SERVER_DECODERS[1].decode(await asyncio.wait_for(ws.recv(), 5))
        assert isinstance(reply, v1.Pong)
        ids.append(reply.id)
    return ids


async def test_frames_cut_anywhere_across_reads_all_arrive_in_order(make_server) -> None:
    server = await make_server()
    ws = await greeted(server)
    data = pings(20)
    transport = ws.transport
    for cut in (1, 3, 7, 50):  # one byte at a time, then pieces of a header, a mask, a payload
        for at in range(0, len(data), cut):
            transport.write(data[at : at + cut])
            await asyncio.sleep(0)
        assert await pongs(ws, 20) == list(range(1, 21))
    assert reader_of(server).frames_read >= 80  # read here, not by websockets' parser
    await ws.close()


async def test_a_ping_between_data_frames_goes_to_websockets_and_reading_goes_on(
    make_server,
) -> None:
    server = await make_server()
    ws = await greeted(server)
    ws.transport.write(pings(2) + masked(b"are you there", opcode=0x9) + pings(2, start=3))
    assert await pongs(ws, 4) == [1, 2, 3, 4]  # (websockets answers the ping itself)
    latency = await asyncio.wait_for(await ws.ping(), 5)  # and its own pings still work
    assert latency >= 0
    ws.transport.write(pings(3, start=5))
    assert await pongs(ws, 3) == [5, 6, 7]
    await ws.close()


async def test_a_fragmented_message_is_reassembled_by_websockets(make_server) -> None:
    server = await make_server()
    ws = await greeted(server)
    frame = encode(v1.Ping(id=9), False).encode()
    ws.transport.write(
        masked(frame[:5], opcode=0x1, fin=False) + masked(frame[5:], opcode=0x0) + pings(1, 10)
    )
    assert await pongs(ws, 2) == [9, 10]
    await ws.close()


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (masked(b'{"type":"ping"}', mask=False), CloseCode.PROTOCOL_ERROR),  # not masked
        (masked(b"\xff\xfe", opcode=0x1), CloseCode.INVALID_DATA),  # not UTF-8
        (bytes((0xC1, 0x80)) + b"\0\0\0\0", CloseCode.PROTOCOL_ERROR),  # a reserved bit
        (masked(b"x" * 2_000, opcode=0x2), CloseCode.MESSAGE_TOO_BIG),  # past max_size
        (masked(b"x" * 70_000, opcode=0x2), CloseCode.MESSAGE_TOO_BIG),  # a 64-bit length
    ],
    ids=["unmasked", "not-utf8", "reserved-bit", "too-big", "64-bit-length"],
)
async def test_a_bad_frame_gets_websockets_close_code(make_server, frame: bytes, code: int) -> None:
    server = await make_server(max_frame_bytes=1_024)
    ws = await greeted(server)
    ws.transport.write(pings(1))
    assert await pongs(ws, 1) == [1]  # read here
    ws.transport.write(frame)
    await asyncio.wait_for(ws.wait_closed(), 5)
    assert ws.close_code == code


async def test_a_frame_websockets_began_is_finished_by_websockets(make_server) -> None:
    """A control frame cut across reads: its start goes to websockets, and so does its end (the
    parser is within a frame), then reading here goes on."""
    server = await make_server()
    ws = await greeted(server)
    ping = masked(b"still there?", opcode=0x9)
    for cut in (1, 2, 6, 9):
        ws.transport.write(pings(1, start=cut) + ping[:cut])
        await asyncio.sleep(0.05)
        ws.transport.write(ping[cut:] + pings(1, start=100 + cut))
        assert await pongs(ws, 2) == [cut, 100 + cut]
    before = reader_of(server).frames_read
    ws.transport.write(pings(5, start=200))
    assert await pongs(ws, 5) == list(range(200, 205))
    assert reader_of(server).frames_read == before + 5
    await ws.close()


async def test_what_follows_a_frame_websockets_began_is_never_read_here(make_server) -> None:
    """The end of a control frame whose start went to websockets looks like a frame of ours
    (its payload, not masked, is one): it is still websockets' (its parser is within a frame,
    and has not been asked since it was last seen between frames), then reading here goes
    on."""
    server = await make_server()
    ws = await greeted(server)
    lookalike = masked(b"evil")  # a whole text frame, 10 bytes: the ping's payload
    ping = bytes((0x89, 0x80 | len(lookalike))) + b"\0\0\0\0" + lookalike  # a zero mask
    for round_ in range(3):
        ws.transport.write(pings(1, start=10 * round_) + ping[:6])  # its header and mask
        await asyncio.sleep(0.05)
        ws.transport.write(ping[6:] + pings(1, start=10 * round_ + 1))
        assert await pongs(ws, 2) == [10 * round_, 10 * round_ + 1]
    await ws.close()


async def test_a_held_connection_keeps_no_empty_deque(make_server) -> None:
    """websockets gives each connection two deques (its message queue and its writers waiting
    for the buffer to drain), each 760 bytes empty: 1.5 KiB of every held connection, nearly
    always empty. The server's connections use lists instead, and still read frames in order
    (a frame or two are queued at a time) and take many at once."""
    server = await make_server()
    ws = await greeted(server)
    connection = reader_of(server)
    frames = connection.recv_messages.frames.queue
    assert not isinstance(frames, collections.deque)
    assert not isinstance(connection.drain_waiters, collections.deque)
    assert sys.getsizeof(frames) + sys.getsizeof(connection.drain_waiters) < 200
    ws.transport.write(pings(50))
    assert await pongs(ws, 50) == list(range(1, 51))
    await ws.close()


def test_the_frames_list_puts_back_as_websockets_deque_did() -> None:
    """websockets puts frames back first, in their order, with ``extendleft(reversed(...))``."""
    frames, reference = _Frames([3, 4]), collections.deque([3, 4])
    for queue in (frames, reference):
        queue.extendleft(reversed([1, 2]))
        queue.append(5)
    assert list(frames) == list(reference) == [1, 2, 3, 4, 5]
    assert [frames.popleft() for _ in range(5)] == [reference.popleft() for _ in range(5)]


async def test_many_frames_at_once_pause_reading_and_all_are_answered_in_order(
    make_server,
) -> None:
    """The session takes whole frames straight from the queue (``ServerConnection.recv``, not
    websockets' three coroutines): past the queue's high mark (``max_queue``: 16 frames) the
    transport stops reading, as websockets' own reading did, and reads again once the session
    has taken them; none is lost or reordered, and the reads went the short way."""
    server = await make_server()
    ws = await greeted(server)
    connection = reader_of(server)
    paused = []
    pause, resume = connection.transport.pause_reading, connection.transport.resume_reading

    def pausing() -> None:
        paused.append(True)
        pause()

    def resuming() -> None:
        paused.append(False)
        resume()

    connection.recv_messages.pause, connection.recv_messages.resume = pausing, resuming
    ws.transport.write(pings(300))
    assert await pongs(ws, 300) == list(range(1, 301))
    assert paused[:2] == [True, False] and paused[-1] is False
    assert not connection.recv_messages.paused
    assert len(connection.recv_messages.frames.queue) == 0
    await ws.close()
