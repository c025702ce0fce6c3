"""Ratings move the right way for a known ranking, in the pure model and through the store."""

from __future__ import annotations

import msgspec
import pytest

from blackdrez.server.records.ratings import INITIAL, PROVISIONAL_GAMES, Rating, rate
from blackdrez.server.records.store import RecordsStore
from tests.records.games import bot_record, finished, seat_order


def test_the_winner_goes_up_and_the_loser_down() -> None:
    new = rate({"win": 1, "lose": 2}, {})
    assert new["win"].mu > INITIAL.mu > new["lose"].mu
    assert new["win"].sigma < INITIAL.sigma and new["lose"].sigma < INITIAL.sigma


def test_a_full_ranking_orders_the_new_ratings() -> None:
    new = rate({"a": 1, "b": 2, "c": 3, "d": 4}, {})
    assert new["a"].mu > new["b"].mu > new["c"].mu > new["d"].mu
    assert new["a"].mu > INITIAL.mu > new["d"].mu


def test_beating_a_stronger_player_gains_more() -> None:
    strong = Rating(35.0, 4.0)
    weak = Rating(20.0, 4.0)
    me = Rating(25.0, 4.0)
    over_strong = rate({"me": 1, "them": 2}, {"me": me, "them": strong})["me"].mu - me.mu
    over_weak = rate({"me": 1, "them": 2}, {"me": me, "them": weak})["me"].mu - me.mu
    assert over_strong > over_weak > 0


def test_losing_to_a_weaker_player_costs_more() -> None:
    me = Rating(25.0, 4.0)
    to_weak = me.mu - rate({"them": 1, "me": 2}, {"me": me, "them": Rating(15.0, 4.0)})["me"].mu
    to_strong = me.mu - rate({"them": 1, "me": 2}, {"me": me, "them": Rating(35.0, 4.0)})["me"].mu
    assert to_weak > to_strong > 0


def test_a_tie_between_equals_changes_no_mean() -> None:
    new = rate({"a": 1, "b": 1}, {})
    assert new["a"].mu == pytest.approx(INITIAL.mu) == pytest.approx(new["b"].mu)
    assert new["a"].sigma < INITIAL.sigma


def test_the_same_game_always_gives_the_same_ratings() -> None:
    current = {"a": Rating(27.0, 6.0), "b": Rating(22.0, 7.0), "c": INITIAL}
    assert rate({"c": 1, "a": 2, "b": 3}, current) == rate({"b": 3, "c": 1, "a": 2}, current)


def test_a_rating_needs_two_ranked_players_and_places_from_one() -> None:
    with pytest.raises(ValueError, match="at least two"):
        rate({"alone": 1}, {})
    with pytest.raises(ValueError, match="places start at 1"):
        rate({"a": 0, "b": 1}, {})


def test_the_ordinal_is_mu_minus_three_sigma() -> None:
    assert Rating(30.0, 2.0).ordinal == 24.0
    assert INITIAL.ordinal == pytest.approx(0.0)


def _by_place(seed: str, seats: int = 4) -> list[str]:
    """Players named by place: seat order[0] (the winner) gets "first", and so on."""
    order = seat_order(bot_record("blackdrez", seed, seats))
    names = ["first", "second", "third", "fourth"][:seats]
    by_seat = [""] * seats
    for place, seat in enumerate(order):
        by_seat[seat] = names[place]
    return by_seat


async def test_a_rated_game_moves_ratings_by_its_ranking(store: RecordsStore) -> None:
    seed = "rating-1"
    game = finished("g1", "blackdrez", seed=seed, players=_by_place(seed), rated=True)
    places = {p.player: p.place for p in game.players}
    assert sorted(places.values()) == [1, 2, 3, 4]  # a seed whose ranking has no tie
    await store.put_game(game)
    board, _ = await store.leaderboard("blackdrez", "all")
    assert [entry.player for entry in board] == sorted(places, key=lambda p: (places[p], p))
    ratings = {entry.player: entry.rating for entry in board}
    best = min(places, key=places.get)
    worst = max(places, key=places.get)
    assert ratings[best].mu > INITIAL.mu > ratings[worst].mu
    assert all(rating.games == 1 for rating in ratings.values())
    [point], cursor = await store.rating_history(best, "blackdrez")
    assert cursor is None
    assert (point.game_id, point.place) == ("g1", 1)
    assert (point.mu_before, point.sigma_before) == INITIAL
    assert (point.mu, point.sigma) == (ratings[best].mu, ratings[best].sigma)


async def test_an_unrated_game_changes_no_rating(store: RecordsStore) -> None:
    await store.put_game(finished("g1", "blackdrez", rated=False))
    assert await store.leaderboard("blackdrez") == ([], None)
    stats = await store.stats("p0")
    assert stats[0].rating is None and stats[0].games == 1


async def test_ratings_build_on_each_other_game_after_game(store: RecordsStore) -> None:
    # "first" wins every game (the seat that won each game's ranking gets that name).
    for number in range(3):
        seed = f"series-{number}"
        players = _by_place(seed, 2)
        await store.put_game(
            finished(f"g{number}", "blackdrez", seed=seed, players=players, rated=True, seats=2,
                     ended_at=1000.0 + number)
        )  # fmt: skip
    history, _ = await store.rating_history("first", "blackdrez")
    assert [point.game_id for point in history] == ["g2", "g1", "g0"]
    mus = [point.mu for point in reversed(history)]
    assert mus == sorted(mus) and mus[0] > INITIAL.mu
    for older, newer in zip(reversed(history), list(reversed(history))[1:], strict=False):
        assert (newer.mu_before, newer.sigma_before) == (older.mu, older.sigma)
    page, cursor = await store.rating_history("first", "blackdrez", limit=2)
    rest, end = await store.rating_history("first", "blackdrez", before=cursor, limit=2)
    assert [p.game_id for p in page + rest] == ["g2", "g1", "g0"] and end is None


async def test_bots_are_rated_and_boards_keep_humans_and_bots_apart(
    store: RecordsStore,
) -> None:
    seed = "ladder"
    players = ["h1", "h2", "b1", "b2"]
    await store.put_game(
        finished("g1", "blackdrez", seed=seed, players=players, bots=["b1", "b2"], rated=True)
    )
    everyone, _ = await store.leaderboard("blackdrez", "all")
    humans, _ = await store.leaderboard("blackdrez", "humans")
    bots, _ = await store.leaderboard("blackdrez", "bots")
    assert {e.player for e in everyone} == set(players)
    assert {e.player for e in humans} == {"h1", "h2"} and not any(e.bot for e in humans)
    assert {e.player for e in bots} == {"b1", "b2"} and all(e.bot for e in bots)
    assert [e for e in everyone if e.bot] == bots and [e for e in everyone if not e.bot] == humans
    first, cursor = await store.leaderboard("blackdrez", "all", limit=3)
    rest, end = await store.leaderboard("blackdrez", "all", after=cursor, limit=3)
    assert first + rest == everyone and end is None


async def test_a_ranked_seat_without_a_player_is_not_rated(store: RecordsStore) -> None:
    seed = "rating-1"
    players = _by_place(seed)
    game = finished("g1", "blackdrez", seed=seed, players=players, rated=True)
    # The winner's seat was freed before the end: only the three others are rated.
    leaver = next(p for p in game.players if p.player == "first")
    game = msgspec.structs.replace(game, players=[p for p in game.players if p is not leaver])
    await store.put_game(game)
    board, _ = await store.leaderboard("blackdrez")
    assert {e.player for e in board} == {"second", "third", "fourth"}


async def test_a_rating_is_provisional_until_ten_rated_games(store: RecordsStore) -> None:
    assert PROVISIONAL_GAMES == 10
    players = ["a", "b"]
    for number in range(PROVISIONAL_GAMES):
        await store.put_game(
            finished(f"g{number}", "blackdrez", seed=f"prov-{number}", players=players,
                     rated=True, seats=2, ended_at=1000.0 + number)
        )  # fmt: skip
        ratings = await store.ratings("blackdrez", players)
        assert [ratings[p].games for p in players] == [number + 1] * 2
        expected = number + 1 < PROVISIONAL_GAMES
        assert [ratings[p].provisional for p in players] == [expected] * 2, number
    board, _ = await store.leaderboard("blackdrez")
    assert [entry.rating.provisional for entry in board if entry.rating] == [False, False]
    assert await store.ratings("blackdrez", ["nobody"]) == {}
    with pytest.raises(ValueError, match="1 to 8 players"):
        await store.ratings("blackdrez", [])
