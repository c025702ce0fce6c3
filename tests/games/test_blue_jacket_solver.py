"""The Blue Jacket solver: winning lines replay to wins, losses match an exhaustive search."""

from __future__ import annotations

import dataclasses

import pytest

from blackdrez.games import GAMES
from blackdrez.games.blue_jacket.rules import BlueJacket, Config
from blackdrez.games.blue_jacket.solver import (
    ALL,
    PROVED,
    Techniques,
    best_score,
    deal_seed,
    solve,
    solve_deal,
    solve_numbered,
    solve_position,
    summarize,
)
from tests.games.blue_jacket_small import Small, brute_force, small_position
from tests.games.test_blue_jacket_helpers import USELESS_ROWS, position

WINNABLE_SMALL = (0, 3, 15, 45, 70, 77, 93, 96, 112)
"""Seeds of :func:`small_position` (6 active piles, 2 deals) that the brute force wins."""
LOST_SMALL = (8, 13, 24, 26, 32, 48, 60, 61, 62, 108)
"""Seeds the brute force searches in full without a win (each in well under a second)."""


def small(seed: int) -> Small:
    return small_position(seed, active=6, stock_deals=2)


def solve_small(position: Small, techniques: Techniques = ALL, budget: int = 50_000):
    return solve_position(
        position.rows, position.bottom, len(position.aces), position.stock, budget, techniques
    )


def replays_to_a_win(engine: BlueJacket, moves: list, cards: int = 104) -> bool:
    for move in moves:
        engine.apply(0, move)
    return engine.score == cards


@pytest.mark.parametrize("deal", [0, 7, 154])
def test_a_numbered_deal_is_won_and_its_line_replays_to_a_win(deal: int) -> None:
    solution = solve_deal(deal_seed(deal))
    assert solution.outcome == "winnable" and solution.best == 104
    engine = BlueJacket.new(Config(progress_budget=0), deal_seed(deal))
    assert replays_to_a_win(engine, solution.moves)
    assert engine.result().won and engine.result().ending == "won"


def test_the_solver_starts_from_the_current_position() -> None:
    engine = BlueJacket.new(Config(progress_budget=0), deal_seed(3))
    first = solve(engine).moves
    for move in first[:20]:
        engine.apply(0, move)
    rest = solve(engine)
    assert rest.outcome == "winnable"
    assert replays_to_a_win(engine, rest.moves)


def test_numbered_deal_seeds_are_the_servers() -> None:
    assert deal_seed(12) == GAMES["blue_jacket"].deal_seed(12)


def test_a_spent_budget_is_unknown_not_a_loss() -> None:
    solution = solve_deal(deal_seed(849), budget=50)
    assert solution.outcome == "unknown" and solution.moves == []
    assert solution.nodes == 50


def test_a_budget_below_one_node_is_refused() -> None:
    with pytest.raises(ValueError, match="budget"):
        solve_deal(deal_seed(0), budget=0)


@pytest.mark.parametrize("seed", WINNABLE_SMALL)
def test_small_winnable_positions_are_won_by_lines_that_replay(seed: int) -> None:
    position = small(seed)
    assert brute_force(position)[0]
    solution = solve_small(position)
    assert solution.outcome == "winnable"
    assert replays_to_a_win(position.engine(), solution.moves, position.cards())


@pytest.mark.parametrize("seed", LOST_SMALL)
def test_small_lost_positions_are_not_winnable_and_their_best_score_is_exact(seed: int) -> None:
    position = small(seed)
    won, best = brute_force(position)
    assert not won
    assert solve_small(position).outcome == "not_winnable"
    par = best_score(position.engine())
    assert par.exact and par.score == best


@pytest.mark.parametrize(
    "technique", [field.name for field in dataclasses.fields(Techniques) if field.name != "cut"]
)
def test_each_technique_keeps_every_answer(technique: str) -> None:
    # The cut is left on: without it a lost position with holes is searched to exhaustion.
    techniques = dataclasses.replace(ALL, **{technique: False})
    for seed in (*WINNABLE_SMALL[:4], *LOST_SMALL[:4]):
        position = small(seed)
        expected = "winnable" if seed in WINNABLE_SMALL else "not_winnable"
        assert solve_small(position, techniques).outcome == expected, seed


def test_the_proved_techniques_alone_decide_the_same() -> None:
    for seed in (*WINNABLE_SMALL[:3], *LOST_SMALL[:3]):
        expected = "winnable" if seed in WINNABLE_SMALL else "not_winnable"
        assert solve_small(small(seed), PROVED).outcome == expected


def test_a_row_without_starters_left_blocks_the_deal_and_loses() -> None:
    # Row 1 has an empty pile and no Two anywhere: the stock can never be dealt.
    rows = ("2S 5S 6C 7C 8C 9C TC -", USELESS_ROWS[1], USELESS_ROWS[2])
    game = position(rows, "KS KH", stock="QS QH")
    view = game.view(0)
    solution = solve_position(view.rows, view.bottom, 0, ["QS", "QH"])
    assert solution.outcome == "not_winnable"


def test_best_score_of_a_winnable_deal_is_a_full_house() -> None:
    par = best_score(BlueJacket.new(Config(progress_budget=0), deal_seed(1)))
    assert par.exact and par.score == 104


def test_summarize_counts_outcomes_with_intervals() -> None:
    results = [solve_numbered(number, budget=20_000)[0] for number in (0, 1)]
    report = summarize(results)
    assert report["deals"] == 2 and report["winnable"] == 2 and report["unknown"] == 0
    assert report["decided_fraction"] == 1.0
    low, high = report["winnable_ci95"]
    assert 0.3 < low < 1.0 and high == 1.0
    assert report["nodes_max"] == max(result.nodes for result in results)
