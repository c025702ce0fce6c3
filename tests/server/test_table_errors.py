"""The table core's error paths, through the in-memory harness: every refusal names its code and
changes nothing (the harness asserts the room's state key and that no update is queued), and the
log tools refuse a log that cannot be a table's.

No sockets and no node: what a node adds (routing, leases, fan-out) is tested in the other
``tests/server`` files.
"""

from __future__ import annotations

import msgspec
import pytest

from blackdrez.games import GAMES
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.table import records
from blackdrez.server.table.commands import (
    Create,
    LogEntry,
    Tick,
    decode_entry,
    encode_entry,
    execute,
    rebuild,
    state_key,
    timer_entry,
)
from blackdrez.server.table.history import KEPT_EVENTS
from blackdrez.server.table.lifecycle import TableStatus
from blackdrez.server.table.records import (
    GamePlayed,
    TableRecord,
    decode_table_record,
    players_seated,
    record_games,
    record_log,
    table_record,
)
from blackdrez.server.table.room import RoomError
from blackdrez.server.table.snapshots import resume
from blackdrez.server.table.snapshots import take as take_snapshot
from blackdrez.server.testing.table_logs import play_table
from tests.server.harness import TableHarness


def refused(code: ErrorCode, call, *args, **kwargs) -> RoomError:
    """Run a harness request that must be refused with ``code``; return the error."""
    with pytest.raises(RoomError) as error:
        call(*args, **kwargs)
    assert error.value.code == code, error.value.message
    return error.value


def seated(*players: str, **options) -> TableHarness:
    """A table hosted by the first of ``players``, every one seated (seats 0, 1...)."""
    options.setdefault("seats", max(2, len(players)))
    harness = TableHarness(host=players[0], **options)
    for player in players:
        harness.client(player).join()
    return harness


# --------------------------------------------------------------------------- joining and leaving


def test_a_seated_player_cannot_take_a_second_seat_but_may_ask_for_their_own() -> None:
    harness = seated("ann", "bob", seats=3)
    ann = harness.client("ann")
    refused(ErrorCode.ALREADY_SEATED, ann.join, seat=2)
    before = len(harness.log)
    ann.join(seat=0)
    ann.join()
    assert len(harness.log) == before, "joining one's own seat again changes nothing"


def test_joining_a_full_table_a_taken_seat_or_no_such_seat_is_refused() -> None:
    harness = seated("ann", "bob")
    refused(ErrorCode.TABLE_FULL, harness.client("cid").join)
    harness = seated("ann", seats=3)
    refused(ErrorCode.SEAT_TAKEN, harness.client("bob").join, seat=0)
    refused(ErrorCode.BAD_MESSAGE, harness.client("bob").join, seat=5)


def test_a_private_table_needs_its_invite_except_for_its_host() -> None:
    invite = "secret"
    harness = seated("ann", private=True, invite=invite)
    assert harness.room.invite == invite
    refused(ErrorCode.INVITE_REQUIRED, harness.client("bob").join)
    refused(ErrorCode.INVITE_REQUIRED, harness.client("bob").join, invite="wrong")
    refused(ErrorCode.INVITE_REQUIRED, harness.client("cid").spectate)
    harness.client("bob").join(invite=invite)
    assert harness.room.seat_of("bob") == 1


def test_everyone_let_in_at_a_private_table_is_told_its_invite_to_pass_on() -> None:
    """Only the host was told the invite, so a friend who came by it could not show it to the
    next friend. Whoever a private table lets in (with the invite, or as its host) was given it
    and may pass it on; a public table has none."""
    invite = "secret"
    harness = seated("ann", seats=3, private=True, invite=invite)
    for reply in (
        harness.client("ann").join()[0],  # (the host's own seat again)
        harness.client("bob").join(invite=invite)[0],
        harness.client("cid").spectate(invite=invite)[0],
    ):
        assert isinstance(reply, v1.Joined) and reply.invite == invite
    public = seated("ann")
    assert public.client("bob").join()[0].invite is None


def test_leaving_a_table_one_is_not_at_is_refused() -> None:
    harness = seated("ann")
    refused(ErrorCode.NOT_SEATED, harness.client("bob").leave)


# --------------------------------------------------------------------------- the host's requests


def test_only_the_host_starts_and_only_with_enough_ready_players() -> None:
    harness = seated("ann", "bob")
    refused(ErrorCode.NOT_HOST, harness.client("bob").start)
    refused(ErrorCode.NOT_ENOUGH_PLAYERS, harness.client("ann").start)
    harness.client("bob").ready()
    harness.client("ann").start()
    assert harness.room.status is TableStatus.PLAYING


def test_only_the_host_adds_bots_and_only_into_free_seats() -> None:
    harness = seated("ann", "bob")
    with pytest.raises(RoomError) as error:
        harness.room.bot_seats("bob", 1)
    assert error.value.code == ErrorCode.NOT_HOST
    with pytest.raises(RoomError) as error:
        harness.room.bot_seats("ann", 1)
    assert error.value.code == ErrorCode.TABLE_FULL
    assert seated("ann", seats=4).room.bot_seats("ann", 7) == 3


def test_only_the_host_removes_a_bot_and_only_a_bot() -> None:
    harness = seated("ann", "bob", seats=3)
    harness.client("robo", bot=True).join()
    refused(ErrorCode.NOT_HOST, harness.client("bob").send, v1.RemoveBot(table="t", seat=2))
    ann = harness.client("ann")
    refused(ErrorCode.BAD_MESSAGE, ann.send, v1.RemoveBot(table="t", seat=1))
    refused(ErrorCode.BAD_MESSAGE, ann.send, v1.RemoveBot(table="t", seat=7))
    ann.send(v1.RemoveBot(table="t", seat=2))
    assert harness.room.seats[2] is None


def test_bot_names_skip_the_names_taken_at_the_table() -> None:
    harness = seated("ann", seats=4)
    harness.client("robo", "Ada (threshold)", bot=True).join()
    names = harness.room.bot_names(2, "bust_probability")
    assert names == ["Ben (bust odds)", "Cleo (bust odds)"]


# --------------------------------------------------------------------------- acting


def test_an_action_that_is_not_one_of_the_games_or_from_no_seat_is_refused() -> None:
    harness = seated("ann", "bob")
    harness.client("bob").ready()
    harness.client("ann").start()
    mover = harness.room.seats[harness.room.engine.state.to_act].player
    refused(ErrorCode.BAD_ACTION, harness.client(mover).act, {"type": "fold"})
    refused(ErrorCode.BAD_ACTION, harness.client(mover).act, {"nope": 1})
    harness.client("cid").spectate()
    refused(ErrorCode.NOT_SEATED, harness.client("cid").act, {"type": "hit"})


# --------------------------------------------------------------------------- commands and logs


def test_a_game_started_without_a_seed_or_an_unknown_command_is_refused() -> None:
    harness = seated("ann", "bob")
    harness.client("bob").ready()
    with pytest.raises(RoomError) as error:
        execute(
            harness.room, LogEntry(now=harness.now, command=v1.StartGame(table="t"), player="ann")
        )
    assert error.value.code == ErrorCode.INTERNAL
    with pytest.raises(RoomError) as error:
        execute(harness.room, LogEntry(now=harness.now, command=v1.Ping(), player="ann"))
    assert error.value.code == ErrorCode.UNKNOWN_TYPE


def test_a_log_must_start_with_its_create_and_replay_without_refusals() -> None:
    harness = seated("ann", "bob")
    with pytest.raises(ValueError, match="must start with its create"):
        rebuild(harness.log[1:])
    impossible = encode_entry(
        LogEntry(now=harness.now, command=v1.LeaveTable(table="t"), player="nobody")
    )
    with pytest.raises(ValueError, match="refused on replay"):
        rebuild([*harness.log, impossible])


def test_a_resync_from_too_far_back_gets_a_snapshot() -> None:
    harness = seated("ann", "bob")
    ann = harness.client("ann")
    assert harness.room.log.since(-1) is None
    harness.room.log.kept.clear()
    replies = ann.send(v1.Resync(table="t", since=0))
    assert [type(reply) for reply in replies] == [v1.Snapshot]
    assert KEPT_EVENTS >= 64


def test_a_broadcast_keeps_a_viewer_class_only_for_a_seat_with_legal_actions() -> None:
    harness = seated("ann", "bob")
    harness.client("bob").ready()
    harness.client("ann").start()
    last = harness.broadcasts[-1]
    mover = harness.room.engine.state.to_act
    assert last.variant(mover) == mover
    assert last.variant(1 - mover) is None
    assert last.variant(None) is None
    assert last.for_seat(None).legal == []


def test_a_timer_with_nothing_due_changes_nothing() -> None:
    harness = seated("ann", "bob")
    before = state_key(harness.room)
    entry = timer_entry(harness.room, harness.now)
    assert isinstance(entry.command, Tick)
    execute(harness.room, entry)
    assert state_key(harness.room) == before


def played_games(harness: TableHarness, games: int) -> TableHarness:
    """``games`` games of two players played to their ends at the harness's table."""
    for _ in range(games):
        harness.client("bob").ready()
        harness.client("ann").start()
        while harness.room.status is not TableStatus.FINISHED:
            if harness.room.status is not TableStatus.PLAYING:
                harness.advance(60.0)  # between rounds
                continue
            mover = harness.room.seats[harness.room.engine.state.to_act].player
            harness.client(mover).act({"type": "withdraw"})
    return harness


def test_a_closed_tables_record_keeps_its_games_and_its_whole_log() -> None:
    harness = played_games(seated("ann", "bob"), 3)
    record = decode_table_record(table_record(harness.log, 123.0))
    assert (record.table, record.game, record.closed) == (harness.table, "blackdrez", 123.0)
    games = record_games(record)
    assert len(games) == 3
    assert games[-1].commitment == harness.room.engine.commitment
    assert games[-1].seed == harness.room.engine.seed
    assert games[-1].result == msgspec.to_builtins(harness.room.engine.result())
    assert len({game.seed for game in games}) == 3
    assert record_log(record) == harness.log
    assert players_seated(harness.log) == {"ann", "bob"}
    assert isinstance(decode_entry(record_log(record)[0]).command, Create)


def test_a_closing_tables_record_does_not_replay_its_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """The node makes the record on its event loop: rebuilding a table that played for hours
    there stalled every table of the node (about 15 µs an entry)."""
    harness = played_games(seated("ann", "bob"), 2)

    def replayed(entries: list[bytes]) -> None:
        raise AssertionError("the record replayed the log")

    monkeypatch.setattr(records, "rebuilding", replayed)
    record = decode_table_record(table_record(harness.log, 5.0))
    assert record_log(record) == harness.log
    monkeypatch.undo()
    assert len(record_games(record)) == 2  # found when asked, from the log it keeps


def test_a_record_made_before_keeps_the_games_it_noted() -> None:
    harness = played_games(seated("ann", "bob"), 1)
    noted = [GamePlayed(seed="s", commitment="c", deal=None, result={"noted": True})]
    packed = decode_table_record(table_record(harness.log, 5.0)).log
    older = TableRecord(table=harness.table, game="blackdrez", closed=5.0, games=noted, log=packed)
    record = decode_table_record(msgspec.msgpack.encode(older))
    assert record_games(record) == noted


@pytest.mark.parametrize("game", [name for name, spec in GAMES.items() if spec.solitaire])
def test_a_solitaire_session_refuses_a_second_player(game: str) -> None:
    harness = TableHarness(game=game, host="ann")
    harness.client("ann").join()
    refused(ErrorCode.TABLE_FULL, harness.client("bob").join)
    assert msgspec.to_builtins(harness.room.info().seats[0].player) == "ann"


def test_a_long_tables_record_keeps_its_latest_snapshot_a_short_ones_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    played, log = play_table(120)
    snapshot = (len(log), take_snapshot(played))
    short = decode_table_record(table_record(log, 5.0, snapshot))
    assert short.snapshot is None, "a short table's replay is short: no snapshot kept"
    monkeypatch.setattr(records, "SNAPSHOT_KEPT_FROM", len(log))
    long = decode_table_record(table_record(log, 5.0, snapshot))
    assert long.snapshot == snapshot
    room = resume(long.snapshot, record_log(long)[long.snapshot[0] - 1 :])
    assert room.seq == played.seq and room.status == played.status

    class Before(msgspec.Struct, kw_only=True):  # a node of the version before decodes it
        table: str
        game: str
        closed: float
        games: list[GamePlayed]
        log: bytes

    older = msgspec.msgpack.decode(table_record(log, 5.0, snapshot), type=Before)
    assert older.log == long.log
