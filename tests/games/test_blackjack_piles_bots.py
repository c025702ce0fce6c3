"""Blackjack Piles reference bot, simulation, and the published rounds table."""

from __future__ import annotations

import itertools
import json
import pathlib
import re

from blackdrez.games.blackjack_piles.bots import STRATEGIES, greedy, simulate
from blackdrez.games.blackjack_piles.rules import (
    ROUNDS,
    BlackjackPiles,
    Cash,
    Config,
    EndRound,
    Move,
    Place,
    Resign,
    RoundRules,
    View,
)
from blackdrez.games.cards import standard_deck

DOC = pathlib.Path(__file__).parents[2] / "docs" / "rules" / "blackjack_piles.md"
ROW = re.compile(r"^\| (\d) \| (\d) \| (no cap|\d+) \| (yes|no) \| ([\d.]+) \|", re.MULTILINE)


def game(*top: str, first_round: int = 1) -> BlackjackPiles:
    rest = [card for card in standard_deck() if card not in top]
    orders = [[*top, *rest]] + [standard_deck() for _ in range(first_round, 7)]
    return BlackjackPiles.from_order(Config(first_round=first_round), orders)


def test_the_rounds_table_is_as_documented() -> None:
    rows = ROW.findall(DOC.read_text())
    documented = tuple(
        RoundRules(
            piles=int(piles),
            cap=None if cap == "no cap" else int(cap),
            stock_in_hand=hand == "yes",
        )
        for _, piles, cap, hand, _ in rows
    )
    assert [int(number) for number, *_ in rows] == list(range(1, 8))
    assert documented == ROUNDS
    rates = [float(rate) for *_, rate in rows]
    assert all(earlier > later for earlier, later in itertools.pairwise(rates))


def test_round_one_is_clearly_easier_than_round_seven() -> None:
    """A smaller sample than the published 2,000 deals, with wide margins between the rounds."""
    report = simulate(1, "check", per_round=True, rounds=(1, 4, 7), deals=200)
    first, middle, last = report["rounds"]  # type: ignore[misc]
    assert (first["round"], middle["round"], last["round"]) == (1, 4, 7)
    assert first["pass_rate"] > 0.9
    assert 0.3 < middle["pass_rate"] < 0.7
    assert last["pass_rate"] < 0.15


def test_greedy_cashes_when_it_can() -> None:
    engine = game("AH", "KD", "5C")
    engine.apply(0, Place(0))
    action = greedy(engine.view(0), engine.legal_actions(0))
    assert action == Cash((0,), stock=True)


def test_greedy_prefers_the_bigger_hand() -> None:
    engine = game("5S", "6D", "TC", "AS", "TD")
    for pile in range(4):
        engine.apply(0, Place(pile))
    # Tops 5 6 T A, stock T: A+T (two cards, either ten) or 5+6+T (three cards).
    legal = engine.legal_actions(0)
    assert Cash((3,), stock=True) in legal
    action = greedy(engine.view(0), legal)
    assert isinstance(action, Cash)
    assert action.piles[:2] == (0, 1)
    assert len(action.piles) + action.stock == 3


def test_greedy_does_not_bury_a_card_needlessly() -> None:
    engine = game("KS", "9D")
    engine.apply(0, Place(0))
    assert greedy(engine.view(0), engine.legal_actions(0)) != Place(0)


def test_greedy_moves_to_open_a_cash() -> None:
    groups = [["AC", "TC"], ["AD", "TD"], ["AH", "TH"], ["AS", "TS"]]
    tens = [rank + suit for rank in "JQK" for suit in "CDH"] + ["JS", "QS", "KS"]
    lows = [low + suit for low, _ in ("29", "38", "47", "56") for suit in "CDH"]
    highs = [high + suit for _, high in ("29", "38", "47", "56") for suit in "CDH"]
    groups += [list(triple) for triple in zip(tens, lows, highs, strict=True)]
    groups += [["9S", "8S", "4S"]]
    order = [card for group in groups for card in group] + ["3S", "2S", "7S", "6S", "5S"]
    engine = game(*order)
    for group in groups:
        for pile in range(len(group)):
            engine.apply(0, Place(pile))
        engine.apply(0, Cash(tuple(range(len(group)))))
    for pile in (0, 0, 1, 2, 3):
        engine.apply(0, Place(pile))
    # Piles: 3S 2S / 7S / 6S / 5S / empty. Moving 2S uncovers 3S: 3+7+6+5 = 21.
    action = greedy(engine.view(0), engine.legal_actions(0))
    assert action == Move(0, 4)
    engine.apply(0, action)
    assert greedy(engine.view(0), engine.legal_actions(0)) == Cash((0, 1, 2, 3))


def test_greedy_ends_the_round_when_nothing_helps() -> None:
    view = View(
        round=1,
        rules=ROUNDS[0],
        piles=[["KS", "QS"], ["9D"], [], [], []],
        stock_top=None,
        stock_count=0,
        hands=15,
        left=3,
        score=0,
        results=[],
        over=False,
        commitment=None,
        seed=None,
    )
    legal = [Move(0, 2), Move(0, 3), Move(0, 4), EndRound(), Resign()]
    assert greedy(view, legal) == EndRound()


def test_simulate_reports_full_games_and_rounds() -> None:
    report = simulate(5, "sim", per_round=True, deals=3)
    assert set(STRATEGIES) == {"greedy", "expert"}
    assert json.loads(json.dumps(report)) == report
    assert report["games"] == 5
    score = report["score"]
    assert isinstance(score, dict)
    assert score["min"] <= score["mean"] <= score["max"]
    rounds = report["rounds"]
    assert isinstance(rounds, list)
    assert [entry["round"] for entry in rounds] == list(range(1, 8))
    assert all(0 <= entry["pass_rate"] <= 1 for entry in rounds)
    assert simulate(5, "sim") == {key: value for key, value in report.items() if key != "rounds"}
