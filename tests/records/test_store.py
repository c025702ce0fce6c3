"""The records store against SQLite and a real PostgreSQL: writes, idempotency, lists, profiles."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from blackdrez.games import GAMES, verify
from blackdrez.games.records import decode_record
from blackdrez.server.records.ingest import InvalidGame, finished_game
from blackdrez.server.records.model import SeatPlayer
from blackdrez.server.records.store import GameIdConflict, InvalidCursor, RecordsStore
from tests.records.games import bot_record, finished

ROOT = Path(__file__).resolve().parents[2]
GAME_NAMES = list(GAMES)


@pytest.mark.parametrize("game", GAME_NAMES)
async def test_a_stored_game_comes_back_as_a_record_that_verifies(
    store: RecordsStore, game: str
) -> None:
    stored = finished("g1", game)
    assert await store.put_game(stored)
    fetched = await store.game("g1")
    assert fetched is not None
    record = decode_record(msgspec.json.encode(fetched))
    assert verify.verify(record) == []
    assert record.actions == stored.record.actions and record.seed == stored.record.seed
    assert fetched.players == stored.players and fetched.result == stored.result
    assert (fetched.started_at, fetched.ended_at) == (stored.started_at, stored.ended_at)


async def test_blackdrez_verify_accepts_the_stored_record_file(
    store: RecordsStore, tmp_path: Path
) -> None:
    await store.put_game(finished("g1", "blackdrez", rated=True))
    path = tmp_path / "game.json"
    path.write_bytes(msgspec.json.encode(await store.game("g1")))
    verified = subprocess.run(
        [sys.executable, "-m", "blackdrez.tools.cli", "verify", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.startswith("OK: blackdrez record verified")


async def test_an_unknown_game_id_is_none(store: RecordsStore) -> None:
    assert await store.game("nope") is None


async def test_a_retried_write_changes_nothing(store: RecordsStore) -> None:
    game = finished("g1", "blackdrez", rated=True)
    assert await store.put_game(game) is True
    assert await store.put_game(game) is False
    page, _ = await store.games()
    assert [g.id for g in page] == ["g1"]
    [stats] = await store.stats("p0")
    assert stats.games == 1 and stats.rating is not None and stats.rating.games == 1
    history, _ = await store.rating_history("p0", "blackdrez")
    assert len(history) == 1


async def test_concurrent_writes_of_one_game_store_it_once(store: RecordsStore) -> None:
    game = finished("g1", "blackdrez", rated=True)
    written = await asyncio.gather(*(store.put_game(game) for _ in range(4)))
    assert sorted(written) == [False, False, False, True]
    [stats] = await store.stats("p1")
    assert stats.games == 1 and stats.rating is not None and stats.rating.games == 1


async def test_a_game_id_already_used_by_another_game_is_refused(store: RecordsStore) -> None:
    await store.put_game(finished("g1", "blackdrez", seed="one"))
    with pytest.raises(GameIdConflict, match="g1"):
        await store.put_game(finished("g1", "blackdrez", seed="two"))
    fetched = await store.game("g1")
    assert fetched is not None and fetched.seed == "one"


async def test_a_failed_write_leaves_nothing_behind(store: RecordsStore) -> None:
    good = finished("g1", "blue_jacket", players=["solo"])
    # A second game whose player row cannot be written: the whole game must roll back.
    bad = msgspec.structs.replace(
        finished("g2", "blue_jacket", players=["solo"]),
        players=[msgspec.structs.replace(good.players[0], name=None)],
    )
    await store.put_game(good)
    with pytest.raises(Exception):  # noqa: B017 - each driver raises its own NOT NULL error
        await store.put_game(bad)
    assert await store.game("g2") is None
    [stats] = await store.stats("solo")
    assert stats.games == 1
    assert await store.put_game(finished("g2", "blue_jacket", players=["solo"]))


async def test_games_are_listed_newest_first_and_filtered_by_player_and_game(
    store: RecordsStore,
) -> None:
    four = ["ann", "bob", "cy", "dee"]
    await store.put_game(finished("a", "blackdrez", players=four, ended_at=10))
    await store.put_game(finished("b", "blue_jacket", players=["ann"], ended_at=20))
    await store.put_game(finished("c", "blackjack_piles", players=["bob"], ended_at=30))
    await store.put_game(finished("d", "blue_jacket", players=["bob"], ended_at=40))

    async def ids(**filters: str) -> list[str]:
        page, cursor = await store.games(**filters)
        assert cursor is None
        return [game.id for game in page]

    assert await ids() == ["d", "c", "b", "a"]
    assert await ids(player="ann") == ["b", "a"]
    assert await ids(game="blue_jacket") == ["d", "b"]
    assert await ids(player="bob", game="blue_jacket") == ["d"]
    assert await ids(player="nobody") == []
    [game] = (await store.games(player="ann", game="blackdrez"))[0]
    assert [p.player for p in game.players] == ["ann", "bob", "cy", "dee"]
    assert game.table == "t_a" and game.rated is False


@pytest.mark.parametrize("filters", [{}, {"player": "p0"}, {"game": "blue_jacket"}])
async def test_pages_visit_every_game_once_in_order(
    store: RecordsStore, filters: dict[str, str]
) -> None:
    # Equal end times on purpose: the id breaks the tie, so no game is skipped or repeated.
    for number in range(23):
        await store.put_game(
            finished(f"g{number:02d}", "blue_jacket", seed="s", ended_at=100 + number // 3)
        )
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page, cursor = await store.games(before=cursor, limit=5, **filters)
        pages += 1
        assert len(page) <= 5
        seen += [game.id for game in page]
        if cursor is None:
            break
    assert pages == 5
    expected = sorted((f"g{n:02d}" for n in range(23)), key=lambda i: (int(i[1:]) // 3, i))
    assert seen == expected[::-1]


async def test_list_bounds_and_bad_cursors_are_clear_errors(store: RecordsStore) -> None:
    for limit in (0, 101, -1):
        with pytest.raises(ValueError, match="limit must be an integer from 1 to 100"):
            await store.games(limit=limit)
    for cursor in ("", "x", "12", "abc~g1", "~g1", "12~"):
        with pytest.raises(InvalidCursor):
            await store.games(before=cursor)
    with pytest.raises(InvalidCursor):
        await store.leaderboard("blackdrez", after="not a number~p")
    with pytest.raises(InvalidCursor):
        await store.leaderboard("blue_jacket", after="1~2")


async def test_a_profile_counts_games_wins_and_best_scores(store: RecordsStore) -> None:
    scores = []
    for number, seed in enumerate(["x1", "x2", "x3"]):
        game = finished(f"bj{number}", "blue_jacket", seed=seed, players=["ann"], ended_at=number)
        scores.append(game.players[0].score)
        await store.put_game(game)
    drez = finished("d1", "blackdrez", players=["ann", "bob"], seats=2, rated=True, ended_at=9)
    await store.put_game(drez)
    player = await store.player("ann")
    assert player is not None
    assert (player.name, player.bot, player.account) == ("Name ann", False, False)
    assert (player.first_seen, player.last_seen) == (0.0, 9.0)
    stats = {s.game: s for s in await store.stats("ann")}
    assert stats["blue_jacket"].games == 3 and stats["blue_jacket"].best_score == max(scores)
    assert stats["blue_jacket"].rating is None
    assert stats["blackdrez"].games == 1 and stats["blackdrez"].best_score is None
    assert stats["blackdrez"].wins == int(drez.players[0].won)
    assert stats["blackdrez"].rating is not None
    assert await store.player("nobody") is None


async def test_a_bot_stays_labelled_a_bot(store: RecordsStore) -> None:
    await store.put_game(finished("g1", "blue_jacket", players=["robo"], bots=["robo"]))
    await store.put_game(finished("g2", "blue_jacket", players=["robo"], ended_at=2e9))
    player = await store.player("robo")
    assert player is not None and player.bot
    [entry], _ = await store.leaderboard("blue_jacket", "bots")
    assert entry.player == "robo" and entry.bot


async def test_the_solitaire_leaderboard_ranks_best_scores_humans_bots_and_all(
    store: RecordsStore,
) -> None:
    best = {}
    for number, player in enumerate(["ann", "bob", "cy", "robo", "ann", "zed"]):
        game = finished(
            f"g{number}",
            "blackjack_piles",
            seed=f"seed{number}",
            players=[player],
            bots=["robo", "zed"],
            ended_at=number,
        )
        best[player] = max(best.get(player, -1), game.players[0].score)
        await store.put_game(game)
    everyone, _ = await store.leaderboard("blackjack_piles", "all")
    assert [e.best_score for e in everyone] == sorted(best.values(), reverse=True)
    assert {e.player for e in everyone} == set(best)
    humans, _ = await store.leaderboard("blackjack_piles", "humans")
    assert {e.player for e in humans} == {"ann", "bob", "cy"}
    bots, _ = await store.leaderboard("blackjack_piles", "bots")
    assert {e.player for e in bots} == {"robo", "zed"} and all(e.bot for e in bots)
    paged, cursor = [], None
    while True:
        page, cursor = await store.leaderboard("blackjack_piles", "all", after=cursor, limit=2)
        paged += page
        if cursor is None:
            break
    assert paged == everyone
    with pytest.raises(ValueError, match="kind must be"):
        await store.leaderboard("blackjack_piles", "robots")  # type: ignore[arg-type]


def test_a_record_that_does_not_verify_is_refused() -> None:
    record = bot_record("blue_jacket", "s")
    forged = msgspec.structs.replace(record, seed="another seed")
    with pytest.raises(InvalidGame, match="the seed does not match the commitment"):
        finished_game(
            game_id="g1",
            record=forged,
            players=[SeatPlayer(seat=0, player="p", name="P")],
            started_at=0,
            ended_at=1,
        )
    unfinished = msgspec.structs.replace(record, actions=record.actions[:-1])
    with pytest.raises(InvalidGame, match="does not verify"):
        finished_game(
            game_id="g1",
            record=unfinished,
            players=[SeatPlayer(seat=0, player="p", name="P")],
            started_at=0,
            ended_at=1,
        )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"game_id": "has space"}, "a game id is"),
        ({"game_id": ""}, "a game id is"),
        ({"ended_at": -5.0}, "ended .* before it started"),
        ({"started_at": float("nan")}, "finite"),
        ({"players": []}, "at least one player"),
        ({"players": [SeatPlayer(seat=4, player="p", name="P")]}, "seat 4 is not a seat"),
        (
            {"players": [SeatPlayer(seat=0, player="p", name="P")] * 2},
            "seat 0 is named twice",
        ),
        (
            {
                "players": [
                    SeatPlayer(seat=0, player="p", name="P"),
                    SeatPlayer(seat=1, player="p", name="P"),
                ]
            },
            "holds two seats",
        ),
        ({"players": [SeatPlayer(seat=0, player="", name="P")]}, "a player id is"),
        ({"players": [SeatPlayer(seat=0, player="p", name="")]}, "a name is"),
    ],
)
def test_inconsistent_games_are_refused(change: dict, message: str) -> None:
    arguments = {
        "game_id": "g1",
        "record": bot_record("blackdrez", "s"),
        "players": [SeatPlayer(seat=0, player="p", name="P")],
        "started_at": 0.0,
        "ended_at": 1.0,
        **change,
    }
    with pytest.raises(InvalidGame, match=message):
        finished_game(**arguments)


def test_only_blackdrez_games_are_rated() -> None:
    with pytest.raises(InvalidGame, match="only blackdrez games are rated"):
        finished("g1", "blue_jacket", rated=True)


def test_results_per_player_follow_from_the_record() -> None:
    game = finished("g1", "blackdrez", seed="ranked", players=["a", "b", "c", "d"])
    result = verify.replay(game.record).result()
    for place in result.ranking:
        for seat in place.seats:
            player = game.players[seat]
            assert (player.place, player.score) == (place.place, place.cards)
            assert player.won == (place.place == 1)
    solitaire = finished("g2", "blue_jacket", seed="won?")
    outcome = verify.replay(solitaire.record).result()
    assert solitaire.players[0].score == outcome.score
    assert solitaire.players[0].won == outcome.won
    assert solitaire.players[0].place is None


async def test_a_daily_deals_game_stays_sealed_until_its_day_has_ended(
    store: RecordsStore,
) -> None:
    """Its record holds the day's seed: nothing serves it before the seed is revealed."""
    day_ends = 1_700_006_400.0
    now = [day_ends - 3600.0]
    store.clock = lambda: now[0]
    daily = finished("daily", "blue_jacket", players=["ann"], ended_at=now[0] - 60.0,
                     sealed_until=day_ends)  # fmt: skip
    other = finished("other", "blue_jacket", players=["ann"], ended_at=now[0] - 30.0)
    assert await store.put_game(daily) and await store.put_game(other)
    assert not await store.put_game(daily), "stored once, like any game"
    assert await store.game("daily") is None
    for filters in ({}, {"player": "ann"}, {"game": "blue_jacket"}):
        games, _ = await store.games(**filters)  # type: ignore[arg-type]
        assert [g.id for g in games] == ["other"], filters
    now[0] = day_ends
    fetched = await store.game("daily")
    assert fetched is not None and verify.verify(fetched) == []
    games, _ = await store.games(player="ann")
    assert [g.id for g in games] == ["other", "daily"]


async def test_a_private_rated_games_point_is_in_its_players_rating_history_only(
    store: RecordsStore,
) -> None:
    """A private rated table moves its players' ratings like any, but the point it adds to a
    rating history (its game's id, its time, the place) would tell anyone who played it, when,
    with whom (the other players' points at the same instant) and how it went: left out of the
    history anyone but the player reads. The rating itself is the player's, as before."""
    await store.put_game(finished("open", players=["ann", "bob"], seats=2, rated=True, ended_at=10))
    hidden = finished(
        "hidden", players=["ann", "cy"], seats=2, rated=True, ended_at=20, private=True
    )
    await store.put_game(hidden)

    async def points(player: str, viewer: str | None, **options: Any) -> list[str]:
        history, _ = await store.rating_history(player, "blackdrez", viewer=viewer, **options)
        return [point.game_id for point in history]

    for viewer in (None, "bob", "cy"):
        assert await points("ann", viewer) == ["open"], viewer
    assert await points("ann", "ann") == ["hidden", "open"]
    assert await points("cy", "cy") == ["hidden"]
    assert await points("cy", None) == []
    first, cursor = await store.rating_history("ann", "blackdrez", viewer="ann", limit=1)
    assert [p.game_id for p in first] == ["hidden"] and cursor is not None
    assert await points("ann", "ann", before=cursor) == ["open"]
    [stats] = await store.stats("cy")
    assert stats.rating is not None and stats.rating.games == 1, "the rating is the player's"


async def test_a_private_tables_games_are_listed_and_served_to_their_players_only(
    store: RecordsStore,
) -> None:
    await store.put_game(finished("open", players=["ann", "bob"], seats=2, ended_at=10))
    hidden = finished("hidden", players=["ann", "cy"], seats=2, ended_at=20, private=True)
    await store.put_game(hidden)

    async def ids(**filters: str) -> list[str]:
        return [game.id for game in (await store.games(**filters))[0]]

    for viewer in (None, "bob", "ann"):  # lists of everyone's games: public games only
        assert await ids(viewer=viewer) == ["open"]
        assert await ids(game="blackdrez", viewer=viewer) == ["open"]
    assert await ids(player="ann") == ["open"]
    assert await ids(player="ann", viewer="cy") == ["open"], "another player's list"
    assert await ids(player="ann", viewer="ann") == ["hidden", "open"]
    assert await ids(player="cy", game="blackdrez", viewer="cy") == ["hidden"]
    assert await ids(player="cy") == []

    assert await store.game("hidden") is None
    assert await store.game("hidden", viewer="bob") is None
    served = await store.game("hidden", viewer="cy")
    assert served is not None and served.private and served.players == hidden.players
    public = await store.game("open")
    assert public is not None and not public.private
    stats = {s.game: s for s in await store.stats("cy")}
    assert stats["blackdrez"].games == 1, "a private game is one of the player's games"


async def test_an_arenas_games_are_listed_by_its_id_and_say_it(store: RecordsStore) -> None:
    """Issue 37: a game of an arena table is stored with the arena's id, listed by it (newest
    first, paged, alone or with a player), and its record says it; other games say none."""
    await store.put_game(finished("a1", players=["ann", "bob"], seats=2, ended_at=10, arena="A"))
    await store.put_game(finished("x", players=["ann", "bob"], seats=2, ended_at=15))
    await store.put_game(finished("a2", players=["ann", "cy"], seats=2, ended_at=20, arena="A"))
    await store.put_game(finished("b1", players=["bob", "cy"], seats=2, ended_at=30, arena="B"))

    async def ids(**filters: Any) -> list[str]:
        return [game.id for game in (await store.games(**filters))[0]]

    assert await ids(arena="A") == ["a2", "a1"]
    assert await ids(arena="B") == ["b1"]
    assert await ids(arena="A", player="bob") == ["a1"]
    assert await ids(arena="nowhere") == []
    page, cursor = await store.games(arena="A", limit=1)
    assert [g.id for g in page] == ["a2"] and page[0].arena == "A" and cursor is not None
    assert await ids(arena="A", before=cursor) == ["a1"]
    assert {g.id: g.arena for g in (await store.games())[0]} == {
        "b1": "B", "a2": "A", "x": None, "a1": "A"
    }  # fmt: skip
    record = await store.game("a1")
    assert record is not None and record.arena == "A"


async def test_two_nodes_writing_one_database_at_once_lose_nothing(
    store: RecordsStore, database_url: str
) -> None:
    """Two nodes on one records database (the workers of one machine on its SQLite file, or
    nodes sharing a PostgreSQL) writing rated games of the same players at once: every game and
    every rating change is kept (a SQLite writer waits for the other's lock)."""
    other = await RecordsStore.open(database_url)
    try:
        games = [finished(f"g{n}", "blackdrez", rated=True, ended_at=1e9 + n) for n in range(16)]
        written = await asyncio.gather(
            *((store if n % 2 else other).put_game(game) for n, game in enumerate(games))
        )
        assert written == [True] * 16
        for player in ("p0", "p1", "p2", "p3"):
            [stats] = await other.stats(player)
            assert stats.games == 16 and stats.rating is not None
            assert stats.rating.games == 16, player
    finally:
        await other.close()
