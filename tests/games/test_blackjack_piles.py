"""Blackjack Piles engine: every rule and Decision of RULES.md section 2, and properties."""

from __future__ import annotations

import collections
import re
from collections.abc import Sequence

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blackdrez.games.base import Reason, Rejected
from blackdrez.games.blackjack_piles.bots import greedy
from blackdrez.games.blackjack_piles.rules import (
    ROUNDS,
    Action,
    BlackjackPiles,
    Cash,
    Cashed,
    Config,
    EndRound,
    Event,
    GameOver,
    Move,
    Moved,
    Place,
    Placed,
    Resign,
    RoundEnded,
    RoundStarted,
    View,
    card_points,
    makes_21,
    round_bonus,
)
from blackdrez.games.cards import standard_deck
from blackdrez.games.shuffle import commitment, verify_deal

CARD = re.compile(r'"([A2-9TJQK][CDHS])"')


def deck(*top: str) -> list[str]:
    """A full deck starting with ``top``, the other cards in canonical order."""
    rest = [card for card in standard_deck() if card not in top]
    return [*top, *rest]


def game(*top: str, first_round: int = 1) -> BlackjackPiles:
    """A game whose first round's stock starts with ``top``; later rounds in canonical order."""
    orders = [deck(*top)] + [standard_deck() for _ in range(first_round, 7)]
    return BlackjackPiles.from_order(Config(first_round=first_round), orders)


def kinds(events: list[Event]) -> list[str]:
    """The events' wire tags."""
    return [type(event).__struct_config__.tag for event in events]


def place_all(engine: BlackjackPiles, *piles: int) -> None:
    for pile in piles:
        engine.apply(0, Place(pile))


def rejected(engine: BlackjackPiles, action: object, reason: Reason, seat: int = 0) -> None:
    """Assert that ``action`` is rejected for ``reason`` and leaves the state unchanged."""
    before = engine.dump()
    with pytest.raises(Rejected) as caught:
        engine.apply(seat, action)  # type: ignore[arg-type]
    assert caught.value.reason == reason
    assert engine.dump() == before


# A deck the player can clear but for a few cards, played group by group: each group goes on
# empty piles 0, 1, ... and is cashed. Four Ace-ten pairs, twelve triples of a ten and two cards
# making 11, then 9-8-4 and 7-6-5-3.
PAIRS = [["AC", "TC"], ["AD", "TD"], ["AH", "TH"], ["AS", "TS"]]


def winning_groups() -> list[list[str]]:
    """Groups totalling 21 that use 51 cards, leaving the Two of Spades."""
    tens = [rank + suit for rank in "JQK" for suit in "CDH"] + ["JS", "QS", "KS"]
    lows = [low + suit for low, _ in ("29", "38", "47", "56") for suit in "CDH"]
    highs = [high + suit for _, high in ("29", "38", "47", "56") for suit in "CDH"]
    triples = [[ten, low, high] for ten, low, high in zip(tens, lows, highs, strict=True)]
    return [*PAIRS, *triples, ["9S", "8S", "4S"], ["7S", "6S", "5S", "3S"]]


def play_groups(engine: BlackjackPiles, groups: list[list[str]]) -> list[Event]:
    events: list[Event] = []
    for group in groups:
        for index, card in enumerate(group):
            assert engine.view(0).stock_top == card
            events += engine.apply(0, Place(index))
        events += engine.apply(0, Cash(tuple(range(len(group)))))
    return events


def winning_order() -> list[str]:
    return [card for group in winning_groups() for card in group] + ["2S"]


# Cards and values ---------------------------------------------------------------------------


def test_card_points() -> None:
    assert [card_points(c) for c in ["AS", "2H", "9C", "TD", "JD", "QS", "KH"]] == [
        1,
        2,
        9,
        10,
        10,
        10,
        10,
    ]


@pytest.mark.parametrize(
    ("cards", "expected"),
    [
        (["AS", "KD"], True),
        (["AS", "AD", "9C"], True),
        (["AS", "5D", "5C"], True),
        (["7S", "7D", "7C"], True),
        (["KS", "QD"], False),
        (["AS", "AD"], False),
        (["KS", "QD", "AC"], True),
        (["2S", "3S", "4S", "5S", "6S", "AS"], True),
        (["TS", "TD", "2C"], False),
    ],
)
def test_makes_21(cards: list[str], expected: bool) -> None:
    assert makes_21(cards) is expected


def test_no_round_can_leave_zero_cards() -> None:
    """The deck totals 340 with Aces as 1; each Ace as 11 adds 10; never a multiple of 21."""
    low = sum(card_points(card) for card in standard_deck())
    assert low == 340
    assert all((low + 10 * aces) % 21 for aces in range(5))


# Setup, placing, hidden stock ----------------------------------------------------------------


def test_round_one_starts_with_five_empty_piles_and_the_top_face_up() -> None:
    engine = game("KH", "5C")
    view = engine.view(0)
    assert view.round == 1
    assert view.rules == ROUNDS[0]
    assert view.piles == [[], [], [], [], []]
    assert view.stock_top == "KH"
    assert view.stock_count == 52
    assert view.left == 52
    assert view.hands == 0
    assert view.seed is None
    assert engine.view(None) == view


def test_place_puts_the_stock_top_on_any_pile_and_reveals_the_next() -> None:
    engine = game("KH", "5C", "9D")
    events = engine.apply(0, Place(2))
    assert events == [Placed(card="KH", pile=2, stock_top="5C", stock_count=51)]
    events = engine.apply(0, Place(2))
    assert engine.view(0).piles[2] == ["KH", "5C"]
    assert engine.view(0).stock_top == "9D"


def test_only_pile_tops_are_available() -> None:
    engine = game("AH", "5C", "KD", "2S")
    place_all(engine, 0, 0)
    # AH is under 5C: AH + KD is not offered, and not accepted.
    assert not [a for a in engine.legal_actions(0) if isinstance(a, Cash)]
    rejected(engine, Cash((0,), stock=True), Reason.ILLEGAL)


def test_cash_with_the_stock_top_in_round_one() -> None:
    engine = game("AH", "KD", "2S")
    engine.apply(0, Place(0))
    assert Cash((0,), stock=True) in engine.legal_actions(0)
    events = engine.apply(0, Cash((0,), stock=True))
    assert events == [
        Cashed(
            cards=["AH", "KD"],
            total=21,
            piles=[0],
            stock=True,
            hands=1,
            stock_top="2S",
            stock_count=50,
        )
    ]
    assert engine.view(0).piles[0] == []
    assert engine.view(0).hands == 1
    assert engine.view(0).left == 50


@pytest.mark.parametrize("first_round", [4, 5, 6, 7])
def test_later_rounds_do_not_take_the_stock_top(first_round: int) -> None:
    engine = game("AH", "KD", "2S", first_round=first_round)
    engine.apply(0, Place(0))
    assert not [a for a in engine.legal_actions(0) if isinstance(a, Cash)]
    rejected(engine, Cash((0,), stock=True), Reason.ILLEGAL)
    engine.apply(0, Place(1))
    assert Cash((0, 1)) in engine.legal_actions(0)


@pytest.mark.parametrize("first_round", [1, 2, 3])
def test_first_rounds_take_the_stock_top(first_round: int) -> None:
    engine = game("AH", "KD", first_round=first_round)
    engine.apply(0, Place(0))
    assert Cash((0,), stock=True) in engine.legal_actions(0)


def test_six_card_hand_and_hand_sizes() -> None:
    engine = game("2S", "3S", "4S", "5S", "6S", "AS", "KD")
    place_all(engine, 0, 1, 2, 3, 4)
    assert Cash((0, 1, 2, 3, 4), stock=True) in engine.legal_actions(0)
    rejected(engine, Cash((0,)), Reason.ILLEGAL)
    rejected(engine, Cash((), stock=True), Reason.ILLEGAL)
    engine.apply(0, Cash((0, 1, 2, 3, 4), stock=True))
    assert engine.view(0).hands == 1


def test_cash_must_total_exactly_21() -> None:
    engine = game("KS", "QD", "2C")
    place_all(engine, 0, 1)
    rejected(engine, Cash((0, 1)), Reason.ILLEGAL)
    rejected(engine, Cash((0, 1), stock=True), Reason.ILLEGAL)


def test_cash_piles_once_each_in_order() -> None:
    engine = game("5S", "6D", "KC", "2C")
    place_all(engine, 0, 1, 2)
    assert Cash((0, 1, 2)) in engine.legal_actions(0)
    rejected(engine, Cash((2, 1, 0)), Reason.ILLEGAL)
    rejected(engine, Cash((0, 0, 1, 2)), Reason.ILLEGAL)
    rejected(engine, Cash((0, 1, 7)), Reason.ILLEGAL)
    rejected(engine, Cash((0, 3)), Reason.ILLEGAL)


def test_an_ace_counts_one_or_eleven_in_play() -> None:
    engine = game("AS", "AD", "9C", "5H")
    place_all(engine, 0, 1, 2)
    engine.apply(0, Cash((0, 1, 2)))
    assert engine.view(0).hands == 1


# Moves ----------------------------------------------------------------------------------------


def test_move_a_top_card_to_an_empty_pile() -> None:
    engine = game("KS", "5D", "2C")
    place_all(engine, 0, 0)
    assert Move(0, 1) in engine.legal_actions(0)
    assert engine.apply(0, Move(0, 3)) == [Moved(card="5D", source=0, target=3)]
    assert engine.view(0).piles == [["KS"], [], [], ["5D"], []]


def test_move_only_to_an_empty_pile() -> None:
    engine = game("KS", "5D", "2C")
    place_all(engine, 0, 0, 1)
    rejected(engine, Move(0, 1), Reason.ILLEGAL)
    rejected(engine, Move(0, 9), Reason.ILLEGAL)


def test_decision_moving_a_single_card_is_not_a_move() -> None:
    engine = game("KS", "5D")
    engine.apply(0, Place(0))
    assert not [a for a in engine.legal_actions(0) if isinstance(a, Move)]
    rejected(engine, Move(0, 1), Reason.ILLEGAL)


# Caps ----------------------------------------------------------------------------------------


def test_a_full_pile_takes_no_more_cards() -> None:
    cap = ROUNDS[2].cap
    assert cap is not None
    engine = game("2S", "2D", "2H", "2C", first_round=3)
    place_all(engine, *[0] * cap)
    assert Place(0) not in engine.legal_actions(0)
    assert Place(1) in engine.legal_actions(0)
    rejected(engine, Place(0), Reason.ILLEGAL)


# Round end -----------------------------------------------------------------------------------


SMALL = ["2S", "3S", "4S", "2D", "3D", "4D", "2H", "3H", "4H", "2C", "3C", "4C"]


def test_round_ends_by_itself_when_the_stock_top_fits_nowhere() -> None:
    engine = game(*SMALL, first_round=7)
    rules = ROUNDS[6]
    assert rules.cap is not None
    cards = rules.piles * rules.cap
    for index in range(cards - 1):
        assert kinds(engine.apply(0, Place(index % rules.piles))) == ["placed"]
    events = engine.apply(0, Place((cards - 1) % rules.piles))
    ended = events[1]
    assert isinstance(ended, RoundEnded)
    assert ended.ended_by == "auto"
    assert ended.result.left == 52
    assert ended.result.hands == 0
    assert not ended.result.passed
    assert events[2] == GameOver(score=0, seed=None)
    assert engine.over
    assert engine.legal_actions(0) == []
    assert engine.default_action(0) is None


def test_end_round_only_with_an_empty_stock() -> None:
    engine = game("KS")
    assert EndRound() not in engine.legal_actions(0)
    rejected(engine, EndRound(), Reason.ILLEGAL)


def test_passing_round_advances_with_bonus_and_score() -> None:
    engine = game(*winning_order())
    events = play_groups(engine, winning_groups())
    # The last card, the Two of Spades, is alone: nothing is left to play, the round ends.
    events = engine.apply(0, Place(0))
    assert kinds(events) == ["placed", "round_ended", "round_started"]
    ended = events[1]
    assert isinstance(ended, RoundEnded)
    assert ended.ended_by == "auto"
    assert ended.advanced
    result = ended.result
    assert (result.hands, result.left, result.bonus) == (18, 1, 4)
    assert result.score == (18 + 4) * 1
    assert result.passed
    started = events[2]
    assert started == RoundStarted(
        round=2, rules=ROUNDS[1], stock_top=standard_deck()[0], stock_count=52
    )
    view = engine.view(0)
    assert view.round == 2
    assert len(view.piles) == ROUNDS[1].piles
    assert view.hands == 0
    assert view.score == 22
    assert view.results == [result]


def test_game_ends_after_round_seven_even_when_passed() -> None:
    order = [card for group in winning_groups()[:-1] for card in group]
    order += ["7S", "6S", "5S", "3S", "2S"]
    engine = game(*order, first_round=7)
    play_groups(engine, winning_groups()[:-1])
    place_all(engine, 0, 1, 2, 0)
    events = engine.apply(0, Place(1))
    # Tops 3S 2S 5S cannot cash and no pile is empty: the round ends by itself.
    assert kinds(events) == ["placed", "round_ended", "game_over"]
    ended = events[1]
    assert isinstance(ended, RoundEnded)
    assert (ended.result.hands, ended.result.left) == (17, 5)
    assert ended.result.passed
    assert not ended.advanced
    assert ended.result.score == 17 * 7
    assert engine.over
    assert engine.result().completed
    assert engine.result().last_round == 7


def test_player_ends_the_round_when_play_remains() -> None:
    # The stock empties while a move is still possible: the player may end the round.
    order = [card for group in winning_groups() for card in group] + ["2S"]
    order = [*order[:-5], "3S", "2S", "7S", "6S", "5S"]
    engine = game(*order)
    play_groups(engine, winning_groups()[:-1])
    place_all(engine, 0, 0, 1, 2)
    engine.apply(0, Place(3))
    view = engine.view(0)
    assert view.stock_top is None
    assert not engine.over
    legal = engine.legal_actions(0)
    assert EndRound() in legal
    assert engine.default_action(0) == EndRound()
    events = engine.apply(0, EndRound())
    ended = events[0]
    assert isinstance(ended, RoundEnded)
    assert ended.ended_by == "player"
    assert ended.result.left == 5


def test_bonus_table() -> None:
    assert [round_bonus(left) for left in range(1, 6)] == [4, 3, 2, 0, 0]


def test_decision_resign_scores_the_round_as_it_stands() -> None:
    engine = game("AH", "KD", "5C")
    engine.apply(0, Place(0))
    engine.apply(0, Cash((0,), stock=True))
    events = engine.apply(0, Resign())
    ended, over = events
    assert isinstance(ended, RoundEnded)
    assert ended.ended_by == "resign"
    assert (ended.result.hands, ended.result.left, ended.result.score) == (1, 50, 1)
    assert not ended.result.passed
    assert over == GameOver(score=1, seed=None)
    rejected(engine, Place(0), Reason.GAME_OVER)
    assert engine.result().score == 1
    assert not engine.result().completed


def test_game_over_reveals_the_seed() -> None:
    engine = BlackjackPiles.new(Config(), "failing")
    assert engine.view(0).seed is None
    assert engine.commitment == commitment("failing")
    events = engine.apply(0, Resign())
    assert events[-1] == GameOver(score=0, seed="failing")
    assert engine.view(None).seed == "failing"


def test_result_before_the_end_is_an_error() -> None:
    with pytest.raises(ValueError):
        game("KS").result()


# Rejections ----------------------------------------------------------------------------------


def test_rejection_reasons() -> None:
    engine = game("KS", "5D")
    rejected(engine, Place(0), Reason.NOT_YOUR_TURN, seat=1)
    rejected(engine, "place", Reason.BAD_ACTION)
    rejected(engine, Place("0"), Reason.BAD_ACTION)  # type: ignore[arg-type]
    rejected(engine, Place(True), Reason.BAD_ACTION)
    rejected(engine, Cash([0, 1]), Reason.BAD_ACTION)  # type: ignore[arg-type]
    rejected(engine, Move(0, None), Reason.BAD_ACTION)  # type: ignore[arg-type]
    rejected(engine, Place(5), Reason.ILLEGAL)
    rejected(engine, Place(-1), Reason.ILLEGAL)


def test_actions_decode_from_the_wire() -> None:
    assert msgspec.convert({"type": "place", "pile": 2}, Action) == Place(2)
    assert msgspec.convert({"type": "cash", "piles": [0, 3], "stock": True}, Action) == Cash(
        (0, 3), stock=True
    )
    assert msgspec.convert({"type": "move", "source": 0, "target": 1}, Action) == Move(0, 1)
    assert msgspec.convert({"type": "end_round"}, Action) == EndRound()
    assert msgspec.convert({"type": "resign"}, Action) == Resign()


def test_config_validation() -> None:
    assert Config().first_round == 1
    for bad in (0, 8, True):
        with pytest.raises(ValueError):
            Config(first_round=bad)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"rounds": 3}, Config)


def test_from_order_needs_a_full_deck_per_round() -> None:
    with pytest.raises(ValueError):
        BlackjackPiles.from_order(Config(), [standard_deck()])
    with pytest.raises(ValueError):
        BlackjackPiles.from_order(Config(first_round=7), [standard_deck()[:-1]])
    with pytest.raises(ValueError):
        BlackjackPiles.from_order(Config(first_round=7), [[*standard_deck()[:-1], "AS"]])


def test_default_action_places_on_the_first_pile() -> None:
    engine = game("KS", "5D")
    assert engine.default_action(0) == Place(0)
    assert engine.default_action(1) is None


# Fairness ------------------------------------------------------------------------------------


def test_deal_order_is_the_seeded_shuffle_per_round() -> None:
    orders = BlackjackPiles.deal_order(Config(), "s")
    assert len(orders) == 7
    engine = BlackjackPiles.new(Config(), "s")
    dealt = engine.dealt()
    assert dealt[0] == orders[0][:1]
    assert dealt[1:] == [[]] * 6
    for number, cards in enumerate(orders, start=1):
        assert verify_deal("s", commitment("s"), standard_deck(), cards, f"round:{number}") is None
    assert BlackjackPiles.deal_order(Config(first_round=6), "s") == orders[5:]


# Properties ----------------------------------------------------------------------------------


def visible(view_piles: list[list[str]], top: str | None) -> set[str]:
    cards = {card for pile in view_piles for card in pile}
    return cards | ({top} if top else set())


def shown_by(before: View, action: Action, after: View, order: Sequence[str]) -> set[str]:
    """The cards a player may see while ``action`` plays: those on view before and after it,
    and the stock's face-up top as the action leaves it (``order`` is the round's deck). When
    the action ends the round and the next one starts at once, that top counts as left on the
    table but no view shows it: only the event that turned it face up does."""
    drawn = len(order) - before.stock_count
    if isinstance(action, Place) or (isinstance(action, Cash) and action.stock):
        drawn += 1
    face_up = set(order[drawn : drawn + 1])
    return visible(before.piles, before.stock_top) | visible(after.piles, after.stock_top) | face_up


def named_cards(engine: BlackjackPiles, events: list[Event]) -> set[str]:
    """Every card ``events`` name, as a spectator receives them."""
    json = msgspec.json.encode([engine.event_view(event, None) for event in events]).decode()
    return set(CARD.findall(json))


def default_by_priority(legal: list[Action]) -> Action | None:
    """The documented timer choice: end_round, else the first place, else the first cash."""
    for kind in (EndRound, Place, Cash):
        chosen = [action for action in legal if isinstance(action, kind)]
        if chosen:
            return chosen[0]
    return None


def play_random(
    data: st.DataObject, engine: BlackjackPiles, config: Config, steps: int
) -> list[Action]:
    """Play random legal actions (mixed with the bot's, so that later rounds are reached)."""
    actions: list[Action] = []
    seed = engine.seed
    assert seed is not None
    orders = BlackjackPiles.deal_order(config, seed)
    cashed: list[str] = []
    for _ in range(steps):
        if engine.over:
            break
        legal = engine.legal_actions(0)
        assert legal, "a running game always offers an action"
        assert engine.default_action(0) == default_by_priority(legal)
        before = engine.view(0)
        if data.draw(st.booleans(), label="bot"):
            action = greedy(before, legal)
        else:
            choices = [a for a in legal if not isinstance(a, Resign)] or legal
            action = data.draw(st.sampled_from(choices), label="action")
        events = engine.apply(0, action)
        actions.append(action)
        after = engine.view(0)
        played = orders[before.round - config.first_round]
        assert named_cards(engine, events) <= shown_by(before, action, after, played)
        for event in events:
            if isinstance(event, Cashed):
                cashed += event.cards
            if isinstance(event, RoundStarted):
                cashed = []
        # No hidden card in the view.
        for viewer in (0, None):
            json = msgspec.json.encode(engine.view(viewer)).decode()
            assert set(CARD.findall(json)) <= visible(after.piles, after.stock_top)
        assert after.seed == (seed if engine.over else None)
        # Cards are conserved: piles + cashed + stock = the round's deck.
        order = orders[after.round - config.first_round]
        stock = order[len(order) - after.stock_count :]
        on_piles = [card for pile in after.piles for card in pile]
        assert collections.Counter(on_piles + cashed + stock) == collections.Counter(order)
        assert after.left == len(on_piles) + after.stock_count
        # The revealed cards are how the seeded deal begins.
        for revealed, full in zip(engine.dealt(), orders, strict=True):
            assert revealed == full[: len(revealed)]
        for result in after.results:
            assert result.bonus == round_bonus(result.left)
            assert result.score == (result.hands + result.bonus) * result.round
            assert result.left > 0
    return actions


FACE_UP_TOP_SEED = "\xa6\U000cf701\U000a9737\x00"
"""The seed with which hypothesis found a round ended by its face-up stock top."""

ROUND_4_LEAVING_A_FACE_UP_TOP = (
    "0 0 1 2 3 1 01 2 012 0 3 3 0 1 2 2 0 1 013 1 013 0 023 3 1 1 2 3 0 0 023 013 0 0 01 0 3 2 1 "
    "01 1 1 012 0 0 0123 3 1 123 3 2 1 012 2 1 3 0 0 1 2 12 2 1 2 3"
)
"""Round 4 of :data:`FACE_UP_TOP_SEED` as hypothesis played it: one digit places the stock's top
on that pile, several digits cash those piles' tops. The last place fills the last free slot; the
new face-up top (6C) fits nowhere, so the round ends by itself, passes, and round 5 starts: only
the ``placed`` event ever shows 6C."""


def test_a_round_ended_by_its_face_up_top_shows_that_top_only_in_the_event() -> None:
    config = Config(first_round=4)
    engine = BlackjackPiles.new(config, FACE_UP_TOP_SEED)
    order = BlackjackPiles.deal_order(config, FACE_UP_TOP_SEED)[0]
    for token in ROUND_4_LEAVING_A_FACE_UP_TOP.split():
        action: Action = Place(int(token)) if len(token) == 1 else Cash(tuple(map(int, token)))
        before = engine.view(0)
        events = engine.apply(0, action)
        assert named_cards(engine, events) <= shown_by(before, action, engine.view(0), order)
    placed, ended, started = events
    assert placed == Placed(card="2D", pile=3, stock_top="6C", stock_count=1)
    assert isinstance(ended, RoundEnded) and ended.ended_by == "auto" and ended.advanced
    assert ended.result.left == 13  # 11 on the piles, 6C and the card under it in the stock
    assert isinstance(started, RoundStarted) and started.round == 5
    assert engine.dealt()[0][-1] == "6C"


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(data=st.data(), seed=st.text(max_size=8), first_round=st.integers(1, 7))
def test_random_play_keeps_every_invariant(
    data: st.DataObject, seed: str, first_round: int
) -> None:
    config = Config(first_round=first_round)
    engine = BlackjackPiles.new(config, seed)
    actions = play_random(data, engine, config, 150)
    # Replays from the same seed and actions give identical bytes.
    replay = BlackjackPiles.new(Config(first_round=first_round), seed)
    for action in actions:
        replay.apply(0, action)
    assert replay.dump() == engine.dump()
    # Dump and load round-trip.
    loaded = BlackjackPiles.load(engine.dump())
    assert loaded.dump() == engine.dump()
    assert loaded.view(0) == engine.view(0)
    assert loaded.legal_actions(0) == engine.legal_actions(0)


GARBAGE = st.one_of(
    st.builds(Place, st.integers(-3, 8)),
    st.builds(
        Cash,
        st.lists(st.integers(-1, 6), max_size=7).map(tuple),
        st.booleans(),
    ),
    st.builds(Move, st.integers(-1, 6), st.integers(-1, 6)),
    st.just(EndRound()),
)


@PROPERTY
@given(data=st.data(), seed=st.text(max_size=8), action=GARBAGE, seat=st.integers(0, 2))
def test_an_action_is_applied_exactly_when_it_is_legal(
    data: st.DataObject, seed: str, action: Action, seat: int
) -> None:
    config = Config(first_round=data.draw(st.integers(1, 7)))
    engine = BlackjackPiles.new(config, seed)
    play_random(data, engine, config, data.draw(st.integers(0, 60)))
    legal = engine.legal_actions(seat)
    if action in legal:
        engine.apply(seat, action)
        return
    before = engine.dump()
    with pytest.raises(Rejected) as caught:
        engine.apply(seat, action)
    expected = Reason.GAME_OVER if engine.over else Reason.NOT_YOUR_TURN if seat else Reason.ILLEGAL
    assert caught.value.reason == expected
    assert engine.dump() == before
