"""Encoding and decoding frames: JSON in text frames, MessagePack in binary frames.

Encoders and decoders are built once per version and reused (msgspec's fastest path). Decoding
failures become :class:`FrameError` with the :class:`~protocol.errors.ErrorCode` that the server
sends back, so every bad frame gets a typed answer.
"""

from __future__ import annotations

from typing import Any

import msgspec

from protocol import v1
from protocol.errors import ErrorCode
from protocol.handshake import Hello

Frame = str | bytes


class FrameError(Exception):
    """A frame that cannot become a message; ``code`` says why."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _classify(error: msgspec.DecodeError) -> FrameError:
    text = str(error)
    if isinstance(error, msgspec.ValidationError):
        if "`$.type`" in text or "missing required field `type`" in text:
            return FrameError(ErrorCode.UNKNOWN_TYPE, f"unknown message type: {text}")
        return FrameError(ErrorCode.BAD_MESSAGE, text)
    return FrameError(ErrorCode.BAD_FRAME, f"undecodable frame: {text}")


_json_encoder = msgspec.json.Encoder()
_msgpack_encoder = msgspec.msgpack.Encoder()


def encode(message: Any, binary: bool) -> Frame:
    """Encode a message: MessagePack bytes when ``binary``, else JSON text."""
    if binary:
        return _msgpack_encoder.encode(message)
    return _json_encoder.encode(message).decode("utf-8")


class Decoder:
    """Decodes frames of one type (a Struct or a tagged union) in either encoding."""

    def __init__(self, type_: Any) -> None:
        self._json = msgspec.json.Decoder(type_)
        self._msgpack = msgspec.msgpack.Decoder(type_)

    def decode(self, frame: Frame) -> Any:
        """Decode a text frame as JSON or a binary frame as MessagePack; raise FrameError."""
        try:
            if isinstance(frame, str):
                return self._json.decode(frame)
            return self._msgpack.decode(frame)
        except msgspec.DecodeError as error:
            raise _classify(error) from None
        except RecursionError:
            raise FrameError(ErrorCode.BAD_FRAME, "the frame is nested too deeply") from None


class _NeverSent(msgspec.Struct, tag="-", tag_field="type"):
    """Makes the hello decoder a tagged union, so ``"type": "hello"`` is required."""


hello_decoder = Decoder(Hello | _NeverSent)
"""The first frame of every connection, whatever the version."""

CLIENT_DECODERS: dict[int, Decoder] = {1: Decoder(v1.ClientMessage)}
"""Per protocol version: what a server decodes after the handshake."""

SERVER_DECODERS: dict[int, Decoder] = {1: Decoder(v1.ServerMessage)}
"""Per protocol version: what a client decodes."""


def decode_hello(frame: Frame) -> Hello:
    """Decode a connection's first frame; anything but a valid hello raises FrameError."""
    try:
        hello = hello_decoder.decode(frame)
    except FrameError as error:
        if error.code is ErrorCode.UNKNOWN_TYPE:
            raise FrameError(ErrorCode.HELLO_REQUIRED, "the first message must be hello") from None
        raise
    if not isinstance(hello, Hello):
        raise FrameError(ErrorCode.HELLO_REQUIRED, "the first message must be hello")
    return hello
