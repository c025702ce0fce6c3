"""BlackDrez rules (RULES.md section 1): every rule and Decision, on stacked stocks."""

from __future__ import annotations

import hashlib

import msgspec
import pytest

from blackdrez.games.base import Reason, Rejected
from blackdrez.games.blackdrez.rules import (
    SYSTEM,
    Action,
    BlackDrez,
    Bust,
    Config,
    EndGame,
    Event,
    GameOver,
    Hit,
    HitCard,
    Place,
    PotSplit,
    RoundStarted,
    RoundWon,
    Stand,
    StartRound,
    Stood,
    Turn,
    Withdraw,
    Withdrew,
    hand_value,
)
from blackdrez.games.cards import pokerdrez_deck
from blackdrez.games.shuffle import shuffled
from tests.games.test_blackdrez_helpers import game, stack, table_cards

NORTH, WEST, SOUTH, EAST = 0, 1, 2, 3


def reject(engine: BlackDrez, seat: int, action: object, reason: Reason) -> None:
    """Assert that ``action`` is rejected with ``reason`` and changes nothing."""
    before = engine.dump()
    with pytest.raises(Rejected) as caught:
        engine.apply(seat, action)  # type: ignore[arg-type]
    assert caught.value.reason is reason, caught.value.detail
    assert engine.dump() == before


# Config and deck


def test_config_defaults_and_deck_count() -> None:
    config = Config()
    assert (config.seats, config.decks, config.max_rounds, config.first_dealer) == (
        4,
        None,
        None,
        None,
    )
    assert Config(seats=4).deck_count == 1
    assert Config(seats=5).deck_count == 2
    assert Config(seats=8, decks=1).deck_count == 1
    assert Config(seats=2, decks=2).deck_count == 2


@pytest.mark.parametrize(
    "fields",
    [
        {"seats": 1},
        {"seats": 9},
        {"seats": True},
        {"decks": 3},
        {"decks": 0},
        {"max_rounds": 0},
        {"first_dealer": 4},
        {"first_dealer": -1},
    ],
)
def test_config_rejects_bad_values(fields: dict) -> None:
    with pytest.raises(ValueError):
        Config(**fields)


def test_config_forbids_unknown_fields() -> None:
    assert msgspec.convert({"seats": 3}, Config) == Config(seats=3)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"seats": 3, "jokers": 2}, Config)


def test_one_deck_is_54_cards_without_neutral_cards() -> None:
    engine = BlackDrez.new(Config(seats=3), "deck-test")
    assert sorted(engine.deal_order(Config(seats=3), "deck-test")[0]) == sorted(pokerdrez_deck())
    assert len(engine.state.order) == 54
    assert len(BlackDrez.new(Config(seats=6), "deck-test").state.order) == 108


def test_new_shuffles_with_the_deck_context_and_commits_to_the_seed() -> None:
    engine = BlackDrez.new(Config(), "seed-1")
    assert engine.deal_order(Config(), "seed-1") == [shuffled(pokerdrez_deck(1), "seed-1", "deck")]
    assert engine.seed == "seed-1"
    assert engine.commitment == hashlib.sha256(b"seed-1").hexdigest()
    assert engine.dealt() == [[]]
    engine.apply(SYSTEM, StartRound(seats=[0, 1, 2, 3]))
    assert engine.dealt() == [engine.deal_order(Config(), "seed-1")[0][:8]]


def test_first_dealer_is_drawn_from_the_seed_unless_named() -> None:
    for seed in ("a", "b", "c", "d", "e"):
        expected = shuffled(list(range(5)), seed, "dealer")[0]
        assert BlackDrez.new(Config(seats=5), seed).state.dealer == expected
    assert BlackDrez.new(Config(first_dealer=2), "a").state.dealer == 2
    assert BlackDrez.from_order(Config(), stack("")).state.dealer == 0
    assert BlackDrez.from_order(Config(first_dealer=3), stack("")).state.dealer == 3


def test_from_order_rejects_cards_not_in_the_decks() -> None:
    with pytest.raises(ValueError):
        BlackDrez.from_order(Config(), ["Q1", "Q1"])
    with pytest.raises(ValueError):
        BlackDrez.from_order(Config(), ["X1"])
    assert BlackDrez.from_order(Config(decks=2), ["Q1", "Q1"]).stock == 2


# Hand value


@pytest.mark.parametrize(
    ("cards", "value"),
    [
        (["Q1"], 5),
        (["R1"], 4),
        (["B1"], 3),
        (["N1"], 2),
        (["P1"], 1),
        (["J1"], 6),
        (["Q1", "J1"], 11),
        (["J1", "J2"], 7),
        (["Q1", "B1", "J1"], 9),
        (["J1", "P1", "P2", "P3", "P4"], 10),
        (["Q1", "Q2", "N1"], 12),
        (["Q1", "Q2", "J1", "J2"], 12),
        (["R1", "R2", "B1", "J1"], 12),
    ],
)
def test_hand_value_is_the_best_total_with_jokers_six_or_one(cards: list[str], value: int) -> None:
    assert hand_value(cards) == value


# Lifecycle and deal


def test_a_game_starts_between_rounds_and_only_the_system_can_act() -> None:
    engine = BlackDrez.from_order(Config(seats=3), stack(""))
    assert (engine.state.phase, engine.state.round, engine.over) == ("between_rounds", 0, False)
    assert engine.legal_actions(0) == []
    *starts, end = engine.legal_actions(SYSTEM)
    assert starts[0] == StartRound(seats=[0, 1, 2])
    assert sorted(sorted(a.seats) for a in starts) == [[0, 1], [0, 1, 2], [0, 2], [1, 2]]
    assert end == EndGame()
    assert len(BlackDrez.from_order(Config(seats=8), []).legal_actions(SYSTEM)) == 2**8 - 8
    reject(engine, 0, Hit(), Reason.NOT_YOUR_TURN)
    reject(engine, 0, StartRound(seats=[0, 1]), Reason.NOT_YOUR_TURN)


def test_deal_starts_right_of_the_dealer_and_ends_with_the_dealer() -> None:
    order = pokerdrez_deck()
    engine = BlackDrez.from_order(Config(first_dealer=1), order)
    (started, turn) = engine.apply(SYSTEM, StartRound(seats=[0, 1, 2, 3]))
    assert isinstance(started, RoundStarted)
    assert started.dealer == 1
    assert started.hands == [
        [order[2], order[6]],
        [order[3], order[7]],
        [order[0], order[4]],
        [order[1], order[5]],
    ]
    assert started.values == [10, 10, 10, 10]
    assert started.stock == 46
    # Everyone at 10: the tie goes to the first seat right of the dealer.
    assert turn == Turn(2)


def test_only_playing_seats_are_dealt_and_the_dealer_skips_to_a_playing_seat() -> None:
    order = pokerdrez_deck()
    engine = BlackDrez.from_order(Config(first_dealer=0), order)
    started, _ = engine.apply(SYSTEM, StartRound(seats=[3, 1]))
    # Seat 0 does not play: the next playing seat to its right (1) deals.
    assert started.dealer == 1
    assert started.seats == [1, 3]
    assert started.hands == [[], [order[1], order[3]], [], [order[0], order[2]]]
    assert started.values == [None, 10, None, 10]
    assert engine.view(None).seats[0].status == "out"
    assert engine.view(None).seats[0].in_round is False


def test_dealer_passes_right_after_each_round() -> None:
    engine, _ = game("QQQQJPPP", dealer=EAST)  # North wins on the deal
    assert engine.state.phase == "between_rounds"
    # Between rounds the view names the dealer of the round just played (the one its result
    # describes) and, apart, the seat due to deal the next one.
    assert (engine.view(None).dealer, engine.view(None).next_dealer) == (EAST, NORTH)
    started, *_ = engine.apply(SYSTEM, StartRound(seats=[1, 2, 3]))
    assert started.dealer == WEST  # North sits out: West, right of North, deals
    assert (engine.view(None).dealer, engine.view(None).next_dealer) == (WEST, None)
    engine.apply(engine.state.to_act, Withdraw())
    engine.apply(engine.state.to_act, Withdraw())
    assert (engine.view(None).dealer, engine.view(None).next_dealer) == (WEST, SOUTH)


def test_before_the_first_round_the_first_dealer_is_due_to_deal() -> None:
    engine = BlackDrez.from_order(Config(first_dealer=SOUTH), stack(""))
    assert (engine.view(None).dealer, engine.view(None).next_dealer) == (SOUTH, SOUTH)
    started, *_ = engine.apply(SYSTEM, StartRound(seats=[0, 1, 2, 3]))
    assert started.dealer == SOUTH


# The table ends the game (fewer than two can play)


def test_the_table_ends_the_game_between_rounds_with_the_usual_ranking() -> None:
    engine, _ = game("QQQQJPPP", dealer=EAST)  # North wins the first round on the deal
    (over,) = engine.apply(SYSTEM, EndGame())
    assert isinstance(over, GameOver)
    assert over.result.reason == "players"
    assert over.result.rounds == 1
    assert over.result.ranking == [Place(1, [NORTH], 8), Place(2, [WEST, SOUTH, EAST], 0)]
    assert engine.over and engine.view(None).result == over.result
    assert over.seed is None and engine.stock == 54 - 8


def test_a_game_ended_before_any_round_ranks_nobody() -> None:
    engine = BlackDrez.new(Config(seats=3), "ended-early")
    (over,) = engine.apply(SYSTEM, EndGame())
    assert over.result.ranking == []
    assert over.result.rounds == 0
    assert over.seed == "ended-early"


def test_a_seat_that_sat_out_every_round_is_not_ranked() -> None:
    engine, _ = game("PQPJ", dealer=NORTH, start=[0, 1])  # North wins on the deal
    over = engine.apply(SYSTEM, EndGame())[-1]
    assert [place.seats for place in over.result.ranking] == [[NORTH], [WEST]]


def test_only_the_table_ends_a_game_and_only_between_rounds() -> None:
    engine, _ = game("BRNQBNPPQ", dealer=EAST)  # a round in play
    reject(engine, SYSTEM, EndGame(), Reason.ILLEGAL)
    between, _ = game("QQQQJPPP", dealer=EAST)
    reject(between, NORTH, EndGame(), Reason.NOT_YOUR_TURN)
    assert EndGame() in between.legal_actions(SYSTEM)
    assert EndGame() not in between.legal_actions(NORTH)
    between.apply(SYSTEM, EndGame())
    reject(between, SYSTEM, EndGame(), Reason.GAME_OVER)
    assert msgspec.convert({"type": "end_game"}, Action) == EndGame()


# Eleven on the deal


def test_a_single_eleven_on_the_deal_wins_every_card() -> None:
    engine, events = game("QQQQJPPP", dealer=EAST)
    started, won = events
    assert started.values == [11, 6, 6, 6]
    assert isinstance(won, RoundWon)
    assert (won.seat, won.reason) == (NORTH, "eleven")
    assert sorted(won.cards) == sorted(stack("QQQQJPPP", fill=False))
    assert engine.state.piles[NORTH] == won.cards
    statuses = [seat.status for seat in engine.view(None).seats]
    assert statuses == ["winner", "lost", "lost", "lost"]
    assert engine.state.to_act is None


def test_several_elevens_split_and_the_remainder_is_carried_over() -> None:
    engine, events = game("QQQQJJJQ", dealer=EAST)
    top = stack("QQQQJJJQ", fill=False)
    split = events[-1]
    assert isinstance(split, PotSplit)
    assert (split.winners, split.reason) == ([0, 1, 2], "eleven")
    assert split.shares == [[top[0], top[4]], [top[1], top[5]], [top[2], top[6]]]
    assert split.carry_over == [top[3], top[7]]
    assert engine.view(None).carry_over == [top[3], top[7]]
    assert [len(pile) for pile in engine.state.piles] == [2, 2, 2, 0]
    # Round 2 (all Queens and Rooks: 9 each); the last player left takes the carry-over too.
    engine.apply(SYSTEM, StartRound(seats=[0, 1, 2, 3]))
    assert engine.state.to_act == 1
    engine.apply(1, Withdraw())
    engine.apply(2, Withdraw())
    won = engine.apply(3, Withdraw())[-1]
    assert isinstance(won, RoundWon)
    assert (won.seat, won.reason) == (NORTH, "last_player")
    assert won.cards[:2] == [top[3], top[7]]
    assert engine.state.carry_over == []
    assert len(engine.state.piles[NORTH]) == 2 + len(won.cards) == 9


def test_carry_over_is_set_aside_when_the_game_ends() -> None:
    engine, events = game("QQQQJJJQ", dealer=EAST, max_rounds=1)
    top = stack("QQQQJJJQ", fill=False)
    over = events[-1]
    assert isinstance(over, GameOver)
    assert over.set_aside == [top[3], top[7]]
    assert engine.state.carry_over == []
    assert engine.view(None).set_aside == [top[3], top[7]]
    assert over.result.reason == "max_rounds"
    assert over.result.ranking == [Place(1, [0, 1, 2], 2), Place(4, [3], 0)]


# Turns


def test_lowest_hand_acts_first_and_the_dealer_is_last_among_ties() -> None:
    # Dealer North; West 10, South 2, East 10, North 2: South comes before the dealer.
    engine, events = game("QPQPQPQP", dealer=NORTH)
    assert events[0].values == [2, 10, 2, 10]
    assert events[-1] == Turn(SOUTH)
    assert engine.state.to_act == SOUTH
    # A lone lowest dealer acts first.
    _, events = game("QQQPQQQP", dealer=NORTH)
    assert events[-1] == Turn(NORTH)


def test_the_turn_goes_to_the_first_tied_lowest_right_of_the_last_actor() -> None:
    # North 6, West 6, South 3, East 6; South hits a Queen (8): East, right of South, goes next.
    engine, events = game("BRNQBNPPQ", dealer=EAST)
    assert events[0].values == [6, 6, 3, 6]
    assert engine.state.to_act == SOUTH
    hit, turn = engine.apply(SOUTH, Hit())
    assert hit == HitCard(SOUTH, stack("BRNQBNPPQ", fill=False)[8], 8, 54 - 9)
    assert turn == Turn(EAST)
    assert engine.view(None).last_actor == SOUTH


def test_worked_example_from_the_rules() -> None:
    order = stack("QQQPRQBPQQJPN")
    cards = order[:13]
    engine = BlackDrez.from_order(Config(seats=4, first_dealer=EAST), order)
    assert engine.dealt() == [[]]
    started, turn = engine.apply(SYSTEM, StartRound(seats=[0, 1, 2, 3]))
    assert started.values == [9, 10, 8, 2]
    assert turn == Turn(EAST)
    # East is lowest and keeps the turn while lowest, then busts at 12.
    assert engine.apply(EAST, Hit()) == [HitCard(EAST, cards[8], 7, 54 - 9), Turn(EAST)]
    hit, bust, turn = engine.apply(EAST, Hit())
    assert hit.value == 12
    assert bust == Bust(EAST, 12, [cards[3], cards[7], cards[8], cards[9]])
    assert turn == Turn(SOUTH)
    # The position of the example: North 9, West 10, South 8, East 12 (bust, out).
    view = engine.view(None)
    assert [seat.value for seat in view.seats[:3]] == [9, 10, 8]
    assert view.seats[EAST].status == "bust"
    assert view.pot == [cards[3], cards[7], cards[8], cards[9]]
    # South hits a Joker: as 6 it would make 14, so it counts 1: 9, tied with North, keeps the turn.
    assert engine.apply(SOUTH, Hit()) == [HitCard(SOUTH, cards[10], 9, 54 - 11), Turn(SOUTH)]
    # South hits a Pawn: 10. North (9) is now lowest.
    assert engine.apply(SOUTH, Hit()) == [HitCard(SOUTH, cards[11], 10, 54 - 12), Turn(NORTH)]
    # North hits a Knight and reaches 11, winning every card on the table.
    hit, won = engine.apply(NORTH, Hit())
    assert hit == HitCard(NORTH, cards[12], 11, 54 - 13)
    assert (won.seat, won.reason) == (NORTH, "eleven")
    assert sorted(won.cards) == sorted(cards)
    assert sorted(engine.state.piles[NORTH]) == sorted(cards)
    assert engine.view(None).seats[NORTH].status == "winner"


# Hit, bust, withdraw, stand


def test_bust_sends_the_hand_to_the_pot_and_the_last_player_wins() -> None:
    engine, _ = game("RQRQQ", seats=2, dealer=1)
    assert engine.state.to_act == 0
    hit, bust, won = engine.apply(0, Hit())
    assert hit.value == 13
    assert bust.seat == 0
    assert (won.seat, won.reason) == (1, "last_player")
    assert sorted(won.cards) == sorted(stack("RQRQQ", fill=False))
    assert engine.view(None).seats[0].status == "bust"


def test_withdraw_keeps_the_first_half_of_the_hand_rounded_down() -> None:
    engine, _ = game("PQQPQRNP", seats=3, dealer=2)
    top = stack("PQQPQRNP", fill=False)
    assert engine.state.to_act == 0
    engine.apply(0, Hit())
    engine.apply(0, Hit())
    assert engine.state.hands[0] == [top[0], top[3], top[6], top[7]]
    withdrew, turn = engine.apply(0, Withdraw())
    assert withdrew == Withdrew(0, [top[0], top[3]], [top[6], top[7]])
    assert engine.state.piles[0] == [top[0], top[3]]
    assert engine.view(None).pot == [top[6], top[7]]
    assert engine.view(None).seats[0].status == "withdrawn"
    assert turn == Turn(2)
    # Two cards: keep one, the first dealt; then seat 1 is the last player and takes the table.
    withdrew, won = engine.apply(2, Withdraw())
    assert withdrew == Withdrew(2, [top[2]], [top[5]])
    assert won == RoundWon(1, "last_player", [top[6], top[7], top[5], top[1], top[4]])


def test_withdraw_with_an_odd_hand_keeps_fewer_than_half() -> None:
    engine, _ = game("PQQPQRN", seats=3, dealer=2)
    top = stack("PQQPQRN", fill=False)
    engine.apply(0, Hit())
    withdrew, _ = engine.apply(0, Withdraw())
    assert withdrew == Withdrew(0, [top[0]], [top[3], top[6]])


def test_stand_only_when_level_and_passes_the_turn_right() -> None:
    engine, _ = game("QQQRRR", seats=3, dealer=2)  # 9 each; the next card is a Queen
    assert engine.legal_actions(0) == [Hit(), Stand(), Withdraw()]
    assert engine.apply(0, Stand()) == [Stood(0), Turn(1)]
    assert engine.view(None).seats[0].status == "stood"
    hit, bust, turn = engine.apply(1, Hit())  # 14: bust, and the stand of seat 0 is cleared
    assert (hit.value, bust) == (14, Bust(1, 14, engine.view(None).pot))
    assert engine.view(None).seats[0].status == "playing"
    assert turn == Turn(2)
    assert engine.apply(2, Stand()) == [Stood(2), Turn(0)]
    stood, split = engine.apply(0, Stand())
    assert stood == Stood(0)
    # Seven cards on the table, two winners: three each, one carried over.
    assert (split.winners, split.reason) == ([0, 2], "stand")
    assert [len(share) for share in split.shares] == [3, 3]
    assert len(split.carry_over) == 1


def test_a_hit_after_a_stand_means_everyone_must_stand_again() -> None:
    engine, _ = game("QRBPNBPPP", seats=3, dealer=2)
    assert engine.state.values == [6, 6, 6]
    assert engine.apply(0, Stand()) == [Stood(0), Turn(1)]
    engine.apply(1, Hit())  # Pawn: 7; the stand of seat 0 is cleared
    assert engine.view(None).seats[0].status == "playing"
    assert engine.state.to_act == 2  # 6, 7, 6: from seat 1 going right, seat 2 comes first
    reject(engine, 2, Stand(), Reason.ILLEGAL)
    assert engine.legal_actions(2) == [Hit(), Withdraw()]
    assert engine.apply(2, Hit())[-1] == Turn(0)  # 7
    assert engine.apply(0, Hit())[-1] == Turn(0)  # 7: level again, seat 0 keeps the turn
    assert engine.apply(0, Stand()) == [Stood(0), Turn(1)]
    assert engine.apply(1, Stand()) == [Stood(1), Turn(2)]
    stood, split = engine.apply(2, Stand())
    assert stood == Stood(2)
    assert (split.winners, split.reason, split.carry_over) == ([0, 1, 2], "stand", [])
    assert [len(share) for share in split.shares] == [3, 3, 3]


def test_a_tie_of_stands_splits_and_carries_the_odd_card() -> None:
    engine, _ = game("QRPBP", seats=2, dealer=1)
    top = stack("QRPBP", fill=False)
    assert engine.state.values[:2] == [6, 7]
    assert engine.apply(0, Hit()) == [HitCard(0, top[4], 7, 54 - 5), Turn(0)]
    assert engine.apply(0, Stand()) == [Stood(0), Turn(1)]
    shares = [[top[0], top[2]], [top[4], top[1]]]
    assert engine.apply(1, Stand()) == [Stood(1), PotSplit([0, 1], "stand", shares, [top[3]])]
    assert engine.state.carry_over == [top[3]]


def test_empty_stock_means_withdraw_or_stand() -> None:
    engine, _ = game("QRPB", seats=2, dealer=1, fill=False)
    assert engine.stock == 0
    assert engine.legal_actions(0) == [Withdraw()]
    reject(engine, 0, Hit(), Reason.ILLEGAL)
    reject(engine, 0, Stand(), Reason.ILLEGAL)
    events = engine.apply(0, Withdraw())
    assert events[1] == RoundWon(1, "last_player", ["P1", "R1", "B1"])
    assert isinstance(events[2], GameOver)
    level, _ = game("QRRQ", seats=2, dealer=1, fill=False)
    assert level.legal_actions(0) == [Stand(), Withdraw()]


# Game end


def test_round_end_ends_the_game_when_the_stock_is_short() -> None:
    engine, events = game("QRPB" + "QQQQ", seats=2, dealer=1, fill=False)
    engine.apply(0, Withdraw())
    assert engine.state.phase == "between_rounds"  # four left: enough for two players
    engine.apply(SYSTEM, StartRound(seats=[0, 1]))
    events = engine.apply(engine.state.to_act, Withdraw())
    over = events[-1]
    assert isinstance(over, GameOver)
    assert over.result.reason == "stock"
    assert over.result.rounds == 2
    assert engine.over
    assert engine.legal_actions(SYSTEM) == []
    reject(engine, SYSTEM, StartRound(seats=[0, 1]), Reason.GAME_OVER)
    reject(engine, 0, Hit(), Reason.GAME_OVER)


def test_start_round_ends_the_game_when_the_stock_cannot_serve_everyone() -> None:
    engine = BlackDrez.from_order(Config(seats=3), stack("QQQQQ", fill=False))
    events = engine.apply(SYSTEM, StartRound(seats=[0, 1, 2]))
    assert len(events) == 1
    assert isinstance(events[0], GameOver)
    assert events[0].result.ranking == []
    assert engine.stock == 5
    assert engine.dealt() == [[]]


def test_max_rounds_ends_the_game() -> None:
    engine, events = game("QQQQJPPP", dealer=EAST, max_rounds=1)
    assert isinstance(events[-1], GameOver)
    assert events[-1].result.reason == "max_rounds"
    engine, events = game("QQQQJPPP", dealer=EAST, max_rounds=2)
    assert not engine.over


def test_ranking_by_pile_size_with_shared_places() -> None:
    engine, events = game("QQQJJQ", seats=3, dealer=2, max_rounds=1)
    result = engine.result()
    assert result is not None
    assert result.ranking == [Place(1, [0, 1], 3), Place(3, [2], 0)]
    assert events[-1].result == result
    assert events[-1].seed is None  # built from an explicit order


def test_a_seat_sitting_out_keeps_its_pile_and_a_newcomer_starts_empty() -> None:
    engine, _ = game("QQQQJPPP", dealer=EAST)
    won = list(engine.state.piles[NORTH])
    engine.apply(SYSTEM, StartRound(seats=[1, 2, 3]))
    while engine.state.phase == "playing":
        engine.apply(engine.state.to_act, Withdraw())
    assert engine.state.piles[NORTH] == won
    assert engine.view(None).seats[NORTH].status == "out"
    engine.apply(SYSTEM, StartRound(seats=[0, 1], newcomers=[0]))
    assert engine.state.set_aside == won
    assert engine.view(None).seats[NORTH].pile == []
    reject_engine, _ = game("QQQQJPPP", dealer=EAST)
    reject(reject_engine, SYSTEM, StartRound(seats=[1, 2], newcomers=[0]), Reason.ILLEGAL)


# Rejections, default action, views, wire forms


def test_rejections_carry_the_right_reason() -> None:
    engine, _ = game("BRNQBNPPQ", dealer=EAST)
    assert engine.state.to_act == SOUTH
    reject(engine, SOUTH, object(), Reason.BAD_ACTION)
    reject(engine, SOUTH, {"type": "hit"}, Reason.BAD_ACTION)
    reject(engine, NORTH, Hit(), Reason.NOT_YOUR_TURN)
    reject(engine, SYSTEM, Hit(), Reason.NOT_YOUR_TURN)
    reject(engine, 17, Hit(), Reason.NOT_YOUR_TURN)
    reject(engine, SOUTH, StartRound(seats=[0, 1]), Reason.NOT_YOUR_TURN)
    reject(engine, SYSTEM, StartRound(seats=[0, 1]), Reason.ILLEGAL)
    reject(engine, SOUTH, Stand(), Reason.ILLEGAL)
    engine.apply(SOUTH, Withdraw())
    reject(engine, SOUTH, Hit(), Reason.NOT_IN_ROUND)
    sitting_out, _ = game("QQQQJPPP", dealer=EAST)
    sitting_out.apply(SYSTEM, StartRound(seats=[1, 2]))
    reject(sitting_out, NORTH, Withdraw(), Reason.NOT_IN_ROUND)


@pytest.mark.parametrize(
    "seats", [[0], [], [0, 0], [0, 4], [0, -1], [0, "1"], [0, True, 2], [0, 1.0]]
)
def test_start_round_needs_two_distinct_valid_seats(seats: list) -> None:
    engine = BlackDrez.from_order(Config(), stack(""))
    reject(engine, SYSTEM, StartRound(seats=seats), Reason.ILLEGAL)


def test_default_action_withdraws_the_seat_on_turn() -> None:
    engine, _ = game("BRNQBNPPQ", dealer=EAST)
    assert engine.default_action(SOUTH) == Withdraw()
    assert engine.default_action(NORTH) is None
    assert engine.default_action(SYSTEM) is None
    assert BlackDrez.from_order(Config(), stack("")).default_action(0) is None


def test_view_shows_everything_public_and_the_seed_only_when_over() -> None:
    engine = BlackDrez.new(Config(seats=2, max_rounds=1), "view-seed")
    view = engine.view(0)
    assert view == engine.view(None), "every viewer sees the same: all cards are face up"
    assert (view.round, view.phase, view.stock, view.decks) == (
        0,
        "between_rounds",
        54,
        1,
    )
    assert view.seed is None
    assert view.commitment == hashlib.sha256(b"view-seed").hexdigest()
    engine.apply(SYSTEM, StartRound(seats=[0, 1]))
    view = engine.view(None)
    assert view.phase == "playing"
    assert view.stock == 50
    for seat in view.seats:
        assert seat.in_round
        assert seat.hand == engine.state.hands[seat.seat]
        assert seat.value == hand_value(seat.hand)
    assert b"view-seed" not in msgspec.json.encode(view)
    while not engine.over:
        engine.apply(engine.state.to_act, Withdraw())
    view = engine.view(1)
    assert view.seed == "view-seed"
    assert view.result == engine.result()
    assert view.to_act is None


def test_actions_and_events_have_wire_forms() -> None:
    assert msgspec.convert({"type": "hit"}, Action) == Hit()
    assert msgspec.convert({"type": "withdraw"}, Action) == Withdraw()
    assert msgspec.convert({"type": "stand"}, Action) == Stand()
    assert msgspec.convert({"type": "start_round", "seats": [0, 2]}, Action) == StartRound([0, 2])
    engine, events = game("QPQPQPQP", dealer=NORTH)
    events += engine.apply(SOUTH, Hit())
    for event in events:
        wire = msgspec.json.encode(event)
        assert msgspec.json.decode(wire, type=Event) == event
        assert engine.event_view(event, None) == event
    assert msgspec.json.decode(msgspec.json.encode(events[0]))["type"] == "round_started"


def test_cards_are_conserved_in_a_scripted_round() -> None:
    engine, _ = game("BRNQBNPPQ", dealer=EAST)
    total = table_cards(engine)
    assert sum(total.values()) == 8
    engine.apply(SOUTH, Hit())
    engine.apply(EAST, Withdraw())
    assert sum(table_cards(engine).values()) == 9
