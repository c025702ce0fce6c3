"""The table lifecycle on the table core, through the in-memory harness (no sockets).

Every status and command (allowed, refused with the right code, or ignored), every transition of
the table, the rules that keep a table from freezing or spinning, and closing deserted tables.
"""

from __future__ import annotations

import gc
import sys

import msgspec
import pytest

from blackdrez.games.base import Reason
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.table.commands import Begin, Resume, Stop, state_key
from blackdrez.server.table.lifecycle import COMMANDS, TRANSITIONS, TableCommand, TableStatus
from blackdrez.server.table.room import RECENT_EVENTS, REJECTIONS, RUNAWAY_BURST, RoomError
from tests.server.harness import TableHarness

DEAL_WIN = "deal-win:7"
"""A seed whose first two-player round is won on the deal."""
SECOND_DEAL_WIN = "second-deal-win:7"
"""A seed whose second two-player round is won on the deal (when the first ends by withdrawals)."""
PLAYING_3 = "seed:0"
"""A seed whose first round, seats 0 and 1 of three, is not won on the deal."""
PLAYING_4 = "seed:0"
"""A seed whose first round, seats 0 and 1 of four, is not won on the deal."""

S = TableStatus


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
        if seat is not None and not seat.ready:
            harness.client(seat.player).ready()
    harness.client(harness.room.seating.host).start()


def on_turn(harness: TableHarness):
    """The client of the seat on turn."""
    seat = harness.room.engine.state.to_act
    return harness.client(harness.room.seats[seat].player)


def withdraw_until_round_ends(harness: TableHarness) -> None:
    """Whoever is on turn withdraws until the round in play is over."""
    while harness.room.status is S.PLAYING:
        on_turn(harness).act({"type": "withdraw"})


# --------------------------------------------------------------------------- status and command

ORDER = [S.OPEN, S.PLAYING, S.BETWEEN_ROUNDS, S.WAITING, S.FINISHED, S.CLOSED]
EXPECTED = {  # for each command, its verdict in each status of ORDER
    "join": ("yes", "yes", "yes", "yes", "yes", "not_found"),
    "spectate": ("yes", "yes", "yes", "yes", "yes", "not_found"),
    "leave": ("yes", "yes", "yes", "yes", "yes", "not_found"),
    "ready": ("yes", "yes", "yes", "yes", "yes", "not_found"),
    "start": ("yes", "game_running", "game_running", "game_running", "yes", "not_found"),
    "add_bots": ("yes", "yes", "yes", "yes", "yes", "not_found"),
    "remove_bot": ("yes", "yes", "yes", "yes", "yes", "not_found"),
    "act": ("not_in_round", "yes", "not_your_turn", "not_your_turn", "game_over", "not_found"),
    "resync": ("yes", "yes", "yes", "yes", "yes", "not_found"),
    "say": ("yes", "yes", "yes", "yes", "yes", "not_found"),
    "remove_spectator": ("yes", "yes", "yes", "yes", "yes", "not_found"),
    "hint": ("not_in_round", "yes", "not_your_turn", "not_your_turn", "game_over", "not_found"),
    "undo": ("not_in_round", "yes", "not_your_turn", "not_your_turn", "game_over", "not_found"),
    "presence": ("yes", "yes", "yes", "yes", "yes", "~"),
    "begin": ("yes", "game_running", "game_running", "game_running", "yes", "not_found"),
    "tick": ("yes", "yes", "yes", "yes", "yes", "~"),
    "resume": ("yes", "yes", "yes", "yes", "yes", "~"),
    "ratings": ("yes", "yes", "yes", "yes", "yes", "~"),
    "close": ("yes", "yes", "yes", "yes", "yes", "~"),
}
"""The module docstring's table, written out again: a change to COMMANDS must be deliberate."""


def test_the_command_table_is_the_documented_one() -> None:
    assert set(COMMANDS) == set(TableStatus)
    for status, row in COMMANDS.items():
        assert set(row) == set(TableCommand), status
        for command, verdict in row.items():
            shown = EXPECTED[command.value][ORDER.index(status)]
            expected = {"yes": "allowed", "~": "ignored"}.get(shown, shown)
            got = verdict if isinstance(verdict, str) else verdict.code.value
            assert got == expected, (status, command)


def in_status(status: TableStatus) -> TableHarness:
    """A four-seat table: host ``a`` and ``b`` seated (and ready where a game is on), a bot
    that is not ready in seat 2, seat 3 free."""
    harness = table_of(
        "a",
        "b",
        seats=4,
        seeds=[PLAYING_4, PLAYING_4],
        round_pause_seconds=5.0,
        max_rounds=1 if status is S.FINISHED else None,
        grace_seconds=0.0 if status is S.CLOSED else 60.0,
    )
    harness.client("robot", bot=True).join()
    harness.client("robot").ready(False)
    if status is S.CLOSED:
        harness.client("b").leave()
        harness.client("a").leave()
        return harness
    if status is not S.OPEN:
        harness.client("b").ready()
        harness.client("a").start()
        if status is S.WAITING:
            harness.client("b").ready(False)
        if status is not S.PLAYING:
            withdraw_until_round_ends(harness)
        if status is S.FINISHED:
            harness.client("b").ready()
    harness.client("b").ready()  # the start that is tried needs two ready players
    if status is S.WAITING:
        harness.client("b").ready(False)
    assert harness.room.status is status
    return harness


def issue(harness: TableHarness, command: TableCommand) -> None:
    """A request for ``command`` that nothing but the table's status can refuse."""
    a, b = harness.client("a"), harness.client("b")
    match command:
        case TableCommand.JOIN:
            harness.client("newcomer").join()
        case TableCommand.SPECTATE:
            harness.client("watcher").spectate()
        case TableCommand.LEAVE:
            b.leave()
        case TableCommand.READY:
            b.ready(not harness.room.seats[1].ready if harness.room.seats[1] else True)
        case TableCommand.START:
            a.start()
        case TableCommand.ADD_BOTS:
            assert harness.room.bot_seats("a", 1) == 1
        case TableCommand.REMOVE_BOT:
            a.send(v1.RemoveBot(table=harness.table, seat=2))
        case TableCommand.ACT:
            mover = on_turn(harness) if harness.room.status is S.PLAYING else a
            mover.act({"type": "withdraw"})
        case TableCommand.RESYNC:
            a.resync()
        case TableCommand.HINT | TableCommand.UNDO:
            message = v1.Hint if command is TableCommand.HINT else v1.Undo
            if COMMANDS[harness.room.status][command] != "allowed":
                a.send(message(table=harness.table))  # refused by the status
                return
            with pytest.raises(RoomError) as error:  # allowed there, but not at a BlackDrez table
                a.send(message(table=harness.table))
            assert error.value.code == ErrorCode.NOT_A_SOLITAIRE
        case TableCommand.SAY:
            b.send(v1.Say(table=harness.table, text="hello"))
        case TableCommand.REMOVE_SPECTATOR:
            if harness.room.status is not S.CLOSED:
                harness.client("watcher").spectate()
            a.send(v1.RemoveSpectator(table=harness.table, player="watcher"))
        case TableCommand.PRESENCE:
            a.drop()
        case TableCommand.BEGIN:
            a.send(Begin())
        case TableCommand.TICK:
            harness.tick()
        case TableCommand.RESUME:
            a.send(Resume())
        case TableCommand.CLOSE:
            a.send(Stop(reason="closed by the test"))


@pytest.mark.parametrize("status", ORDER)
@pytest.mark.parametrize("command", list(TableCommand))
def test_every_command_in_every_status(status: TableStatus, command: TableCommand) -> None:
    harness = in_status(status)
    verdict = COMMANDS[status][command]
    version = harness.room.version
    if isinstance(verdict, str):
        issue(harness, command)  # the harness checks that a refusal changes nothing
        if verdict == "ignored":
            assert harness.room.version == version
    else:
        with pytest.raises(RoomError) as error:
            issue(harness, command)
        assert error.value.code == verdict.code
        assert error.value.message
    assert_replays(harness)


def assert_replays(harness: TableHarness) -> None:
    """The log rebuilds exactly the live room."""
    live, rebuilt = harness.room, harness.replayed()
    assert state_key(rebuilt) == state_key(live)
    assert rebuilt.log.kept_events() == live.log.kept_events()
    for seat in [None, *range(len(live.seats))]:
        assert rebuilt.snapshot(seat) == live.snapshot(seat)


def test_every_engine_rejection_has_its_error_code() -> None:
    assert set(REJECTIONS) == set(Reason)
    assert {code.value for code in REJECTIONS.values()} == {reason.value for reason in Reason}


def test_stand_when_hands_are_not_level_is_refused_with_its_code() -> None:
    """Issue 9 section 8: the refusal of an illegal stand names its code and why."""
    harness = table_of("a", "b", seeds=["seed:1"])
    start_game(harness)
    state = harness.room.engine.state
    assert state.values[0] != state.values[1]
    with pytest.raises(RoomError) as error:
        on_turn(harness).act({"type": "stand"})
    assert error.value.code == ErrorCode.ILLEGAL_ACTION
    assert "level" in error.value.message


# --------------------------------------------------------------------------- transitions


def test_every_transition_of_the_table_happens_and_no_other() -> None:
    seen: set[tuple[TableStatus, TableStatus]] = set()

    # a game with a pause, a player who un-readies and comes back, then leaves for good
    harness = table_of("a", "b", seats=3, seeds=[PLAYING_3, PLAYING_3], round_pause_seconds=5.0)
    start_game(harness)  # open -> playing
    harness.client("b").ready(False)
    withdraw_until_round_ends(harness)  # playing -> waiting
    harness.client("b").ready()  # waiting -> between_rounds
    harness.advance(5.0)  # between_rounds -> playing
    withdraw_until_round_ends(harness)  # playing -> between_rounds
    harness.client("b").ready(False)  # between_rounds -> waiting
    harness.advance(harness.room.options.grace_seconds)  # waiting -> finished
    harness.client("c").join()  # finished -> open
    seen |= set(harness.transitions)

    # a one-round game, then the same players again, then everybody goes
    harness = table_of("a", "b", seeds=["seed:0", "seed:1"], max_rounds=1, grace_seconds=0.0)
    start_game(harness)
    withdraw_until_round_ends(harness)  # playing -> finished
    start_game(harness)  # finished -> playing
    withdraw_until_round_ends(harness)
    harness.client("a").leave()
    harness.client("b").leave()  # finished -> closed
    seen |= set(harness.transitions)

    # the deal of round 2 is won on the spot and it was the last round
    harness = table_of("a", "b", seeds=[SECOND_DEAL_WIN], max_rounds=2, round_pause_seconds=1.0)
    start_game(harness)
    withdraw_until_round_ends(harness)
    harness.advance(1.0)  # between_rounds -> finished
    seen |= set(harness.transitions)

    # nobody ever played: open -> closed
    harness = TableHarness(grace_seconds=1.0)
    harness.advance(1.0)
    seen |= set(harness.transitions)

    # stopped in every running status
    for status in (S.PLAYING, S.BETWEEN_ROUNDS, S.WAITING):
        harness = in_status(status)
        harness.client("a").send(Stop(reason="closed by the test"))
        seen |= set(harness.transitions)

    documented = {(old, new) for old, targets in TRANSITIONS.items() for new in targets}
    assert seen == documented


def test_every_status_but_closed_has_a_way_out() -> None:
    for status, targets in TRANSITIONS.items():
        assert bool(targets) == (status is not S.CLOSED), status
        assert status is S.CLOSED or S.CLOSED in targets


@pytest.mark.parametrize("status", [S.BETWEEN_ROUNDS, S.WAITING])
def test_a_timed_status_always_has_its_deadline(status: TableStatus) -> None:
    harness = in_status(status)
    assert harness.room.next_deadline() is not None
    harness.advance(3600.0)
    assert harness.room.status is not status


# --------------------------------------------------------------------------- rounds


def test_a_round_won_on_the_deal_is_followed_by_the_pause() -> None:
    """Issue 11 flow bug 1: the next round used to be dealt in the same instant."""
    harness = table_of("a", "b", seeds=[DEAL_WIN], round_pause_seconds=3.0)
    start_game(harness)
    a = harness.client("a")
    assert a.view["round"] == 1 and a.view["phase"] == "between_rounds"
    harness.advance(2.9)
    assert a.view["round"] == 1, "the result of the round stays on screen for the pause"
    harness.advance(0.2)
    assert a.view["round"] == 2


def test_between_rounds_the_dealer_shown_is_the_one_of_the_round_described() -> None:
    """Issue 11 flow bug 2: the dealer badge between rounds must match the round's banner."""
    harness = table_of("a", "b", "c", seeds=[PLAYING_3], round_pause_seconds=3.0)
    start_game(harness)
    a = harness.client("a")
    dealt = [e.event for e in a.events if e.event["type"] == "round_started"][-1]["dealer"]
    withdraw_until_round_ends(harness)
    assert a.view["dealer"] == dealt
    assert a.view["next_dealer"] == (dealt + 1) % 3
    harness.advance(3.0)
    started = [e.event for e in a.events if e.event["type"] == "round_started"][-1]
    assert started["dealer"] == a.view["dealer"] == (dealt + 1) % 3


def test_the_host_who_starts_plays() -> None:
    """Issue 11 flow bug 2: the host pressed start without being ready and sat out."""
    harness = table_of("host", "b", "c")
    harness.client("b").ready()
    harness.client("c").ready()
    harness.client("host").start()
    view = harness.client("host").view
    assert view["seats"][0]["in_round"], "the host who pressed start is dealt in"
    assert harness.room.seats[0].ready
    ready = [e.event for e in harness.client("b").events if e.event["type"] == "ready_changed"]
    assert ready[-1] == {"type": "ready_changed", "seat": 0, "ready": True}


def test_the_host_alone_with_nobody_ready_cannot_start() -> None:
    harness = table_of("host", "b")
    with pytest.raises(RoomError) as error:
        harness.client("host").start()
    assert error.value.code == ErrorCode.NOT_ENOUGH_PLAYERS
    assert not harness.room.seats[0].ready, "a refused start changes nothing"


def test_a_player_who_unreadies_finishes_the_round_then_sits_out_keeping_the_pile() -> None:
    harness = table_of("a", "b", "c", seeds=[PLAYING_3], round_pause_seconds=1.0)
    start_game(harness)
    harness.client("c").ready(False)
    assert harness.room.status is S.PLAYING, "the round goes on"
    withdraw_until_round_ends(harness)
    pile = list(harness.room.engine.state.piles[2])
    harness.advance(1.0)
    started = [e.event for e in harness.client("c").events if e.event["type"] == "round_started"]
    assert started[-1]["round"] == 2 and started[-1]["seats"] == [0, 1]
    assert harness.room.engine.state.piles[2] == pile
    harness.client("c").ready()
    withdraw_until_round_ends(harness)
    harness.advance(1.0)
    assert harness.room.engine.state.status[2] != "out", "ready again: dealt in again"


# --------------------------------------------------------------------------- waiting for players


def test_a_player_who_unreadies_does_not_make_the_table_spin() -> None:
    """Issue 9 section 2: with no pause, the table used to try (and log) a deal every tick."""
    harness = table_of("a", "b", round_pause_seconds=0.0, grace_seconds=30.0)
    start_game(harness)
    harness.client("b").ready(False)
    withdraw_until_round_ends(harness)
    assert harness.room.status is S.WAITING
    logged, fired, seq = len(harness.log), harness.timer_firings, harness.client("a").seq
    harness.advance(29.0)
    assert (len(harness.log), harness.timer_firings) == (logged, fired), "no timer, no log"
    assert harness.client("a").seq == seq, "nothing broadcast"
    harness.advance(2.0)
    assert harness.timer_firings == fired + 1
    result = harness.client("a").view["result"]
    assert result["reason"] == "players"
    assert [place["seats"] for place in result["ranking"]] in ([[0], [1]], [[1], [0]], [[0, 1]])
    assert_replays(harness)


@pytest.mark.parametrize("how", ["ready", "newcomer", "leave"])
def test_the_wait_ends_when_two_can_play_again(how: str) -> None:
    harness = table_of("a", "b", seats=3, seeds=[PLAYING_3], round_pause_seconds=2.0)
    start_game(harness)
    harness.client("b").ready(False)
    withdraw_until_round_ends(harness)
    harness.advance(10.0)
    assert harness.room.status is S.WAITING
    if how == "ready":
        harness.client("b").ready()
        playing = [0, 1]
    elif how == "newcomer":
        harness.client("c").join()
        harness.client("c").ready()
        playing = [0, 2]
    else:
        harness.client("b").leave()
        assert harness.room.status is S.WAITING
        harness.client("c").join(seat=1)
        harness.client("c").ready()
        playing = [0, 1]
    assert harness.room.status is S.BETWEEN_ROUNDS
    harness.advance(2.0)
    assert harness.room.status is S.PLAYING
    assert harness.room.engine.state.round == 2
    assert [s for s, st in enumerate(harness.room.engine.state.status) if st != "out"] == playing
    assert_replays(harness)


def test_everybody_leaving_mid_game_ends_it_at_the_wait_and_closes_the_table() -> None:
    harness = table_of("a", "b", seeds=["seed:0"], grace_seconds=20.0)
    watcher = harness.client("w")
    watcher.spectate()
    start_game(harness)
    harness.client("a").leave()
    harness.client("b").leave()  # both withdraw at once: the round ends
    assert harness.room.status is S.WAITING
    harness.advance(19.9)
    assert not harness.room.closed, "newcomers may still sit down and play"
    harness.advance(0.2)
    assert harness.room.closed
    assert watcher.event_types[-2:] == ["game_over", "table_closed"]
    assert_replays(harness)


# --------------------------------------------------------------------------- nothing changed


def test_requests_that_change_nothing_are_neither_logged_nor_broadcast() -> None:
    harness = table_of("a", "b", seats=3)
    a, b, w = harness.client("a"), harness.client("b"), harness.client("w")
    b.ready()
    w.spectate()
    logged, broadcasts = len(harness.log), len(harness.broadcasts)
    b.ready()
    b.join()
    b.join(seat=1)
    w.spectate()
    a.spectate()  # a seated player watches already
    a.resync()
    harness.tick()
    assert (len(harness.log), len(harness.broadcasts)) == (logged, broadcasts)
    b.drop()
    b.drop()
    assert len(harness.log) == logged + 1


# --------------------------------------------------------------------------- history


def test_a_spectator_gets_the_recent_history_of_the_game() -> None:
    """Issue 11 flow bug 12: a spectator's table log started empty."""
    harness = table_of("a", "b", seeds=["seed:0"])
    start_game(harness)
    spectator = harness.client("s")
    spectator.spectate()
    kinds = [numbered.event["type"] for numbered in spectator.recent]
    assert kinds[:2] == ["game_started", "round_started"]
    assert spectator.recent[-1].seq == spectator.seq
    on_turn(harness).act({"type": "hit"})
    reloaded = harness.client("s")
    reloaded.seq = 0  # a reload: the client asks from scratch
    reloaded.send(v1.Resync(table=harness.table, since=0))
    assert [n.seq for n in reloaded.events][-1] == harness.room.seq


def test_history_is_capped_and_starts_with_the_current_game() -> None:
    harness = table_of("a", "b", seats=3, seeds=["seed:0"], max_rounds=1)
    start_game(harness)
    withdraw_until_round_ends(harness)
    harness.client("c").join()  # the finished game is cleared for the newcomer
    recent = harness.client("c").recent
    assert [n.event["type"] for n in recent] == ["seat_taken"]
    for _ in range(RECENT_EVENTS):
        harness.client("b").ready()
        harness.client("b").ready(False)
    watcher = harness.client("w")
    watcher.spectate()
    assert len(watcher.recent) == RECENT_EVENTS
    assert watcher.recent[-1].seq == harness.room.seq


def test_joining_a_finished_table_starts_clean() -> None:
    """Issue 11 flow bug 7: a newcomer used to land in the old game's seat, pile and ranking."""
    harness = table_of("a", "b", max_rounds=1, seats=3)
    start_game(harness)
    withdraw_until_round_ends(harness)
    assert harness.client("a").view["phase"] == "over"
    newcomer = harness.client("c")
    newcomer.join()
    assert newcomer.view is None, "no old game's result for the newcomer"
    assert newcomer.info.status == "open"
    assert harness.client("a").info.status == "open"
    assert harness.client("a").view is None
    start_game(harness)
    assert sorted(harness.client("c").view["seats"][2]["hand"]) != []
    assert_replays(harness)


# --------------------------------------------------------------------------- closing


def test_the_host_leaves_a_table_watched_by_a_spectator_it_closes() -> None:
    """Issue 9 section 4: host leaves, then the spectator leaves: such a table stayed listed as
    open forever. Spectators alone do not keep a table open: it closes when the host leaves."""
    harness = TableHarness(host="h", grace_seconds=10.0)
    harness.client("h").join()
    watcher = harness.client("s")
    watcher.spectate()
    harness.client("h").leave()
    assert harness.room.closed
    assert watcher.events[-1].event == {"type": "table_closed", "reason": "everyone left"}
    with pytest.raises(RoomError) as error:
        watcher.leave()
    assert error.value.code == ErrorCode.NOT_FOUND, "a closed table logs no more leaves"
    assert_replays(harness)


def test_a_table_closes_whoever_leaves_last() -> None:
    for last in ("host", "guest"):
        harness = table_of("host", "guest", seats=3)
        harness.client("w").spectate()
        first = "guest" if last == "host" else "host"
        harness.client(first).leave()
        assert harness.room.status is S.OPEN
        harness.client(last).leave()
        assert harness.room.closed, last


def test_a_player_who_dropped_keeps_the_table_for_the_grace() -> None:
    harness = table_of("h", grace_seconds=10.0)
    harness.client("h").drop()
    harness.advance(9.9)
    assert harness.room.status is S.OPEN, "the seat is kept for the grace"
    harness.advance(0.1)
    assert harness.room.closed


def test_bots_do_not_keep_a_table_people_came_to() -> None:
    harness = TableHarness(host="h")
    harness.client("h").join()
    harness.client("bot", bot=True).join()
    harness.client("h").leave()
    assert harness.room.closed


def test_a_table_only_bots_sat_at_stays_open_while_they_sit() -> None:
    """A bot swarm's table: no human ever came, so its bots are what keeps it open."""
    harness = TableHarness(host="bot0", grace_seconds=0.0)
    for index in range(2):
        harness.client(f"bot{index}", bot=True).join()
    harness.advance(60.0)
    assert harness.room.status is S.OPEN
    harness.client("bot0").start()
    harness.advance(60.0)
    assert harness.room.status is not S.CLOSED
    for index in range(2):
        harness.client(f"bot{index}").leave()
    harness.advance(0.0)  # the wait for players (no grace) ends the game: nobody is left
    assert harness.room.closed


def test_a_table_nobody_sat_at_closes_after_the_grace() -> None:
    harness = TableHarness(grace_seconds=10.0)
    harness.client("w").spectate()
    harness.advance(9.9)
    assert not harness.room.closed
    harness.advance(0.1)
    assert harness.room.closed


def test_a_game_in_play_is_never_closed_under_its_players() -> None:
    harness = TableHarness(host="h", seeds=["seed:0"], seats=2)
    harness.client("h").join()
    harness.client("bot", bot=True).join()
    harness.client("h").start()
    harness.client("h").leave()  # plays by default action until the round ends
    withdraw_until_round_ends(harness)
    assert harness.room.status is S.WAITING, "only the bot could play another round"
    assert not harness.room.closed
    harness.client("n").join()  # a newcomer comes within the wait, takes the seat and the host
    assert harness.room.seating.host == "n"
    harness.client("n").ready()
    assert harness.room.status is S.BETWEEN_ROUNDS
    harness.advance(harness.room.options.round_pause_seconds)
    assert harness.room.status is S.PLAYING
    assert_replays(harness)


def test_the_host_passes_to_another_seated_human() -> None:
    harness = table_of("h", "bot", "g")
    harness.room.seats[1].bot = True
    harness.client("h").leave()
    assert harness.room.seating.host == "g"


def test_everybody_leaving_a_finished_game_closes_the_table() -> None:
    harness = table_of("a", "b", seeds=["seed:0"], max_rounds=1)
    start_game(harness)
    withdraw_until_round_ends(harness)
    harness.client("a").leave()
    assert harness.room.status is S.FINISHED
    harness.client("b").leave()
    assert harness.room.closed


def test_a_solitaire_session_closes_as_soon_as_its_player_leaves() -> None:
    harness = TableHarness(game="blue_jacket", host="solo", grace_seconds=3600.0, private=True)
    harness.client("solo").join()
    harness.client("solo").send(Begin())
    assert harness.room.status is S.PLAYING
    harness.client("solo").leave()
    assert harness.room.closed
    assert [e.event["type"] for e in harness.client("solo").events][-1] == "table_closed"
    assert_replays(harness)


@pytest.mark.parametrize("case", ["nobody sat", "nobody left to play"])
def test_the_sweeper_closes_what_the_rules_say_is_closed(case: str) -> None:
    if case == "nobody sat":
        harness = TableHarness(host="h", grace_seconds=10.0)
    else:
        harness = table_of("a", "b", seeds=["seed:0"], grace_seconds=10.0)
        start_game(harness)
        harness.client("a").leave()
        harness.client("b").leave()
        assert harness.room.status is S.WAITING
    harness.now += 9.0  # the clock moves but no timer fires (as if it were lost)
    harness.sweep()
    assert not harness.room.should_close(harness.now)
    assert not harness.room.closed
    harness.now += 2.0
    assert harness.room.should_close(harness.now)
    harness.sweep()
    assert harness.room.closed
    assert not harness.room.should_close(harness.now)
    assert_replays(harness)


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


def test_a_table_whose_players_act_as_fast_as_they_can_is_never_stopped() -> None:
    """No pause between rounds and players who act the instant they may (bots, on a fast node):
    a deal follows every round, hundreds of timer firings a second (1,000 here), every one of
    them the game's. A player's action between firings says so; only a timer that goes on firing
    with nobody acting is a runaway."""
    harness = table_of("a", "b", "c", "d", round_pause_seconds=0.0)
    start_game(harness)
    while harness.timer_firings <= 2 * RUNAWAY_BURST and not harness.room.closed:
        if harness.room.status is S.FINISHED:
            start_game(harness)
        elif harness.room.status is S.PLAYING:
            on_turn(harness).act({"type": "withdraw"})
        harness.advance(0.001)
    assert not harness.room.closed
    assert "Stop" not in harness.logged_commands


def test_players_requests_never_stop_a_table() -> None:
    harness = table_of("a", "b")
    b = harness.client("b")
    for turn in range(3 * int(RUNAWAY_BURST)):
        b.ready(turn % 2 == 0)
    assert not harness.room.closed


def test_kept_events_are_their_wire_form_out_of_the_collectors_sight() -> None:
    """The events a table keeps for resync are held encoded: neither they nor their entries are
    tracked by the garbage collector (hundreds of kept events per table were most of what it
    walked on a busy node), and a resync or a snapshot gives back exactly what the updates
    carried, in the same order."""
    harness = table_of("A", "B", "C")
    start_game(harness)
    withdraw_until_round_ends(harness)
    room, a = harness.room, harness.client("A")
    assert len(room.log.kept) > 5
    assert all(type(kept) is bytes for kept in room.log.kept)  # (bytes are never tracked)
    assert not any(gc.is_tracked(kept) for kept in room.log.kept)
    sent = [(e.seq, msgspec.to_builtins(e.event)) for e in a.events]
    kept = room.log.since(0)
    assert kept is not None
    assert [(e.seq, e.event) for e in kept][-len(sent) :] == sent
    recent = room.snapshot(None).recent
    assert [(e.seq, e.event) for e in recent] == sent[-len(recent) :]
    # encoded to a client, a kept event is the same bytes as the live one was
    assert msgspec.msgpack.encode(kept[-1]) == msgspec.msgpack.encode(a.events[-1])


def test_a_long_history_keeps_a_table_small() -> None:
    """However long a table has played, what it keeps for resync stays a few KiB: a busy node
    holds hundreds of tables, and each table's kept events are also in every snapshot of it
    (with 256 kept they were 17 KiB here, a quarter of the node's memory per connection under
    load). A client further behind than the kept events gets a snapshot (its ``recent`` events
    are all kept)."""
    harness = table_of("a", "b", "c", "d", seats=4)
    start_game(harness)
    for _ in range(150):
        harness.client("b").ready(False)
        harness.client("b").ready()
    kept = harness.room.log.kept
    assert len(kept) >= RECENT_EVENTS
    assert sum(sys.getsizeof(event) for event in kept) <= 8 * 1024


# --------------------------------------------------------------------------- leaving, and back


def leaving_mid_round(*, grace_seconds: float = 60.0) -> tuple[TableHarness, str, int]:
    """Three seated and playing; a player not on turn (and their seat) to leave."""
    harness = table_of(
        "a", "b", "c", seeds=[PLAYING_3], round_pause_seconds=1.0, grace_seconds=grace_seconds,
        turn_seconds=600.0,
    )  # fmt: skip
    start_game(harness)
    assert harness.room.status is S.PLAYING
    to_act = harness.room.engine.state.to_act
    seat = next(i for i in range(3) if i != to_act)
    return harness, harness.room.seats[seat].player, seat


def seats_freed(harness: TableHarness, leaver: str) -> list[int]:
    """The seats freed, as another player at the table saw it."""
    client = harness.client(next(p for p in "abc" if p != leaver))
    return [e.event["seat"] for e in client.events if e.event["type"] == "seat_freed"]


def test_a_player_who_left_mid_round_and_joins_again_keeps_the_seat() -> None:
    """Before, the join answered ``joined`` with the old seat while the leave stood: the seat
    was freed at the round's end under a player told they sat there."""
    harness, player, seat = leaving_mid_round()
    client = harness.client(player)
    client.leave()
    assert harness.room.seats[seat].leaving
    assert client.join()[0].seat == seat
    assert not harness.room.seats[seat].leaving
    withdraw_until_round_ends(harness)
    harness.advance(1.0)
    assert seats_freed(harness, player) == []
    assert harness.room.seats[seat].player == player
    assert harness.room.engine.state.status[seat] != "out", "dealt in the next round"
    client.ready(False)  # a seated player's requests are theirs again
    assert_replays(harness)


def test_a_player_who_left_mid_round_may_watch_and_is_a_spectator_once_the_seat_is_free() -> None:
    harness, player, seat = leaving_mid_round()
    client = harness.client(player)
    client.leave()
    assert client.spectate()[0].seat is None
    assert harness.room.spectators == {player}
    assert harness.room.info().spectators == 1
    assert client.resync()  # as a spectator
    withdraw_until_round_ends(harness)
    assert seats_freed(harness, player) == [seat]
    assert harness.room.spectators == {player}
    client.leave()
    assert harness.room.spectators == set()
    assert_replays(harness)


def test_one_who_left_mid_round_cannot_resync_the_seat_nor_leave_twice() -> None:
    harness, player, seat = leaving_mid_round()
    client = harness.client(player)
    client.leave()
    with pytest.raises(RoomError) as refused:
        client.resync()
    assert refused.value.code == ErrorCode.NOT_SEATED
    logged = harness.logged_commands
    client.leave()  # leaving already: nothing more
    assert harness.logged_commands == logged
    withdraw_until_round_ends(harness)
    assert seats_freed(harness, player) == [seat]


def test_one_away_past_the_grace_who_comes_back_before_the_round_ends_keeps_the_seat() -> None:
    harness, player, seat = leaving_mid_round(grace_seconds=1.0)
    client = harness.client(player)
    client.drop()
    harness.advance(1.1)
    occupant = harness.room.seats[seat]
    assert occupant.leaving and occupant.leaving_reason == "timeout"
    client.resync()
    assert not occupant.leaving and occupant.connected
    withdraw_until_round_ends(harness)
    assert seats_freed(harness, player) == []
    assert_replays(harness)


def test_a_bot_the_host_removed_cannot_take_its_seat_back_before_it_is_freed() -> None:
    for n in range(20):  # a deal where the bot is in the round and not on turn
        harness = table_of(
            "a", "b", seats=3, seeds=[f"seed:{n}"], round_pause_seconds=1.0, turn_seconds=600.0
        )
        bot = harness.client("bot", bot=True)
        bot.join()
        start_game(harness)
        seat = harness.room.seat_of("bot")
        engine = harness.room.engine
        if harness.room.status is S.PLAYING and engine.state.to_act != seat:
            break
    harness.client("a").send(v1.RemoveBot(table=harness.table, seat=seat))
    assert harness.room.seats[seat].leaving
    with pytest.raises(RoomError) as refused:
        bot.join()
    assert refused.value.code == ErrorCode.SEAT_TAKEN
    assert harness.room.seats[seat].leaving
    withdraw_until_round_ends(harness)
    assert harness.room.seats[seat] is None


def test_one_away_when_the_game_ends_is_freed_after_the_grace() -> None:
    """The game's last action came within the grace of a player whose link went silent: the
    seat is still freed when the grace runs out, at the finished table (the fault suite's
    keepalive test saw only the other player's leave when its game ended inside the grace)."""
    harness = table_of("a", "b", "c", seeds=[PLAYING_3], max_rounds=1, grace_seconds=5.0)
    start_game(harness)
    harness.client("c").drop()
    withdraw_until_round_ends(harness)  # c's link is silent, not yet noticed by the game
    assert harness.room.status is S.FINISHED
    assert harness.room.seats[2] is not None and not harness.room.seats[2].connected
    harness.advance(4.9)
    assert seats_freed(harness, "c") == []
    harness.advance(0.1)
    assert seats_freed(harness, "c") == [2]
    assert harness.room.status is S.FINISHED, "the others still sit at the finished table"
