"""Game records: the file format, replay, verification, and the fairness page's own snippet."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest

from blackdrez.games import GAMES, shuffle, verify
from blackdrez.games.blackdrez import rules as blackdrez
from blackdrez.games.blackjack_piles import rules as blackjack_piles
from blackdrez.games.blue_jacket import rules as blue_jacket
from blackdrez.games.cards import pokerdrez_deck, standard_deck
from blackdrez.games.records import Record, decode_record, encode_record, read_record, write_record

FAIRNESS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "fairness.md"
CONFIGS: dict[str, Any] = {
    "blackdrez": blackdrez.Config(seats=3),
    "blackjack_piles": blackjack_piles.Config(),
    "blue_jacket": blue_jacket.Config(),
}


def play(name: str, seed: str, config: Any = None) -> tuple[Any, list[tuple[int, Any]]]:
    """A finished bot game of ``name`` from ``seed`` (with ``config``, by default the one of
    :data:`CONFIGS`): the engine and every (seat, action)."""
    game = GAMES[name]
    engine = game.engine.new(CONFIGS[name] if config is None else config, seed)
    strategies = list(game.strategies)
    actions = []
    while not engine.over:
        seat, action = verify.bot_move(game, engine, strategies)
        engine.apply(seat, action)
        actions.append((seat, action))
    return engine, actions


@pytest.fixture(scope="module", params=list(GAMES))
def finished(request: pytest.FixtureRequest) -> tuple[Any, Record]:
    """Per game: a finished engine and its record, read back from JSON."""
    engine, actions = play(request.param, "records-test")
    return engine, decode_record(encode_record(verify.record_of(engine, actions)))


def test_the_registry_names_every_game_with_its_types() -> None:
    assert GAMES["blackdrez"].engine is blackdrez.BlackDrez
    assert GAMES["blackjack_piles"].action is blackjack_piles.Action
    assert GAMES["blue_jacket"].config is blue_jacket.Config
    assert all(game.engine.game == name for name, game in GAMES.items())


@pytest.mark.parametrize("name", list(GAMES))
def test_deal_order_shuffles_the_canonical_deck_with_the_named_contexts(name: str) -> None:
    game = GAMES[name]
    config = CONFIGS[name]
    orders = game.engine.deal_order(config, "s")
    contexts = game.contexts(config)
    assert len(orders) == len(contexts)
    for order, context in zip(orders, contexts, strict=True):
        assert Counter(order) == Counter(game.deck(config))
        if name != "blue_jacket":  # Blue Jacket reveals its starters first
            assert order == shuffle.shuffled(game.deck(config), "s", context)


def test_canonical_decks() -> None:
    assert GAMES["blackdrez"].deck(blackdrez.Config(seats=6)) == pokerdrez_deck(2)
    assert GAMES["blue_jacket"].deck(blue_jacket.Config()) == standard_deck(2)


def test_a_record_round_trips_through_a_file(finished, tmp_path: Path) -> None:
    _, record = finished
    path = tmp_path / "game.json"
    write_record(record, path)
    assert read_record(path) == record
    text = path.read_text()
    assert text.count("\n") > len(record.actions), "one action a line"
    assert msgspec.json.decode(text)["seed"] == "records-test"


def test_a_record_holds_what_verification_needs(finished) -> None:
    engine, record = finished
    assert record.commitment == shuffle.commitment("records-test")
    assert record.order is None
    assert record.dealt == engine.dealt()
    assert all(isinstance(action, dict) and "type" in action for _, action in record.actions)


def test_replay_gives_the_same_final_state(finished) -> None:
    engine, record = finished
    replayed = verify.replay(record)
    assert replayed.over
    assert replayed.dump() == engine.dump()


def test_steps_yield_every_action_with_its_events(finished) -> None:
    _, record = finished
    engine = verify.start(record)
    steps = list(verify.steps(engine, record))
    assert [step.index for step in steps] == list(range(len(record.actions)))
    assert all(step.events for step in steps)
    assert type(steps[-1].events[-1]).__name__ == "GameOver"


def test_a_game_from_an_explicit_order_records_and_replays_the_order() -> None:
    order = shuffle.shuffled(pokerdrez_deck(), "order")[:30]
    config = blackdrez.Config(seats=2)
    engine = blackdrez.BlackDrez.from_order(config, order)
    engine.apply(blackdrez.SYSTEM, blackdrez.StartRound(seats=[0, 1]))
    actions: list[tuple[int, Any]] = [(blackdrez.SYSTEM, blackdrez.StartRound(seats=[0, 1]))]
    record = verify.record_of(engine, actions)
    assert record.seed is None and record.order == order
    assert verify.replay(decode_record(encode_record(record))).dump() == engine.dump()
    assert verify.verify(record) == [
        "the record has no seed: only a game dealt from a seed can be verified"
    ]


def test_a_rejected_action_is_named_by_its_index(finished) -> None:
    _, record = finished
    broken = msgspec.structs.replace(
        record, actions=[*record.actions[:3], (5, {"type": "resign"}), *record.actions[3:]]
    )
    with pytest.raises(verify.ReplayError, match="action 3 ") as caught:
        verify.replay(broken)
    assert caught.value.index == 3


def test_a_malformed_action_is_named_by_its_index(finished) -> None:
    _, record = finished
    broken = msgspec.structs.replace(record, actions=[(0, {"type": "fly"})])
    with pytest.raises(verify.ReplayError, match=r"action 0 .* is not a .* action"):
        verify.replay(broken)


def test_unknown_games_and_bad_configs_are_clear_errors() -> None:
    with pytest.raises(verify.ReplayError, match="unknown game 'poker'"):
        verify.replay(Record(game="poker", config={}, seed="s"))
    with pytest.raises(verify.ReplayError, match="invalid blackdrez config"):
        verify.replay(Record(game="blackdrez", config={"seats": 9}, seed="s"))


def test_verify_accepts_a_true_record(finished) -> None:
    _, record = finished
    assert verify.verify(record) == []


def test_verification_hands_back_the_replayed_game(finished) -> None:
    engine, record = finished
    checked = verify.verification(record)
    assert checked.problems == []
    assert checked.engine.over and checked.engine.dump() == engine.dump()
    broken = msgspec.structs.replace(record, actions=[(0, {"type": "no_such_action"})])
    assert verify.verification(broken).engine is None


def test_verify_rejects_a_tampered_seed(finished) -> None:
    _, record = finished
    problems = verify.verify(msgspec.structs.replace(record, seed="records-test!"))
    assert problems
    assert "the seed does not match the commitment" in problems[0]


def test_verify_rejects_a_tampered_commitment(finished) -> None:
    _, record = finished
    forged = "0" * 64
    problems = verify.verify(msgspec.structs.replace(record, commitment=forged))
    assert len(problems) == 1
    assert "does not match the commitment" in problems[0] and forged in problems[0]


def test_verify_takes_any_commitment_text(finished) -> None:
    _, record = finished
    upper = msgspec.structs.replace(record, commitment=record.commitment.upper())
    assert verify.verify(upper) == []
    problems = verify.verify(msgspec.structs.replace(record, commitment="ünïcode"))
    assert len(problems) == 1 and "does not match the commitment" in problems[0]


def test_verify_rejects_one_tampered_dealt_card(finished) -> None:
    _, record = finished
    dealt = [list(cards) for cards in record.dealt]
    position = 5
    true_card = dealt[0][position]
    dealt[0][position] = next(card for card in dealt[0] if card != true_card)
    problems = verify.verify(msgspec.structs.replace(record, dealt=dealt))
    assert len(problems) == 1
    assert f"card {position + 1} dealt was {dealt[0][position]!r}" in problems[0]
    assert f"the shuffle gives {true_card!r}" in problems[0]


def test_verify_rejects_a_record_missing_a_dealt_card(finished) -> None:
    _, record = finished
    dealt = [list(cards) for cards in record.dealt]
    dealt[0] = dealt[0][:-1]  # still the shuffle's order, but one card short of the replay
    problems = verify.verify(msgspec.structs.replace(record, dealt=dealt))
    context = GAMES[record.game].contexts(verify.config_of(record))[0]
    assert problems == [
        f"deck {context!r}: the record lists {len(dealt[0])} cards dealt, "
        f"the replay deals {len(dealt[0]) + 1}"
    ]


def test_verify_rejects_an_unfinished_game(finished) -> None:
    _, record = finished
    short = msgspec.structs.replace(record, actions=record.actions[:-1])
    replayed = verify.start(short)
    for _ in verify.steps(replayed, short):
        pass
    problems = verify.verify(msgspec.structs.replace(short, dealt=replayed.dealt()))
    assert problems == [f"the game is not over after the record's {len(short.actions)} actions"]


def test_verify_needs_the_dealt_cards_and_the_commitment(finished) -> None:
    _, record = finished
    bare = Record(game=record.game, config=record.config, seed=record.seed, actions=record.actions)
    assert verify.verify(bare) == [
        "the record has no commitment to check the seed against",
        "the record lists no dealt cards, so the deal cannot be checked",
    ]


def _javascript_snippet() -> str:
    blocks = re.findall(r"```js\n(.*?)```", FAIRNESS_PAGE.read_text(), flags=re.DOTALL)
    assert len(blocks) == 1, "docs/fairness.md holds exactly one JavaScript block"
    return blocks[0]


def test_the_fairness_pages_javascript_reproduces_the_python_shuffle(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        message = "node is not installed: the fairness page's JavaScript snippet was not run"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    script = tmp_path / "shuffle.js"
    script.write_text(_javascript_snippet())
    seed = "blackdrez-test-vector"
    cases = [
        (seed, "deck", pokerdrez_deck()),
        (seed, "round:1", standard_deck()),
        ("another seed, with ünïcode", "round:7", standard_deck()),
        ("x", "deck", standard_deck(2)),
    ]
    for case_seed, context, deck in cases:
        output = subprocess.run(
            [node, str(script), case_seed, context, ",".join(deck)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.split()
        assert output[0] == shuffle.commitment(case_seed)
        assert output[1].split(",") == shuffle.shuffled(deck, case_seed, context)
