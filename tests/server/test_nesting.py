"""Deep nesting: at most MAX_DEPTH levels; deeper is ``bad_frame`` whatever else the frame is."""

from __future__ import annotations

import msgspec
import pytest
from websockets.asyncio.client import connect

from blackdrez.protocol import v1
from blackdrez.protocol.codec import (
    CLIENT_DECODERS,
    MAX_DEPTH,
    SERVER_DECODERS,
    FrameError,
    decode_hello,
)
from blackdrez.protocol.errors import ErrorCode
from blackdrez.protocol.handshake import Hello


def nested(levels: int) -> object:
    """A value of exactly ``levels`` levels of lists (1: ``[]``)."""
    value: object = []
    for _ in range(levels - 1):
        value = [value]
    return value


def act(depth: int) -> dict:
    """An ``act`` request of exactly ``depth`` levels (the request object is level 1)."""
    return {
        "type": "act",
        "id": 5,
        "table": "t1",
        "action": {"type": "hit", "x": nested(depth - 2)},
    }


@pytest.mark.parametrize("binary", [False, True])
def test_the_deepest_allowed_frame_decodes(binary: bool) -> None:
    frame = (msgspec.msgpack if binary else msgspec.json).encode(act(MAX_DEPTH))
    if not binary:
        frame = frame.decode()
    message = CLIENT_DECODERS[1].decode(frame)
    assert isinstance(message, v1.Act)


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize(
    "value",
    [
        act(MAX_DEPTH + 1),  # a valid request, one level too deep
        {"type": "fly", "x": nested(MAX_DEPTH)},  # an unknown type as well
        {"type": "join", "x": nested(MAX_DEPTH)},  # a missing field as well
        nested(MAX_DEPTH + 1),  # not an object at all
        "far too deep",  # 5000 levels: built as text, too deep even to encode here
    ],
    ids=["valid", "unknown_type", "missing_field", "not_an_object", "far_too_deep"],
)
def test_one_level_too_deep_is_bad_frame_whatever_else_is_wrong(value, binary: bool) -> None:
    if value == "far too deep":
        frame: str | bytes = b"\x91" * 4999 + b"\x90" if binary else "[" * 5000 + "]" * 5000
    else:
        frame = (msgspec.msgpack if binary else msgspec.json).encode(value)
        if not binary:
            frame = frame.decode()
    with pytest.raises(FrameError) as refused:
        CLIENT_DECODERS[1].decode(frame)
    assert refused.value.code == ErrorCode.BAD_FRAME
    assert f"nested deeper than {MAX_DEPTH} levels" in refused.value.message
    with pytest.raises(FrameError) as first:
        decode_hello(frame)
    assert first.value.code == ErrorCode.BAD_FRAME


def test_brackets_inside_strings_do_not_count() -> None:
    name = "[" * (MAX_DEPTH * 3)
    frame = msgspec.json.encode({"type": "hello", "versions": [1], "name": name}).decode()
    assert decode_hello(frame).name == name
    packed = msgspec.msgpack.encode({"type": "hello", "versions": [1], "name": "\x90" * 300})
    assert decode_hello(packed).name == "\x90" * 300


async def test_the_server_answers_bad_frame_with_the_id(server) -> None:
    async with connect(f"ws://127.0.0.1:{server.port}/") as ws:
        await ws.send(msgspec.json.encode(Hello(versions=[1])).decode())
        await ws.recv()
        await ws.send(msgspec.json.encode(act(MAX_DEPTH + 1)).decode())
        reply = SERVER_DECODERS[1].decode(await ws.recv())
    assert isinstance(reply, v1.Error)
    assert (reply.code, reply.id) == (ErrorCode.BAD_FRAME, 5)
