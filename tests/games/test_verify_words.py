"""A record that does not replay is explained in the browser's words: seats counted from 1, the
refused action as its player would say it ("hit", "stand"), never a Python dict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from blackdrez.games import GAMES, verify
from blackdrez.games.blackdrez import rules as blackdrez
from blackdrez.games.blackjack_piles import rules as blackjack_piles
from blackdrez.games.blue_jacket import rules as blue_jacket
from blackdrez.games.records import Record, decode_record, encode_record, write_record
from blackdrez.tools import cli
from tests.games.test_records import play

NOT_REPLAYED = "the game does not replay from the seed: "


def recorded(name: str, config: Any) -> Record:
    """A finished bot game of ``name``, as its record reads back from JSON."""
    engine, actions = play(name, "verify-words", config)
    return decode_record(encode_record(verify.record_of(engine, actions)))


@pytest.fixture(scope="module")
def three_seats() -> Record:
    return recorded("blackdrez", blackdrez.Config(seats=3))


def tampered(record: Record, index: int, pair: tuple[int, Any], insert: bool = False) -> Record:
    """``record`` with its action ``index`` replaced by ``pair`` (or ``pair`` put before it)."""
    actions = [*record.actions[:index], pair, *record.actions[index + (0 if insert else 1) :]]
    return msgspec.structs.replace(record, actions=actions)


def test_a_hit_moved_to_another_seat_is_named_from_1_and_in_words(three_seats: Record) -> None:
    index, (seat, action) = next(
        (i, pair) for i, pair in enumerate(three_seats.actions) if pair[1]["type"] == "hit"
    )
    other = (seat + 1) % 3
    problems = verify.verify(tampered(three_seats, index, (other, action)))
    assert problems == [
        f"{NOT_REPLAYED}action {index} (seat {other + 1}: hit) was rejected: "
        f"it was not seat {other + 1}'s turn: seat {seat + 1} was to act"
    ]


def test_blackdrez_verify_prints_the_refused_action_in_words(
    three_seats: Record, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tampered.json"
    write_record(tampered(three_seats, 2, (7, {"type": "stand"}), insert=True), path)
    assert cli.main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert "action 2 (seat 8: stand) was rejected: it was not seat 8's turn" in out
    assert "{'type'" not in out and "seat 7" not in out


def test_a_round_started_by_a_player_says_the_table_starts_rounds(three_seats: Record) -> None:
    problems = verify.verify(tampered(three_seats, 0, (0, three_seats.actions[0][1])))
    assert problems == [
        f"{NOT_REPLAYED}action 0 (seat 1: start a round with seat 1, seat 2 and seat 3) was "
        "rejected: it was not seat 1's turn: the table was to act"
    ]


def test_an_action_after_the_end_and_a_rule_in_plain_words(three_seats: Record) -> None:
    end = len(three_seats.actions)
    [late] = verify.verify(tampered(three_seats, end, (0, {"type": "hit"}), insert=True))
    assert (
        late == f"{NOT_REPLAYED}action {end} (seat 1: hit) was rejected: the game was already over"
    )
    piles = recorded("blackjack_piles", blackjack_piles.Config())
    [early] = verify.verify(tampered(piles, 0, (0, {"type": "end_round"})))
    assert early.endswith(
        "action 0 (seat 1: end the round) was rejected: the round can end only once the stock "
        "is empty"
    )


def test_a_rule_that_counts_from_0_is_not_quoted() -> None:
    """Blackjack Piles' own refusal names its piles from 0 ("pile 0 is empty"): it is left out
    rather than contradict the action's "pile 1"."""
    piles = recorded("blackjack_piles", blackjack_piles.Config())
    [problem] = verify.verify(tampered(piles, 0, (0, {"type": "cash", "piles": [0]})))
    assert problem == (
        f"{NOT_REPLAYED}action 0 (seat 1: cash the tops of pile 1) was rejected: "
        "the rules did not allow it then"
    )


@pytest.mark.parametrize(
    ("action", "words"),
    [
        (blackdrez.Hit(), "hit"),
        (blackdrez.Stand(), "stand"),
        (blackdrez.Withdraw(), "withdraw"),
        (blackdrez.EndGame(), "end the game"),
        (blackdrez.StartRound(seats=[0, 2]), "start a round with seat 1 and seat 3"),
        (blackjack_piles.Place(pile=1), "place the stock's top card on pile 2"),
        (
            blackjack_piles.Cash(piles=(0, 2), stock=True),
            "cash the tops of pile 1, pile 3 and the stock's top card",
        ),
        (blackjack_piles.Move(source=0, target=3), "move the top card of pile 1 to pile 4"),
        (blackjack_piles.EndRound(), "end the round"),
        (blackjack_piles.Resign(), "resign"),
        (
            blue_jacket.Move(source="r1.3", target="aces"),
            "move the card at row 1 pile 3 to the Aces pile",
        ),
        (
            blue_jacket.Interchange(a="r1.2", b="r2.4"),
            "interchange the cards of row 1 pile 2 and row 2 pile 4",
        ),
        (blue_jacket.Deal(), "deal"),
        (blue_jacket.Move(source="x9", target="b2"), "move the card at 'x9' to bottom pile 2"),
    ],
)
def test_every_action_in_words(action: Any, words: str) -> None:
    game = next(spec for spec in GAMES.values() if isinstance(action, spec.action))
    assert game.action_words(action) == words


def test_seats_in_words() -> None:
    assert [verify.seat_words(seat) for seat in (blackdrez.SYSTEM, 0, 3)] == [
        "the table",
        "seat 1",
        "seat 4",
    ]
