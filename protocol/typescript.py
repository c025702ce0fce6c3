"""The protocol's TypeScript type definitions, generated from its JSON Schema.

Theory of operation
-------------------
The JavaScript client package (``clients/js/``) ships ``protocol.d.ts``: one interface per
message and payload Struct, one union type per union of :mod:`blackdrez.protocol.schema`
(``ClientMessage``, ``ServerMessage``, ``TableEvent``, each game's ``Action``, ``Event`` and
``View``), made from that schema (itself made from the Structs) by :func:`render`. The schema
uses a few JSON Schema forms only (objects with properties and required fields, ``anyOf``,
``enum``, arrays, maps, the scalar types and ``$ref``); each becomes its TypeScript form, a
description its doc comment. A game definition named ``blackdrez.Hit`` is ``blackdrez_Hit``.

The file is committed; ``python -m blackdrez.protocol.typescript`` writes it, ``--check`` (and
the test suite) says whether it is current; ``tests/server/test_js_client.py`` compiles it with
``tsc``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from blackdrez.protocol import schema
from blackdrez.protocol.schema import SchemaFile

PATH = Path(__file__).resolve().parent.parent / "clients" / "js" / "protocol.d.ts"
REGENERATE = "python -m blackdrez.protocol.typescript"
_SCALARS = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "null": "null",
}
_UNION_NAMES = {
    "handshake_reply": "HandshakeReply",
    "client_message": "ClientMessage",
    "server_message": "ServerMessage",
    "table_event": "TableEvent",
}


def _name(definition: str) -> str:
    return definition.replace(".", "_")


def _union_name(key: str) -> str:
    if key in _UNION_NAMES:
        return _UNION_NAMES[key]
    game, _, kind = key.rpartition("_")
    return "".join(part.title() for part in game.split("_")) + kind.title()


def _type(node: dict[str, Any]) -> str:
    """The TypeScript type of one schema node."""
    if "$ref" in node:
        return _name(node["$ref"].rsplit("/", 1)[1])
    if "anyOf" in node:
        return " | ".join(dict.fromkeys(_type(option) for option in node["anyOf"]))
    if "enum" in node:
        return " | ".join(json.dumps(value) for value in node["enum"])
    kind = node.get("type")
    if isinstance(kind, list):
        return " | ".join(_type({**node, "type": k}) for k in kind)
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        item = _type(node.get("items", {}))
        return f"Array<{item}>"
    if kind == "object":
        if "properties" in node:
            return _object(node, "")
        extra = node.get("additionalProperties")
        return f"Record<string, {_type(extra) if isinstance(extra, dict) else 'unknown'}>"
    return "unknown"


def _comment(text: str | None, indent: str) -> list[str]:
    if not text:
        return []
    lines = text.strip().replace("*/", "* /").splitlines()
    return [f"{indent}/**", *(f"{indent} * {line}".rstrip() for line in lines), f"{indent} */"]


def _object(node: dict[str, Any], indent: str) -> str:
    required = set(node.get("required", []))
    lines = ["{"]
    for field, spec in node["properties"].items():
        lines += _comment(spec.get("description"), indent + "  ")
        optional = "" if field in required else "?"
        key = field if re.fullmatch(r"[A-Za-z_$][\w$]*", field) else json.dumps(field)
        lines.append(f"{indent}  {key}{optional}: {_type(spec)};")
    lines.append(f"{indent}}}")
    return "\n".join(lines)


def _render(document: dict[str, Any]) -> str:
    """The whole ``protocol.d.ts`` of the protocol's schema ``document``."""
    out = [
        f"// Generated from the protocol's JSON Schema by `{REGENERATE}`; do not edit.",
        "// The BlackDrez protocol, version 1 (docs/protocol.md): every message and payload.",
        "",
    ]
    for key, node in document.items():
        if key.startswith("$") or key in ("title", "description", "hello"):
            continue  # (hello: the Hello interface itself)
        out += [f"export type {_union_name(key)} = {_type(node)};", ""]
    for name, node in sorted(document["$defs"].items()):
        out += _comment(node.get("description") or node.get("title"), "")
        if node.get("type") == "object" and "properties" in node:
            out += [f"export interface {_name(name)} {_object(node, '')}", ""]
        else:
            out += [f"export type {_name(name)} = {_type(node)};", ""]
    return "\n".join(out)


TYPESCRIPT = SchemaFile(schema.build, PATH, REGENERATE, "protocol code", _render)
render = TYPESCRIPT.render
check = TYPESCRIPT.check
main = TYPESCRIPT.main


if __name__ == "__main__":
    sys.exit(main())
