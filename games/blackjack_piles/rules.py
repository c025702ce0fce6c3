"""Blackjack Piles: a one-player solitaire of seven rounds, cashing hands worth exactly 21.

Theory of operation
-------------------
Each round deals one freshly shuffled 52-card deck (``standard_deck()`` shuffled by
:func:`blackdrez.games.shuffle.shuffled` with context ``"round:N"``) into a face-down stock whose
top
card is face up. The player (seat 0) places that card on one of the round's piles, cashes 2 to 6
available cards (pile tops, and the stock's top in rounds that allow it) totalling exactly 21, or
moves a pile's top card to an empty pile. The round's rules come from one table, :data:`ROUNDS`:
how many piles, how many cards a pile may hold, and whether the stock's top may join a hand.

A round ends when the player ends it (only once the stock is empty), or by itself as soon as no
``place``, ``cash`` or ``move`` is legal; cards still in the stock then count as left on the
table. The player advances when the round's hands exceed the cards left; the next round then
starts at once (a ``round_ended`` event followed by ``round_started``). A failed round, round 7,
or a resignation ends the game (``round_ended`` then ``game_over``).

Phases and the actions they allow (seat 0 only; anything else is ``not_your_turn``)::

    action      playing, stock not empty      playing, stock empty     over
    ---------   ---------------------------   ----------------------   ---------
    place       yes, on a pile below the cap  no                       game_over
    cash        yes (stock top if the round   yes (pile tops only)     game_over
                allows it)
    move        yes, to an empty pile         yes, to an empty pile    game_over
    end_round   no                            yes                      game_over
    resign      yes                           yes                      game_over

Decisions beyond RULES.md:

* ``move`` needs a source pile of at least two cards: moving a pile's only card to an empty pile
  changes nothing (no rule depends on a pile's position), and forbidding it keeps every round
  finite.
* ``resign`` ends the game at once; the current round scores as it stands (hands cashed, cards on
  the piles and in the stock left, bonus by that count) and does not advance.
* ``from_order`` needs one full 52-card order for every round from ``config.first_round`` to 7.
* ``Config.first_round`` (default 1) starts a game at a later round, scored with that round's
  number; it exists to measure one round in isolation.
* ``default_action`` (the turn timer) ends the round when it may, else places the stock's top on
  the first pile that takes it, else cashes the first hand listed.
* ``dealt()`` counts the stock's face-up top as revealed; a round's later cards stay unrevealed
  even after the game (the revealed seed lets anyone recompute them).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, ClassVar, Literal, Self

import msgspec

from blackdrez.games.base import Reason, Rejected
from blackdrez.games.cards import standard_deck
from blackdrez.games.shuffle import commitment, shuffled

LAST_ROUND = 7
MIN_HAND = 2
MAX_HAND = 6
TARGET = 21
BONUS = {3: 2, 2: 3, 1: 4}
"""Bonus by the number of cards left on the table at a round's end."""


class RoundRules(msgspec.Struct, frozen=True, kw_only=True):
    """One round's rules: pile count, cards per pile (``None`` = no cap), stock top in hands."""

    piles: int
    cap: int | None
    stock_in_hand: bool


ROUNDS: tuple[RoundRules, ...] = (
    RoundRules(piles=5, cap=None, stock_in_hand=True),
    RoundRules(piles=4, cap=None, stock_in_hand=True),
    RoundRules(piles=4, cap=3, stock_in_hand=True),
    RoundRules(piles=4, cap=3, stock_in_hand=False),
    RoundRules(piles=3, cap=None, stock_in_hand=False),
    RoundRules(piles=3, cap=5, stock_in_hand=False),
    RoundRules(piles=3, cap=4, stock_in_hand=False),
)
"""The rounds table, round 1 first: the one place where the difficulty curve is set."""


def rules_of(round_number: int) -> RoundRules:
    """Return the rules of round ``round_number`` (1 to 7)."""
    return ROUNDS[round_number - 1]


def card_points(card: str) -> int:
    """Return a card's points with an Ace counted as 1 (2-9 their number, T/J/Q/K 10)."""
    rank = card[0]
    if rank == "A":
        return 1
    if rank in "TJQK":
        return 10
    return int(rank)


def makes_21(cards: Sequence[str]) -> bool:
    """Whether ``cards`` can total exactly 21, each Ace counting 1 or 11."""
    return points_make_21([card_points(card) for card in cards])


def points_make_21(points: Sequence[int]) -> bool:
    """Whether cards worth ``points`` (Aces as 1) can total exactly 21, an Ace adding 10 or not."""
    missing = TARGET - sum(points)
    return missing >= 0 and missing % 10 == 0 and missing // 10 <= points.count(1)


def round_bonus(left: int) -> int:
    """Return the bonus for ending a round with ``left`` cards on the table."""
    return BONUS.get(left, 0)


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A game's settings. The rounds themselves come from :data:`ROUNDS`."""

    first_round: int = 1

    def __post_init__(self) -> None:
        if (
            not isinstance(self.first_round, int)
            or isinstance(self.first_round, bool)
            or not 1 <= self.first_round <= LAST_ROUND
        ):
            raise ValueError(f"first_round must be a round number from 1 to {LAST_ROUND}")


# Actions -------------------------------------------------------------------------------------


class Place(msgspec.Struct, frozen=True, tag="place", tag_field="type"):
    """Put the stock's top card on pile ``pile`` (0-based)."""

    pile: int


class Cash(msgspec.Struct, frozen=True, tag="cash", tag_field="type"):
    """Cash the tops of ``piles`` (increasing indices), plus the stock's top if ``stock``."""

    piles: tuple[int, ...]
    stock: bool = False


class Move(msgspec.Struct, frozen=True, tag="move", tag_field="type"):
    """Move the top card of pile ``source`` to the empty pile ``target``."""

    source: int
    target: int


class EndRound(msgspec.Struct, frozen=True, tag="end_round", tag_field="type"):
    """End the round (only once the stock is empty)."""


class Resign(msgspec.Struct, frozen=True, tag="resign", tag_field="type"):
    """End the game now; the current round scores as it stands."""


Action = Place | Cash | Move | EndRound | Resign


# Events and views ----------------------------------------------------------------------------


EndedBy = Literal["player", "auto", "resign"]


class RoundResult(msgspec.Struct, frozen=True, kw_only=True):
    """How a finished round went. ``passed``: the hands exceeded the cards left (a resigned
    round never passes); the player advances when a round passes, round 7 ends the game."""

    round: int
    hands: int
    left: int
    bonus: int
    score: int
    passed: bool


class Placed(msgspec.Struct, frozen=True, kw_only=True, tag="placed", tag_field="type"):
    """The stock's top card went onto a pile; ``stock_top`` is the card now showing."""

    card: str
    pile: int
    stock_top: str | None
    stock_count: int


class Cashed(msgspec.Struct, frozen=True, kw_only=True, tag="cashed", tag_field="type"):
    """A hand was cashed: ``cards`` in the order of ``piles`` then the stock's top."""

    cards: list[str]
    total: int
    piles: list[int]
    stock: bool
    hands: int
    stock_top: str | None
    stock_count: int


class Moved(msgspec.Struct, frozen=True, kw_only=True, tag="moved", tag_field="type"):
    """A pile's top card moved to an empty pile."""

    card: str
    source: int
    target: int


class RoundEnded(msgspec.Struct, frozen=True, kw_only=True, tag="round_ended", tag_field="type"):
    """A round ended. ``ended_by``: ``"player"`` (end_round), ``"auto"`` (nothing left to play)
    or ``"resign"``; ``advanced``: the next round starts now (a ``round_started`` follows)."""

    result: RoundResult
    ended_by: EndedBy
    advanced: bool


class RoundStarted(
    msgspec.Struct, frozen=True, kw_only=True, tag="round_started", tag_field="type"
):
    """A new round started with a fresh deck."""

    round: int
    rules: RoundRules
    stock_top: str
    stock_count: int


class GameOver(msgspec.Struct, frozen=True, kw_only=True, tag="game_over", tag_field="type"):
    """The game ended; ``seed`` is revealed (``None`` for a game built from a card order)."""

    score: int
    seed: str | None


Event = Placed | Cashed | Moved | RoundEnded | RoundStarted | GameOver


class View(msgspec.Struct, frozen=True, kw_only=True):
    """What the player (and any spectator) sees: everything but the stock below its top."""

    round: int
    rules: RoundRules
    piles: list[list[str]]
    stock_top: str | None
    stock_count: int
    hands: int
    left: int
    score: int
    results: list[RoundResult]
    over: bool
    commitment: str | None
    seed: str | None


class GameResult(msgspec.Struct, frozen=True, kw_only=True):
    """The final outcome: total score, last round played, whether all seven rounds were passed."""

    score: int
    last_round: int
    completed: bool
    results: list[RoundResult]


class State(msgspec.Struct, kw_only=True):
    """The whole game state; its msgpack encoding is :meth:`BlackjackPiles.dump`."""

    config: Config
    seed: str | None
    commitment: str | None
    decks: list[list[str]]
    round: int
    piles: list[list[str]]
    drawn: list[int]
    hands: int
    results: list[RoundResult]
    over: bool


# The engine ----------------------------------------------------------------------------------

PLAYER = 0
_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(State)


class BlackjackPiles:
    """One game of Blackjack Piles (see the module docstring)."""

    game: ClassVar[str] = "blackjack_piles"

    def __init__(self, state: State) -> None:
        self.state = state
        """The whole state (read it, never change it: only :meth:`apply` does)."""

    # Construction ----------------------------------------------------------------------------

    @classmethod
    def deal_order(cls, config: Config, seed: str) -> list[list[str]]:
        """Each round's card order from ``seed``, first round ``config.first_round``."""
        return [
            shuffled(standard_deck(), seed, f"round:{number}")
            for number in range(config.first_round, LAST_ROUND + 1)
        ]

    @classmethod
    def new(cls, config: Config, seed: str) -> Self:
        """Start a game whose decks come from ``seed``."""
        return cls._start(config, cls.deal_order(config, seed), seed)

    @classmethod
    def from_order(cls, config: Config, order: Sequence[Sequence[str]]) -> Self:
        """Start a game from explicit card orders, one full deck per round played (top first)."""
        rounds = LAST_ROUND - config.first_round + 1
        if len(order) != rounds:
            raise ValueError(
                f"need {rounds} card orders (rounds {config.first_round} to {LAST_ROUND}), "
                f"got {len(order)}"
            )
        canonical = sorted(standard_deck())
        for index, deck in enumerate(order):
            if sorted(deck) != canonical:
                raise ValueError(f"order {index} is not one standard 52-card deck")
        return cls._start(config, [list(deck) for deck in order], None)

    @classmethod
    def _start(cls, config: Config, decks: list[list[str]], seed: str | None) -> Self:
        first = config.first_round
        state = State(
            config=config,
            seed=seed,
            commitment=commitment(seed) if seed is not None else None,
            decks=decks,
            round=first,
            piles=[[] for _ in range(rules_of(first).piles)],
            drawn=[0],
            hands=0,
            results=[],
            over=False,
        )
        return cls(state)

    # Reading the state -----------------------------------------------------------------------

    @property
    def seed(self) -> str | None:
        """The game's seed (``None`` when built from a card order)."""
        return self.state.seed

    @property
    def commitment(self) -> str | None:
        """SHA-256 of the seed, published before the first card."""
        return self.state.commitment

    @property
    def over(self) -> bool:
        """Whether the game has ended."""
        return self.state.over

    @property
    def rules(self) -> RoundRules:
        """The current round's rules."""
        return rules_of(self.state.round)

    def _deck(self) -> list[str]:
        return self.state.decks[self.state.round - self.state.config.first_round]

    def _stock_count(self) -> int:
        return len(self._deck()) - self.state.drawn[-1]

    def _stock_top(self) -> str | None:
        deck = self._deck()
        drawn = self.state.drawn[-1]
        return deck[drawn] if drawn < len(deck) else None

    def _left(self) -> int:
        return sum(len(pile) for pile in self.state.piles) + self._stock_count()

    def _score(self) -> int:
        return sum(result.score for result in self.state.results)

    def dealt(self) -> list[list[str]]:
        """The cards revealed so far, per round from ``config.first_round`` (the deal order)."""
        revealed = [
            deck[: min(drawn + 1, len(deck))]
            for deck, drawn in zip(self.state.decks, self.state.drawn, strict=False)
        ]
        return revealed + [[] for _ in range(len(self.state.decks) - len(revealed))]

    # Legal actions ---------------------------------------------------------------------------

    def _takes(self, pile: list[str]) -> bool:
        cap = self.rules.cap
        return cap is None or len(pile) < cap

    def _places(self) -> list[Place]:
        if self._stock_top() is None:
            return []
        return [Place(index) for index, pile in enumerate(self.state.piles) if self._takes(pile)]

    def _cashes(self) -> list[Cash]:
        sources: list[tuple[int | None, int]] = [
            (index, card_points(pile[-1])) for index, pile in enumerate(self.state.piles) if pile
        ]
        top = self._stock_top()
        if top is not None and self.rules.stock_in_hand:
            sources.append((None, card_points(top)))
        cashes = []
        for size in range(MIN_HAND, min(MAX_HAND, len(sources)) + 1):
            for combo in itertools.combinations(sources, size):
                if points_make_21([points for _, points in combo]):
                    piles = tuple(index for index, _ in combo if index is not None)
                    cashes.append(Cash(piles, stock=combo[-1][0] is None))
        return cashes

    def _moves(self) -> list[Move]:
        piles = self.state.piles
        empty = [index for index, pile in enumerate(piles) if not pile]
        return [
            Move(source, target)
            for source, pile in enumerate(piles)
            if len(pile) >= MIN_HAND
            for target in empty
        ]

    def _can_play(self) -> bool:
        return bool(self._places() or self._moves() or self._cashes())

    def legal_actions(self, seat: int) -> list[Action]:
        """Every action ``seat`` may take now: places, cashes, moves, end_round, resign."""
        if self.state.over or seat != PLAYER:
            return []
        actions: list[Action] = [*self._places(), *self._cashes(), *self._moves()]
        if self._stock_top() is None:
            actions.append(EndRound())
        actions.append(Resign())
        return actions

    def default_action(self, seat: int) -> Action | None:
        """What a turn timer does: end the round when it may, else place on the first pile that
        takes the card, else cash the first hand listed; ``None`` when ``seat`` has no turn."""
        actions = self.legal_actions(seat)
        for kind in (EndRound, Place, Cash):
            for action in actions:
                if isinstance(action, kind):
                    return action
        return None

    # Applying actions ------------------------------------------------------------------------

    def _check(self, seat: int, action: Any) -> None:
        if not isinstance(action, Place | Cash | Move | EndRound | Resign) or not _well_formed(
            action
        ):
            raise Rejected(Reason.BAD_ACTION, f"not a Blackjack Piles action: {action!r}")
        if self.state.over:
            raise Rejected(Reason.GAME_OVER, "the game is over")
        if seat != PLAYER:
            raise Rejected(Reason.NOT_YOUR_TURN, "Blackjack Piles has one player, seat 0")
        match action:
            case Place(pile):
                self._check_place(pile)
            case Cash(piles, stock):
                self._check_cash(piles, stock)
            case Move(source, target):
                self._check_move(source, target)
            case EndRound():
                if self._stock_top() is not None:
                    raise Rejected(Reason.ILLEGAL, "the round can end only once the stock is empty")

    def _check_pile(self, index: int) -> None:
        if not 0 <= index < len(self.state.piles):
            raise Rejected(Reason.ILLEGAL, f"this round has piles 0 to {len(self.state.piles) - 1}")

    def _check_place(self, pile: int) -> None:
        if self._stock_top() is None:
            raise Rejected(Reason.ILLEGAL, "the stock is empty")
        self._check_pile(pile)
        if not self._takes(self.state.piles[pile]):
            raise Rejected(Reason.ILLEGAL, f"pile {pile} is full ({self.rules.cap} cards)")

    def _check_cash(self, piles: tuple[int, ...], stock: bool) -> None:
        if list(piles) != sorted(set(piles)):
            raise Rejected(Reason.ILLEGAL, "list the piles once each, in increasing order")
        for index in piles:
            self._check_pile(index)
            if not self.state.piles[index]:
                raise Rejected(Reason.ILLEGAL, f"pile {index} is empty")
        if stock:
            if self._stock_top() is None:
                raise Rejected(Reason.ILLEGAL, "the stock is empty")
            if not self.rules.stock_in_hand:
                number = self.state.round
                raise Rejected(
                    Reason.ILLEGAL, f"round {number} does not allow the stock's top in hands"
                )
        cards = self._hand(piles, stock)
        if not MIN_HAND <= len(cards) <= MAX_HAND:
            raise Rejected(Reason.ILLEGAL, f"a hand has {MIN_HAND} to {MAX_HAND} cards")
        if not makes_21(cards):
            raise Rejected(Reason.ILLEGAL, f"{' '.join(cards)} cannot total exactly {TARGET}")

    def _check_move(self, source: int, target: int) -> None:
        self._check_pile(source)
        self._check_pile(target)
        if self.state.piles[target]:
            raise Rejected(Reason.ILLEGAL, f"pile {target} is not empty")
        if len(self.state.piles[source]) < MIN_HAND:
            raise Rejected(Reason.ILLEGAL, f"pile {source} needs two cards for a move to change it")

    def _hand(self, piles: tuple[int, ...], stock: bool) -> list[str]:
        cards = [self.state.piles[index][-1] for index in piles]
        top = self._stock_top()
        if stock and top is not None:
            cards.append(top)
        return cards

    def apply(self, seat: int, action: Action) -> list[Event]:
        """Apply ``action`` for ``seat`` and return its events, or raise :class:`Rejected`."""
        self._check(seat, action)
        s = self.state
        events: list[Event] = []
        match action:
            case Place(pile):
                card = self._stock_top()
                assert card is not None
                s.piles[pile].append(card)
                s.drawn[-1] += 1
                events.append(Placed(card=card, pile=pile, **self._stock_fields()))
            case Cash(piles, stock):
                cards = self._hand(piles, stock)
                for index in piles:
                    s.piles[index].pop()
                if stock:
                    s.drawn[-1] += 1
                s.hands += 1
                events.append(
                    Cashed(
                        cards=cards,
                        total=TARGET,
                        piles=list(piles),
                        stock=stock,
                        hands=s.hands,
                        **self._stock_fields(),
                    )
                )
            case Move(source, target):
                card = s.piles[source].pop()
                s.piles[target].append(card)
                events.append(Moved(card=card, source=source, target=target))
            case EndRound():
                events.extend(self._end_round("player"))
            case Resign():
                events.extend(self._end_round("resign"))
        if not s.over and not isinstance(action, EndRound) and not self._can_play():
            events.extend(self._end_round("auto"))
        return events

    def _stock_fields(self) -> dict[str, Any]:
        return {"stock_top": self._stock_top(), "stock_count": self._stock_count()}

    def _end_round(self, ended_by: EndedBy) -> list[Event]:
        s = self.state
        left = self._left()
        bonus = round_bonus(left)
        passed = ended_by != "resign" and s.hands > left
        advanced = passed and s.round < LAST_ROUND
        result = RoundResult(
            round=s.round,
            hands=s.hands,
            left=left,
            bonus=bonus,
            score=(s.hands + bonus) * s.round,
            passed=passed,
        )
        s.results.append(result)
        events: list[Event] = [RoundEnded(result=result, ended_by=ended_by, advanced=advanced)]
        if advanced:
            s.round += 1
            s.piles = [[] for _ in range(self.rules.piles)]
            s.drawn.append(0)
            s.hands = 0
            top = self._stock_top()
            assert top is not None
            events.append(
                RoundStarted(
                    round=s.round, rules=self.rules, stock_top=top, stock_count=self._stock_count()
                )
            )
        else:
            s.over = True
            events.append(GameOver(score=self._score(), seed=s.seed))
        return events

    # Views, result, persistence --------------------------------------------------------------

    def view(self, viewer: int | None) -> View:
        """The state as ``viewer`` sees it; the player and spectators see the same."""
        s = self.state
        return View(
            round=s.round,
            rules=self.rules,
            piles=[list(pile) for pile in s.piles],
            stock_top=self._stock_top(),
            stock_count=self._stock_count(),
            hands=s.hands,
            left=self._left(),
            score=self._score(),
            results=list(s.results),
            over=s.over,
            commitment=s.commitment,
            seed=s.seed if s.over else None,
        )

    def event_view(self, event: Event, viewer: int | None) -> Event:
        """``event`` as ``viewer`` sees it: events never carry hidden cards, so unchanged."""
        return event

    def result(self) -> GameResult:
        """The final outcome; raises ``ValueError`` while the game is still running."""
        s = self.state
        if not s.over:
            raise ValueError("the game is not over")
        last = s.results[-1]
        return GameResult(
            score=self._score(),
            last_round=last.round,
            completed=last.round == LAST_ROUND and last.passed,
            results=list(s.results),
        )

    def dump(self) -> bytes:
        """The whole state as msgpack bytes (deterministic)."""
        return _ENCODER.encode(self.state)

    @classmethod
    def load(cls, data: bytes) -> Self:
        """Restore a game from :meth:`dump` bytes."""
        return cls(_DECODER.decode(data))


def _is_index(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _well_formed(action: Action) -> bool:
    """Whether an action's fields have the right types (Structs do not check on creation)."""
    match action:
        case Place(pile):
            return _is_index(pile)
        case Cash(piles, stock):
            return (
                isinstance(piles, tuple)
                and all(_is_index(index) for index in piles)
                and isinstance(stock, bool)
            )
        case Move(source, target):
            return _is_index(source) and _is_index(target)
    return True


def missing_to_21(values: tuple[int, ...]) -> tuple[set[int], set[int]]:
    """What the group ``values`` (Aces as 1) lacks to make exactly 21: the card values that
    complete it alone (an Ace as 1), and the totals two more cards could bring (when the group
    may take two more)."""
    low = sum(values)
    needed: set[int] = set()
    pairs: set[int] = set()
    for soft in range(values.count(1) + 1):
        missing = TARGET - low - 10 * soft
        if 2 <= missing <= 10:
            needed.add(missing)
        elif missing in (1, 11):
            needed.add(1)
        if missing >= 2 and len(values) <= MAX_HAND - 2:
            pairs.add(missing)
    return needed, pairs
