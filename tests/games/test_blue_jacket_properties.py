"""Blue Jacket properties over random games: conservation, hidden cards, replays, completeness."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blackdrez.games.base import Reason, Rejected
from blackdrez.games.blue_jacket.bots import greedy
from blackdrez.games.blue_jacket.rules import (
    LOCATIONS,
    Action,
    BlueJacket,
    Config,
    Deal,
    Interchange,
    Move,
    Resign,
)
from tests.games.test_blue_jacket_helpers import DECK, cards_in, everywhere, stock_of

seeds = st.text(min_size=1, max_size=16)
choices = st.lists(st.integers(min_value=0, max_value=10**6), min_size=20, max_size=200)

ROW_LOCATIONS = [location for location in LOCATIONS if location.startswith("r")]
CANDIDATES: list[Action] = [
    *(Move(source, target) for source in LOCATIONS for target in LOCATIONS),
    *(Interchange(a, b) for a in ROW_LOCATIONS for b in ROW_LOCATIONS),
    Deal(),
]
"""Every well-formed action but resign."""


def pick(engine: BlueJacket, choice: int) -> Action:
    """A legal action: mostly the greedy bot's (to reach late positions), sometimes any other."""
    legal = engine.legal_actions(0)
    if choice % 8:
        return greedy(engine.view(0), legal)
    if choice % 101 == 0:
        return Resign()
    plays = [action for action in legal if not isinstance(action, Resign)]
    return plays[choice % len(plays)]


def play(seed: str, picks: list[int], budget: int = 0) -> Iterator[tuple[BlueJacket, Action, list]]:
    """Play a game from ``seed``; yield ``(engine, action, events)`` after each action."""
    engine = BlueJacket.new(Config(progress_budget=budget), seed)
    for choice in picks:
        if engine.over:
            return
        action = pick(engine, choice)
        events = engine.apply(0, action)
        yield engine, action, events


def visible(engine: BlueJacket) -> Counter[str]:
    return DECK - Counter(stock_of(engine))


@settings(max_examples=80, deadline=None)
@given(seeds, choices)
def test_cards_are_conserved_and_hidden_cards_never_shown(seed: str, picks: list[int]) -> None:
    order = BlueJacket.deal_order(Config(), seed)[0]
    score = 0
    for engine, _, events in play(seed, picks, budget=2000):
        assert everywhere(engine) == DECK
        shown = visible(engine)
        for viewer in (0, None):
            assert cards_in(engine.view(viewer)) == shown
            for event in events:
                assert not cards_in(engine.event_view(event, viewer)) - shown
        assert engine.dealt()[0] == order[: len(engine.dealt()[0])]
        view = engine.view(None)
        assert view.seed == (seed if engine.over else None)
        assert view.score >= score
        score = view.score


@settings(max_examples=50, deadline=None)
@given(seeds, choices)
def test_replays_give_identical_dumps_and_dumps_round_trip(seed: str, picks: list[int]) -> None:
    first = [(action, events, engine.dump()) for engine, action, events in play(seed, picks)]
    second = [(action, events, engine.dump()) for engine, action, events in play(seed, picks)]
    assert first == second
    for _, _, dump in first:
        restored = BlueJacket.load(dump)
        assert restored.dump() == dump


@settings(max_examples=30, deadline=None)
@given(seeds, choices, st.integers(min_value=0, max_value=20))
def test_legal_actions_are_exactly_the_accepted_ones(
    seed: str, picks: list[int], stride: int
) -> None:
    for step, (engine, _, _) in enumerate(play(seed, picks)):
        if engine.over or step % (stride + 5):
            continue
        legal = engine.legal_actions(0)
        assert len(set(legal)) == len(legal)
        before = engine.dump()
        for action in CANDIDATES:
            if action in legal:
                copy = BlueJacket.load(before)
                copy.apply(0, action)
                assert copy.dump() != before
            else:
                with pytest.raises(Rejected) as caught:
                    engine.apply(0, action)
                assert caught.value.reason is Reason.ILLEGAL
                assert engine.dump() == before


def naive_progress(engine: BlueJacket, cap: int) -> bool | None:
    """Whether some action sequence raises the score: plain search over legal actions."""
    score = engine.score
    stack = [engine.dump()]
    seen: set[bytes] = set()
    while stack:
        if len(seen) > cap:
            return None
        dump = stack.pop()
        node = BlueJacket.load(dump)
        for action in node.legal_actions(0):
            if isinstance(action, Resign):
                continue
            child = BlueJacket.load(dump)
            child.apply(0, action)
            if child.score > score:
                return True
            view = child.view(0)
            key = msgspec.json.encode([view.rows, view.bottom, view.stock_count])
            if not child.over and key not in seen:
                seen.add(key)
                stack.append(child.dump())
    return False


@settings(max_examples=40, deadline=None)
@given(seeds, choices)
def test_progress_search_agrees_with_a_plain_search(seed: str, picks: list[int]) -> None:
    for engine, _, _ in play(seed, picks):
        if engine.over:
            continue
        expected = naive_progress(engine, cap=300)
        if expected is not None:
            assert engine.foundation_progress_possible(budget=100_000) is expected


def test_progress_search_finds_both_answers_in_real_games() -> None:
    answers: Counter[bool | None] = Counter()
    for index in range(30):
        for engine, _, _ in play(f"progress:{index}", list(range(1, 200))):
            if not engine.over:
                answers[engine.foundation_progress_possible()] += 1
    assert answers[True] > 0 and answers[False] > 0 and answers[None] == 0
