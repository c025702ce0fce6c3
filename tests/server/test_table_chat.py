"""Table chat in the table core (issue 37), through the in-memory harness: who may write, what a
line becomes, the snapshot's and a resync's lines, the host sending a spectator away, and that
a table rebuilt from its log has the same chat. The node's part (a rate limit per player, the
removed spectator's watch, frames too long) is in ``test_table_chat_node.py``."""

from __future__ import annotations

import sys

import pytest

from blackdrez.games.verify import record_of
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.table.chat import CHAT_KEPT, clean
from blackdrez.server.table.commands import state_key
from blackdrez.server.table.room import RoomError
from tests.server.harness import FakeClient, TableHarness


def say(client: FakeClient, text: str | None = None, quick: str | None = None) -> list:
    return client.send(v1.Say(table=client.harness.table, text=text, quick=quick))


def lines(client: FakeClient) -> list[tuple[str, str]]:
    """The chat lines ``client`` was sent, as (name, text)."""
    return [(e.event["name"], e.event["text"]) for e in client.events if e.event["type"] == "said"]


def refused(code: ErrorCode, call, *args, **kwargs) -> None:
    with pytest.raises(RoomError) as error:
        call(*args, **kwargs)
    assert error.value.code == code, error.value.message


def table(**options) -> tuple[TableHarness, FakeClient, FakeClient, FakeClient]:
    """Ann (host) and Bob seated, Cat watching."""
    harness = TableHarness(host="ann", seats=3, **options)
    ann, bob, cat = (
        harness.client("ann", "Ann"),
        harness.client("bob", "Bob"),
        harness.client("cat", "Cat"),
    )
    ann.join()
    bob.join()
    cat.spectate()
    return harness, ann, bob, cat


def test_players_and_spectators_write_and_everyone_reads_in_order() -> None:
    harness, ann, bob, cat = table()
    assert isinstance(say(ann, "hello all")[0], v1.Ok)
    say(cat, "watching from afar")
    say(bob, quick="good_luck")
    expected = [("Ann", "hello all"), ("Cat", "watching from afar"), ("Bob", "Good luck!")]
    for client in (ann, bob, cat):
        assert lines(client) == expected
    said = [e.event for e in cat.events if e.event["type"] == "said"]
    assert [s["seat"] for s in said] == [0, None, 1]
    assert said[2]["quick"] == "good_luck"
    # The log rebuilds the same room, chat included.
    replayed = harness.replayed()
    assert state_key(replayed) == state_key(harness.room)
    assert list(replayed.chat.lines) == list(harness.room.chat.lines)


def test_a_line_is_plain_text_cleaned_and_never_empty() -> None:
    harness, ann, _, cat = table()
    say(ann, "  <b>bold?</b>\n\nno \u202eflip\x00  ")
    assert lines(cat)[-1] == ("Ann", "<b>bold?</b> no flip")
    assert clean("family \U0001f468\u200d\U0001f469") == "family \U0001f468\u200d\U0001f469"
    before = harness.room.seq
    refused(ErrorCode.BAD_MESSAGE, say, ann, " \n\t\x07 ")
    refused(ErrorCode.BAD_MESSAGE, say, ann)
    refused(ErrorCode.BAD_MESSAGE, say, ann, "both", "thanks")
    assert harness.room.seq == before


def test_the_host_may_close_the_chat_to_spectators() -> None:
    harness, _, bob, cat = table(spectator_chat=False)
    refused(ErrorCode.CHAT_CLOSED, say, cat, "may I?")
    say(bob, "players still may")
    assert lines(cat) == [("Bob", "players still may")]
    stranger = harness.client("dan", "Dan")
    refused(ErrorCode.NOT_SEATED, say, stranger, "hi")


def test_a_snapshot_carries_the_last_lines_and_a_resync_fills_the_gap() -> None:
    harness, ann, bob, cat = table()
    for n in range(CHAT_KEPT + 10):
        say(ann if n % 2 else bob, f"line {n}")
    late = harness.client("eve", "Eve")
    snapshot = next(r for r in late.spectate() if isinstance(r, v1.Snapshot))
    texts = [n.event.text for n in snapshot.chat]
    assert texts == [f"line {n}" for n in range(10, CHAT_KEPT + 10)]
    seqs = [n.seq for n in snapshot.chat]
    assert seqs == sorted(seqs) and seqs[-1] == snapshot.seq
    # Cat misses three lines (as after a dropped connection), then resyncs: they come in order.
    harness.watchers.pop(cat)
    for n in range(3):
        say(ann, f"missed {n}")
    missed = cat.seq
    reply = cat.resync()
    assert any(isinstance(r, v1.Update) for r in reply)
    assert [e.seq for e in cat.events][-3:] == [missed + 1, missed + 2, missed + 3]
    assert lines(cat)[-3:] == [("Ann", f"missed {n}") for n in range(3)]


def test_the_host_sends_a_spectator_away_for_good() -> None:
    harness, ann, bob, cat = table()
    say(cat, "spam spam spam")
    refused(ErrorCode.NOT_HOST, bob.send, v1.RemoveSpectator(table=harness.table, player="cat"))
    refused(ErrorCode.NOT_FOUND, ann.send, v1.RemoveSpectator(table=harness.table, player="bob"))
    ann.send(v1.RemoveSpectator(table=harness.table, player="cat"))
    removed = [e.event for e in bob.events if e.event["type"] == "spectator_removed"]
    assert removed == [{"type": "spectator_removed", "player": "cat", "name": "Cat"}]
    assert "cat" not in harness.room.spectators
    refused(ErrorCode.NOT_SEATED, say, cat, "still here?")
    refused(ErrorCode.REMOVED, cat.spectate)
    replayed = harness.replayed()
    assert replayed.chat.removed == {"cat"}


def test_chat_is_not_part_of_the_games_record() -> None:
    harness = TableHarness(host="ann", seats=2, max_rounds=1, round_pause_seconds=0)
    ann, bob = harness.client("ann", "Ann"), harness.client("bob", "Bob")
    ann.join()
    bob.join()
    bob.ready()
    ann.start()
    say(ann, "a secret only the table reads")
    while not harness.room.engine.over:
        harness.advance(60)  # the turn timer plays for whoever is on turn
    say(bob, quick="good_game")
    record = record_of(harness.room.engine, harness.room.actions)
    assert "secret" not in repr(record) and "Good game" not in repr(record)


def test_a_table_that_never_chats_keeps_no_room_for_lines() -> None:
    """Most tables of a busy node never chat: their chat holds nothing until the first line (an
    empty deque was 760 bytes a table); from then on the last lines are kept as before."""
    harness, ann, _, _ = table()
    chat = harness.room.chat
    assert sys.getsizeof(chat.lines) < 100
    say(ann, "hi")
    say(ann, "again")
    assert [n.event.text for n in chat.lines] == ["hi", "again"]
