"""The API's published contract: the JSON Schema file, the examples in docs/api.md, real bodies.

Each fenced ``json`` block in docs/api.md is preceded by ``<!-- example: KEY -->``, KEY a
top-level key of docs/schema/api-v1.json: the example must validate against that schema and
decode with the server's own type, so no example can drift from the code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
from argon2 import PasswordHasher
from jsonschema import Draft202012Validator

from blackdrez.server import identity
from blackdrez.server.records import schema
from blackdrez.server.records.accounts import Accounts
from blackdrez.server.records.api import RecordsApi
from blackdrez.server.records.store import RecordsStore
from tests.records.games import finished

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "api.md"
_BLOCK = re.compile(r"(?:<!-- example: (?P<key>[a-z_]+) -->\n)?```json\n(?P<body>.*?)\n```", re.S)
EXAMPLES = [(m["key"] or "", m["body"]) for m in _BLOCK.finditer(DOC.read_text("utf-8"))]


def validator(key: str) -> Draft202012Validator:
    """A validator for the body named ``key``, resolving ``$ref`` within the document."""
    document = json.loads(schema.SCHEMA_PATH.read_text("utf-8"))
    return Draft202012Validator({**document[key], "$defs": document["$defs"]})


def test_the_committed_schema_matches_the_code() -> None:
    assert schema.check(), (
        f"{schema.SCHEMA_PATH} is out of date with the API code: regenerate it with "
        f"`{schema.REGENERATE}` and commit it"
    )


def test_the_schema_check_fails_for_a_stale_file(tmp_path: Path) -> None:
    target = tmp_path / "api.json"
    assert schema.main(["--check", "--output", str(target)]) == 1
    assert schema.main(["--output", str(target)]) == 0
    assert schema.main(["--check", "--output", str(target)]) == 0


def test_every_example_names_its_body() -> None:
    assert EXAMPLES
    assert all(key in schema.BODIES for key, _ in EXAMPLES), [k for k, _ in EXAMPLES]


def test_every_body_has_an_example() -> None:
    assert set(schema.BODIES) == {key for key, _ in EXAMPLES}


@pytest.mark.parametrize(("key", "text"), EXAMPLES, ids=[key for key, _ in EXAMPLES])
def test_an_example_validates_and_decodes(key: str, text: str) -> None:
    data = json.loads(text)
    validator(key).validate(data)
    decoded = msgspec.json.decode(text.encode(), type=schema.BODIES[key])
    assert json.loads(msgspec.json.encode(decoded)) == data  # no field left out or renamed


async def test_real_responses_validate_against_the_schema(store: RecordsStore) -> None:
    hasher = PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
    api = RecordsApi(store, Accounts(store, b"secret", hasher=hasher))
    await store.put_game(finished("blackdrez-1", "blackdrez", bots=["p3"], rated=True))
    for game in ("blackjack_piles", "blue_jacket"):
        await store.put_game(finished(f"{game}-1", game, players=["p0"]))
    guest = identity.issue_token(b"secret", "p0", "Ann").text
    requests: list[tuple[str, str, Any, str]] = [
        ("GET", "/api/v1/games?limit=2", None, "games_page"),
        ("GET", "/api/v1/games/blackdrez-1", None, "game_record"),
        ("GET", "/api/v1/games/blue_jacket-1", None, "game_record"),
        ("GET", "/api/v1/players/p0", None, "player_profile"),
        ("GET", "/api/v1/players/p0/ratings", None, "rating_history"),
        ("GET", "/api/v1/leaderboards/blackdrez?kind=bots", None, "leaderboard"),
        ("GET", "/api/v1/leaderboards/blackjack_piles", None, "leaderboard"),
        ("GET", "/api/v1/games?limit=0", None, "error"),
        ("POST", "/api/v1/accounts/claim", {"token": guest, "name": "Ann", "password": "x" * 8},
         "session"),
        ("POST", "/api/v1/accounts/login", {"name": "Ann", "password": "wrong one"}, "error"),
    ]  # fmt: skip
    for method, target, body, key in requests:
        response = await api.handle(method, target, json.dumps(body).encode() if body else b"")
        validator(key).validate(json.loads(response.body))
