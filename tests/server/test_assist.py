"""Hints, undo and auto-finish in solitaire sessions, on the table core (no sockets).

The property tests drive a session with random moves, undos and hints and check, after every
step, what the player may rely on: an undo restores exactly the state before the move it takes
back and shows no card that was not already seen; moves from before the last revealed card, and
a game that ended, cannot be taken back; a hint is one of the legal actions; the moves as played
(undone ones taken out) are a record that verifies; the log rebuilds the same session.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blackdrez.games import GAMES
from blackdrez.games.blue_jacket import rules as blue_jacket
from blackdrez.games.records import decode_record, encode_record
from blackdrez.games.verify import record_of, replay
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.table.assist import forced_finish, hint_strategy
from blackdrez.server.table.commands import Begin
from blackdrez.server.table.room import RoomError
from tests.server.harness import TableHarness

SOLITAIRES = ("blackjack_piles", "blue_jacket")


def session(game: str, seed: str = "assist:1", **fields: Any) -> TableHarness:
    """A solitaire session with its player seated and the game begun (as the node does)."""
    harness = TableHarness(game, host="solo", seeds=[seed], private=True, **fields)
    player = harness.client("solo")
    player.join()
    player.send(Begin())
    return harness


def dealt(harness: TableHarness) -> list[list[str]]:
    return harness.room.engine.dealt()


def undo(harness: TableHarness) -> list[Any]:
    return harness.client("solo").send(v1.Undo(table=harness.table))


def ask_hint(harness: TableHarness) -> Any:
    (reply,) = harness.client("solo").send(v1.Hint(table=harness.table))
    assert isinstance(reply, v1.HintReply)
    return msgspec.json.decode(msgspec.json.encode(reply.action))  # as a client reads it


def moves(harness: TableHarness) -> list[Any]:
    """The player's legal actions but resign (as the client holds them: wire dicts)."""
    return [a for a in harness.client("solo").legal if a["type"] != "resign"]


@pytest.mark.parametrize("game", SOLITAIRES)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.sampled_from("mmmmuh"), st.integers(0, 10**6)), max_size=60))
def test_undo_restores_exactly_and_never_reveals(game: str, steps: list[tuple[str, int]]) -> None:
    harness = session(game)
    room = harness.room
    takeable: list[tuple[bytes, list[list[str]]]] = []  # the model: (dump, dealt) before a move
    seen = [room.engine.dump()]
    for kind, pick in steps:
        if room.engine.over:
            break
        if kind == "m":
            options = moves(harness)
            before, revealed = room.engine.dump(), dealt(harness)
            harness.client("solo").act(options[pick % len(options)])
            if room.engine.over or dealt(harness) != revealed:
                takeable.clear()  # a card was revealed, or the game ended
            else:
                takeable.append((before, revealed))
            seen.append(room.engine.dump())
        elif kind == "u":
            version, revealed = room.version, dealt(harness)
            if not takeable:
                with pytest.raises(RoomError) as error:
                    undo(harness)
                assert error.value.code == ErrorCode.NOTHING_TO_UNDO
                assert room.version == version
                continue
            undo(harness)
            before, earlier = takeable.pop()
            assert room.engine.dump() == before, "the undo restored another state"
            assert dealt(harness) == earlier == revealed, "the undo revealed or hid a card"
            assert before in seen
            assert harness.client("solo").info.undoable == len(takeable)
        else:
            action = ask_hint(harness)
            assert action in harness.client("solo").legal
        assert room.assist is not None
        assert len(room.assist.undo) == len(takeable)
    # The moves as played are the game's record: it replays from the seed to this state.
    assert room.assist is not None
    engine = replay(record_of(room.engine, room.assist.played))
    assert engine.dump() == room.engine.dump()
    assert harness.replayed().engine.dump() == room.engine.dump()


@pytest.mark.parametrize("game", SOLITAIRES)
def test_hints_are_legal_moves_all_game_long(game: str) -> None:
    """Following every hint plays a whole game: each one was legal when it was given."""
    harness = session(game, seed="hints:7")
    player = harness.client("solo")
    for _ in range(600):
        if harness.room.engine.over:
            break
        action = ask_hint(harness)
        assert action in player.legal
        player.act(action)
    assert harness.room.engine.over
    assert harness.room.assist.hints == player.info.hints > 0
    assert harness.replayed().engine.dump() == harness.room.engine.dump()


def test_the_hint_bot_is_the_best_quick_one() -> None:
    """Hints come from the best bot that answers in milliseconds: the experts (about a second of
    CPU a plan) would hold up the node's event loop."""
    assert hint_strategy("blue_jacket") == "heuristic"
    assert hint_strategy("blackjack_piles") == (
        "heuristic" if "heuristic" in GAMES["blackjack_piles"].strategies else "greedy"
    )


@pytest.mark.parametrize("game", SOLITAIRES)
def test_a_finished_game_refuses_hint_and_undo_and_nothing_changes(game: str) -> None:
    harness = session(game)
    player = harness.client("solo")
    player.act({"type": "resign"})
    for message in (v1.Hint(table=harness.table), v1.Undo(table=harness.table)):
        with pytest.raises(RoomError) as error:  # the harness checks nothing changed
            player.send(message)
        assert error.value.code == ErrorCode.GAME_OVER


def test_a_fresh_game_has_nothing_to_undo() -> None:
    harness = session("blue_jacket")
    with pytest.raises(RoomError) as error:
        undo(harness)
    assert error.value.code == ErrorCode.NOTHING_TO_UNDO
    assert "revealed" in error.value.message


def test_a_deal_cannot_be_taken_back_nor_the_moves_before_it() -> None:
    harness = session("blue_jacket", seed="deal:3")
    player = harness.client("solo")
    for _ in range(200):
        if any(a["type"] == "deal" for a in player.legal):
            break
        player.act(next(a for a in player.legal if a["type"] != "resign"))
    assert any(a["type"] == "deal" for a in player.legal), "no deal within 200 moves"
    stock = harness.room.engine.stock_count
    player.act({"type": "deal"})
    assert player.info.undoable == 0
    with pytest.raises(RoomError) as error:
        undo(harness)
    assert error.value.code == ErrorCode.NOTHING_TO_UNDO
    assert harness.room.engine.stock_count == stock - blue_jacket.PILES


def test_only_the_seated_player_asks() -> None:
    harness = session("blackjack_piles")
    watcher = harness.client("watcher")
    watcher.spectate(invite=harness.room.invite)
    for message in (v1.Hint(table=harness.table), v1.Undo(table=harness.table)):
        with pytest.raises(RoomError) as error:
            watcher.send(message)
        assert error.value.code == ErrorCode.NOT_SEATED


def test_an_undo_is_an_event_and_counts_as_help() -> None:
    harness = session("blue_jacket", seed="undo:event")
    player = harness.client("solo")
    action = next(a for a in player.legal if a["type"] in ("move", "interchange"))
    before = player.view
    player.act(action)
    assert player.info.undoable == 1
    undo(harness)
    assert player.view == before
    assert player.events[-1].event == {"type": "undone", "action": action, "undoable": 0}
    assert (player.info.undos, player.info.hints, player.info.undoable) == (1, 0, 0)


# --------------------------------------------------------------------------- auto-finish


def near_the_end(missing: int) -> blue_jacket.BlueJacket:
    """A Blue Jacket game with an empty stock and every card on a foundation but ``missing``
    Jacks, each on its own bottom pile."""
    suits = "SHDC"
    rows = [
        [[f"{rank}{suits[p % 4]}" for rank in builds] for p in range(blue_jacket.PILES)]
        for builds in (("2", "5", "8", "J"), ("3", "6", "9", "Q"), ("4", "7", "T", "K"))
    ]
    jacks = [rows[0][p].pop() for p in range(missing)]
    state = blue_jacket.State(
        config=blue_jacket.Config(),
        seed=None,
        commitment=None,
        order=[],
        revealed=0,
        rows=rows,
        bottom=[[jack] for jack in jacks] + [[] for _ in range(blue_jacket.PILES - missing)],
        aces=[f"A{suits[i % 4]}" for i in range(8)],
        moves=0,
        progress=None,
        over=False,
        won=False,
        ending=None,
    )
    return blue_jacket.BlueJacket(state)


def test_auto_finish_plays_a_forced_win_to_the_end() -> None:
    engine = near_the_end(3)
    line = forced_finish("blue_jacket", engine)
    assert len(line) == 3 and not engine.over, "finding the line changes nothing"
    for action in line:
        engine.apply(0, action)
    assert engine.result().won


def test_auto_finish_waits_while_the_stock_holds_cards() -> None:
    engine = near_the_end(3)
    engine._s.order = ["QS"]  # one card left in the stock: the rest is not forced
    assert forced_finish("blue_jacket", engine) == []
    assert forced_finish("blackjack_piles", near_the_end(3)) == []


def test_a_session_finishes_itself_once_the_rest_is_forced() -> None:
    harness = session("blue_jacket", seed="finish:1")
    room = harness.room
    room.engine = near_the_end(4)
    harness.client("solo").act({"type": "move", "source": "b1", "target": "r1.1"})
    assert room.engine.over and room.engine.result().won
    assert room.status == "finished"
    assert room.assist is not None
    assert [type(a).__name__ for _, a in room.assist.played] == ["Move"] * 4


def test_a_record_with_undos_taken_out_verifies() -> None:
    """A finished session's record file (as a leaderboard keeps it) passes ``verify``."""
    from blackdrez.games.verify import verify

    harness = session("blackjack_piles", seed="record:2", ranked=True)
    player = harness.client("solo")
    for step in range(400):
        if harness.room.engine.over:
            break
        if step % 5 == 4 and player.info.undoable:
            undo(harness)
        else:
            player.act(ask_hint(harness))
    assert harness.room.engine.over
    (result,) = harness.room.take_outcome().ranked
    assert result.undos > 0 and result.hints > 0
    record = decode_record(result.record)
    assert verify(record) == []
    assert msgspec.json.decode(encode_record(record)) == msgspec.json.decode(result.record)
