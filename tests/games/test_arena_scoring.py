"""An arena's scoring (issue 37), pure: points for each player placed below, shared places
sharing, double points on fire after two wins in a row until a game not won, and the standings'
order; properties over random games."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from blackdrez.games.arena import (
    FIRE_AFTER,
    ArenaGame,
    Placed,
    Standing,
    ordered,
    place_points,
    scored,
    standings_of,
)


def test_points_count_the_players_placed_below() -> None:
    assert [place_points(p, [1, 2, 3, 4]) for p in (1, 2, 3, 4)] == [3, 2, 1, 0]
    assert [place_points(p, [1, 1, 3]) for p in (1, 1, 3)] == [1, 1, 0], "a shared first"


def test_two_wins_in_a_row_set_a_player_on_fire_until_a_game_not_won() -> None:
    ann = Standing(player="a", name="Ann")
    for _ in range(FIRE_AFTER):
        ann = scored(ann, 1, [1, 2, 3, 4])
    assert ann.on_fire and ann.points == 6
    ann = scored(ann, 1, [1, 2, 3, 4])
    assert ann.results == [3, 3, 6], "doubled on fire"
    ann = scored(ann, 2, [1, 2, 3, 4])
    assert not ann.on_fire and ann.results[-1] == 2 and ann.streak == 0
    assert (ann.points, ann.games, ann.wins) == (14, 4, 3)


def test_the_order_is_points_then_wins_then_games_then_who_came_first() -> None:
    rows = [
        Standing(player="late", name="L", joined=2.0, points=5, wins=1, games=3),
        Standing(player="early", name="E", joined=1.0, points=5, wins=1, games=3),
        Standing(player="wins", name="W", joined=3.0, points=5, wins=2, games=3),
        Standing(player="top", name="T", joined=4.0, points=9),
    ]
    assert [s.player for s in ordered(rows)] == ["top", "wins", "early", "late"]


games = st.lists(
    st.integers(2, 8).flatmap(
        lambda n: st.tuples(st.just(n), st.lists(st.integers(1, n), min_size=n, max_size=n))
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(played=games)
def test_a_standing_adds_up_its_games(played: list[tuple[int, list[int]]]) -> None:
    standing = Standing(player="p", name="P")
    for _, places in played:
        before = standing
        standing = scored(standing, places[0], places)
        plain = place_points(places[0], places)
        assert standing.results[-1] in (plain, 2 * plain)
        assert standing.results[-1] == (2 * plain if before.on_fire and places[0] == 1 else plain)
        assert 0 <= plain <= len(places) - 1
    assert standing.points == sum(standing.results) >= 0
    assert standing.games == len(played) and standing.wins <= standing.games


tables = st.lists(
    st.tuples(
        st.permutations(["ann", "bob", "cy", "dee"]).map(lambda p: p[:2] + p[2:][:1]),
        st.lists(st.integers(1, 3), min_size=3, max_size=3),
        st.booleans(),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(played=tables, shuffle=st.randoms())
def test_the_stored_games_fold_into_the_standings_scored_live(
    played: list[tuple[list[str], list[int], bool]], shuffle: Any
) -> None:
    """What ``blackdrez arena --check`` relies on: scoring each game as it ends (live) and
    folding the stored games afterwards, in whatever order the API lists them, twice listed or
    not, give every player the same points, games, wins and results; games that ended after
    the arena are in neither."""
    ends = 1000.0
    live: dict[str, Standing] = {}
    stored: list[ArenaGame] = []
    for n, (players, places, late) in enumerate(played):
        ended = ends + n if late else float(n)
        unranked = players[-1] if places[-1] == 3 else None  # a seat not ranked now and then
        ranked = [(p, place) for p, place in zip(players, places, strict=True) if p != unranked]
        stored.append(
            ArenaGame(
                id=f"t:{n}",
                started_at=ended - 1,
                ended_at=ended,
                players=[
                    Placed(p, p.title(), False, None if p == unranked else place)
                    for p, place in zip(players, places, strict=True)
                ],
            )
        )
        if late:
            continue
        for player, place in ranked:
            before = live.get(player) or Standing(player=player, name=player.title())
            live[player] = scored(before, place, [place for _, place in ranked])
    listed = stored + stored[: len(stored) // 2]
    shuffle.shuffle(listed)
    folded = {s.player: s for s in standings_of(listed, ends)}
    assert set(folded) == set(live)
    for player, standing in live.items():
        got = folded[player]
        assert (got.points, got.games, got.wins, got.results) == (
            standing.points, standing.games, standing.wins, standing.results
        )  # fmt: skip
