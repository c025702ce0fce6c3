"""Game records as JSON files: what a finished game needs to be replayed and verified.

A record file is one JSON object: :class:`Record`, that is :class:`server.games.base.Record` plus
``dealt``, the cards the players saw leave the stock (one list per deck, or per round in
Blackjack Piles, in the order of the engine's ``deal_order``). ``blackdrez verify`` checks those
cards against the seed once it is revealed.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from server.games import base


class Record(base.Record, kw_only=True):
    """A game record as written to a file: the base record plus the cards dealt.

    ``dealt`` is ``None`` when the writer did not note the cards (then ``verify`` can check the
    commitment and the replay, not the deal).
    """

    dealt: list[list[str]] | None = None


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(Record)


_ONE_PER_LINE = ("actions", "dealt")
"""Fields written one item a line, so that a record reads (and diffs) action by action."""


def encode_record(record: base.Record) -> bytes:
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


def write_record(record: base.Record, path: str | Path) -> None:
    """Write ``record`` to the JSON file ``path``."""
    Path(path).write_bytes(encode_record(record))


def read_record(path: str | Path) -> Record:
    """Read a record from the JSON file ``path``."""
    return decode_record(Path(path).read_bytes())
