"""The WebSocket protocol as an AsyncAPI 3.0 document, generated from the message Structs.

Theory of operation
-------------------
AsyncAPI is to message protocols what OpenAPI is to HTTP. This module turns the protocol's own
JSON Schema (:func:`blackdrez.protocol.schema.build`, itself made from the Structs) into one
AsyncAPI 3.0 document, ``docs/schema/asyncapi.json``, describing a node as the application:

* **One server**, a node's port (``ws://HOST:8765/``), and **two channels** on its one address,
  one per encoding: ``json`` (text frames, ``application/json``) and ``msgpack`` (binary frames,
  ``application/msgpack``, the same structure). The encoding of the client's ``hello`` is the
  connection's (docs/protocol.md, "Transport").
* **The handshake** (version negotiation): on each channel the operation ``receiveHello`` takes
  ``hello`` and replies ``welcome`` (the highest version both speak) or ``error``
  (``unsupported_version``, then close 4001).
* **Every v1 message**, one AsyncAPI message per Struct (keyed by the Struct's name, since a
  request and its reply may share a ``type``; its ``name`` is the wire ``type``), its payload
  the Struct's schema: ``receiveClientMessage`` (what clients send) and ``sendServerMessage``
  (what the node sends: replies and pushes) on each channel. The game payloads carried as
  ``Any`` (``action``, ``view``, ``event``) are in the components too, as the protocol schema
  names them (``blackdrez.Hit``...).

The schemas are JSON Schema draft 2020-12 as msgspec writes them, declared with their
``schemaFormat``. The document is committed and checked like the protocol schema (``python -m
blackdrez.protocol.asyncapi``; ``--check``); the test suite validates it with AsyncAPI's own
parser (``@asyncapi/parser``, ``tools/asyncapi/``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from blackdrez.protocol import schema, v1
from blackdrez.protocol.handshake import SUPPORTED_VERSIONS
from blackdrez.protocol.schema import SchemaFile

PATH = Path(__file__).resolve().parent.parent / "docs" / "schema" / "asyncapi.json"
REGENERATE = "python -m blackdrez.protocol.asyncapi"
SCHEMA_FORMAT = "application/schema+json;version=draft-2020-12"
ENCODINGS = {
    "json": ("application/json", "text frames: JSON (UTF-8)"),
    "msgpack": ("application/msgpack", "binary frames: MessagePack, the same structure"),
}


def _members(union: dict[str, Any]) -> list[str]:
    """The definition names a union of the protocol schema lists."""
    return [ref["$ref"].rsplit("/", 1)[1] for ref in union.get("anyOf", [union])]


def _rewrite(node: Any) -> Any:
    """``node`` with its ``#/$defs/X`` references pointing at ``#/components/schemas/X``."""
    if isinstance(node, dict):
        return {
            key: (
                value.replace("#/$defs/", "#/components/schemas/")
                if key == "$ref" and isinstance(value, str)
                else _rewrite(value)
            )
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_rewrite(item) for item in node]
    return node


def _tag(definition: dict[str, Any]) -> str:
    """The wire ``type`` of a message's definition."""
    values: list[str] = definition["properties"]["type"]["enum"]
    return values[0]


def build() -> dict[str, Any]:
    """The whole AsyncAPI document as plain data."""
    protocol = schema.build()
    definitions: dict[str, Any] = _rewrite(protocol["$defs"])
    client = _members(protocol["client_message"])
    server = _members(protocol["server_message"])
    handshake = {
        "hello": _members(protocol["hello"]),
        "reply": _members(protocol["handshake_reply"]),
    }
    names = sorted({*client, *server, *handshake["reply"]})
    messages: dict[str, Any] = {}
    for name in names:  # keyed by Struct name: a request and its reply may share a type
        described = definitions[name].get("description", "").strip()
        tag = _tag(definitions[name])
        messages[name] = {
            "name": tag,
            "title": name,
            "summary": described.split("\n\n")[0].replace("\n", " ") or tag,
            "payload": {
                "schemaFormat": SCHEMA_FORMAT,
                "schema": {"$ref": f"#/components/schemas/{name}"},
            },
        }
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    for encoding, (content_type, words) in ENCODINGS.items():
        channels[encoding] = {
            "address": "/",
            "title": f"The game connection, {encoding}",
            "description": f"One WebSocket per player; {words}. The encoding of the client's "
            "hello is the connection's.",
            "servers": [{"$ref": "#/servers/node"}],
            "messages": {
                name: {**message, "contentType": content_type} for name, message in messages.items()
            },
        }
        here = f"#/channels/{encoding}"

        def refs(group: list[str], here: str = here) -> list[dict[str, str]]:
            return [{"$ref": f"{here}/messages/{name}"} for name in group]

        operations[f"receiveHello_{encoding}"] = {
            "action": "receive",
            "channel": {"$ref": here},
            "title": "The handshake (never changes)",
            "summary": "hello lists the versions the client speaks; the node answers welcome "
            "with the highest both speak, or error unsupported_version and closes with 4001.",
            "messages": refs(handshake["hello"]),
            "reply": {"channel": {"$ref": here}, "messages": refs(handshake["reply"])},
        }
        operations[f"receiveClientMessage_{encoding}"] = {
            "action": "receive",
            "channel": {"$ref": here},
            "summary": "What a client sends after welcome (each request's id comes back in "
            "its reply).",
            "messages": refs([name for name in client if name not in handshake["hello"]]),
        }
        operations[f"sendServerMessage_{encoding}"] = {
            "action": "send",
            "channel": {"$ref": here},
            "summary": "What the node sends: replies (with the request's id) and pushes.",
            "messages": refs(server),
        }
    versions = ", ".join(str(v) for v in SUPPORTED_VERSIONS)
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "BlackDrez protocol",
            "version": str(v1.VERSION),
            "description": (
                f"Generated from the message Structs by `{REGENERATE}`; do not edit. The "
                "real-time protocol of a BlackDrez node: one WebSocket per player, each frame "
                "one message with a type field, JSON in text frames or MessagePack in binary "
                f"frames. The handshake negotiates the version (this node speaks {versions}). "
                "See docs/protocol.md for every message's meaning, limits and errors."
            ),
            "license": {"name": "MIT"},
        },
        "defaultContentType": "application/json",
        "servers": {
            "node": {
                "host": "127.0.0.1:8765",
                "protocol": "ws",
                "description": "A node's port (any node of a deployment, or its load "
                "balancer); wss behind TLS.",
            }
        },
        "channels": channels,
        "operations": operations,
        "components": {"schemas": dict(sorted(definitions.items()))},
    }


ASYNCAPI = SchemaFile(build, PATH, REGENERATE, "protocol code")
render = ASYNCAPI.render
check = ASYNCAPI.check
main = ASYNCAPI.main


if __name__ == "__main__":
    sys.exit(main())
