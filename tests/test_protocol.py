"""The protocol's published contract: the JSON Schema, the examples in docs/protocol.md, the codec.

Each fenced ``json`` block in docs/protocol.md is preceded by ``<!-- example: KIND -->`` where KIND
says how the block must decode: ``hello``, ``client`` (a v1 client message), ``server`` (a v1
server message), ``table_event``, ``limits`` (``welcome.limits``) or ``<game>.<action|event|view>``.
An example must decode with the server's own decoders and encode back to the same JSON, so no
example can name a field the code does not have (or, from the server, leave one out).
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest

from blackdrez.clients.bots import run_bot
from blackdrez.protocol import schema, v1
from blackdrez.protocol.codec import (
    CLIENT_DECODERS,
    SERVER_DECODERS,
    FrameError,
    decode_hello,
    encode,
)
from blackdrez.protocol.errors import ErrorCode
from blackdrez.protocol.handshake import Hello
from blackdrez.server.app import GameServer, Settings

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "protocol.md"
NODE_EXAMPLE = ROOT / "tools" / "examples" / "node_client.mjs"
_BLOCK = re.compile(r"(?:<!-- example: (?P<kind>[a-z_.]+) -->\n)?```json\n(?P<body>.*?)\n```", re.S)


def _examples() -> list[tuple[str, str]]:
    """``(kind, text)`` of every json block in the doc; a block without a marker has kind ''."""
    text = DOC.read_text(encoding="utf-8")
    return [(m["kind"] or "", m["body"]) for m in _BLOCK.finditer(text)]


EXAMPLES = _examples()
GAME_TYPES: dict[str, Any] = {
    f"{game}.{kind}": type_
    for game, unions in schema.GAME_UNIONS.items()
    for kind, type_ in unions.items()
}


def _plain(value: Any) -> Any:
    """``value`` as the JSON it encodes to, decoded again (tuples become lists)."""
    return json.loads(msgspec.json.encode(value))


def _tag(struct_type: Any) -> str:
    return struct_type.__struct_config__.tag


def _decode(kind: str, text: str) -> Any:
    """Decode one example the way its receiver would."""
    if kind == "hello":
        return decode_hello(text)
    if kind == "client":
        return CLIENT_DECODERS[1].decode(text)
    if kind == "server":
        return SERVER_DECODERS[1].decode(text)
    if kind == "table_event":
        return msgspec.json.decode(text, type=v1.TableEvent)
    if kind == "limits":
        return msgspec.json.decode(text, type=v1.Limits)
    return msgspec.json.decode(text, type=GAME_TYPES[kind])


# --------------------------------------------------------------------------- the schema


def test_the_committed_schema_matches_the_code() -> None:
    assert schema.check(), (
        f"{schema.SCHEMA_PATH} is out of date with the protocol code: regenerate it with "
        f"`{schema.REGENERATE}` and commit it"
    )


def test_the_schema_names_every_message_of_every_union() -> None:
    document = json.loads(schema.render())
    unions = {
        "client_message": v1.ClientMessage,
        "server_message": v1.ServerMessage,
        "table_event": v1.TableEvent,
        **{f"{name.replace('.', '_')}": t for name, t in GAME_TYPES.items() if "view" not in name},
    }
    for key, union in unions.items():
        mapping = document[key]["discriminator"]["mapping"]
        assert set(mapping) == {_tag(member) for member in get_args(union)}, key
        for reference in mapping.values():
            assert reference.removeprefix("#/$defs/") in document["$defs"]
    assert document["hello"] == {"$ref": "#/$defs/Hello"}
    assert set(document["handshake_reply"]["discriminator"]["mapping"]) == {"welcome", "error"}
    assert document["blue_jacket_view"] == {"$ref": "#/$defs/blue_jacket.View"}


def test_the_check_command_fails_on_drift_and_passes_after_regenerating(tmp_path: Path) -> None:
    target = tmp_path / "v1.json"
    assert schema.main(["--check", "--output", str(target)]) == 1  # missing
    assert schema.main(["--output", str(target)]) == 0
    assert schema.main(["--check", "--output", str(target)]) == 0
    text = target.read_text(encoding="utf-8")
    assert text.endswith("}\n") and text.startswith('{\n  "$defs": {')
    target.write_text(text.replace('"Ping"', '"Pingg"', 1), encoding="utf-8")
    assert schema.main(["--check", "--output", str(target)]) == 1


# --------------------------------------------------------------------------- the doc's examples


def test_the_doc_has_examples_and_every_one_is_marked() -> None:
    assert len(EXAMPLES) > 50
    known = {"hello", "client", "server", "table_event", "limits", *GAME_TYPES}
    unmarked = [text[:60] for kind, text in EXAMPLES if kind not in known]
    assert not unmarked, "precede each ```json block with <!-- example: KIND -->"


@pytest.mark.parametrize(("kind", "text"), EXAMPLES, ids=[k for k, _ in EXAMPLES])
def test_each_example_decodes_and_encodes_back_to_the_same_json(kind: str, text: str) -> None:
    message = _decode(kind, text)
    encoded, example = _plain(message), json.loads(text)
    if kind in ("hello", "client"):  # a client may leave out fields that have defaults
        assert example.keys() <= encoded.keys()
        encoded = {key: encoded[key] for key in example}
    assert encoded == example


def test_the_doc_shows_every_message_type() -> None:
    shown: dict[str, set[type]] = {}
    for kind, text in EXAMPLES:
        shown.setdefault(kind, set()).add(type(_decode(kind, text)))
    assert shown["client"] | shown["hello"] >= set(get_args(v1.ClientMessage))
    assert shown["server"] == set(get_args(v1.ServerMessage))
    assert shown["table_event"] == set(get_args(v1.TableEvent))
    for game, unions in schema.GAME_UNIONS.items():
        assert shown[f"{game}.event"] == set(get_args(unions["event"])), game
        assert shown[f"{game}.view"] == {unions["view"]}, game
        assert shown[f"{game}.action"], game


def _tables_to_games() -> dict[str, str]:
    games = {}
    for kind, text in EXAMPLES:
        if kind != "server":
            continue
        message = SERVER_DECODERS[1].decode(text)
        infos = {
            v1.Joined: lambda m: [m.table],
            v1.Snapshot: lambda m: [m.info],
            v1.Update: lambda m: [m.info] if m.info else [],
            v1.Tables: lambda m: m.tables,
            v1.LobbyUpdate: lambda m: m.tables,
        }.get(type(message), lambda m: [])(message)
        games.update((info.id, info.game) for info in infos)
    return games


def test_game_payloads_in_the_examples_are_the_tables_games_own() -> None:
    games = _tables_to_games()
    checked = 0
    for kind, text in EXAMPLES:
        message = _decode(kind, text) if kind == "server" else None
        if not isinstance(message, v1.Snapshot | v1.Update):
            continue
        unions = schema.GAME_UNIONS[games[message.table]]
        if message.view is not None:
            assert _plain(msgspec.convert(message.view, unions["view"])) == (message.view)
        for action in message.legal:
            msgspec.convert(action, unions["action"])
        for numbered in getattr(message, "events", []):
            event = msgspec.convert(numbered.event, v1.TableEvent | unions["event"])
            assert _plain(event) == numbered.event
        checked += 1
    assert checked >= 10


def test_example_sequence_numbers_are_consecutive_within_each_update() -> None:
    for kind, text in EXAMPLES:
        message = _decode(kind, text) if kind == "server" else None
        if isinstance(message, v1.Update) and message.events:
            numbers = [e.seq for e in message.events]
            assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
            assert message.seq == numbers[-1]


# --------------------------------------------------------------------------- the codec


MESSAGES = [(kind, text) for kind, text in EXAMPLES if kind in ("hello", "client", "server")]


@pytest.mark.parametrize(("kind", "text"), MESSAGES, ids=[k for k, _ in MESSAGES])
def test_json_and_messagepack_round_trip(kind: str, text: str) -> None:
    message = _decode(kind, text)
    packed = encode(message, binary=True)
    assert isinstance(packed, bytes)
    again = _decode(kind, packed)
    assert again == message
    assert json.loads(encode(again, binary=False)) == _plain(message)
    assert msgspec.msgpack.decode(packed) == _plain(message)


def test_a_message_built_in_code_round_trips_in_both_encodings() -> None:
    update = v1.Update(
        table="t1",
        seq=3,
        events=[v1.Numbered(seq=3, event={"type": "turn", "seat": 1})],
        view=None,
        legal=[{"type": "hit"}],
        deadline=1.5,
    )
    for binary in (False, True):
        assert SERVER_DECODERS[1].decode(encode(update, binary)) == update
    hello = Hello(versions=[1, 2], name="Ann")
    for binary in (False, True):
        assert decode_hello(encode(hello, binary)) == hello
        assert CLIENT_DECODERS[1].decode(encode(hello, binary)) == hello


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("not json", ErrorCode.BAD_FRAME),
        ('{"type": "ping"', ErrorCode.BAD_FRAME),
        (b"\xc1", ErrorCode.BAD_FRAME),
        # Well-formed at first (a number, an object) with bytes after it: not one frame of
        # either encoding, whatever the first part is.
        (b"not json", ErrorCode.BAD_FRAME),
        ("1 not json", ErrorCode.BAD_FRAME),
        ('{"type": "join", "id": 1} x', ErrorCode.BAD_FRAME),
        (msgspec.msgpack.encode({"type": "fly"}) + b"\xff", ErrorCode.BAD_FRAME),
        (
            '{"type": "act", "table": "t", "action": ' + "[" * 100_000 + "]" * 100_000 + "}",
            ErrorCode.BAD_FRAME,
        ),
        ('{"type": "fly", "id": 1}', ErrorCode.UNKNOWN_TYPE),
        ('{"type": 5}', ErrorCode.UNKNOWN_TYPE),
        ('{"id": 1}', ErrorCode.UNKNOWN_TYPE),
        (msgspec.msgpack.encode({"type": "fly"}), ErrorCode.UNKNOWN_TYPE),
        ('{"type": "join", "id": 1}', ErrorCode.BAD_MESSAGE),
        ('{"type": "ping", "id": -1}', ErrorCode.BAD_MESSAGE),
        ('{"type": "ping", "id": 9007199254740992}', ErrorCode.BAD_MESSAGE),
        ('{"type": "resync", "table": "", "since": 0}', ErrorCode.BAD_MESSAGE),
        ('{"type": "create_table", "options": {"colour": "red"}}', ErrorCode.BAD_MESSAGE),
        ('{"type": "start_solitaire", "game": "blackdrez"}', ErrorCode.BAD_MESSAGE),
        (msgspec.msgpack.encode({"type": "join", "table": 5}), ErrorCode.BAD_MESSAGE),
    ],
)
def test_bad_frames_are_classified(frame: str | bytes, code: ErrorCode) -> None:
    with pytest.raises(FrameError) as failure:
        CLIENT_DECODERS[1].decode(frame)
    assert failure.value.code == code


def test_valid_frames_decode_to_their_messages() -> None:
    decoder = CLIENT_DECODERS[1]
    assert decoder.decode('{"type": "ping", "id": 7}') == v1.Ping(id=7)
    assert decoder.decode('{"type": "ready", "table": "t1", "extra": 1}') == v1.SetReady(table="t1")
    assert decoder.decode(b"\x82\xa4type\xa4ping\xa2id\x03") == v1.Ping(id=3)
    leaderboard = '{"type": "leaderboard", "id": 2, "game": "blue_jacket", "entries": []}'
    assert SERVER_DECODERS[1].decode(leaderboard) == v1.Leaderboard(
        id=2, game="blue_jacket", entries=[]
    )
    assert decoder.decode('{"type": "leaderboard", "game": "blue_jacket"}') == v1.GetLeaderboard(
        game="blue_jacket"
    )


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ('{"type": "ping"}', ErrorCode.HELLO_REQUIRED),
        ('{"type": "hello", "versions": "one"}', ErrorCode.BAD_MESSAGE),
        ("{", ErrorCode.BAD_FRAME),
        (b"not json", ErrorCode.BAD_FRAME),
        ('{"type": "hello"} and more', ErrorCode.BAD_FRAME),
    ],
)
def test_a_first_frame_that_is_not_hello_is_classified(frame: str, code: ErrorCode) -> None:
    with pytest.raises(FrameError) as failure:
        decode_hello(frame)
    assert failure.value.code == code


def test_hello_ignores_unknown_fields_so_old_servers_accept_new_clients() -> None:
    hello = decode_hello('{"type": "hello", "versions": [1, 7], "features": ["x"]}')
    assert hello == Hello(versions=[1, 7])


# --------------------------------------------------------------------------- another language


def _node_with_websocket() -> str | None:
    """The node binary if it has a WebSocket (global, or behind Node 20's flag), else None."""
    node = shutil.which("node")
    if node is None:
        return None
    probe = "process.exit(typeof WebSocket === 'function' ? 0 : 1)"
    found = subprocess.run(
        [node, "--experimental-websocket", "-e", probe], capture_output=True, timeout=30
    )
    return node if found.returncode == 0 else None


async def test_the_node_example_client_plays_a_game_against_a_bot() -> None:
    node = _node_with_websocket()
    if node is None:
        pytest.skip("no Node.js with WebSocket")
    server = GameServer(Settings(port=0, ping_interval=None), bot_client=run_bot)
    await server.start()
    try:
        process = await asyncio.create_subprocess_exec(
            node,
            "--experimental-websocket",
            str(NODE_EXAMPLE),
            f"ws://127.0.0.1:{server.port}/",
            "Nora",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(process.communicate(), 60)
    finally:
        await server.stop()
    text = output.decode()
    assert process.returncode == 0, text
    assert "welcome: player p_" in text
    assert "game over:" in text
    assert "commitment holds (fair)" in text


def test_the_table_options_keep_their_fields() -> None:
    """``TableOptions`` refuses unknown fields (a ``create_table`` with a misspelt option is a
    ``bad_message``), so a reader of an older version (a node mid-upgrade, an installed Python
    client) fails on any options with a field it does not know: joined, snapshot, lobby records
    and logs all carry them. A new table setting goes beside the options (``create_table``,
    ``TableInfo``), which older readers ignore; this list changes only with a new protocol
    version."""
    assert [field.name for field in msgspec.structs.fields(v1.TableOptions)] == [
        "name",
        "seats",
        "decks",
        "turn_seconds",
        "grace_seconds",
        "max_rounds",
        "round_pause_seconds",
        "private",
        "rated",
    ]
