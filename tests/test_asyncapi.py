"""The WebSocket protocol described in AsyncAPI 3.0 (issue 38): the committed document is what
the code makes, AsyncAPI's own parser (``@asyncapi/parser``, run by Node) finds no error in it,
and it carries every message of the protocol in both encodings, with the handshake's reply."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, get_args

import pytest

from blackdrez.protocol import asyncapi, v1

ROOT = Path(__file__).resolve().parent.parent
CHECKER = ROOT / "tools" / "asyncapi"
DOCUMENT: dict[str, Any] = json.loads(asyncapi.PATH.read_text("utf-8"))


def structs(union: Any) -> set[str]:
    return {member.__name__ for member in get_args(union)}


def named(refs: list[dict[str, str]]) -> set[str]:
    """The message keys ``refs`` point at."""
    return {ref["$ref"].rsplit("/", 1)[1] for ref in refs}


def test_the_committed_document_is_what_the_code_makes() -> None:
    assert asyncapi.check(), f"{asyncapi.PATH} is stale: run `{asyncapi.REGENERATE}`"


@pytest.fixture(scope="module")
def parser() -> Path:
    """The folder of the parser's script, its packages installed (``npm install`` once)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("no Node.js/npm: the AsyncAPI parser runs on Node (the machine image's)")
    if not (CHECKER / "node_modules" / "@asyncapi" / "parser").is_dir():
        installed = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=CHECKER, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert installed.returncode == 0, installed.stdout + installed.stderr
    return CHECKER


def validate(checker: Path, document: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["node", "validate.mjs", str(document)],
        cwd=checker, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_asyncapis_parser_finds_no_error(parser: Path) -> None:
    checked = validate(parser, asyncapi.PATH)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "valid AsyncAPI 3.0.0: 6 operations" in checked.stdout
    assert "error" not in checked.stdout.replace("0 error", "")


def test_the_parser_refuses_a_broken_document(parser: Path, tmp_path: Path) -> None:
    """The check can fail: an operation on a channel that does not exist."""
    broken = json.loads(json.dumps(DOCUMENT))
    broken["operations"]["receiveHello_json"]["channel"] = {"$ref": "#/channels/nowhere"}
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    checked = validate(parser, path)
    assert checked.returncode == 1 and "invalid-ref" in checked.stdout, checked.stdout


def test_every_message_in_both_encodings_with_the_handshake() -> None:
    client, server = structs(v1.ClientMessage), structs(v1.ServerMessage)
    channels, operations = DOCUMENT["channels"], DOCUMENT["operations"]
    assert {c: channels[c]["address"] for c in channels} == {"json": "/", "msgpack": "/"}
    encodings = {"json": "application/json", "msgpack": "application/msgpack"}
    for encoding, content_type in encodings.items():
        messages = channels[encoding]["messages"]
        assert client | server <= set(messages), (client | server) - set(messages)
        assert {m["contentType"] for m in messages.values()} == {content_type}
        assert messages["Hint"]["name"] == messages["HintReply"]["name"] == "hint"
        assert named(operations[f"sendServerMessage_{encoding}"]["messages"]) == server
        assert named(operations[f"receiveClientMessage_{encoding}"]["messages"]) == client - {
            "Hello"
        }
        hello = operations[f"receiveHello_{encoding}"]
        assert named(hello["messages"]) == {"Hello"}
        assert named(hello["reply"]["messages"]) == {"Welcome", "Error"}
    join = DOCUMENT["components"]["schemas"]["JoinTable"]
    assert join["properties"]["type"]["enum"] == ["join"]
    assert "blackdrez.Hit" in DOCUMENT["components"]["schemas"], "the games' payloads too"
