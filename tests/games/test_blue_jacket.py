"""Blue Jacket: every rule and Decision of RULES.md section 3, on constructed positions."""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest

from blackdrez.games.base import Reason, Rejected
from blackdrez.games.blue_jacket.rules import (
    Action,
    BlueJacket,
    Config,
    Deal,
    Dealt,
    GameOver,
    Interchange,
    Interchanged,
    Move,
    Moved,
    NoProgress,
    Resign,
    is_starter,
    next_card,
    reveal_order,
)
from blackdrez.games.cards import RANKS, SUITS, standard_deck
from blackdrez.games.shuffle import commitment, shuffled
from tests.games.test_blue_jacket_helpers import (
    DECK,
    USELESS_ROWS,
    USELESS_STOCK,
    position,
    stock_of,
)

SEED = "blue-jacket-test"


def rejected(
    engine: BlueJacket, action: object, reason: Reason = Reason.ILLEGAL, seat: int = 0
) -> str:
    """Assert ``action`` is rejected with ``reason`` and changes nothing; return the detail."""
    before = engine.dump()
    with pytest.raises(Rejected) as caught:
        engine.apply(seat, action)  # type: ignore[arg-type]
    assert caught.value.reason is reason
    assert engine.dump() == before
    return caught.value.detail


def legal_moves(engine: BlueJacket) -> set[tuple[str, str]]:
    return {(a.source, a.target) for a in engine.legal_actions(0) if isinstance(a, Move)}


# Config and the deal ---------------------------------------------------------------------------


def test_config_defaults_and_validation() -> None:
    assert Config().progress_budget > 0
    with pytest.raises(ValueError, match="progress_budget"):
        Config(progress_budget=-1)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"progress_budget": 10**9}, Config)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"decks": 2}, Config)


def test_starters_are_the_first_two_then_a_three_and_a_four_of_other_suits() -> None:
    head = ["3S", "2S", "3S", "4H", "3D", "4S", "4D"]
    rest = list((Counter(standard_deck(2)) - Counter(head)).elements())
    game = BlueJacket.from_order(Config(), head + rest)
    view = game.view(0)
    assert [view.rows[r][0] for r in range(3)] == [["2S"], ["3D"], ["4H"]]
    others = ["3S", "3S", "4S", "4D", *rest]
    assert [pile for pile in view.rows[0][1:]] == [[card] for card in others[0:7]]
    assert [pile for pile in view.rows[1][1:]] == [[card] for card in others[7:14]]
    assert [pile for pile in view.rows[2][1:]] == [[card] for card in others[14:21]]
    assert view.bottom == [[card] for card in others[21:29]]
    assert stock_of(game) == others[29:]
    assert view.stock_count == 72
    assert game.dealt() == [["2S", "3D", "4H", *others[:29]]]


def test_from_order_needs_exactly_two_decks() -> None:
    deck = standard_deck(2)
    with pytest.raises(ValueError, match="two standard"):
        BlueJacket.from_order(Config(), deck[:-1])
    with pytest.raises(ValueError, match="two standard"):
        BlueJacket.from_order(Config(), [*deck[:-1], "AS"])


def test_new_game_follows_the_seed_and_commits_to_it() -> None:
    game = BlueJacket.new(Config(), SEED)
    order = BlueJacket.deal_order(Config(), SEED)
    assert order == [reveal_order(shuffled(standard_deck(2), SEED, "deck"))]
    assert Counter(order[0]) == DECK
    assert game.dealt() == [order[0][:32]]
    assert game.seed == SEED
    assert game.commitment == commitment(SEED)
    assert game.view(0).commitment == commitment(SEED)
    assert game.view(0).seed is None
    again = BlueJacket.from_order(Config(), shuffled(standard_deck(2), SEED, "deck"))
    assert again.view(0).rows == game.view(0).rows
    assert again.seed is None and again.commitment is None


def test_nine_deals_of_eight_cards_each_then_no_more() -> None:
    game = BlueJacket.new(Config(progress_budget=0), SEED)
    order = BlueJacket.deal_order(Config(), SEED)[0]
    for deal in range(9):
        assert game.can_deal() and game.view(0).can_deal
        before = game.view(0).bottom
        events = game.apply(0, Deal())
        dealt = order[32 + 8 * deal : 40 + 8 * deal]
        assert events[0] == Dealt(cards=dealt, stock_count=72 - 8 * (deal + 1))
        assert game.view(0).bottom == [
            [*pile, card] for pile, card in zip(before, dealt, strict=True)
        ]
        assert game.dealt() == [order[: 40 + 8 * deal]]
        if game.over:
            break
    assert game.stock_count == 0 or game.over
    if not game.over:
        assert not game.can_deal()
        assert "stock is empty" in rejected(game, Deal())


def test_a_deal_puts_one_card_on_every_bottom_pile_even_empty_ones() -> None:
    game = position(USELESS_ROWS, "KS,KH - QD", stock=USELESS_STOCK)
    game.apply(0, Deal())
    assert game.view(0).bottom == [
        ["KS", "KH", "JS"],
        ["JH"],
        ["QD", "JD"],
        ["JC"],
        ["QS"],
        ["QH"],
        ["QD"],
        ["QC"],
    ]
    assert game.stock_count == 8


def test_no_deal_while_a_row_pile_is_empty() -> None:
    rows = (USELESS_ROWS[0], USELESS_ROWS[1], "9S 9H 9D 9C TS TH TD")
    game = position(rows, "KS KH", stock=USELESS_STOCK)
    assert not game.can_deal()
    assert Deal() not in game.legal_actions(0)
    assert "every row pile" in rejected(game, Deal())


# Moves -----------------------------------------------------------------------------------------


def test_build_same_suit_three_ranks_up_on_a_foundation_pile() -> None:
    game = position(("2S,5S 7H", "3D", "4C,7C,TC"), "8S 8H 9D KC TH")
    moves = legal_moves(game)
    assert ("b1", "r1.1") in moves
    assert ("b5", "r1.1") not in moves
    assert "does not build" in rejected(game, Move("b2", "r1.1"))
    assert "does not build" in rejected(game, Move("b3", "r2.1"))
    events = game.apply(0, Move("b1", "r1.1"))
    assert events[0] == Moved(card="8S", source="b1", target="r1.1", score=7)
    assert game.view(0).rows[0][0] == ["2S", "5S", "8S"]
    game.apply(0, Move("b4", "r3.1"))
    assert game.view(0).rows[2][0] == ["4C", "7C", "TC", "KC"]


def test_every_card_builds_on_the_same_suit_three_ranks_below_and_starts_its_row() -> None:
    """The helpers the engine asks thousands of times a game (worked out once, in tables), for
    every card: what builds on it (RULES.md: same suit, three up; nothing on a Jack or above)
    and which row it starts (2, 3 and 4)."""
    for suit in SUITS:
        for index, rank in enumerate(RANKS):
            card = f"{rank}{suit}"
            above = RANKS[index + 3] + suit if index + 3 < len(RANKS) else None
            assert next_card(card) == above, card
            assert [is_starter(card, row) for row in range(3)] == [
                rank == starter for starter in "234"
            ], card
    assert next_card("7H") == "TH" and next_card("TH") == "KH" and next_card("JH") is None


def test_a_pile_holds_at_most_four_cards() -> None:
    game = position(("2S,5S,8S,JS", "3H,6H,9H,QH", "4D,7D,TD,KD"), "AS JS QH KD 2S")
    targets = {target for _, target in legal_moves(game)}
    assert not targets & {"r1.1", "r2.1", "r3.1"}
    for source in ("b1", "b2", "b3", "b4", "b5"):
        for target in ("r1.1", "r2.1", "r3.1"):
            rejected(game, Move(source, target))


def test_a_misplaced_row_pile_accepts_nothing_until_its_card_leaves() -> None:
    game = position(("7H", "3D", "4C"), "TH 2H -")
    assert "accepts nothing" in rejected(game, Move("b1", "r1.1"))
    assert "accepts nothing" in rejected(game, Move("b2", "r1.1"))
    game.apply(0, Move("r1.1", "b3"))
    assert game.view(0).rows[0][0] == []
    game.apply(0, Move("b2", "r1.1"))
    assert game.view(0).rows[0][0] == ["2H"]


def test_an_empty_row_pile_takes_only_its_rows_starting_rank_of_any_suit() -> None:
    game = position(("2S", "3S", "4S"), "2H 3H 4H 2C 5S")
    moves = legal_moves(game)
    assert {("b1", "r1.2"), ("b2", "r2.2"), ("b3", "r3.2"), ("b4", "r1.2")} <= moves
    assert ("b1", "r2.2") not in moves and ("b2", "r3.2") not in moves
    assert "only a 3" in rejected(game, Move("b1", "r2.2"))
    assert "only a 2" in rejected(game, Move("b5", "r1.2"))
    game.apply(0, Move("b1", "r1.2"))
    game.apply(0, Move("b4", "r1.3"))
    assert game.view(0).rows[0][:3] == [["2S"], ["2H"], ["2C"]]
    assert game.score == 5


def test_interchange_swaps_two_single_misplaced_cards_of_each_others_starting_rank() -> None:
    game = position(("3H 2S", "2C 4S", "4D 3C"))
    legal = [a for a in game.legal_actions(0) if isinstance(a, Interchange)]
    assert Interchange("r1.1", "r2.1") in legal and Interchange("r2.1", "r1.1") in legal
    assert Interchange("r2.2", "r3.2") in legal and Interchange("r3.2", "r2.2") in legal
    assert len(legal) == 4
    events = game.apply(0, Interchange("r2.1", "r1.1"))
    assert events[0] == Interchanged(a="r2.1", b="r1.1", card_a="2C", card_b="3H", score=4)
    view = game.view(0)
    assert view.rows[0][0] == ["2C"] and view.rows[1][0] == ["3H"]


def test_interchange_refused_when_the_cards_do_not_fit_each_others_rows() -> None:
    game = position(("3H 2S 4H", "4C 5S", "2D"))
    assert "starting rank of the other" in rejected(game, Interchange("r1.1", "r2.1"))
    assert "starting rank of the other" in rejected(game, Interchange("r1.3", "r2.1"))
    assert "two different rows" in rejected(game, Interchange("r1.1", "r1.2"))
    assert "two row piles" in rejected(game, Interchange("r1.1", "b1"))
    assert "two row piles" in rejected(game, Interchange("aces", "r1.1"))
    built = position(("3H,6H", "2C"))
    assert "one card each" in rejected(built, Interchange("r1.1", "r2.1"))
    empty = position(("3H", ""))
    assert "one card each" in rejected(empty, Interchange("r1.1", "r2.1"))


def test_any_available_ace_goes_to_the_aces_pile_and_nothing_else_does() -> None:
    game = position(("AH 2S", "3S", "4S"), "AS AD,5S")
    moves = legal_moves(game)
    assert {("b1", "aces"), ("r1.1", "aces")} <= moves
    assert "Aces only" in rejected(game, Move("b2", "aces"))
    game.apply(0, Move("b1", "aces"))
    game.apply(0, Move("r1.1", "aces"))
    assert game.view(0).aces == ["AS", "AH"]
    assert game.score == 5
    assert "nothing leaves" in rejected(game, Move("aces", "b1"))
    assert "nothing leaves" in rejected(game, Move("aces", "r1.1"))


def test_an_empty_bottom_pile_takes_any_single_available_card() -> None:
    game = position(("7H 2S,5S", "3S", "4S"), "AS,9C 6D -")
    moves = legal_moves(game)
    assert {("b1", "b3"), ("r1.1", "b3")} <= moves
    assert "only when it is empty" in rejected(game, Move("b1", "b2"))
    game.apply(0, Move("b1", "b3"))
    assert game.view(0).bottom[:3] == [["AS"], ["6D"], ["9C"]]


def test_decision_a_lone_bottom_card_does_not_move_to_another_bottom_pile() -> None:
    game = position(("2S",), "9C -")
    assert ("b1", "b2") not in legal_moves(game)
    assert "changes nothing" in rejected(game, Move("b1", "b2"))


def test_decision_cards_on_a_foundation_stay_there() -> None:
    game = position(("2S,5S 2H", "3S", "4S"), "- 9C")
    moves = legal_moves(game)
    assert not {source for source, _ in moves} & {"r1.1", "r1.2", "r2.1", "r3.1"}
    assert "foundation" in rejected(game, Move("r1.1", "b1"))
    assert "foundation" in rejected(game, Move("r1.2", "b1"))
    assert "foundation" in rejected(game, Move("r1.2", "r1.3"))


def test_only_top_cards_move() -> None:
    game = position(("2S",), "5S,9C -")
    assert ("b1", "r1.1") not in legal_moves(game)
    rejected(game, Move("b1", "r1.1"))
    events = game.apply(0, Move("b1", "b2"))
    assert events[0].card == "9C"  # type: ignore[union-attr]
    assert "empty" in rejected(game, Move("r1.2", "b1"))


def test_decision_aces_are_never_moved_for_the_player() -> None:
    stock = "AS AH AD AC JS JH JD JC"
    game = position(USELESS_ROWS, "KS KH KD KC QS QH QD QC", stock=stock)
    game.apply(0, Deal())
    view = game.view(0)
    assert [pile[-1] for pile in view.bottom[:4]] == ["AS", "AH", "AD", "AC"]
    assert view.aces == [] and view.score == 0
    rows = ("AS 7H", "3S", "4S")
    held = position(rows, "2H")
    held.apply(0, Move("b1", "r1.3"))
    assert held.view(0).rows[0][0] == ["AS"] and held.view(0).aces == []


# Score and the end -----------------------------------------------------------------------------


def test_score_counts_the_aces_pile_and_every_foundation_row_pile() -> None:
    game = position(("2S,5S 7H 3H", "3D 4D", "4C,7C,TC"), aces="AS AH")
    assert game.score == 2 + 2 + 1 + 3
    assert game.view(None).score == game.score


def won_but_one() -> BlueJacket:
    rows = tuple(
        " ".join(",".join(f"{rank}{suit}" for rank in ranks) for suit in "SHDCSHDC")
        for ranks in (("2", "5", "8", "J"), ("3", "6", "9", "Q"), ("4", "7", "T", "K"))
    )
    game = position(rows, "AC", aces="AS AH AD AS AH AD AC")  # type: ignore[arg-type]
    assert Counter(stock_of(game)) + Counter(game.dealt()[0]) == DECK
    return game


def test_won_when_all_104_cards_are_on_foundations() -> None:
    game = won_but_one()
    assert game.score == 103 and not game.over
    events = game.apply(0, Move("b1", "aces"))
    assert events[-1] == GameOver(score=104, won=True, ending="won", seed=None)
    assert game.over and game.view(0).won and game.view(0).progress is False
    assert game.result().won and game.result().score == 104
    assert game.legal_actions(0) == []
    rejected(game, Resign(), Reason.GAME_OVER)


def test_game_ends_when_no_legal_move_is_left() -> None:
    game = position(USELESS_ROWS, "KS,KH - QD QS QH QC JD JC")
    assert Move("b1", "b2") in game.legal_actions(0)
    events = game.apply(0, Move("b1", "b2"))
    assert events[-1] == GameOver(score=0, won=False, ending="no_moves", seed=None)
    assert game.over and game.result().ending == "no_moves"
    assert game.legal_actions(0) == []


def test_a_legal_deal_counts_as_a_move_left() -> None:
    game = position(USELESS_ROWS, "KS KH KD KC QS QH QD QC", stock=USELESS_STOCK[:23])
    assert game.legal_actions(0) == [Deal(), Resign()]
    assert not game.over
    events = game.apply(0, Deal())
    assert events[-1] == GameOver(score=0, won=False, ending="no_moves", seed=None)


def test_resign_ends_the_game_and_reveals_the_seed() -> None:
    game = BlueJacket.new(Config(), SEED)
    score = game.score
    events = game.apply(0, Resign())
    assert events == [GameOver(score=score, won=False, ending="resigned", seed=SEED)]
    view = game.view(None)
    assert view.over and view.seed == SEED and view.ending == "resigned"
    assert game.result().score == score and game.result().moves == 0
    rejected(game, Deal(), Reason.GAME_OVER)
    rejected(game, Move("b1", "aces"), Reason.GAME_OVER)


def test_result_only_once_over() -> None:
    with pytest.raises(ValueError, match="not over"):
        BlueJacket.new(Config(), SEED).result()


# Seats, reasons, wire form ---------------------------------------------------------------------


def test_only_seat_zero_plays_and_nobody_has_a_turn_timer() -> None:
    game = BlueJacket.new(Config(), SEED)
    assert game.legal_actions(1) == []
    rejected(game, Deal(), Reason.NOT_YOUR_TURN, seat=1)
    rejected(game, Resign(), Reason.NOT_YOUR_TURN, seat=-1)
    assert game.default_action(0) is None and game.default_action(1) is None


@pytest.mark.parametrize(
    "garbage",
    [
        None,
        "deal",
        {"type": "deal"},
        Move("b9", "aces"),
        Move("r4.1", "aces"),
        Move("b1", "r1.0"),
        Move(1, "aces"),  # type: ignore[arg-type]
        Interchange("r1.1", "x"),
        Interchanged(a="r1.1", b="r2.1", card_a="2S", card_b="3S", score=0),
    ],
)
def test_garbage_is_a_bad_action(garbage: object) -> None:
    rejected(BlueJacket.new(Config(), SEED), garbage, Reason.BAD_ACTION)


def test_actions_and_events_on_the_wire() -> None:
    wire = [
        {"type": "move", "source": "b1", "target": "aces"},
        {"type": "interchange", "a": "r1.1", "b": "r2.1"},
        {"type": "deal"},
        {"type": "resign"},
    ]
    actions = [msgspec.convert(item, Action) for item in wire]
    assert actions == [Move("b1", "aces"), Interchange("r1.1", "r2.1"), Deal(), Resign()]
    assert [msgspec.to_builtins(action) for action in actions] == wire


def test_spectators_see_what_the_player_sees() -> None:
    game = BlueJacket.new(Config(), SEED)
    game.apply(0, Deal())
    assert game.view(None) == game.view(0)
    event = Dealt(cards=["AS"], stock_count=1)
    assert game.event_view(event, None) == event


# Progress --------------------------------------------------------------------------------------


def test_progress_now() -> None:
    assert position(("2S",), "AS").foundation_progress_possible() is True
    assert position(("2S",), "5S").foundation_progress_possible() is True
    assert position(("2S 7H",), "2D").foundation_progress_possible() is True
    assert position(("3C 2S", "2H")).foundation_progress_possible() is True
    assert position(("3C", "")).foundation_progress_possible() is True
    assert position(("", "3C")).foundation_progress_possible() is False


def test_progress_by_digging_needs_an_empty_bottom_pile() -> None:
    dig = position(USELESS_ROWS, "AS,9C - KS KH KD KC QS QH")
    assert dig.foundation_progress_possible() is True
    assert dig.foundation_progress_possible(budget=1) is None
    full = position(USELESS_ROWS, "AS,9C KS KH KD KC QS QH QD")
    assert full.foundation_progress_possible() is False
    deep = position(USELESS_ROWS, "AS,9C,9D,9H - - KS KH KD KC QS")
    assert deep.foundation_progress_possible() is False
    deeper = position(USELESS_ROWS, "AS,9C,9D,9H - - - KS KH KD KC")
    assert deeper.foundation_progress_possible() is True


def test_progress_by_emptying_a_row_pile_for_a_starter() -> None:
    game = position(USELESS_ROWS, "2S -")
    assert game.foundation_progress_possible() is True
    blocked = position(USELESS_ROWS, "2S KS KH KD KC QS QH QD")
    assert blocked.foundation_progress_possible() is False
    one_empty = position(USELESS_ROWS, "2S,KS - KH KD KC QS QH QD")
    assert one_empty.foundation_progress_possible() is False


def test_progress_through_the_stock_uses_the_real_order() -> None:
    bottom = "KS KH KD KC QS QH QD QC"
    later = USELESS_STOCK + " 5S 5H 5D 5C 6S 6H 6D AC"
    assert position(USELESS_ROWS, bottom, stock=later).foundation_progress_possible() is True
    assert position(USELESS_ROWS, bottom, stock=USELESS_STOCK).foundation_progress_possible() is (
        False
    )
    rows = (USELESS_ROWS[0], USELESS_ROWS[1], "9S 9H 9D 9C TS TH TD")
    no_deal = position(rows, bottom, stock=later)
    assert no_deal.foundation_progress_possible() is False


def test_no_progress_is_announced_once_and_shown() -> None:
    game = position(USELESS_ROWS, "AS KS,KH - QD QS QH QC JD", budget=1000)
    assert game.view(0).progress is None
    game.apply(0, Move("b2", "b3"))
    assert game.view(0).progress is True
    game = BlueJacket.load(game.dump())
    events = game.apply(0, Move("b1", "aces"))
    assert events == [
        Moved(card="AS", source="b1", target="aces", score=1),
        NoProgress(score=1),
    ]
    assert game.view(0).progress is False and not game.over
    events = game.apply(0, Move("r1.1", "b1"))
    assert events[-1] == GameOver(score=1, won=False, ending="no_moves", seed=None)


def test_progress_search_stays_small_on_a_wide_position() -> None:
    """Many cards free to move, none able to reach a foundation: the search proves it in a few
    hundred nodes (224 today), far under the 4,000 run after every action, and says it ran out
    (``None``), not a guess, when given less. Counted in search nodes, not timed: a wall-clock
    bound failed on a loaded machine (164 ms against 50) with the same search."""
    tall = ("KS,KH,KD,KC,QS,QH,QD", "JS,JH,JD,JC,QC,KS,KH", "6S,6H,6D,6C,7S,7H,7D", "8S,8H,8D,9S")
    game = position(USELESS_ROWS, " ".join(tall))
    assert game.foundation_progress_possible(budget=300) is False
    assert game.foundation_progress_possible(budget=50) is None
