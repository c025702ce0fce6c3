"""The table lifecycle on the table core, through the in-memory harness (no sockets)."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode
from server.room import RUNAWAY_BURST, RoomError
from tests.server.harness import TableHarness

DEAL_WIN = "deal-win:7"
"""A seed whose first two-player round is won on the deal."""


def table_of(*players: str, seeds: list[str] | None = None, **options) -> TableHarness:
    """A table hosted by the first of ``players``, every one of them seated."""
    options.setdefault("seats", max(2, len(players)))
    harness = TableHarness(host=players[0], seeds=seeds, **options)
    for player in players:
        harness.client(player).join()
    return harness


def start_game(harness: TableHarness) -> None:
    """Everyone seated gets ready and the host starts."""
    for seat in harness.room.seats:
        if seat is not None:
            harness.client(seat.player).ready()
    harness.client(harness.room.host).start()


def withdraw_until_round_ends(harness: TableHarness) -> None:
    room = harness.room
    start = room.engine.state.round
    while room.engine.state.phase == "playing" and room.engine.state.round == start:
        seat = room.engine.state.to_act
        harness.client(room.seats[seat].player).act({"type": "withdraw"})


def test_a_round_won_on_the_deal_is_followed_by_the_pause() -> None:
    harness = table_of("a", "b", seeds=[DEAL_WIN], round_pause_seconds=3.0)
    start_game(harness)
    a = harness.client("a")
    assert a.view["round"] == 1 and a.view["phase"] == "between_rounds"
    harness.advance(2.9)
    assert a.view["round"] == 1, "the result of the round stays on screen for the pause"
    harness.advance(0.2)
    assert a.view["round"] == 2


def test_the_host_who_starts_plays() -> None:
    harness = table_of("host", "b", "c")
    harness.client("b").ready()
    harness.client("c").ready()
    harness.client("host").start()
    view = harness.client("host").view
    assert view["seats"][0]["in_round"], "the host who pressed start is dealt in"
    assert harness.room.seats[0].ready


def test_the_host_alone_with_nobody_ready_cannot_start() -> None:
    harness = table_of("host", "b")
    with pytest.raises(RoomError) as error:
        harness.client("host").start()
    assert error.value.code == ErrorCode.NOT_ENOUGH_PLAYERS
    assert not harness.room.seats[0].ready, "a refused start changes nothing"


def test_joining_a_finished_table_starts_clean() -> None:
    harness = table_of("a", "b", max_rounds=1, seats=3)
    start_game(harness)
    withdraw_until_round_ends(harness)
    assert harness.client("a").view["phase"] == "over"
    newcomer = harness.client("c")
    newcomer.join()
    assert newcomer.view is None, "no old game's result for the newcomer"
    assert newcomer.info.status == "open"
    assert harness.client("a").info.status == "open"


def test_a_spectator_gets_the_recent_history_of_the_game() -> None:
    harness = table_of("a", "b")
    start_game(harness)
    spectator = harness.client("s")
    spectator.spectate()
    kinds = [numbered.event["type"] for numbered in spectator.recent]
    assert kinds[0] == "game_started"
    assert "round_started" in kinds
    assert spectator.recent[-1].seq == spectator.seq


def test_a_player_who_unreadies_does_not_make_the_table_spin() -> None:
    harness = table_of("a", "b", round_pause_seconds=0.0, grace_seconds=30.0)
    start_game(harness)
    harness.client("b").ready(False)
    withdraw_until_round_ends(harness)
    logged = len(harness.log)
    harness.advance(29.0)
    assert len(harness.log) == logged
    harness.advance(2.0)
    assert harness.client("a").view["result"]["reason"] == "players"


def test_a_table_whose_timer_fires_too_fast_is_stopped(monkeypatch) -> None:
    """A bug that kept a room's deadline due would spin its node: the room is stopped instead
    (and the stop is logged, so the replay ends the same way)."""
    harness = table_of("a", "b")
    monkeypatch.setattr(harness.room, "next_deadline", lambda: harness.now)  # always due
    harness.advance(1.0)
    assert harness.room.closed
    assert harness.timer_firings == RUNAWAY_BURST + 1
    closed = harness.client("a").events[-1].event
    assert closed["type"] == "table_closed" and closed["reason"].startswith("stopped")
    assert harness.logged_commands[-1] == "Stop"
    assert harness.replayed().closed


def test_players_requests_never_stop_a_table() -> None:
    harness = table_of("a", "b")
    b = harness.client("b")
    for turn in range(3 * int(RUNAWAY_BURST)):
        b.ready(turn % 2 == 0)
    assert not harness.room.closed
