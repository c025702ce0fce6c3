"""Encoding and decoding frames: JSON in text frames, MessagePack in binary frames.

Encoders and decoders are built once per version and reused (msgspec's fastest path). Decoding
failures become :class:`FrameError` with the :class:`~blackdrez.protocol.errors.ErrorCode` that the
server
sends back, so every bad frame gets a typed answer.

Values may nest at most :data:`MAX_DEPTH` levels (the frame's own object is level 1). A deeper
frame is ``bad_frame`` before anything else is looked at, so the answer does not depend on which
field is too deep or on how much stack the decoder has left. A frame too short to hold that many
levels is not looked at; a longer one is bounded by a count of its bracket (or MessagePack
container) bytes, and only one with more of them than the limit is decoded untyped to be measured.
"""

from __future__ import annotations

from typing import Any

import msgspec

from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.protocol.handshake import Hello

Frame = str | bytes

MAX_DEPTH = 64
"""The deepest nesting a client frame may have; deeper frames are ``bad_frame``."""
_NOT_CONTAINER_BYTES = bytes(b for b in range(256) if not (0x80 <= b <= 0x9F or 0xDC <= b <= 0xDF))
"""Every byte but MessagePack's map and array headers (deleting these leaves an upper bound)."""


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
    """Decodes frames of one type (a Struct or a tagged union) in either encoding; with
    ``limit_depth``, frames nested deeper than :data:`MAX_DEPTH` are ``bad_frame``."""

    def __init__(self, type_: Any, *, limit_depth: bool = False) -> None:
        self._json = msgspec.json.Decoder(type_)
        self._msgpack = msgspec.msgpack.Decoder(type_)
        self._limit_depth = limit_depth

    def decode(self, frame: Frame) -> Any:
        """Decode a text frame as JSON or a binary frame as MessagePack; raise FrameError."""
        if self._limit_depth and _too_deep(frame):
            raise FrameError(
                ErrorCode.BAD_FRAME, f"the frame is nested deeper than {MAX_DEPTH} levels"
            )
        try:
            if isinstance(frame, str):
                return self._json.decode(frame)
            return self._msgpack.decode(frame)
        except msgspec.ValidationError as error:
            # A typed decoder checks a value against the type as it reads it: a frame whose
            # first value is wrong is refused before its trailing bytes are seen. Is the frame
            # well-formed at all? (Only on this error path: ``bad_frame`` comes first.)
            _check_well_formed(frame)
            raise _classify(error) from None
        except msgspec.DecodeError as error:
            raise _classify(error) from None
        except RecursionError:
            raise FrameError(ErrorCode.BAD_FRAME, "the frame is nested too deeply") from None


def _check_well_formed(frame: Frame) -> None:
    """Raise ``bad_frame`` if ``frame`` is not one value of its encoding (trailing bytes)."""
    try:
        (msgspec.json if isinstance(frame, str) else msgspec.msgpack).decode(frame)
    except msgspec.DecodeError as error:
        raise FrameError(ErrorCode.BAD_FRAME, f"undecodable frame: {error}") from None
    except RecursionError:
        raise FrameError(ErrorCode.BAD_FRAME, "the frame is nested too deeply") from None


def _too_deep(frame: Frame) -> bool:
    """Whether ``frame`` nests deeper than :data:`MAX_DEPTH` levels (see the module docstring)."""
    if isinstance(frame, str):
        # Each level costs two characters at least: most frames are too short to be too deep.
        if len(frame) <= 2 * MAX_DEPTH or frame.count("[") + frame.count("{") <= MAX_DEPTH:
            return False
        untyped: Any = msgspec.json
    else:
        if len(frame) <= MAX_DEPTH or len(frame.translate(None, _NOT_CONTAINER_BYTES)) <= MAX_DEPTH:
            return False
        untyped = msgspec.msgpack
    try:
        value = untyped.decode(frame)
    except RecursionError:
        return True
    except msgspec.DecodeError:
        return False  # malformed: the typed decoder says so
    levels = [(value, 1)]
    while levels:
        item, level = levels.pop()
        if isinstance(item, dict | list):
            if level > MAX_DEPTH:
                return True
            children = item.values() if isinstance(item, dict) else item
            levels.extend((child, level + 1) for child in children)
    return False


class _NeverSent(msgspec.Struct, tag="-", tag_field="type"):
    """Makes the hello decoder a tagged union, so ``"type": "hello"`` is required."""


hello_decoder = Decoder(Hello | _NeverSent, limit_depth=True)
"""The first frame of every connection, whatever the version."""

CLIENT_DECODERS: dict[int, Decoder] = {1: Decoder(v1.ClientMessage, limit_depth=True)}
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
