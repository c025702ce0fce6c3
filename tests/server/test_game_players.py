"""Who a finished game's record names at each seat, through the table harness (no sockets).

A BlackDrez seat's result (its pile) belongs to the player who played its rounds: a player who
sat down there and played none of them does not take it over, and at a rated table the seat of
a player who played a round and then left stays theirs until the game ends, so leaving never
takes a rated game off a player's rating (RULES.md: only seats that played a round are ranked).
"""

from __future__ import annotations

import pytest

from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.table.room import RoomError
from tests.server.harness import TableHarness
from tests.server.test_lifecycle import on_turn, start_game, table_of, withdraw_until_round_ends


def first_round_played_then_ann_leaves(**options) -> TableHarness:
    """Ann (seat 0) and Bob (seat 1) play a round, Cid (seat 2) watches it; Ann then leaves."""
    harness = table_of("ann", "bob", "cid", seats=3, round_pause_seconds=0, **options)
    harness.client("cid").leave()
    start_game(harness)
    withdraw_until_round_ends(harness)
    assert sum(len(pile) for pile in harness.room.engine.state.piles) > 0
    harness.client("ann").leave()
    assert harness.room.seats[0] is None
    return harness


def recorded(harness: TableHarness) -> dict[int, str]:
    """Seat -> player of the one game that ended, as its record names them."""
    (game,) = harness.room.take_outcome().games_over
    return {seat: player for seat, player, _, _ in game.players}


def test_a_newcomer_who_played_no_round_does_not_take_the_leavers_result() -> None:
    harness = first_round_played_then_ann_leaves()
    harness.client("cid").join(seat=0)  # sits down, never gets ready: the game ends waiting
    harness.advance(1000)
    game = harness.room.take_outcome().games_over[0]
    ranked = {seat for place in game.engine.result().ranking for seat in place.seats}
    assert 0 in ranked, "seat 0's pile is Ann's round"
    assert {seat: player for seat, player, _, _ in game.players} == {0: "ann", 1: "bob"}


@pytest.mark.parametrize("seat", [0, None])
def test_at_a_rated_table_a_leavers_seat_stays_theirs_until_the_game_ends(
    seat: int | None,
) -> None:
    harness = first_round_played_then_ann_leaves(rated=True, max_rounds=3)
    cid = harness.client("cid")
    if seat == 0:
        with pytest.raises(RoomError) as refused:
            cid.join(seat=0)
        assert refused.value.code is ErrorCode.SEAT_TAKEN
        cid.join()
    else:
        cid.join()
    assert harness.room.seat_of("cid") == 2, "the first free seat that is nobody's"
    cid.ready()
    harness.advance(1)
    while not harness.room.engine.over:
        on_turn(harness).act({"type": "withdraw"})
        harness.advance(1)
    players = recorded(harness)
    assert players[0] == "ann", "Ann is ranked by the pile she left"
    assert players[1] == "bob" and players[2] == "cid"


def test_at_a_rated_table_a_leaver_cannot_start_afresh_in_another_seat() -> None:
    harness = first_round_played_then_ann_leaves(rated=True)
    ann = harness.client("ann")
    with pytest.raises(RoomError) as refused:
        ann.join(seat=2)
    assert refused.value.code is ErrorCode.SEAT_TAKEN
    ann.join()
    assert harness.room.seat_of("ann") == 0, "back to her own seat and pile"


def test_at_a_casual_table_a_newcomer_who_plays_takes_the_seat_afresh() -> None:
    harness = first_round_played_then_ann_leaves(max_rounds=2)
    cid = harness.client("cid")
    cid.join(seat=0)
    cid.ready()
    harness.advance(1)
    while not harness.room.engine.over:
        on_turn(harness).act({"type": "withdraw"})
        harness.advance(1)
    assert recorded(harness) == {0: "cid", 1: "bob"}


def test_the_seats_reserved_for_leavers_are_not_offered_to_bots() -> None:
    harness = first_round_played_then_ann_leaves(rated=True)
    assert harness.room.bot_seats("bob", 2, 0) == 1, "seat 2 only: seat 0 is Ann's"
    with pytest.raises(RoomError) as refused:
        harness.room.bot_seats("bob", 2, 1)
    assert refused.value.code is ErrorCode.TABLE_FULL


def test_the_table_info_shows_a_seat_kept_for_a_leaver_and_whose_it_is() -> None:
    """The lobby and the table's players saw the kept seat as free (``None``) and offered it:
    sitting there was refused. ``held`` names it and its player until the game ends."""
    harness = first_round_played_then_ann_leaves(rated=True, max_rounds=2)
    room = harness.room
    info = room.info()
    assert info.seats[0] is None
    assert [(h.seat, h.player, h.name) for h in info.held] == [(0, "ann", "ann")]
    ann = harness.client("ann")
    ann.join()
    assert room.info().held == [], "back in her seat: nothing is held any more"
    ann.leave()
    assert [h.seat for h in room.info().held] == [0]
    cid = harness.client("cid")
    cid.join()
    assert room.seat_of("cid") == 2 and [h.seat for h in room.info().held] == [0]
    cid.ready()
    harness.advance(1)
    while not room.engine.over:
        on_turn(harness).act({"type": "withdraw"})
        harness.advance(1)
    assert room.info().held == [], "the game is over: the seat is free for anyone"


def test_a_casual_table_holds_no_seat() -> None:
    harness = first_round_played_then_ann_leaves(max_rounds=2)
    assert harness.room.info().seats[0] is None and harness.room.info().held == []
