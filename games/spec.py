"""What everything outside a game's folder knows about the game: its :class:`GameSpec`.

Theory of operation
-------------------
A game is a folder (rules, bots, table glue) whose ``__init__`` exposes ``SPEC``, an instance of
a :class:`GameSpec` subclass; the registry (:data:`blackdrez.games.GAMES`) collects the folders
under ``games/`` and the modules named in ``BLACKDREZ_GAMES``. Every reader takes what it needs
from there instead of naming games itself:

* the table core (``blackdrez.server.table``): seats, how a game is created from table options,
  the system actions the table plays itself (BlackDrez: starting each round, ending the game when
  fewer than two can play), the round pause and the turn timer, what a leaver plays, the
  leaderboard score;
* the solitaire help (``blackdrez.server.table.assist``): the expert behind a hint and what it may
  know besides the view, and the moves a game plays by itself once its rest is forced;
* the records (``blackdrez.server.records``): whether the game is rated, a seat's place, score and
  win from the engine's result, and how many seats a finished game had;
* the lobby and the browser (``/games.js``): the display name, the rules in a few sentences, the
  names and labels of the bots a host adds;
* the protocol (``blackdrez.protocol.v1`` and its schema export): the game names, which are
  solitaires, and each game's action, event and view types;
* the tools (``blackdrez.games.verify``, ``blackdrez.tools.cli``): the Config type, the canonical
  deck and the shuffle contexts to check a deal against, the state field holding a card order,
  the reference bots.

Nothing in ``server/`` names a game: ``tests/test_games_behind_spec.py`` parses it and fails on a
game's module imported there or a game's name written there. Table options arrive as the
protocol's ``TableOptions``; a spec reads their fields by name and never imports the protocol
(games import nothing from the project but themselves).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import msgspec


class GameSpec:
    """One game as the rest of the project sees it; the defaults suit a solitaire."""

    name: ClassVar[str]
    """The game's wire name (also its folder's name)."""
    display_name: ClassVar[str]
    """The game's name as people read it."""
    solitaire: ClassVar[bool] = True
    """A one-seat game started with ``start_solitaire`` (else a table created by a host)."""
    engine: ClassVar[Any]
    """The engine class (see :class:`blackdrez.games.base.Engine`)."""
    config: ClassVar[Any]
    """The engine's Config Struct (its defaults make a valid game)."""
    action: ClassVar[Any]
    """The action union: the type ``msgspec.convert`` turns a wire dict into."""
    event: ClassVar[Any]
    """The event union, for the schema export."""
    view: ClassVar[Any]
    """The view Struct, for the schema export."""
    resign: ClassVar[Any] = None
    """The action class a solitaire player plays to give up (played when they leave)."""
    order_field: ClassVar[str] = "order"
    """The state field holding the card order of a game built with ``from_order``."""
    strategies: ClassVar[Mapping[str, Callable[..., Any]]]
    """The reference bots by name, the first the default."""
    min_players: ClassVar[int] = 1
    rated: ClassVar[bool] = False
    """Finished games move the players' ratings (at a table its host made rated); else the
    records keep best scores."""
    rules_text: ClassVar[str] = ""
    """The rules in a few sentences, for a client with no rules page of its own for the game."""
    bot_names: ClassVar[tuple[str, ...]] = ("Bot",)
    """First names for the bots a host adds to a table (cycled)."""
    strategy_labels: ClassVar[Mapping[str, str]] = {}
    """A reference bot's name as people read it beside a bot's first name (default: its name)."""

    refusals_count_from_1: ClassVar[bool] = False
    """The rules' refusal texts number seats and piles as players see them (from 1); else the
    verifier does not show them to people (``blackdrez.games.verify.refusal_words``)."""

    def action_words(self, action: Any) -> str:
        """``action`` as its player would say it ("hit", "place the stock's top card on pile
        2"), seats and piles counted from 1. By default its type and fields."""
        fields = msgspec.to_builtins(action)
        kind = str(fields.pop("type", type(action).__name__)).replace("_", " ")
        details = ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in fields.items())
        return f"{kind} ({details})" if details else kind

    def deck(self, config: Any) -> list[str]:
        """The unshuffled deck in canonical order."""
        raise NotImplementedError

    def action_of(self, wire: Any) -> Any:
        """``wire`` (an action's wire form) as this game's action: exactly what
        ``msgspec.convert(wire, self.action)`` returns, or the ``msgspec.ValidationError`` it
        raises, with the same message. About ten times faster: msgspec keeps what it learns of a
        Struct's fields, but learns a bare union anew at each call (about 20 µs), so here the
        union is converted as the one field of a Struct made for it (:func:`action_holder`)."""
        try:
            return msgspec.convert({"action": wire}, action_holder(self.action)).action
        except msgspec.ValidationError as error:
            raise msgspec.ValidationError(_unheld(str(error))) from None

    def contexts(self, config: Any) -> list[str]:
        """The shuffle contexts, one per list of the engine's ``deal_order``."""
        return ["deck"]

    def bot_turn(self, engine: Any) -> tuple[int, Any]:
        """``(seat, None)``: the seat whose bot moves next; or ``(seat, action)``: an action
        the game's own table plays instead (BlackDrez starts each round with every seat)."""
        return 0, None

    def seat_count(self, options: Any) -> int:
        """How many seats a table of this game has, for these ``TableOptions``."""
        return 1

    def create(self, options: Any, seed: str) -> Any:
        """A new engine for a game at a table with these options."""
        return self.engine.new(self.engine_config(options), seed)

    def engine_config(self, options: Any) -> Any:
        """The engine's config for these table options."""
        return self.config()

    def deal_seed(self, deal: int) -> str:
        """The public seed of numbered deal ``deal``: anyone can replay it."""
        return f"{self.name}:deal:{deal}"

    def system_action(self, engine: Any, seats: list[int], newcomers: list[int]) -> Any:
        """``(seat, action)`` the table plays itself now, or ``None``."""
        return None

    def end_game_action(self, engine: Any) -> tuple[int, Any]:
        """``(seat, action)`` that ends the game between rounds when fewer than
        ``min_players`` can play (only games with rounds between which players come and go)."""
        raise NotImplementedError(f"{self.name} never waits for players between rounds")

    def leave_action(self, engine: Any) -> Any:
        """What a player who leaves mid-game plays at once (solitaires: resign), or ``None`` to
        play the default action at each of their turns instead (BlackDrez)."""
        return self.resign()

    def between_rounds(self, engine: Any) -> bool:
        """Whether the game waits for the table to start the next round."""
        return False

    def in_round(self, engine: Any, seat: int) -> bool:
        """Whether ``seat`` takes part in the current round."""
        return not engine.over

    def has_played(self, engine: Any, seat: int) -> bool:
        """Whether ``seat`` has played a round of the game (since a newcomer last took it):
        the game will rank it, so its result belongs to whoever played those rounds."""
        return False

    def round_number(self, engine: Any) -> int:
        """The current round (0 before the first)."""
        return getattr(getattr(engine, "state", None), "round", 0)

    def round_pause(self, options: Any) -> float:
        """Seconds between a round's end and the next round's deal."""
        return 0.0

    def par(self, engine: Any) -> dict[str, Any] | None:
        """What perfect play would have scored on a finished game's deal (solitaires), as the
        fields of the protocol's ``par`` event, or ``None``. A search with a node budget, so it
        is deterministic (the same par wherever it is computed) and bounded: up to a second or
        so of CPU, which a server spends in a worker process, off its event loop."""
        return None

    def turn_seconds(self, options: Any) -> float | None:
        """The turn timer, or ``None`` for no timer (solitaires)."""
        return None

    def outcome(self, result: Any, seat: int) -> tuple[int | None, int | None, bool]:
        """``(place, score, won)`` of ``seat`` from a finished game's ``result`` (the engine's
        ``result()``), as the records keep them: a solitaire has no place."""
        return None, result.score, result.won

    def record_seats(self, engine: Any) -> int:
        """How many seats the finished game ``engine`` was played with."""
        return 1

    def hint_context(self, engine: Any) -> Any:
        """What the expert may know besides the player's view (all of it shown to the player),
        as plain data; ``None`` when the view is enough."""
        return None

    def expert_hint(self, view: Any, legal: list[Any], context: Any) -> Any:
        """The expert's move for a player who sees ``view`` (``context``: from
        :meth:`hint_context`), or ``None`` when the game has no expert (its quick bot answers).
        Up to about a second of CPU: the node runs it in a worker process."""
        return None

    def forced_finish(self, engine: Any) -> list[Any]:
        """The actions that finish a game whose rest is forced, which the table plays at once
        for the player; ``[]`` when the rest is not forced (or the game has no such rule)."""
        return []


_HOLDERS: dict[Any, type[msgspec.Struct]] = {}


def action_holder(action: Any) -> type[Any]:
    """A Struct whose one field, ``action``, has the type ``action`` (made once per type)."""
    holder = _HOLDERS.get(action)
    if holder is None:
        holder = _HOLDERS[action] = msgspec.defstruct("ActionHolder", [("action", action)])
    return holder


def _unheld(message: str) -> str:
    """A validation message about the holder's field as msgspec words it about the bare value:
    the path ``$.action...`` is ``$...``, and a message about the value itself names no path."""
    message = message.removesuffix(" - at `$.action`")
    return message.replace("`$.action", "`$")


def and_words(words: Sequence[str], last: str = "and") -> str:
    """``A``, ``A and B``, ``A, B and C`` (or ``A, B or C``)."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {last} {words[-1]}"
