"""A rated table shows its seated players' ratings: a logged command of the host's (no I/O)."""

from __future__ import annotations

from blackdrez.protocol import v1
from blackdrez.server.table.commands import Ratings
from blackdrez.server.table.room import Room
from tests.server.harness import TableHarness


def rating(ordinal: float, games: int = 3) -> v1.SeatRating:
    return v1.SeatRating(
        ordinal=ordinal, mu=ordinal + 15.0, sigma=5.0, games=games, provisional=games < 10
    )


def seated(*players: str, rated: bool = True) -> TableHarness:
    harness = TableHarness(host=players[0], seats=4, rated=rated)
    for player in players:
        harness.client(player).join()
    return harness


def host_reads(harness: TableHarness, ratings: dict[str, v1.SeatRating]) -> None:
    """What the host node does once it has read the ratings from the records."""
    harness.request(harness.client(harness.room.seating.host), Ratings(ratings=ratings))


def shown(room: Room) -> list[v1.SeatRating | None]:
    return [seat.rating for seat in room.info().seats if seat is not None]


def test_a_rated_table_shows_each_seated_players_rating_to_everyone_watching() -> None:
    harness = seated("ann", "bob")
    watcher = harness.client("cy")
    watcher.spectate()
    host_reads(harness, {"ann": rating(4.5), "bob": rating(-1.0, games=12)})
    assert shown(harness.room) == [rating(4.5), rating(-1.0, games=12)]
    info = harness.broadcasts[-1].info
    assert info is not None and [s.rating for s in info.seats if s] == shown(harness.room)
    assert watcher.info == info, "as the spectator received it over the wire (JSON)"
    assert harness.logged_commands[-1] == "Ratings"
    assert harness.replayed().info() == harness.room.info(), "a replay shows the same"


def test_the_same_ratings_again_change_nothing_and_are_not_logged() -> None:
    harness = seated("ann", "bob")
    host_reads(harness, {"ann": rating(4.5), "bob": rating(1.0)})
    logged, broadcasts = len(harness.log), len(harness.broadcasts)
    host_reads(harness, {"ann": rating(4.5), "bob": rating(1.0)})
    assert (len(harness.log), len(harness.broadcasts)) == (logged, broadcasts)


def test_a_casual_table_shows_no_rating() -> None:
    harness = seated("ann", "bob", rated=False)
    logged = len(harness.log)
    host_reads(harness, {"ann": rating(4.5), "bob": rating(1.0)})
    assert shown(harness.room) == [None, None]
    assert len(harness.log) == logged


def test_only_seated_players_ratings_are_kept() -> None:
    harness = seated("ann", "bob")
    host_reads(harness, {"ann": rating(4.5), "bob": rating(1.0), "gone": rating(9.0)})
    assert set(harness.room.seating.ratings) == {"ann", "bob"}
    harness.client("bob").leave()
    assert set(harness.room.seating.ratings) == {"ann"}
    harness.client("bob").join()
    assert shown(harness.room) == [rating(4.5), None], "read again once bob sits down again"
