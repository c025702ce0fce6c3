"""BlackDrez properties over random games: conservation, no leaks, replays, rejections."""

from __future__ import annotations

import itertools
import re
from collections import Counter

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from blackdrez.games.base import Reason, Rejected
from blackdrez.games.blackdrez.rules import (
    SYSTEM,
    Action,
    BlackDrez,
    Config,
    EndGame,
    Hit,
    Stand,
    StartRound,
    Withdraw,
    Withdrew,
    hand_value,
)
from blackdrez.games.cards import FIGURE_POINTS, pokerdrez_deck
from tests.games.test_blackdrez_helpers import table_cards

CARD = re.compile(rb"\b[QRBNPJ][1-9]\b")
SEEDS = st.text(alphabet="0123456789abcdef-", max_size=16).map(lambda text: f"seed:{text}")
CONFIGS = st.builds(
    Config,
    seats=st.integers(2, 8),
    decks=st.sampled_from([None, 1, 2]),
    max_rounds=st.sampled_from([None, None, 1, 3]),
)


def cards_in(value: object) -> Counter[bytes]:
    """The card names in ``value``'s JSON form."""
    return Counter(CARD.findall(msgspec.json.encode(value)))


def dealt_counter(engine: BlackDrez) -> Counter[bytes]:
    return Counter(card.encode() for card in engine.dealt()[0])


def expected_reason(engine: BlackDrez, seat: int, action: Action) -> Reason:
    """The reason RULES.md and the contract give for rejecting ``action`` (known not legal)."""
    state = engine.state
    if engine.over:
        return Reason.GAME_OVER
    if isinstance(action, StartRound | EndGame):
        return Reason.NOT_YOUR_TURN if seat != SYSTEM else Reason.ILLEGAL
    if state.phase == "between_rounds":
        return Reason.NOT_YOUR_TURN
    if 0 <= seat < state.config.seats and state.status[seat] not in ("playing", "stood"):
        return Reason.NOT_IN_ROUND
    if seat != state.to_act:
        return Reason.NOT_YOUR_TURN
    return Reason.ILLEGAL


def is_legal(engine: BlackDrez, seat: int, action: Action) -> bool:
    if isinstance(action, StartRound):
        normal = StartRound(seats=sorted(action.seats))
        return not action.newcomers and normal in engine.legal_actions(seat)
    return action in engine.legal_actions(seat)


def any_action(seats: int) -> st.SearchStrategy[Action]:
    seat_lists = st.lists(st.integers(-1, seats), max_size=seats + 1)
    return st.one_of(
        st.sampled_from([Hit(), Withdraw(), Stand(), EndGame()]),
        st.builds(StartRound, seats=seat_lists),
    )


def check_position(engine: BlackDrez) -> None:
    """Cards conserved; views show exactly the dealt cards; the seed only when over."""
    state = engine.state
    stock = Counter(state.order[state.drawn :])
    assert stock + table_cards(engine) == Counter(pokerdrez_deck(state.config.deck_count))
    dealt = engine.dealt()[0]
    assert dealt == engine.deal_order(state.config, state.seed)[0][: len(dealt)]
    active = [seat for seat, status in enumerate(state.status) if status in ("playing", "stood")]
    if state.phase == "playing":
        # The seat on turn holds the lowest hand (after a stand, every hand is level).
        assert state.to_act in active
        assert len(active) >= 2
        assert state.values[state.to_act] == min(state.values[seat] for seat in active)
        assert all(state.values[seat] < 11 for seat in active)
    else:
        assert state.to_act is None
        assert state.pot == []
        assert all(hand == [] for hand in state.hands)
    for viewer in (None, 0, state.config.seats - 1):
        view = engine.view(viewer)
        assert cards_in(view) == dealt_counter(engine)
        assert (state.seed.encode() in msgspec.json.encode(view)) == engine.over
        assert view.stock == stock.total()


@settings(max_examples=150, deadline=None)
@given(config=CONFIGS, seed=SEEDS, data=st.data())
def test_random_games_keep_every_invariant(config: Config, seed: str, data: st.DataObject) -> None:
    engine = BlackDrez.new(config, seed)
    log: list[tuple[int, Action]] = []
    events_seen: list = []
    check_position(engine)
    while not engine.over:
        # A random action from a random seat, tried on a restored copy: legal ones succeed,
        # the others are rejected with the right reason and change nothing.
        seat = data.draw(st.integers(SYSTEM, config.seats), label="probe seat")
        probe = data.draw(any_action(config.seats), label="probe")
        copy = BlackDrez.load(engine.dump())
        before = copy.dump()
        if is_legal(copy, seat, probe):
            copy.apply(seat, probe)
        else:
            try:
                copy.apply(seat, probe)
            except Rejected as rejected:
                assert rejected.reason is expected_reason(copy, seat, probe), rejected.detail
                assert copy.dump() == before
            else:
                raise AssertionError(f"{probe!r} from seat {seat} was accepted")
        # The game itself moves on with a random legal action.
        if engine.state.phase == "between_rounds":
            seat = SYSTEM
            *starts, end = engine.legal_actions(SYSTEM)
            assert end == EndGame()
            if data.draw(st.integers(0, 9), label="end the game?") == 0:
                action = end
            else:
                action = data.draw(st.sampled_from(starts), label="start")
                newcomers = data.draw(
                    st.lists(st.sampled_from(action.seats), unique=True, max_size=2)
                )
                action = StartRound(seats=action.seats, newcomers=newcomers)
        else:
            seat = engine.state.to_act
            assert seat is not None
            assert engine.default_action(seat) == Withdraw()
            action = data.draw(st.sampled_from(engine.legal_actions(seat)), label="action")
        events = engine.apply(seat, action)
        log.append((seat, action))
        assert events
        dealt = dealt_counter(engine)
        for event in events:
            if isinstance(event, Withdrew):
                assert len(event.kept) == (len(event.kept) + len(event.left)) // 2
            for viewer in (None, 0):
                shown = engine.event_view(event, viewer)
                assert cards_in(shown) <= dealt
                if seed.encode() in msgspec.json.encode(shown):
                    assert engine.over
        events_seen.extend(events)
        check_position(engine)
        assert BlackDrez.load(engine.dump()).dump() == engine.dump()
    result = engine.result()
    assert result is not None
    assert engine.legal_actions(SYSTEM) == []
    assert all(engine.legal_actions(seat) == [] for seat in range(config.seats))
    # Replaying the same seed and actions gives the same events and the same bytes.
    replay = BlackDrez.new(config, seed)
    replayed: list = []
    for seat, action in log:
        wire = msgspec.json.encode(action)
        replayed.extend(replay.apply(seat, msgspec.json.decode(wire, type=Action)))
    assert replayed == events_seen
    assert replay.dump() == engine.dump()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(pokerdrez_deck()), max_size=8))
def test_hand_value_is_the_best_joker_assignment(cards: list[str]) -> None:
    jokers = sum(card[0] == "J" for card in cards)
    base = sum(FIGURE_POINTS[card[0]] for card in cards if card[0] != "J")
    totals = [base + sum(choice) for choice in itertools.product((1, 6), repeat=jokers)]
    fitting = [total for total in totals if total <= 11]
    assert hand_value(cards) == (max(fitting) if fitting else min(totals))
