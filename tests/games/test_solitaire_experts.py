"""The solitaire experts see only what a player sees, play legal games, and the pars hold.

An expert that peeked at the stock would choose differently on two games whose views are the
same but whose hidden cards differ: these tests build such pairs and compare the choices.
"""

from __future__ import annotations

import msgspec

from blackdrez.games.blackjack_piles import rules as blackjack_piles
from blackdrez.games.blackjack_piles.bots import STRATEGIES as PILES_STRATEGIES
from blackdrez.games.blackjack_piles.bots import greedy
from blackdrez.games.blackjack_piles.expert import PilesExpert, choose, seen_cashed
from blackdrez.games.blackjack_piles.rules import BlackjackPiles, Resign
from blackdrez.games.blackjack_piles.solver import game_par, round_par
from blackdrez.games.blue_jacket import rules as blue_jacket
from blackdrez.games.blue_jacket.bots import STRATEGIES as JACKET_STRATEGIES
from blackdrez.games.blue_jacket.bots import play
from blackdrez.games.blue_jacket.expert import ExpertBot
from blackdrez.games.blue_jacket.rules import BlueJacket, Deal
from blackdrez.games.blue_jacket.solver import deal_par, deal_seed

JACKET = blue_jacket.Config(progress_budget=0)


def _state(engine: BlueJacket) -> blue_jacket.State:
    return msgspec.msgpack.decode(engine.dump(), type=blue_jacket.State)


def _other_stock(engine: BlueJacket) -> BlueJacket:
    """The same game with its hidden stock in reverse order (the same view)."""
    state = _state(engine)
    state.order = [*state.order[: state.revealed], *reversed(state.order[state.revealed :])]
    return BlueJacket(state)


def test_the_blue_jacket_expert_chooses_the_same_whatever_the_hidden_stock() -> None:
    engine = BlueJacket.new(JACKET, deal_seed(5))
    other = _other_stock(engine)
    assert _state(engine).order != _state(other).order
    mine, theirs = ExpertBot(samples=2, budget=300), ExpertBot(samples=2, budget=300)
    for _ in range(40):
        view = engine.view(0)
        assert view == other.view(0)
        action = mine(view, engine.legal_actions(0))
        assert theirs(other.view(0), other.legal_actions(0)) == action
        if isinstance(action, Deal):
            break  # the deal reveals different cards in the two games
        engine.apply(0, action)
        other.apply(0, action)


def test_the_blue_jacket_expert_is_the_expert_strategy_and_plays_a_whole_game() -> None:
    assert isinstance(JACKET_STRATEGIES["expert"], ExpertBot)
    engine = BlueJacket.new(JACKET, "expert-game")
    play(engine, ExpertBot(samples=2, budget=300))
    assert engine.over


def test_a_game_built_from_a_position_has_a_par_from_that_position() -> None:
    state = _state(BlueJacket.new(JACKET, deal_seed(3)))
    state.order = state.order[: state.revealed + 8]  # not two full decks: no deal to restart
    engine = BlueJacket(state)
    par = deal_par(engine)
    assert par.score >= engine.score


def _piles_pair(seed: str, steps: int) -> tuple[BlackjackPiles, BlackjackPiles]:
    """A game after ``steps`` greedy actions, and the same game whose first round's undrawn
    cards (below the stock's face-up top) come in reverse order."""
    dealt = BlackjackPiles.new(blackjack_piles.Config(), seed).state.decks
    engine = BlackjackPiles.from_order(blackjack_piles.Config(), dealt)
    actions = []
    for _ in range(steps):
        action = greedy(engine.view(0), engine.legal_actions(0))
        engine.apply(0, action)
        actions.append(action)
    decks = [list(deck) for deck in engine.state.decks]
    shown = engine.state.drawn[-1] + 1
    decks[0] = decks[0][:shown] + decks[0][shown:][::-1]
    other = BlackjackPiles.from_order(blackjack_piles.Config(), decks)
    for action in actions:
        other.apply(0, action)
    return engine, other


def test_the_piles_expert_chooses_the_same_whatever_the_hidden_stock() -> None:
    compared = 0
    for steps in range(0, 40, 3):
        engine, other = _piles_pair("hidden", steps)
        if engine.view(0).round != 1:
            break
        assert engine.state.decks[0] != other.state.decks[0]
        assert engine.view(0) == other.view(0)
        cashed = seen_cashed(engine)
        assert cashed == seen_cashed(other)
        legal = engine.legal_actions(0)
        assert choose(engine.view(0), legal, cashed) == choose(other.view(0), legal, cashed)
        compared += 1
    assert compared >= 10


def test_the_piles_expert_is_the_expert_strategy_and_plays_whole_games() -> None:
    expert = PILES_STRATEGIES["expert"]
    assert isinstance(expert, PilesExpert)
    for index in range(3):
        engine = BlackjackPiles.new(blackjack_piles.Config(), f"expert:{index}")
        while not engine.over:
            action = expert(engine.view(0), engine.legal_actions(0))
            assert not isinstance(action, Resign)
            engine.apply(0, action)
        assert engine.result().results


def test_a_blue_jacket_par_is_a_full_house_for_a_winnable_deal_however_it_was_played() -> None:
    engine = BlueJacket.new(JACKET, deal_seed(1))
    engine.apply(0, blue_jacket.Resign())
    par = deal_par(engine)
    assert par.exact and par.score == 104 >= engine.score


def test_a_blue_jacket_par_never_falls_below_the_players_score() -> None:
    engine = BlueJacket.new(JACKET, deal_seed(2))
    play(engine, JACKET_STRATEGIES["greedy"])
    par = deal_par(engine, budget=1)  # a search that finds nothing: the player's line stands
    assert par.score == engine.score and not par.exact


def test_a_piles_par_covers_every_round_played_and_beats_or_ties_the_player() -> None:
    engine = BlackjackPiles.new(blackjack_piles.Config(), "par")
    while not engine.over:
        engine.apply(0, greedy(engine.view(0), engine.legal_actions(0)))
    pars = game_par(engine, budget=2_000)
    results = engine.state.results
    assert [par.round for par in pars] == [result.round for result in results]
    for par, result in zip(pars, results, strict=True):
        assert par.score >= result.score
        assert par.score == (par.hands + par.bonus) * par.round


def test_a_piles_round_par_without_a_floor_is_a_line_the_search_found() -> None:
    deck = BlackjackPiles.new(blackjack_piles.Config(), "floorless").state.decks[0]
    par = round_par(deck, 1, budget=2_000)
    assert par.hands > 0 and par.nodes <= 2_001
    assert round_par(deck, 1, budget=2_000, floor=(par.hands + 3, 1)).score >= (par.hands + 7)
