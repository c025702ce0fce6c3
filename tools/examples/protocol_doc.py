"""Build docs/protocol.md from its template and a real recorded session.

The template (``tools/examples/protocol.md.in``) is the prose; each example in it is a
placeholder that names frames of the session recorded by
:mod:`blackdrez.tools.examples.record_session`,
so every example in the doc is a frame a real server sent or accepted:

* ``@@EX kind step who dir type [n [path]]@@``: the ``n``-th frame (default 0) of ``type`` that
  ``who`` sent or received (``dir``: ``sent`` / ``recv``) during ``step``, or the part of it at the
  dotted ``path`` (``view``, ``action``...);
* ``@@EV kind game type [n]@@``: the ``n``-th distinct event of ``type`` seen in any update of a
  table of ``game``;
* ``@@RAW step who dir n@@``: the ``n``-th raw frame, verbatim;
* ``@@MADE kind name@@``: one of :data:`MADE`, engine Structs built here for events the short
  session does not reach.

``kind`` becomes the ``<!-- example: kind -->`` marker that ``tests/test_protocol.py`` uses to
decode each example with the right decoder.

Run: ``python -m blackdrez.tools.examples.protocol_doc`` (records a session and writes
docs/protocol.md);
``--session FILE`` reuses a recording written by ``record_session``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from pathlib import Path
from typing import Any

import msgspec

from blackdrez.games.blackdrez import rules as blackdrez
from blackdrez.games.blackjack_piles import rules as blackjack_piles
from blackdrez.games.blue_jacket import rules as blue_jacket
from blackdrez.tools.examples.record_session import Recorder, session

ROOT = Path(__file__).resolve().parent.parent.parent
TEMPLATE = Path(__file__).resolve().parent / "protocol.md.in"
OUTPUT = ROOT / "docs" / "protocol.md"
WIDTH = 96

MADE: dict[str, Any] = {
    "stood": blackdrez.Stood(seat=1),
    "pot_split": blackdrez.PotSplit(
        winners=[0, 2], reason="eleven", shares=[["Q5", "N3"], ["R2", "P9"]], carry_over=["B1"]
    ),
    "piles_moved": blackjack_piles.Moved(card="9S", source=0, target=3),
    "piles_round_started": blackjack_piles.RoundStarted(
        round=2, rules=blackjack_piles.rules_of(2), stock_top="4H", stock_count=52
    ),
    "no_progress": blue_jacket.NoProgress(score=31),
}
"""Examples of events the recorded session does not reach, built from the engines' Structs."""


def layout(value: Any, indent: int = 0) -> str:
    """JSON text that keeps short objects and lists on one line, like a person would write it."""
    flat = json.dumps(value, ensure_ascii=False)
    if len(flat) + indent <= WIDTH or not isinstance(value, dict | list) or not value:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k)}: {layout(v, indent + 2)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [pad + layout(v, indent + 2) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def _block(kind: str, value: Any) -> str:
    return f"<!-- example: {kind} -->\n```json\n{layout(value)}\n```"


def _at(value: Any, path: str) -> Any:
    for part in path.split(".") if path else []:
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def _object(frame: str) -> dict[str, Any] | None:
    try:
        value = json.loads(frame)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def render(template: str, lines: list[dict[str, Any]]) -> str:
    """Fill every placeholder of ``template`` from the recorded ``lines``."""
    games: dict[str, str] = {}
    for line in lines:
        message = _object(line["frame"]) if line["dir"] == "recv" else None
        if message and message["type"] == "joined":
            games[message["table"]["id"]] = message["table"]["game"]
        elif message and message["type"] == "snapshot":
            games[message["table"]] = message["info"]["game"]

    def frame(match: re.Match[str]) -> str:
        kind, step, who, direction, kind_of, *rest = match[1].split()
        index = int(rest[0]) if rest else 0
        found = [
            message
            for line in lines
            if (line["step"], line["who"], line["dir"]) == (step, who, direction)
            and (message := _object(line["frame"])) is not None
            and message.get("type") == kind_of
        ]
        if len(found) <= index:
            raise LookupError(f"no frame for {match[0]}")
        return _block(kind, _at(found[index], rest[1] if len(rest) > 1 else ""))

    def event(match: re.Match[str]) -> str:
        kind, game, kind_of, *rest = match[1].split()
        found: list[Any] = []
        for line in lines:
            message = _object(line["frame"]) if line["dir"] == "recv" else None
            if message and message["type"] == "update" and games.get(message["table"]) == game:
                found += [
                    e["event"]
                    for e in message["events"]
                    if e["event"]["type"] == kind_of and e["event"] not in found
                ]
        index = int(rest[0]) if rest else 0
        if len(found) <= index:
            raise LookupError(f"no event for {match[0]}")
        return _block(kind, found[index])

    def raw(match: re.Match[str]) -> str:
        step, who, direction, index = match[1].split()
        frames = [
            line["frame"]
            for line in lines
            if (line["step"], line["who"], line["dir"]) == (step, who, direction)
        ]
        return frames[int(index)]

    def made(match: re.Match[str]) -> str:
        kind, name = match[1].split()
        return _block(kind, json.loads(msgspec.json.encode(MADE[name])))

    text = re.sub(r"@@EX (.+?)@@", frame, template)
    text = re.sub(r"@@EV (.+?)@@", event, text)
    text = re.sub(r"@@RAW (.+?)@@", raw, text)
    return re.sub(r"@@MADE (.+?)@@", made, text)


def main(argv: list[str] | None = None) -> None:
    """Record a session (or read one) and write docs/protocol.md."""
    parser = argparse.ArgumentParser(prog="python -m blackdrez.tools.examples.protocol_doc")
    parser.add_argument("--session", type=Path, help="a recording from record_session")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    if args.session is not None:
        text = args.session.read_text(encoding="utf-8")
        lines = [json.loads(line) for line in text.splitlines()]
    else:
        recorder = Recorder()
        asyncio.run(session(recorder))
        lines = recorder.lines
    args.output.write_text(render(TEMPLATE.read_text(encoding="utf-8"), lines), encoding="utf-8")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
