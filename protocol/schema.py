"""Export the wire protocol as JSON Schema, generated from the Structs themselves.

Theory of operation
-------------------
The messages are msgspec Structs, so their JSON Schema comes from the code with
:func:`msgspec.json.schema_components` and can never disagree with it. One document,
``docs/schema/v1.json``, holds every definition under ``$defs`` and one top-level key per union
a client needs (see :data:`PROTOCOL_UNIONS` and :data:`GAME_UNIONS`). The game payloads that v1
carries as ``Any`` (``action``, ``event``, ``view``, ``legal``) are the engines' own Structs; their
definitions are prefixed with the game's name (``blackdrez.Hit``) so that two games may use the
same class name without renaming each other's definitions.

This module is an export tool: it imports the engines' types through the games registry
(:mod:`blackdrez.protocol.v1` takes only the game names from it).
The output is stable (sorted keys, two-space indent, trailing newline), so a test can compare the
committed file with the code. Regenerate with ``python -m blackdrez.protocol.schema``; check with
``python -m blackdrez.protocol.schema --check`` (exit status 1 when the committed file differs).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from blackdrez.games import GAMES
from blackdrez.protocol import v1
from blackdrez.protocol.handshake import Hello

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "docs" / "schema" / "v1.json"
REGENERATE = "python -m blackdrez.protocol.schema"

PROTOCOL_UNIONS: dict[str, Any] = {
    "hello": Hello,
    "handshake_reply": v1.Welcome | v1.Error,
    "client_message": v1.ClientMessage,
    "server_message": v1.ServerMessage,
    "table_event": v1.TableEvent,
}
"""Top-level key -> type, for the handshake and the v1 messages."""

GAME_UNIONS: dict[str, dict[str, Any]] = {
    name: {"action": spec.action, "event": spec.event, "view": spec.view}
    for name, spec in GAMES.items()
}
"""Per game: its action union, event union and view. Top-level keys are ``<game>_<kind>``."""


def _components(types: list[Any], prefix: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Schemas of ``types`` and their definitions, each definition named ``prefix + name``."""
    schemas, definitions = msgspec.json.schema_components(
        types, ref_template="#/$defs/" + prefix + "{name}"
    )
    clashes = [name for name in definitions if "." in name]
    if clashes:
        raise ValueError(f"two Structs share a name in one group {prefix!r}: {clashes}")
    return list(schemas), {prefix + name: schema for name, schema in definitions.items()}


def build() -> dict[str, Any]:
    """The whole v1 schema document as plain data."""
    document: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"BlackDrez protocol v{v1.VERSION}",
        "description": (
            "Generated from protocol/handshake.py, protocol/v1.py and the game engines by "
            f"`{REGENERATE}`; do not edit. Each top-level key other than $defs names one message "
            "type or union; see docs/protocol.md."
        ),
    }
    definitions: dict[str, Any] = {}
    schemas, found = _components(list(PROTOCOL_UNIONS.values()), "")
    definitions.update(found)
    document.update(zip(PROTOCOL_UNIONS, schemas, strict=True))
    for game, unions in GAME_UNIONS.items():
        schemas, found = _components(list(unions.values()), game + ".")
        overlap = definitions.keys() & found.keys()
        if overlap:
            raise ValueError(f"definitions named twice: {sorted(overlap)}")
        definitions.update(found)
        document.update(
            (f"{game}_{kind}", schema) for kind, schema in zip(unions, schemas, strict=True)
        )
    document["$defs"] = definitions
    return document


@dataclass(frozen=True)
class SchemaFile:
    """A generated JSON Schema document committed at ``path``: its exact text, the check that the
    committed file is current, and the command that writes or checks it. Shared by this module,
    the records API's schema (``blackdrez.server.records.schema``), the OpenAPI and AsyncAPI
    documents, and the TypeScript definitions (``blackdrez.protocol.typescript``, whose ``text``
    writes TypeScript instead of JSON)."""

    build: Callable[[], dict[str, Any]]
    path: Path
    regenerate: str
    source: str
    """What the document is generated from, for the message when it is stale."""
    text: Callable[[dict[str, Any]], str] | None = None
    """How the built document is written (default: JSON, sorted keys, two-space indent)."""

    def render(self) -> str:
        """The document as the exact text committed."""
        if self.text is not None:
            return self.text(self.build())
        return json.dumps(self.build(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    def check(self, path: Path | None = None) -> bool:
        """Whether the file at ``path`` (the committed one by default) is what the code makes."""
        try:
            return (path or self.path).read_text(encoding="utf-8") == self.render()
        except FileNotFoundError:
            return False

    def main(self, argv: list[str] | None = None) -> int:
        """Write the schema file, or with ``--check`` report whether it is up to date."""
        parser = argparse.ArgumentParser(
            prog=self.regenerate, description=f"Write or check {self.path.name}."
        )
        parser.add_argument(
            "--check",
            action="store_true",
            help="exit 1 if the committed schema differs from the code",
        )
        parser.add_argument("--output", type=Path, default=self.path, help="the schema file")
        args = parser.parse_args(argv)
        if args.check:
            if self.check(args.output):
                print(f"{args.output} is up to date")
                return 0
            print(
                f"{args.output} differs from the {self.source}: regenerate it with "
                f"`{self.regenerate}` and commit it",
                file=sys.stderr,
            )
            return 1
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(self.render(), encoding="utf-8")
        print(f"wrote {args.output}")
        return 0


PROTOCOL_SCHEMA = SchemaFile(build, SCHEMA_PATH, REGENERATE, "protocol code")
render = PROTOCOL_SCHEMA.render
check = PROTOCOL_SCHEMA.check
main = PROTOCOL_SCHEMA.main


if __name__ == "__main__":
    sys.exit(main())
