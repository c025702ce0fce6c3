"""Game records as JSON files: what a finished game needs to be replayed and verified.

A record file is one JSON object: :class:`Record`, the game, its config, its seed (or explicit
card order), every action applied, and ``dealt``, the cards the players saw leave the stock (one
list per deck, or per round in Blackjack Piles, in the order of the engine's ``deal_order``).
``blackdrez verify`` checks those cards against the seed once it is revealed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec


class Record(msgspec.Struct, kw_only=True):
    """A finished or running game as data: enough to replay it exactly and to verify its deal.

    ``actions`` holds ``[seat, action]`` pairs, each action in its wire form (a dict with a
    ``type``). Exactly one of ``seed`` and ``order`` is set.
    """

    game: str
    config: dict[str, Any]
    seed: str | None = None
    commitment: str | None = None
    order: list[Any] | None = None
    actions: list[tuple[int, dict[str, Any]]] = []
    dealt: list[list[str]] | None = None
    """The cards dealt, one list per shuffle context; ``None`` when the writer did not note them
    (then ``verify`` can check the commitment and the replay, not the deal)."""


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(Record)


_ONE_PER_LINE = ("actions", "dealt")
"""Fields written one item a line, so that a record reads (and diffs) action by action."""


def encode_record(record: Record) -> bytes:
    """Return ``record`` as JSON bytes: one field a line, one action (or dealt deck) a line."""
    lines = []
    for field in record.__struct_fields__:
        value = getattr(record, field)
        if field in _ONE_PER_LINE and value:
            items = ",\n  ".join(_ENCODER.encode(item).decode() for item in value)
            text = f"[\n  {items}\n ]"
        else:
            text = _ENCODER.encode(value).decode()
        lines.append(f" {_ENCODER.encode(field).decode()}: {text}")
    return ("{\n" + ",\n".join(lines) + "\n}\n").encode()


def decode_record(data: bytes | str) -> Record:
    """Parse a record from JSON; raises ``msgspec.ValidationError`` or ``DecodeError``."""
    return _DECODER.decode(data)


def write_record(record: Record, path: str | Path) -> None:
    """Write ``record`` to the JSON file ``path``."""
    Path(path).write_bytes(encode_record(record))


def read_record(path: str | Path) -> Record:
    """Read a record from the JSON file ``path``."""
    return decode_record(Path(path).read_bytes())
