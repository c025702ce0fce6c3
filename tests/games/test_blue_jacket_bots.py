"""Blue Jacket reference bots: legal choices, the heuristic's priorities, simulate's statistics."""

from __future__ import annotations

import json

import pytest

from blackdrez.games.blue_jacket.bots import (
    STRATEGIES,
    greedy,
    heuristic,
    look_ahead,
    play,
    simulate,
)
from blackdrez.games.blue_jacket.rules import BlueJacket, Config, Deal, Interchange, Move, Resign
from tests.games.test_blue_jacket_helpers import USELESS_ROWS, USELESS_STOCK, position


def choose(engine: BlueJacket) -> object:
    return greedy(engine.view(0), engine.legal_actions(0))


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_strategy_plays_legal_actions_to_the_end(name: str) -> None:
    for index in range(3):
        engine = BlueJacket.new(Config(progress_budget=0), f"bots:{index}")
        while not engine.over:
            legal = engine.legal_actions(0)
            action = STRATEGIES[name](engine.view(0), legal)
            assert action in legal
            engine.apply(0, action)
        assert engine.result().ending in ("won", "no_moves")


def test_random_strategy_is_a_pure_function_of_the_view() -> None:
    engine = BlueJacket.new(Config(), "bots:pure")
    view, legal = engine.view(0), engine.legal_actions(0)
    assert len({STRATEGIES["random"](view, legal) for _ in range(5)}) == 1


def test_greedy_sends_a_bottom_ace_home_before_anything_else() -> None:
    game = position(("3C 2S", "2H"), "2D,AS -")
    assert choose(game) == Move("b1", "aces")


def test_greedy_interchanges_before_building() -> None:
    game = position(("3C 2S", "2H"), "5S")
    assert choose(game) == Interchange("r1.1", "r2.1")


def test_greedy_fills_an_empty_row_pile_from_the_bottom_row() -> None:
    game = position(("2S", "2H 3S", "4S"), "2D 5H", stock=USELESS_STOCK)
    assert choose(game) == Move("b1", "r1.2")


def test_greedy_builds_from_a_row_only_when_a_starter_waits_to_refill_it() -> None:
    rows = ("2S 5S 6C 7C 8C 9C TC 5H", USELESS_ROWS[1], USELESS_ROWS[2])
    waiting = position(rows, "KS KH KD KC QS QH QD 2H", stock=USELESS_STOCK)
    assert choose(waiting) == Move("r1.2", "r1.1")
    alone = position(rows, "KS KH KD KC QS QH QD QC", stock=USELESS_STOCK)
    assert choose(alone) == Deal()


def test_greedy_digs_for_a_useful_card_before_dealing() -> None:
    game = position(USELESS_ROWS, "AS,KS - KH KD KC QS QH QD", stock=USELESS_STOCK)
    assert choose(game) == Move("b1", "b2")


def test_greedy_never_resigns_while_it_can_play() -> None:
    game = position(USELESS_ROWS, "KS,KH - QD QS QH QC JD JC")
    assert not isinstance(choose(game), Resign)


def test_simulate_reports_json_statistics_and_is_reproducible() -> None:
    stats = simulate(6, "sim")
    json.dumps(stats)
    assert stats["games"] == 6 and stats["strategy"] == "heuristic"
    assert 0 <= stats["wins"] <= 6 and stats["win_rate"] == stats["wins"] / 6
    assert 0 <= stats["median_score"] <= stats["best_score"] <= 104
    assert stats["mean_moves"] > 9 and stats["moves_per_second"] > 0
    again = simulate(6, "sim")
    for key in ("wins", "mean_score", "median_score", "best_score", "mean_moves"):
        assert again[key] == stats[key]


def test_simulate_rejects_bad_options() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        simulate(0, "sim")
    with pytest.raises(ValueError, match="unknown strategy"):
        simulate(1, "sim", strategy="psychic")
    with pytest.raises(ValueError, match="search_budget"):
        simulate(1, "sim", search_budget=-1)


def test_heuristic_beats_greedy_and_random_play() -> None:
    smart = simulate(20, "versus")
    greedy_stats = simulate(20, "versus", strategy="greedy")
    dumb = simulate(20, "versus", strategy="random")
    assert greedy_stats["mean_score"] > dumb["mean_score"] + 20
    assert smart["wins"] > greedy_stats["wins"] > dumb["wins"]


def test_play_returns_the_number_of_actions() -> None:
    engine = BlueJacket.new(Config(progress_budget=0), "count")
    actions = play(engine, greedy)
    assert engine.over and engine.result().moves == actions


def test_look_ahead_plays_safe_foundation_moves_first() -> None:
    game = position(("3C 2S", "2H"), "AS 5S")
    assert look_ahead(game.view(0)) == Move("b1", "aces")


def test_look_ahead_digs_and_empties_a_row_pile_for_a_buried_starter() -> None:
    game = position(USELESS_ROWS, "2S,KS - - KH KD KC QS QH")
    assert look_ahead(game.view(0)) in (Move("b1", "b2"), Move("r1.1", "b2"))
    while not game.over:
        game.apply(0, heuristic(game.view(0), game.legal_actions(0)))
    # 2S starts a row-1 pile, then the row's own 5S and 8S climb onto it.
    assert game.score == 3 and ["2S", "5S", "8S"] in game.view(0).rows[0]


def test_look_ahead_keeps_the_deal_possible() -> None:
    rows = ("2S 5S 6C 7C 8C 9C TC 5H", USELESS_ROWS[1], USELESS_ROWS[2])
    alone = position(rows, "KS KH KD KC QS QH QD QC", stock=USELESS_STOCK)
    assert look_ahead(alone.view(0)) is None
    assert heuristic(alone.view(0), alone.legal_actions(0)) == Deal()
    waiting = position(rows, "KS KH KD KC QS QH QD 2H", stock=USELESS_STOCK)
    assert look_ahead(waiting.view(0)) == Move("r1.2", "r1.1")
