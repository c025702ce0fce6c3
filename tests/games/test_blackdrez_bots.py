"""The reference BlackDrez bots and the simulator."""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest

from blackdrez.games.blackdrez.bots import (
    STRATEGIES,
    bust_chance,
    bust_probability,
    simulate,
    threshold,
    unseen_cards,
)
from blackdrez.games.blackdrez.rules import (
    SYSTEM,
    BlackDrez,
    Config,
    Hit,
    Stand,
    StartRound,
    Withdraw,
)
from tests.games.test_blackdrez_helpers import game


def test_threshold_hits_below_the_threshold_then_withdraws() -> None:
    engine, _ = game("BRNQBNPPQ", dealer=3)  # South (seat 2) is on turn at 3
    view, legal = engine.view(2), engine.legal_actions(2)
    assert threshold(view, legal) == Hit()
    assert threshold(view, legal, threshold=3) == Withdraw()


def test_threshold_stands_on_level_hands_it_would_not_hit() -> None:
    engine, _ = game("QQQRRR", seats=3, dealer=2)  # everyone at 9, seat 0 on turn
    view, legal = engine.view(0), engine.legal_actions(0)
    assert threshold(view, legal) == Stand()
    assert threshold(view, legal, threshold=10) == Hit()
    assert threshold(view, [Withdraw()], threshold=10) == Withdraw()


def test_bust_chance_counts_the_unseen_cards() -> None:
    engine, _ = game("QQRQ", seats=2, dealer=1)  # seat 0: Queen + Rook = 9; seat 1: two Queens
    view = engine.view(0)
    unseen = unseen_cards(view)
    assert unseen.total() == 50
    assert unseen == Counter(engine.state.order[engine.state.drawn :])
    assert view.to_act == 0
    # Queens (6 unseen), Rooks (8) and Bishops (9) bust a 9; Knights, Pawns and Jokers do not.
    assert bust_chance(view) == pytest.approx(23 / 50)
    assert bust_probability(view, [Hit(), Withdraw()]) == Hit()
    assert bust_probability(view, [Hit(), Withdraw()], max_risk=0.4) == Withdraw()
    assert bust_probability(view, [Hit(), Stand(), Withdraw()], max_risk=0.4) == Stand()
    assert bust_chance(engine.view(None)) == bust_chance(view), "the seat on turn is the bot's"
    with pytest.raises(ValueError):
        bust_chance(BlackDrez.new(Config(seats=2), "nobody on turn").view(None))


def test_bots_only_see_the_dealt_cards_and_always_act_legally() -> None:
    for index in range(20):
        engine = BlackDrez.new(Config(seats=2 + index % 7), f"bots:{index}")
        while not engine.over:
            if engine.state.phase == "between_rounds":
                engine.apply(SYSTEM, StartRound(seats=list(range(engine.state.config.seats))))
                continue
            seat = engine.state.to_act
            view, legal = engine.view(seat), engine.legal_actions(seat)
            assert unseen_cards(view) == Counter(engine.state.order[engine.state.drawn :])
            for bot in STRATEGIES.values():
                assert bot(view, legal) in legal
            engine.apply(seat, STRATEGIES["bust_probability"](view, legal))


def test_simulate_reports_json_statistics_deterministically() -> None:
    stats = simulate(40, "sim-test")
    assert stats == simulate(40, "sim-test")
    assert msgspec.json.decode(msgspec.json.encode(stats)) == stats
    assert stats["games"] == 40
    assert stats["rejected_actions"] == 0
    assert stats["strategies"] == ["threshold", "bust_probability"] * 2
    assert stats["rounds_per_game"] >= 1
    assert stats["actions_per_game"] > stats["rounds_per_game"]
    assert sum(stats["wins_by_seat"]) >= 40
    assert sum(stats["wins_by_strategy"].values()) == sum(stats["wins_by_seat"])
    assert 0 <= stats["split_share"] <= 1
    other = simulate(10, "sim-test", seats=6, strategies=["threshold"] * 6)
    assert other["wins_by_strategy"]["bust_probability"] == 0
    assert len(other["wins_by_seat"]) == 6


@pytest.mark.parametrize(
    ("seats", "strategies"), [(3, ["threshold"]), (2, ["threshold", "cautious"])]
)
def test_simulate_rejects_bad_strategies(seats: int, strategies: list[str]) -> None:
    with pytest.raises(ValueError):
        simulate(1, "x", seats=seats, strategies=strategies)
