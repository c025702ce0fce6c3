"""What the tools do with any game: replay, record and verify.

Theory of operation
-------------------
Each game's :class:`~blackdrez.games.spec.GameSpec` (from :data:`games.GAMES`) gives its engine
class,
config type, action union (the type ``msgspec.convert`` turns a wire dict into), its canonical
deck, its shuffle contexts and its reference bots. A :class:`~blackdrez.games.records.Record` names
the
game, its config, its seed (or explicit card order) and every ``[seat, action]`` applied.
:func:`replay` rebuilds the game from those;
:func:`verify` checks a finished game's record against its revealed seed:

1. the seed hashes to the commitment published at the start;
2. every recorded action is legal when replayed from the seed;
3. the replay deals exactly the cards the record says the players saw, each list a prefix of
   the engine's ``deal_order(config, seed)`` (the shuffle of the canonical deck);
4. the game is over.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import msgspec

from blackdrez.games import GAMES
from blackdrez.games.base import Reason, Rejected
from blackdrez.games.records import Record
from blackdrez.games.shuffle import commitment
from blackdrez.games.spec import GameSpec, and_words


class ReplayError(Exception):
    """A record that cannot be replayed: unknown game, bad config, or a rejected action."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index
        """The position of the offending action in ``record.actions`` (``None``: not an action)."""


class Step(NamedTuple):
    """One replayed action: its position in the record, seat, decoded action and events."""

    index: int  # type: ignore[assignment]  # the field shadows tuple.index on purpose
    seat: int
    action: Any
    events: list[Any]


def game_of(name: str) -> GameSpec:
    """Return the game called ``name``; raises ``ReplayError`` naming the known games."""
    try:
        return GAMES[name]
    except KeyError:
        raise ReplayError(f"unknown game {name!r}; known: {', '.join(GAMES)}") from None


def config_of(record: Record) -> Any:
    """Return the record's config as the game's Config; raises ``ReplayError`` when invalid."""
    game = game_of(record.game)
    try:
        return msgspec.convert(record.config, game.config)
    except msgspec.ValidationError as error:
        raise ReplayError(f"invalid {game.name} config {record.config!r}: {error}") from None


def start(record: Record) -> Any:
    """Return the record's game before any action: from its seed, else from its card order."""
    game = game_of(record.game)
    config = config_of(record)
    if (record.seed is None) == (record.order is None):
        raise ReplayError("a record needs exactly one of seed and order")
    if record.seed is not None:
        return game.engine.new(config, record.seed)
    try:
        return game.engine.from_order(config, record.order)
    except (ValueError, TypeError) as error:
        raise ReplayError(f"invalid card order: {error}") from None


def steps(engine: Any, record: Record) -> Iterator[Step]:
    """Apply the record's actions to ``engine`` one by one, yielding each with its events.

    Raises ``ReplayError`` (with ``index``) at the first action that is malformed or rejected.
    """
    game = game_of(record.game)
    for index, pair in enumerate(record.actions):
        try:
            seat, wire = pair
            action = game.action_of(wire)
        except (ValueError, TypeError, msgspec.ValidationError) as error:
            raise ReplayError(
                f"action {index} {pair!r} is not a {game.name} action: {error}", index
            ) from None
        try:
            events = engine.apply(seat, action)
        except Rejected as error:
            raise ReplayError(
                f"action {index} ({seat_words(seat)}: {game.action_words(action)}) was "
                f"rejected: {refusal_words(game, engine, _seats(record), seat, error)}",
                index,
            ) from None
        yield Step(index, seat, action, events)


def seat_words(seat: int) -> str:
    """Who acted, as the browser says it: "seat N" counted from 1, or "the table" for the
    pseudo-seat of the actions the table plays itself (a negative seat, e.g. BlackDrez's
    round starts)."""
    return "the table" if seat < 0 else f"seat {seat + 1}"


MOST_OPTIONS = 5
"""The most legal actions :func:`refusal_words` lists (a solitaire may have dozens)."""


def refusal_words(game: GameSpec, engine: Any, seats: int, seat: int, error: Rejected) -> str:
    """Why ``engine`` (a game of ``seats`` seats) refused ``seat``'s action, in the browser's
    words: seats counted from 1, actions as players say them (``game.action_words``). The rules'
    own detail is kept when it is plain words, or numbers things as players see them
    (``game.refusals_count_from_1``); else what the seat could do instead is said where that is
    short."""
    who = seat_words(seat)
    if error.reason is Reason.GAME_OVER:
        return "the game was already over"
    if error.reason is Reason.NOT_IN_ROUND:
        return f"{who} was not playing that round"
    if error.reason is Reason.BAD_ACTION:
        return f"it is not a {game.name} action"
    if error.reason is Reason.NOT_YOUR_TURN:
        acting = [seat_words(s) for s in range(-1, seats) if engine.legal_actions(s)]
        return f"it was not {who}'s turn" + (f": {and_words(acting)} was to act" if acting else "")
    if game.refusals_count_from_1 or not any(c.isdigit() for c in error.detail):
        return error.detail
    options = [game.action_words(action) for action in engine.legal_actions(seat)]
    if 0 < len(options) <= MOST_OPTIONS:
        return f"the rules did not allow it then; {who} could {and_words(options, 'or')}"
    return "the rules did not allow it then"


def _seats(record: Record) -> int:
    """How many seats the record's game has (a solitaire: one)."""
    return int(getattr(config_of(record), "seats", 1))


def replay(record: Record) -> Any:
    """Return the engine after replaying every action of ``record`` (see :func:`steps`)."""
    engine = start(record)
    for _ in steps(engine, record):
        pass
    return engine


def record_of(engine: Any, actions: Sequence[tuple[int, Any]]) -> Record:
    """Return the record of ``engine``'s game, given every ``(seat, action)`` applied to it.

    ``engine`` is the game *after* those actions (its dealt cards go into the record); it was
    created by ``new`` (the seed is recorded) or ``from_order`` (the order is).
    """
    state = msgspec.msgpack.decode(engine.dump())
    game = game_of(engine.game)
    return Record(
        game=game.name,
        config=state["config"],
        seed=engine.seed,
        commitment=engine.commitment,
        order=state[game.order_field] if engine.seed is None else None,
        actions=[(seat, _wire(action)) for seat, action in actions],
        dealt=engine.dealt(),
    )


def _wire(action: Any) -> dict[str, Any]:
    """``action`` in its wire form, exactly as it reads back from JSON (tuples become lists)."""
    return msgspec.json.decode(msgspec.json.encode(action))


class Verification(NamedTuple):
    """What :func:`verification` found: the problems (empty: verified) and the replayed game."""

    problems: list[str]
    engine: Any
    """The game after replaying the record, or ``None`` when it could not be replayed."""


def verify(record: Record) -> list[str]:
    """Check a finished game's record against its seed; return the problems (empty: verified).

    See the module docstring for what is checked.
    """
    return verification(record).problems


def verification(record: Record) -> Verification:
    """:func:`verify`, also returning the replayed game (to read its result without a replay)."""
    if record.seed is None:
        return Verification(
            ["the record has no seed: only a game dealt from a seed can be verified"], None
        )
    problems: list[str] = []
    if record.commitment is None:
        problems.append("the record has no commitment to check the seed against")
    elif not hmac.compare_digest(
        commitment(record.seed).encode(), record.commitment.lower().encode("utf-8")
    ):
        problems.append(
            f"the seed does not match the commitment: SHA-256 of the seed is "
            f"{commitment(record.seed)}, the record's commitment is {record.commitment}"
        )
    try:
        engine = start(record)
        for _ in steps(engine, record):
            pass
    except ReplayError as error:
        return Verification([*problems, f"the game does not replay from the seed: {error}"], None)
    game = game_of(record.game)
    config = config_of(record)
    dealt = getattr(record, "dealt", None)
    if dealt is None:
        problems.append("the record lists no dealt cards, so the deal cannot be checked")
    else:
        problems.extend(_deal_problems(game, config, record.seed, dealt, engine.dealt()))
    if not engine.over:
        problems.append(f"the game is not over after the record's {len(record.actions)} actions")
    return Verification(problems, engine)


def _deal_problems(
    game: GameSpec, config: Any, seed: str, recorded: list[list[str]], replayed: list[list[str]]
) -> list[str]:
    """Compare the recorded cards with the shuffle and with the replay, naming each difference."""
    order = game.engine.deal_order(config, seed)
    names = [f"deck {context!r}" for context in game.contexts(config)]
    if len(recorded) != len(order):
        return [f"the record lists {len(recorded)} dealt decks, the game deals {len(order)}"]
    problems: list[str] = []
    for name, cards, shuffled, seen in zip(names, recorded, order, replayed, strict=True):
        if len(cards) > len(shuffled):
            problems.append(f"{name}: {len(cards)} cards dealt from a deck of {len(shuffled)}")
            continue
        for position, (card, expected) in enumerate(zip(cards, shuffled, strict=False)):
            if card != expected:
                problems.append(
                    f"{name}: card {position + 1} dealt was {card!r}, the shuffle gives "
                    f"{expected!r}"
                )
                break
        if len(cards) != len(seen):
            problems.append(
                f"{name}: the record lists {len(cards)} cards dealt, the replay deals {len(seen)}"
            )
    return problems


def bot_move(game: GameSpec, engine: Any, strategies: Sequence[str]) -> tuple[int, Any]:
    """The next ``(seat, action)`` with the reference bots (``strategies`` by seat).

    A game's own table moves come from its spec (BlackDrez rounds start for every seat, as
    ``blackdrez_bots.simulate`` does).
    """
    seat, action = game.bot_turn(engine)
    if action is not None:
        return seat, action
    bot = game.strategies[strategies[seat % len(strategies)]]
    return seat, bot(engine.view(seat), engine.legal_actions(seat))


def play_bots(
    name: str, seed: str, config: Any = None, strategies: Sequence[str] | None = None
) -> Record:
    """Play one game of ``name`` from ``seed`` with the reference bots; return its record.

    ``strategies`` names the bot of each seat (cycled; default: the game's first bot for a
    solitaire, the BlackDrez bots alternating round the table).
    """
    return record_of(*bots_game(name, seed, config, strategies))


def bots_game(
    name: str, seed: str, config: Any = None, strategies: Sequence[str] | None = None
) -> tuple[Any, list[tuple[int, Any]]]:
    """:func:`play_bots`' game itself: the finished engine and every ``(seat, action)``
    applied to it (what a table hands its records writer)."""
    game = game_of(name)
    config = game.config() if config is None else config
    names = list(strategies) if strategies else list(game.strategies)
    if game.solitaire:
        names = names[:1]
    for strategy in names:
        if strategy not in game.strategies:
            raise ValueError(
                f"unknown {name} strategy {strategy!r}; known: {', '.join(game.strategies)}"
            )
    engine = game.engine.new(config, seed)
    actions: list[tuple[int, Any]] = []
    while not engine.over:
        seat, action = bot_move(game, engine, names)
        engine.apply(seat, action)
        actions.append((seat, action))
    return engine, actions
