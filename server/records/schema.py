"""Export the records API's JSON Schemas, generated from the response Structs themselves.

Theory of operation
-------------------
Like ``blackdrez.protocol.schema`` for the wire protocol: every body the API sends or takes is a
msgspec
Struct, so :func:`msgspec.json.schema_components` turns them into one document,
``docs/schema/api-v1.json``, with one top-level key per body (:data:`BODIES`) and the shared
definitions under ``$defs``. The output is stable, so a test compares the committed file with the
code. Regenerate with ``python -m blackdrez.server.records.schema``; check with ``--check``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import msgspec

from blackdrez.protocol.schema import SchemaFile
from blackdrez.server.records import api
from blackdrez.server.records.accounts import Session
from blackdrez.server.records.model import GameRecord
from blackdrez.server.records.replay import GameReplay

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "docs" / "schema" / "api-v1.json"
REGENERATE = "python -m blackdrez.server.records.schema"

BODIES: dict[str, Any] = {
    "games_page": api.GamesPage,
    "game_record": GameRecord,
    "game_replay": GameReplay,
    "player_profile": api.PlayerProfile,
    "rating_history": api.RatingHistory,
    "leaderboard": api.Leaderboard,
    "session": Session,
    "error": api.ErrorReply,
    "claim_request": api.ClaimRequest,
    "login_request": api.LoginRequest,
    "revoke_request": api.RevokeRequest,
}
"""Top-level key -> the Struct of one request or response body (see docs/api.md)."""


def build() -> dict[str, Any]:
    """The whole API schema document as plain data."""
    schemas, definitions = msgspec.json.schema_components(
        list(BODIES.values()), ref_template="#/$defs/{name}"
    )
    document: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "BlackDrez records API v1",
        "description": (
            f"Generated from server/records/ by `{REGENERATE}`; do not edit. Each top-level key "
            "other than $defs is the body of one request or response; see docs/api.md."
        ),
    }
    document.update(zip(BODIES, schemas, strict=True))
    document["$defs"] = definitions
    return document


API_SCHEMA = SchemaFile(build, SCHEMA_PATH, REGENERATE, "API code")
render = API_SCHEMA.render
check = API_SCHEMA.check
main = API_SCHEMA.main


if __name__ == "__main__":
    sys.exit(main())
