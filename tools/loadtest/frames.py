"""What a load-test connection sends and reads, as cheaply as the measurement needs.

Theory of operation
-------------------
Requests are ``blackdrez.protocol.v1`` Structs encoded by ``blackdrez.protocol.codec`` (so the load
is the protocol
itself, not a hand-made imitation). Server frames are decoded into :class:`LeanFrame`, which
holds only what a bot reads (type, id, seq, legal actions, the seat values of the view):
msgspec skips the rest fast, so a worker spends its time on the network, not on decoding. The
echo baseline's client frames are built by hand (:func:`masked_frame`): there is no protocol
there, only the cost of a WebSocket frame.
"""

from __future__ import annotations

import random
from typing import Any

import msgspec

try:
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover  (websockets' wheels ship it)
    from websockets.utils import apply_mask


class SeatValue(msgspec.Struct):
    value: int | None = None


class LeanView(msgspec.Struct):
    phase: str = ""
    to_act: int | None = None
    seats: list[SeatValue] = []


class LeanFrame(msgspec.Struct):
    """Only what a load-test bot reads of a server frame (msgspec skips the rest fast)."""

    type: str
    id: int | None = None
    seq: int | None = None
    table: Any = None
    legal: list[dict[str, Any]] = []
    view: LeanView | None = None
    code: str | None = None


LEAN_DECODERS = {True: msgspec.msgpack.Decoder(LeanFrame), False: msgspec.json.Decoder(LeanFrame)}


def choose_action(view: LeanView, legal: list[dict[str, Any]], threshold: int = 8) -> dict:
    """The ``threshold`` bot on a lean view: hit below ``threshold``, else stand, else withdraw."""
    kinds = {action.get("type") for action in legal}
    seat = view.to_act
    value = (view.seats[seat].value or 0) if seat is not None and seat < len(view.seats) else 0
    if "hit" in kinds and value < threshold:
        return {"type": "hit"}
    if "stand" in kinds:
        return {"type": "stand"}
    if "withdraw" in kinds:
        return {"type": "withdraw"}
    return legal[0]


def masked_frame(payload: bytes) -> bytes:
    """A client's binary WebSocket frame of ``payload`` (masked, as clients must): the echo
    baseline's, made once per connection (:func:`client_frame`)."""
    return client_frame(payload)


_MASKS = random.Random()
"""Masking keys of the bots' frames (RFC 6455 asks for unpredictable ones to defeat proxy cache
poisoning; a load test on loopback needs only that they vary, and this is cheaper than
``os.urandom``'s system call per frame)."""


def client_frame(message: str | bytes) -> bytes:
    """``message`` as one final, masked client frame: text for a str, binary for bytes."""
    if isinstance(message, str):
        payload, first = message.encode(), 0x81
    else:
        payload, first = message, 0x82
    size = len(payload)
    if size < 126:
        header = bytes((first, 0x80 | size))
    elif size < 65536:
        header = bytes((first, 0x80 | 126)) + size.to_bytes(2, "big")
    else:
        header = bytes((first, 0x80 | 127)) + size.to_bytes(8, "big")
    mask = _MASKS.randbytes(4)
    return header + mask + apply_mask(payload, mask)


def echo_frame_size(size: int) -> int:
    """The length on the wire of the server's unmasked echo of a ``size``-byte frame."""
    return size + (2 if size < 126 else 4 if size < 65536 else 10)
