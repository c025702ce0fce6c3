"""The records HTTP API as its handler answers: routes, pagination bounds, errors, accounts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from argon2 import PasswordHasher

from blackdrez.games import verify
from blackdrez.games.arena import ArenaGame, standings_of
from blackdrez.games.records import decode_record
from blackdrez.server import identity
from blackdrez.server.records.accounts import Accounts, LoginLimiter, Session
from blackdrez.server.records.api import (
    ErrorReply,
    GamesPage,
    Leaderboard,
    PlayerProfile,
    RatingHistory,
    RecordsApi,
    Response,
)
from blackdrez.server.records.model import GameRecord
from blackdrez.server.records.replay import GameReplay
from blackdrez.server.records.store import RecordsStore
from tests.records.games import finished

ROOT = Path(__file__).resolve().parents[2]
SECRET = b"api secret"


@pytest.fixture
def api(store: RecordsStore) -> RecordsApi:
    hasher = PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
    limiter = LoginLimiter(account_burst=2, client_burst=100)
    return RecordsApi(store, Accounts(store, SECRET, hasher=hasher, limiter=limiter))


def header(response: Response, name: str) -> str | None:
    return dict(response.headers).get(name)


async def get(api: RecordsApi, target: str, type_: Any, status: int = 200) -> Any:
    """GET ``target``, check the status, and decode the body strictly as ``type_``."""
    response = await api.handle("GET", target)
    assert response.status == status, response.body
    assert header(response, "content-type") == "application/json"
    return msgspec.json.decode(response.body, type=type_)


async def error(api: RecordsApi, target: str, status: int, code: str, **kwargs: Any) -> str:
    response = await api.handle(kwargs.pop("method", "GET"), target, **kwargs)
    assert response.status == status, response.body
    reply = msgspec.json.decode(response.body, type=ErrorReply)
    assert reply.error.code == code
    return reply.error.message


async def test_a_game_fetched_from_the_api_verifies(
    api: RecordsApi, store: RecordsStore, tmp_path: Path
) -> None:
    await store.put_game(finished("t1:7", "blackdrez", rated=True))
    response = await api.handle("GET", "/api/v1/games/t1:7")
    assert response.status == 200
    assert "immutable" in (header(response, "cache-control") or "")
    record = msgspec.json.decode(response.body, type=GameRecord)
    assert record.id == "t1:7" and record.rated and len(record.players) == 4
    assert verify.verify(decode_record(response.body)) == []
    path = tmp_path / "fetched.json"
    path.write_bytes(response.body)
    verified = subprocess.run(
        [sys.executable, "-m", "blackdrez.tools.cli", "verify", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr


async def test_unknown_games_and_paths_are_404(api: RecordsApi) -> None:
    await error(api, "/api/v1/games/nope", 404, "not_found")
    await error(api, "/api/v1/games/bad%20id", 404, "not_found")
    await error(api, "/api/v1/players/nobody", 404, "not_found")
    await error(api, "/api/v1/leaderboards/poker", 404, "not_found")
    await error(api, "/api/v1/nothing", 404, "not_found")
    await error(api, "/api/v2/games", 404, "not_found")
    await error(api, "/api/v1/games/", 404, "not_found")


async def test_the_games_list_pages_through_everything_within_bounds(
    api: RecordsApi, store: RecordsStore
) -> None:
    for number in range(12):
        await store.put_game(
            finished(f"g{number:02d}", "blue_jacket", seed="s", ended_at=1000.0 + number)
        )
    seen: list[str] = []
    target = "/api/v1/games?limit=5"
    while True:
        page = await get(api, target, GamesPage)
        assert len(page.games) <= 5
        seen += [game.id for game in page.games]
        if page.next is None:
            break
        target = f"/api/v1/games?limit=5&before={page.next}"
    assert seen == [f"g{n:02d}" for n in reversed(range(12))]
    default = await get(api, "/api/v1/games", GamesPage)
    assert len(default.games) == 12 and default.next is None
    only = await get(api, "/api/v1/games?player=p0&game=blue_jacket&limit=1", GamesPage)
    assert [g.id for g in only.games] == ["g11"] and only.next is not None


async def test_an_arenas_games_make_its_standings(api: RecordsApi, store: RecordsStore) -> None:
    """Issue 37: ``?arena=`` lists an arena's games, and folding their places by the arena's
    rule (``standings_of``) gives each player's points; a game ended after the arena did
    scores nothing."""
    await store.put_game(finished("a:1", players=["ann", "bob"], seats=2, ended_at=10, arena="A"))
    await store.put_game(finished("a:2", players=["bob", "ann"], seats=2, ended_at=20, arena="A"))
    await store.put_game(finished("a:3", players=["ann", "bob"], seats=2, ended_at=99, arena="A"))
    await store.put_game(finished("o:1", players=["ann", "bob"], seats=2, ended_at=15))
    response = await api.handle("GET", "/api/v1/games?arena=A")
    assert response.status == 200
    games = msgspec.json.decode(response.body, type=dict[str, Any])["games"]
    assert [g["id"] for g in games] == ["a:3", "a:2", "a:1"]
    arena_games = msgspec.convert(games, list[ArenaGame])
    standings = standings_of(arena_games, ends=50.0)
    assert sorted(s.games for s in standings) == [2, 2], "a:3 ended after the arena"
    assert sum(s.points for s in standings) == 2, "one point a game of two for the winner"
    placed = {p["player"]: p["place"] for g in games[1:] for p in g["players"] if p["place"] == 1}
    assert {s.player for s in standings if s.wins} == set(placed)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("limit=0", "limit must be an integer from 1 to 100"),
        ("limit=101", "limit must be an integer from 1 to 100"),
        ("limit=ten", "limit must be an integer from 1 to 100"),
        ("limit=-1", "limit must be an integer from 1 to 100"),
        ("limit=5&limit=6", "given 2 times"),
        ("player=", "is empty"),
        ("arena=", "is empty"),
        ("sort=old", "unknown query parameter 'sort'"),
        ("game=poker", "unknown game 'poker'"),
        ("before=garbage", "not a cursor"),
        ("a&&b", "malformed query string"),
    ],
)
async def test_bad_list_queries_are_400_and_say_why(
    api: RecordsApi, query: str, message: str
) -> None:
    assert message in await error(api, f"/api/v1/games?{query}", 400, "bad_request")


BIG = "9" * 23
"""A number past any database integer (64 bits)."""


@pytest.mark.parametrize(
    "target",
    [
        f"/api/v1/games?before={BIG}~g01",
        f"/api/v1/games?before=-{BIG}~g01",
        f"/api/v1/games?player=p0&before={BIG}~g01",
        f"/api/v1/players/p0/ratings?before={BIG}~g01",
        f"/api/v1/leaderboards/blue_jacket?after={BIG}~1~p0",
        f"/api/v1/leaderboards/blue_jacket?after=1~{BIG}~p0",
        "/api/v1/leaderboards/blackdrez?after=nan~p0",
        "/api/v1/leaderboards/blackdrez?after=1e999~p0",
        "/api/v1/games?before=1~g%00",
        "/api/v1/leaderboards/blackdrez?after=1.5~p%00",
        "/api/v1/leaderboards/blue_jacket?after=1~1~p%00",
        "/api/v1/games?player=p%00",
    ],
)
async def test_cursors_and_ids_no_database_could_take_are_400(
    api: RecordsApi, store: RecordsStore, target: str
) -> None:
    """Not a 5xx: neither SQLite (64-bit integers) nor PostgreSQL (no NUL in text) takes them."""
    await store.put_game(finished("g01", "blue_jacket", seed="s", ended_at=1000.0))
    await error(api, target, 400, "bad_request")


async def test_a_player_id_with_a_nul_is_nobody(api: RecordsApi) -> None:
    await error(api, "/api/v1/players/p%00", 404, "not_found")
    await error(api, "/api/v1/players/p%00/ratings", 404, "not_found")


async def test_a_profile_has_stats_ratings_and_latest_games(
    api: RecordsApi, store: RecordsStore
) -> None:
    for number in range(12):
        await store.put_game(
            finished(f"d{number:02d}", "blackdrez", seed=f"s{number}", seats=2,
                     players=["ann", "bob"], rated=True, ended_at=1000.0 + number)
        )  # fmt: skip
    await store.put_game(finished("solo", "blue_jacket", players=["ann"], ended_at=2000.0))
    profile = await get(api, "/api/v1/players/ann", PlayerProfile)
    assert profile.player.id == "ann" and not profile.player.bot
    stats = {s.game: s for s in profile.stats}
    assert stats["blackdrez"].games == 12 and stats["blue_jacket"].games == 1
    assert stats["blackdrez"].rating is not None and stats["blackdrez"].rating.games == 12
    assert [g.id for g in profile.games] == ["solo"] + [f"d{n:02d}" for n in range(11, 2, -1)]
    assert len(profile.ratings) == 12 and profile.ratings_next is None
    more = await get(api, f"/api/v1/games?player=ann&before={profile.games_next}", GamesPage)
    assert [g.id for g in more.games] == ["d02", "d01", "d00"]
    history = await get(api, "/api/v1/players/ann/ratings?limit=5", RatingHistory)
    assert [p.game_id for p in history.ratings] == [f"d{n:02d}" for n in range(11, 6, -1)]
    rest = await get(api, f"/api/v1/players/ann/ratings?before={history.next}", RatingHistory)
    assert len(rest.ratings) == 7 and rest.next is None
    await error(api, "/api/v1/players/ann/ratings?game=blue_jacket", 400, "bad_request")
    await error(api, "/api/v1/players/ann?limit=3", 400, "bad_request")


async def test_leaderboards_by_kind_and_page(api: RecordsApi, store: RecordsStore) -> None:
    await store.put_game(
        finished("g1", "blackdrez", players=["h1", "h2", "b1", "b2"], bots=["b1", "b2"],
                 rated=True)
    )  # fmt: skip
    await store.put_game(finished("g2", "blue_jacket", players=["h1"]))
    board = await get(api, "/api/v1/leaderboards/blackdrez", Leaderboard)
    assert board.by == "rating" and board.kind == "all" and len(board.entries) == 4
    bots = await get(api, "/api/v1/leaderboards/blackdrez?kind=bots", Leaderboard)
    assert {e.player for e in bots.entries} == {"b1", "b2"} and all(e.bot for e in bots.entries)
    first = await get(api, "/api/v1/leaderboards/blackdrez?kind=all&limit=3", Leaderboard)
    rest = await get(api, f"/api/v1/leaderboards/blackdrez?after={first.next}", Leaderboard)
    assert first.entries + rest.entries == board.entries
    solitaire = await get(api, "/api/v1/leaderboards/blue_jacket?kind=humans", Leaderboard)
    assert solitaire.by == "best_score" and [e.player for e in solitaire.entries] == ["h1"]
    assert "kind must be" in await error(
        api, "/api/v1/leaderboards/blackdrez?kind=robots", 400, "bad_request"
    )


async def test_claim_login_and_revoke_over_the_api(api: RecordsApi) -> None:
    guest = identity.issue_token(SECRET, "p_ann", "Ann").text
    body = msgspec.json.encode({"token": guest, "name": "Ann", "password": "long enough"})
    claimed = await api.handle("POST", "/api/v1/accounts/claim", body)
    assert claimed.status == 200 and header(claimed, "cache-control") == "no-store"
    login = msgspec.json.encode({"name": "Ann", "password": "long enough"})
    response = await api.handle("POST", "/api/v1/accounts/login", login, client="10.0.0.1")
    session = msgspec.json.decode(response.body, type=Session)
    assert session.player == "p_ann"
    await error(api, "/api/v1/accounts/claim", 401, "invalid_token", method="POST", body=body)
    other = identity.issue_token(SECRET, "p_other", "Other").text
    taken = msgspec.json.encode({"token": other, "name": "ANN", "password": "long enough"})
    await error(api, "/api/v1/accounts/claim", 409, "name_taken", method="POST", body=taken)
    revoked = await api.handle(
        "POST", "/api/v1/accounts/revoke", msgspec.json.encode({"token": session.token})
    )
    assert revoked.status == 200
    again = msgspec.json.encode({"token": session.token})
    await error(api, "/api/v1/accounts/revoke", 401, "invalid_token", method="POST", body=again)
    wrong = msgspec.json.encode({"name": "Ann", "password": "not it at all"})
    await error(api, "/api/v1/accounts/login", 401, "bad_login", method="POST", body=wrong)
    limited = await api.handle("POST", "/api/v1/accounts/login", login, client="10.0.0.1")
    assert limited.status == 429 and header(limited, "retry-after") == "60"


@pytest.mark.parametrize(
    ("method", "target", "body", "status", "code"),
    [
        ("GET", "/api/v1/accounts/login", b"", 405, "method_not_allowed"),
        ("POST", "/api/v1/games", b"{}", 405, "method_not_allowed"),
        ("POST", "/api/v1/accounts/login", b"not json", 400, "bad_request"),
        ("POST", "/api/v1/accounts/login", b'{"name": "a"}', 400, "bad_request"),
        ("POST", "/api/v1/accounts/login", b'{"name":"a","password":"b","x":1}', 400,
         "bad_request"),
        ("POST", "/api/v1/accounts/login?x=1", b"{}", 400, "bad_request"),
        ("POST", "/api/v1/accounts/login", b"{" + b" " * 5000 + b"}", 413, "too_large"),
        ("POST", "/api/v1/accounts/claim", b'{"token":"x","name":"A","password":"12345678"}',
         401, "invalid_token"),
    ],
)  # fmt: skip
async def test_bad_account_requests_are_refused_with_a_code(
    api: RecordsApi, method: str, target: str, body: bytes, status: int, code: str
) -> None:
    await error(api, target, status, code, method=method, body=body)


async def test_without_accounts_the_account_routes_are_404(store: RecordsStore) -> None:
    api = RecordsApi(store)
    body = msgspec.json.encode({"name": "a", "password": "b"})
    await error(api, "/api/v1/accounts/login", 404, "not_found", method="POST", body=body)


@pytest.mark.parametrize("game", ["blackdrez", "blackjack_piles", "blue_jacket"])
async def test_a_replay_steps_through_the_record_as_spectators_saw_it(
    api: RecordsApi, store: RecordsStore, game: str
) -> None:
    await store.put_game(finished("t9:1", game, rated=game == "blackdrez"))
    replay = await get(api, "/api/v1/games/t9:1/replay", GameReplay)
    record = await store.game("t9:1")
    assert record is not None
    engine = verify.start(record)
    views = [msgspec.to_builtins(engine.view(None))]
    for _ in verify.steps(engine, record):
        views.append(msgspec.to_builtins(engine.view(None)))
    assert [step.index for step in replay.steps] == list(range(len(record.actions) + 1))
    assert [step.view for step in replay.steps] == views
    assert [step.action for step in replay.steps[1:]] == [a for _, a in record.actions]
    assert replay.steps[0].action is None and replay.steps[0].events == []
    assert all(step.events for step in replay.steps[1:]), "every action shows what it did"
    assert replay.fairness.verified and replay.fairness.problems == []
    assert replay.fairness.seed == record.seed
    rounds = [step.round for step in replay.steps]
    firsts = [i for i in range(1, len(rounds)) if i == 1 or rounds[i] != rounds[i - 1]]
    assert replay.rounds == [i for i in firsts if rounds[i]], "each round's first action"
    again = await api.handle("GET", "/api/v1/games/t9:1/replay")
    assert "immutable" in (header(again, "cache-control") or "")
    assert msgspec.json.decode(again.body, type=GameReplay) == replay
    await error(api, "/api/v1/games/t9:2/replay", 404, "not_found")
