"""The node's HTTP routes as an OpenAPI 3.1 document, generated from the code's own types.

Theory of operation
-------------------
Every body the records API sends is a msgspec Struct (``server/records/api.py``, ``model.py``),
and so is ``/healthz``'s (:class:`~blackdrez.server.http.responses.Health`):
:func:`msgspec.json.schema_components` turns them into the document's ``components.schemas``,
and :func:`build` adds the paths (each route's parameters with the bounds the API checks, and
every status it may answer, the 4xx ones included), the bearer token that makes a player's
private games readable and that the admin calls require, and the examples of ``docs/api.md``
(each ``<!-- example: KEY -->`` block, on the response whose body it is).

The document is committed as ``server/http/openapi.json`` (package data: an installed node
serves it without the docs) and served at ``/api/v1/openapi.json``. Regenerate it with
``python -m blackdrez.server.http.openapi``; ``--check`` says whether it is current, and a test
does too. ``tests/server/test_openapi.py`` validates it with ``openapi-spec-validator`` and runs
schemathesis against a live node with records: no 5xx, and every response, 4xx included,
matches the document.
"""

from __future__ import annotations

import json
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from blackdrez.games import GAMES
from blackdrez.protocol.schema import SchemaFile
from blackdrez.server.http.responses import Health
from blackdrez.server.records import api
from blackdrez.server.records.model import GameRecord
from blackdrez.server.records.ratings import RATED_GAMES
from blackdrez.server.records.replay import GameReplay

PATH = Path(__file__).with_name("openapi.json")
REGENERATE = "python -m blackdrez.server.http.openapi"
SERVED_AT = "/api/v1/openapi.json"
DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
_BLOCK = re.compile(r"<!-- example: (?P<key>[a-z_]+) -->\n```json\n(?P<body>.*?)\n```", re.S)

BODIES: dict[str, Any] = {
    "GamesPage": api.GamesPage,
    "GameRecord": GameRecord,
    "GameReplay": GameReplay,
    "PlayerProfile": api.PlayerProfile,
    "RatingHistory": api.RatingHistory,
    "Leaderboard": api.Leaderboard,
    "ErrorReply": api.ErrorReply,
    "Health": Health,
}
_EXAMPLE_OF = {
    "games_page": "GamesPage",
    "game_record": "GameRecord",
    "game_replay": "GameReplay",
    "player_profile": "PlayerProfile",
    "rating_history": "RatingHistory",
    "leaderboard": "Leaderboard",
    "error": "ErrorReply",
}
"""docs/api.md's example keys -> the body each shows."""


def _examples() -> dict[str, list[Any]]:
    """docs/api.md's examples by the body they show (a checkout's docs; none if absent)."""
    found: dict[str, list[Any]] = {}
    if not DOC.is_file():
        return found
    for match in _BLOCK.finditer(DOC.read_text("utf-8")):
        body = _EXAMPLE_OF.get(match["key"])
        if body is not None:
            found.setdefault(body, []).append(json.loads(match["body"]))
    return found


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(name: str, examples: list[Any] | None = None) -> dict[str, Any]:
    media: dict[str, Any] = {"schema": _ref(name)}
    if examples:
        media["examples"] = {f"example{n + 1}": {"value": e} for n, e in enumerate(examples)}
    return {"application/json": media}


def _query(name: str, description: str, **schema: Any) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": {"type": "string", **schema},
    }


def _path(name: str, description: str, **schema: Any) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string", "minLength": 1, **schema},
    }


_LIMIT = _query("limit", "items in the page (default 20)", type="integer", minimum=1, maximum=100)
_ID_TEXT = {"minLength": 1, "maxLength": 128}


def _errors(examples: list[Any] | None, *statuses: int) -> dict[str, Any]:
    words = {
        400: "bad input: a parameter out of its bounds, unknown, repeated or malformed",
        401: "the Authorization header's token is not valid here",
        404: "no such thing (or no records kept on this server)",
        429: "too many requests from this address (Retry-After says when to try again)",
        503: "the records database cannot be reached just now",
    }
    answers: dict[str, Any] = {}
    for status in statuses:
        answer: dict[str, Any] = {"description": words[status], "content": _json("ErrorReply")}
        if status == 429:
            answer["headers"] = {
                "Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}
            }
        answers[str(status)] = answer
    if examples and "400" in answers:
        answers["400"]["content"] = _json("ErrorReply", examples)
    return answers


def _get(
    summary: str, body: str, parameters: list[dict[str, Any]], examples: dict[str, list[Any]]
) -> dict[str, Any]:
    statuses = (400, 401, 404, 429, 503)
    return {
        "get": {
            "summary": summary,
            "operationId": re.sub(r"\W+", "_", summary.lower()).strip("_"),
            "tags": ["records"],
            "security": [{}, {"bearer": []}],
            "parameters": parameters,
            "responses": {
                "200": {"description": body, "content": _json(body, examples.get(body))},
                **_errors(examples.get("ErrorReply"), *statuses),
            },
        }
    }


def _admin(method: str, summary: str, parameters: list[dict[str, Any]]) -> dict[str, Any]:
    loose = {"application/json": {"schema": {"type": "object"}}}
    done = "202" if method == "post" and "drain" in summary.lower() else "200"
    return {
        method: {
            "summary": summary,
            "operationId": "admin_" + re.sub(r"\W+", "_", summary.lower()).strip("_"),
            "tags": ["admin"],
            "security": [{"bearer": []}],
            "parameters": parameters,
            "responses": {
                done: {
                    "description": "done",
                    "content": loose,
                },
                "400": {"description": "a parameter missing or bad", "content": loose},
                "401": {"description": "no or wrong admin token", "content": loose},
                "404": {"description": "no admin token set on this node, or no such thing"},
                "503": {"description": "the store cannot be reached", "content": loose},
            },
        }
    }


def build() -> dict[str, Any]:
    """The whole OpenAPI document as plain data."""
    _, components = msgspec.json.schema_components(
        list(BODIES.values()), ref_template="#/components/schemas/{name}"
    )  # (every body is a Struct: its schema is a $ref to its component)
    examples = _examples()
    games = sorted(GAMES)
    before = _query("before", "the cursor a previous page returned as next")
    paths: dict[str, Any] = {
        "/api/v1/games": _get(
            "List finished games",
            "GamesPage",
            [
                _query("player", "only this player's games (a player id)"),
                _query("game", "only this game", enum=games),
                _query("arena", "only this arena's games (an arena id)"),
                before,
                _LIMIT,
            ],
            examples,
        ),
        "/api/v1/games/{id}": _get(
            "Get a game's record",
            "GameRecord",
            [_path("id", "the game's id: {table}:{n}", **_ID_TEXT)],
            examples,
        ),
        "/api/v1/games/{id}/replay": _get(
            "Get a game's replay",
            "GameReplay",
            [_path("id", "the game's id", **_ID_TEXT)],
            examples,
        ),
        "/api/v1/players/{id}": _get(
            "Get a player's profile",
            "PlayerProfile",
            [_path("id", "the player's id", maxLength=64)],
            examples,
        ),
        "/api/v1/players/{id}/ratings": _get(
            "Get a player's rating history",
            "RatingHistory",
            [
                _path("id", "the player's id", maxLength=64),
                _query("game", "a rated game (default blackdrez)", enum=sorted(RATED_GAMES)),
                before,
                _LIMIT,
            ],
            examples,
        ),
        "/api/v1/leaderboards/{game}": _get(
            "Get a game's leaderboard",
            "Leaderboard",
            [
                _path("game", "the game", enum=games),
                _query("kind", "whose entries (default all)", enum=["humans", "bots", "all"]),
                _query("after", "the cursor a previous page returned as next"),
                _LIMIT,
            ],
            examples,
        ),
        SERVED_AT: {
            "get": {
                "summary": "This document",
                "operationId": "openapi",
                "tags": ["meta"],
                "responses": {
                    "200": {
                        "description": "the OpenAPI document of this node's HTTP routes",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
        "/healthz": {
            "get": {
                "summary": "Health",
                "operationId": "health",
                "tags": ["operations"],
                "description": "200 while the node serves; 503 while it starts, after it lost "
                "its store past the grace, or while it drains (a load balancer's check).",
                "responses": {
                    "200": {"description": "serving", "content": _json("Health")},
                    "503": {"description": "not serving now", "content": _json("Health")},
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics",
                "operationId": "metrics",
                "tags": ["operations"],
                "description": "On the game port unless --metrics-port moves it there.",
                "responses": {
                    "200": {
                        "description": "the Prometheus text format",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
        "/admin/tables": _admin("get", "Every live table", []),
        "/admin/table": _admin(
            "get",
            "One table and its last log entries",
            [
                {**_query("id", "the table", minLength=1), "required": True},
                _query("limit", "entries (default 30)", type="integer", minimum=1, maximum=500),
            ],
        ),
        "/admin/nodes": _admin("get", "Live nodes and their load", []),
        "/admin/reports": _admin(
            "get",
            "Reported chat lines",
            [_query("limit", "reports (default 50)", type="integer", minimum=1, maximum=500)],
        ),
        "/admin/close": _admin(
            "post",
            "Close a table",
            [
                {**_query("table", "the table", minLength=1), "required": True},
                _query("reason", "said to its players", maxLength=200),
            ],
        ),
        "/admin/remove": _admin(
            "post",
            "Take a player's seat away",
            [
                {**_query("table", "the table", minLength=1), "required": True},
                {**_query("player", "the player's id", minLength=1), "required": True},
            ],
        ),
        "/admin/drain": _admin("post", "Drain this node", []),
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "BlackDrez node HTTP API",
            "version": "1",
            "description": (
                f"Generated from the code by `{REGENERATE}`; do not edit. The records API "
                "(finished games, replays, players, ratings, leaderboards), health, metrics and "
                "the admin calls of one node. The game itself is played over the WebSocket "
                "protocol on the same port (docs/protocol.md). See docs/api.md."
            ),
            "license": {"name": "MIT", "identifier": "MIT"},
        },
        "servers": [{"url": "/", "description": "the node answering (any node of a cluster)"}],
        "tags": [
            {"name": "records", "description": "the records API (docs/api.md)"},
            {"name": "operations", "description": "health and metrics (docs/operations.md)"},
            {"name": "admin", "description": "the operator's calls (--admin-token)"},
            {"name": "meta", "description": "this description"},
        ],
        "paths": paths,
        "components": {
            "schemas": dict(sorted(components.items())),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "records: a player's session token (their private games); "
                    "admin: the node's --admin-token",
                }
            },
        },
    }


@cache
def served() -> bytes:
    """The committed document's bytes, as ``/api/v1/openapi.json`` sends them."""
    return PATH.read_bytes()


OPENAPI = SchemaFile(build, PATH, REGENERATE, "HTTP routes' code")
render = OPENAPI.render
check = OPENAPI.check
main = OPENAPI.main


if __name__ == "__main__":
    sys.exit(main())
