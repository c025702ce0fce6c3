"""Blue Jacket: a two-deck solitaire of three rows built up in threes.

Theory of operation
-------------------
The layout is 24 *row piles* (three rows of eight), the *Aces pile*, eight *bottom piles* and the
face-down *stock* (RULES.md section 3). Row 1 builds 2-5-8-J, row 2 builds 3-6-9-Q, row 3 builds
4-7-10-K, each pile in one suit. Every row pile is always in one of three shapes:

* **empty**: takes only its row's starting rank, of any suit;
* **misplaced**: one card that is not its row's starting rank; it accepts nothing until it leaves;
* **foundation**: its bottom card is its row's starting rank; it takes the same suit three ranks
  up (so never more than four cards), and its cards never leave (see Decisions).

A location is a short string: ``"r1.1"`` .. ``"r3.8"`` (row.pile, 1-based), ``"b1"`` .. ``"b8"``
and ``"aces"``. The *available* cards are the top card of each bottom pile and each misplaced
row card. The actions are:

* ``move(source, target)``: an available card to the Aces pile (Aces only), onto a foundation
  pile it builds on, into an empty row pile (its row's starting rank only) or into an empty bottom
  pile;
* ``interchange(a, b)``: two misplaced row piles swap their cards when each card is the starting
  rank of the other's row;
* ``deal``: one stock card onto each bottom pile, only while every row pile holds a card;
* ``resign``.

Phases and the actions they allow (one player, seat 0; there are no turns otherwise)::

    phase     move   interchange   deal                                    resign
    playing   yes    yes           while all 24 row piles hold a card     yes
                                   and the stock is not empty
    over      no     no            no                                      no

The game is ``over`` when it is won (all 104 cards on foundations), when the player resigns, or
when no action but resign is legal (a deal counts as a legal action while it is allowed). The
score is the number of cards on foundations: the Aces pile plus every foundation row pile.

Decisions where RULES.md is silent (also in docs/rules/blue_jacket.md):

* Cards on a foundation (the Aces pile or a foundation row pile) never leave it, so the score
  never falls and "put another card on a foundation" means "raise the score".
* Moving the only card of a bottom pile to an empty bottom pile changes nothing but its column,
  so it is not a legal move (this also guarantees every game ends).
* An interchange involves two different rows (in one row both cards would already be on
  foundations).

After every action the engine asks :meth:`BlueJacket.foundation_progress_possible` (a search
bounded by ``Config.progress_budget``; 0 turns it off) whether any sequence of moves can still
put a card on a foundation, using the real stock order. Only the yes / no / unknown answer is
shown (``View.progress``); when it first becomes "no", a ``no_progress`` event tells the player.

The deal: the shuffled order (``standard_deck(2)``, context ``"deck"``) gives the starters (the
first Two, the first Three of another suit, the first Four of a third suit) and then the other
cards in order: row 1 piles 2-8, row 2 piles 2-8, row 3 piles 2-8, the bottom row, the stock.
:meth:`BlueJacket.deal_order` is that reveal order; the first 32 cards are revealed at once,
then eight per deal.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar, Literal, Self

import msgspec

from blackdrez.games.base import Reason, Rejected
from blackdrez.games.cards import RANK_VALUE, RANKS, rank_of, standard_deck
from blackdrez.games.shuffle import commitment, shuffled

ROWS = 3
PILES = 8
STARTERS = (2, 3, 4)
"""The starting rank of each row (row 1 is index 0)."""
TOP_RANK = 13
STEP = 3
LAYOUT = ROWS * PILES + PILES
"""Cards revealed by the initial deal: 24 row cards and 8 bottom cards."""
DECK_SIZE = 104
ACES = "aces"
DEFAULT_PROGRESS_BUDGET = 4000
"""Search nodes for the progress question after each action: about 10 microseconds a node, so
at most about 40 ms; real positions rarely need more than a few hundred nodes."""
MAX_PROGRESS_BUDGET = 1_000_000

Ending = Literal["won", "resigned", "no_moves"]


def row_location(row: int, pile: int) -> str:
    """The wire name of a row pile from 0-based indices, e.g. ``row_location(0, 0) == "r1.1"``."""
    return f"r{row + 1}.{pile + 1}"


def bottom_location(pile: int) -> str:
    """The wire name of a bottom pile from its 0-based index, e.g. ``"b1"``."""
    return f"b{pile + 1}"


_ROW_AT = {row_location(r, p): (r, p) for r in range(ROWS) for p in range(PILES)}
_BOTTOM_AT = {bottom_location(i): i for i in range(PILES)}
LOCATIONS = (*_ROW_AT, *_BOTTOM_AT, ACES)
"""Every location name, in a fixed order."""


def row_of_rank(rank: int) -> int:
    """The row (0-based) whose piles hold ``rank`` (2 to King)."""
    return (rank - STARTERS[0]) % ROWS


def is_starter(card: str, row: int) -> bool:
    """Whether ``card`` is the starting rank of ``row`` (0-based)."""
    return RANK_VALUE[card[0]] == STARTERS[row]  # rank_of, inlined: the engine's hottest call


def is_foundation(pile: Sequence[str], row: int) -> bool:
    """Whether a row pile is a foundation: its bottom card is its row's starting rank."""
    return bool(pile) and is_starter(pile[0], row)


def next_card(card: str) -> str | None:
    """The card that builds on ``card`` (same suit, three up), or ``None`` above Ten."""
    return _NEXT_CARD[card]


def _built_on(card: str) -> str | None:
    rank = rank_of(card) + STEP
    return f"{RANKS[rank - 1]}{card[1]}" if rank <= TOP_RANK else None


_NEXT_CARD = {card: _built_on(card) for card in standard_deck()}
""":func:`next_card` of every card, worked out once (the progress search asks thousands of
times a game)."""


def reveal_order(order: Sequence[str]) -> list[str]:
    """The order in which the cards of a shuffled ``order`` are revealed (starters first).

    Raises ``ValueError`` unless ``order`` is exactly two standard decks.
    """
    if len(order) != DECK_SIZE or Counter(order) != Counter(standard_deck(2)):
        raise ValueError("the order must hold exactly two standard 52-card decks")
    picked: list[int] = []
    suits: set[str] = set()
    for rank in STARTERS:
        index = next(
            i for i, card in enumerate(order) if rank_of(card) == rank and card[1] not in suits
        )
        picked.append(index)
        suits.add(order[index][1])
    rest = [card for i, card in enumerate(order) if i not in picked]
    return [order[i] for i in picked] + rest


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Table options. ``progress_budget``: search nodes for the progress question (0: off)."""

    progress_budget: int = DEFAULT_PROGRESS_BUDGET

    def __post_init__(self) -> None:
        budget = self.progress_budget
        if not isinstance(budget, int) or isinstance(budget, bool):
            raise ValueError("progress_budget must be an integer")
        if not 0 <= budget <= MAX_PROGRESS_BUDGET:
            raise ValueError(f"progress_budget must be between 0 and {MAX_PROGRESS_BUDGET}")


# Actions -------------------------------------------------------------------------------------


class Move(msgspec.Struct, frozen=True, tag="move", tag_field="type"):
    """Move the available card at ``source`` to ``target`` (location names)."""

    source: str
    target: str


class Interchange(msgspec.Struct, frozen=True, tag="interchange", tag_field="type"):
    """Swap the single cards of row piles ``a`` and ``b``."""

    a: str
    b: str


class Deal(msgspec.Struct, frozen=True, tag="deal", tag_field="type"):
    """Deal one stock card onto each bottom pile."""


class Resign(msgspec.Struct, frozen=True, tag="resign", tag_field="type"):
    """End the game now with the current score."""


Action = Move | Interchange | Deal | Resign


# Events --------------------------------------------------------------------------------------


class Moved(msgspec.Struct, frozen=True, kw_only=True, tag="moved", tag_field="type"):
    """``card`` went from ``source`` to ``target``; ``score`` is the score after it."""

    card: str
    source: str
    target: str
    score: int


class Interchanged(msgspec.Struct, frozen=True, kw_only=True, tag="interchanged", tag_field="type"):
    """``card_a`` went from ``a`` to ``b`` and ``card_b`` from ``b`` to ``a``."""

    a: str
    b: str
    card_a: str
    card_b: str
    score: int


class Dealt(msgspec.Struct, frozen=True, kw_only=True, tag="dealt", tag_field="type"):
    """``cards[i]`` went onto bottom pile ``i + 1``; ``stock_count`` cards remain."""

    cards: list[str]
    stock_count: int


class NoProgress(msgspec.Struct, frozen=True, kw_only=True, tag="no_progress", tag_field="type"):
    """No sequence of moves can put another card on a foundation (the score is final)."""

    score: int


class GameOver(msgspec.Struct, frozen=True, kw_only=True, tag="game_over", tag_field="type"):
    """The game ended (``ending``: won, resigned or no_moves); the seed is revealed."""

    score: int
    won: bool
    ending: Ending
    seed: str | None


Event = Moved | Interchanged | Dealt | NoProgress | GameOver


class View(msgspec.Struct, frozen=True, kw_only=True):
    """What the player (and any spectator) sees. Piles list their cards bottom first.

    ``rows[r][p]`` is row pile ``"r{r+1}.{p+1}"``, ``bottom[i]`` is ``"b{i+1}"`` (every card of
    a bottom pile is face up; only the last can move). ``moves``: actions played, resign
    excluded. ``progress``: whether some sequence of moves can still raise the score (``None``:
    unknown or not checked).
    """

    rows: list[list[list[str]]]
    bottom: list[list[str]]
    aces: list[str]
    stock_count: int
    score: int
    can_deal: bool
    moves: int
    progress: bool | None
    over: bool
    won: bool
    ending: Ending | None
    commitment: str | None
    seed: str | None


class Result(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of a finished game."""

    score: int
    won: bool
    ending: Ending
    moves: int


class State(msgspec.Struct, kw_only=True):
    """The whole game state; its msgpack encoding is the dump."""

    config: Config
    seed: str | None
    commitment: str | None
    order: list[str]
    """The reveal order (``deal_order``); ``order[revealed:]`` is the stock, top first."""
    revealed: int
    rows: list[list[list[str]]]
    bottom: list[list[str]]
    aces: list[str]
    moves: int
    progress: bool | None
    over: bool
    won: bool
    ending: Ending | None


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(State)


# The progress search -------------------------------------------------------------------------


def progress_possible(state: State, budget: int) -> bool | None:
    """Whether some sequence of legal moves from ``state`` puts another card on a foundation.

    Returns ``True`` or ``False`` when it knows, ``None`` when ``budget`` search nodes ran out.
    It is a depth-first search over the moves that do *not* raise the score (those are: a
    misplaced row card to an empty bottom pile, the top of a bottom pile of two or more cards to
    an empty bottom pile, and a deal), checking at each position whether a scoring move is
    available. Two reductions keep it small, both exact:

    * Emptying a row pile matters only for the empty pile it leaves (its card stays available on
      the bottom row), so the search empties at most one pile per row, and only in a row without
      an empty pile.
    * Positions that differ only in the order of the bottom piles are searched once.
    """
    if state.over:
        return False
    rows = state.rows
    wanted: set[str] = set()
    row_empty = [False] * ROWS
    misplaced: list[list[str]] = [[] for _ in range(ROWS)]
    for r in range(ROWS):
        for pile in rows[r]:
            if not pile:
                row_empty[r] = True
            elif is_starter(pile[0], r):
                follow = next_card(pile[-1])
                if follow is not None:
                    wanted.add(follow)
            else:
                misplaced[r].append(pile[0])
    row_cards = [card for cards in misplaced for card in cards]

    def scores(card: str, empty: Sequence[bool]) -> bool:
        rank = rank_of(card)
        if rank == 1 or card in wanted:
            return True
        return rank in STARTERS and empty[rank - STARTERS[0]]

    if any(scores(card, row_empty) for card in row_cards):
        return True
    for r, cards in enumerate(misplaced):
        for card in cards:
            other = rank_of(card) - STARTERS[0]
            if 0 <= other < ROWS and any(is_starter(c, r) for c in misplaced[other]):
                return True
    # Rows whose starting rank some misplaced row card holds (it stays available when moved).
    starter_rows = {row_of_rank(rank_of(card)) for card in row_cards if rank_of(card) in STARTERS}
    stock = state.order[state.revealed :]

    start = (tuple(tuple(pile) for pile in state.bottom), 0, 0)
    seen = {(tuple(sorted(start[0])), 0, 0)}
    stack = [start]
    expanded = 0
    while stack:
        if expanded >= budget:
            return None
        expanded += 1
        bottom, vacated, dealt = stack.pop()
        empty = [row_empty[r] or bool(vacated >> r & 1) for r in range(ROWS)]
        if any(empty[r] and r in starter_rows for r in range(ROWS)):
            return True
        if any(pile and scores(pile[-1], empty) for pile in bottom):
            return True
        children = []
        free = next((i for i, pile in enumerate(bottom) if not pile), None)
        if free is not None:
            for i, column in enumerate(bottom):
                if len(column) >= 2:
                    after = list(bottom)
                    after[i] = column[:-1]
                    after[free] = (column[-1],)
                    children.append((tuple(after), vacated, dealt))
            for r in range(ROWS):
                if misplaced[r] and not empty[r]:
                    after = list(bottom)
                    after[free] = (misplaced[r][0],)
                    children.append((tuple(after), vacated | 1 << r, dealt))
        if not any(empty) and dealt * PILES < len(stock):
            cards = stock[dealt * PILES : (dealt + 1) * PILES]
            after = [(*pile, card) for pile, card in zip(bottom, cards, strict=True)]
            children.append((tuple(after), vacated, dealt + 1))
        for child in children:
            key = (tuple(sorted(child[0])), child[1], child[2])
            if key not in seen:
                seen.add(key)
                stack.append(child)
    return False


# The engine ----------------------------------------------------------------------------------


class BlueJacket:
    """One game of Blue Jacket (see the module docstring)."""

    game: ClassVar[str] = "blue_jacket"

    def __init__(self, state: State) -> None:
        self._s = state

    # Construction ----------------------------------------------------------------------------

    @classmethod
    def deal_order(cls, config: Config, seed: str) -> list[list[str]]:
        """The order in which ``seed``'s deck is revealed: the three starters, then the rest."""
        return [reveal_order(shuffled(standard_deck(2), seed, "deck"))]

    @classmethod
    def new(cls, config: Config, seed: str) -> Self:
        """Start a game whose deck comes from ``seed``."""
        return cls._start(config, cls.deal_order(config, seed)[0], seed)

    @classmethod
    def from_order(cls, config: Config, order: Sequence[str]) -> Self:
        """Start a game from an explicit shuffled order of the 104 cards (RULES.md, Deal)."""
        return cls._start(config, reveal_order(list(order)), None)

    @classmethod
    def _start(cls, config: Config, order: list[str], seed: str | None) -> Self:
        rest = iter(order[ROWS:])
        rows = [[[order[r]]] + [[next(rest)] for _ in range(PILES - 1)] for r in range(ROWS)]
        state = State(
            config=config,
            seed=seed,
            commitment=commitment(seed) if seed is not None else None,
            order=order,
            revealed=LAYOUT,
            rows=rows,
            bottom=[[next(rest)] for _ in range(PILES)],
            aces=[],
            moves=0,
            progress=None,
            over=False,
            won=False,
            ending=None,
        )
        engine = cls(state)
        engine._check_progress()
        return engine

    # Reading the state -----------------------------------------------------------------------

    @property
    def seed(self) -> str | None:
        """The game's seed (``None`` when built from a card order)."""
        return self._s.seed

    @property
    def commitment(self) -> str | None:
        """SHA-256 of the seed, published before the first card."""
        return self._s.commitment

    @property
    def over(self) -> bool:
        """Whether the game has ended."""
        return self._s.over

    @property
    def score(self) -> int:
        """Cards on foundations: the Aces pile plus every foundation row pile."""
        s = self._s
        total = len(s.aces)
        for starter, row in zip(STARTERS, s.rows, strict=True):
            for pile in row:  # is_foundation, inlined: computed after every action
                if pile and RANK_VALUE[pile[0][0]] == starter:
                    total += len(pile)
        return total

    @property
    def stock_count(self) -> int:
        """Cards left in the stock."""
        return len(self._s.order) - self._s.revealed

    def dealt(self) -> list[list[str]]:
        """The cards revealed so far, in :meth:`deal_order`'s order."""
        return [self._s.order[: self._s.revealed]]

    def can_deal(self) -> bool:
        """Whether a deal is allowed now."""
        s = self._s
        return not s.over and self.stock_count > 0 and all(pile for row in s.rows for pile in row)

    def foundation_progress_possible(self, budget: int = DEFAULT_PROGRESS_BUDGET) -> bool | None:
        """Whether some sequence of moves can still put a card on a foundation.

        ``True``: yes; ``False``: proved impossible; ``None``: ``budget`` search nodes ran out.
        See :func:`progress_possible`.
        """
        return progress_possible(self._s, budget)

    # Legal actions ---------------------------------------------------------------------------

    def _available(self) -> list[tuple[str, str, bool]]:
        """``(location, card, may_go_to_an_empty_bottom_pile)`` for every available card."""
        s = self._s
        cards = [
            (bottom_location(i), pile[-1], len(pile) >= 2)
            for i, pile in enumerate(s.bottom)
            if pile
        ]
        for r in range(ROWS):
            for p, pile in enumerate(s.rows[r]):
                if pile and not is_starter(pile[0], r):
                    cards.append((row_location(r, p), pile[0], True))
        return cards

    def _moves(self) -> list[Move]:
        s = self._s
        builds: dict[str, list[str]] = {}
        empty_rows: list[list[str]] = [[] for _ in range(ROWS)]
        for r in range(ROWS):
            for p, pile in enumerate(s.rows[r]):
                if not pile:
                    empty_rows[r].append(row_location(r, p))
                elif is_starter(pile[0], r):
                    follow = next_card(pile[-1])
                    if follow is not None:
                        builds.setdefault(follow, []).append(row_location(r, p))
        empty_bottom = [bottom_location(i) for i, pile in enumerate(s.bottom) if not pile]
        moves: list[Move] = []
        for source, card, spreads in self._available():
            rank = rank_of(card)
            targets: list[str] = []
            if rank == 1:
                targets.append(ACES)
            targets.extend(builds.get(card, ()))
            if rank in STARTERS:
                targets.extend(empty_rows[rank - STARTERS[0]])
            if spreads:
                targets.extend(empty_bottom)
            moves.extend(Move(source, target) for target in targets)
        return moves

    def _interchanges(self) -> list[Interchange]:
        # holders[x][y]: the piles of row x holding a card of row y's starting rank.
        holders: list[list[list[str]]] = [[[] for _ in range(ROWS)] for _ in range(ROWS)]
        for location, card, _ in self._available():
            if location[0] == "r" and rank_of(card) in STARTERS:
                holders[_ROW_AT[location][0]][rank_of(card) - STARTERS[0]].append(location)
        return [
            Interchange(a, b)
            for x in range(ROWS)
            for y in range(ROWS)
            if x != y
            for a in holders[x][y]
            for b in holders[y][x]
        ]

    def _plays(self) -> list[Action]:
        plays: list[Action] = [*self._moves(), *self._interchanges()]
        if self.can_deal():
            plays.append(Deal())
        return plays

    def legal_actions(self, seat: int) -> list[Action]:
        """Every legal action for ``seat`` (only seat 0 plays), resign last."""
        if seat != 0 or self._s.over:
            return []
        return [*self._plays(), Resign()]

    def default_action(self, seat: int) -> Action | None:
        """``None``: a solitaire has no turn timer."""
        return None

    # Checking an action ----------------------------------------------------------------------

    def _check(self, seat: int, action: Any) -> None:
        if not _well_formed(action):
            raise Rejected(Reason.BAD_ACTION, f"not a Blue Jacket action: {action!r}")
        if seat != 0:
            raise Rejected(Reason.NOT_YOUR_TURN, "Blue Jacket has one player, seat 0")
        if self._s.over:
            raise Rejected(Reason.GAME_OVER, "the game is over")
        match action:
            case Move(source=source, target=target):
                problem = self._move_problem(source, target)
            case Interchange(a=a, b=b):
                problem = self._interchange_problem(a, b)
            case Deal():
                problem = self._deal_problem()
            case _:
                problem = None
        if problem is not None:
            raise Rejected(Reason.ILLEGAL, problem)

    def _move_problem(self, source: str, target: str) -> str | None:
        s = self._s
        if source == ACES:
            return "nothing leaves the Aces pile"
        if source in _ROW_AT:
            r, p = _ROW_AT[source]
            pile = s.rows[r][p]
            if not pile:
                return f"{source} is empty"
            if is_starter(pile[0], r):
                return f"{source} is a foundation: its cards stay there"
        else:
            pile = s.bottom[_BOTTOM_AT[source]]
            if not pile:
                return f"{source} is empty"
        card = pile[-1]
        if target == ACES:
            return None if rank_of(card) == 1 else "the Aces pile takes Aces only"
        if target in _BOTTOM_AT:
            if s.bottom[_BOTTOM_AT[target]]:
                return "a bottom pile takes a card only when it is empty"
            if source in _BOTTOM_AT and len(pile) == 1:
                return "moving a bottom pile's only card to another bottom pile changes nothing"
            return None
        r, p = _ROW_AT[target]
        goal = s.rows[r][p]
        if not goal:
            if is_starter(card, r):
                return None
            return f"an empty pile of row {r + 1} takes only a {RANKS[STARTERS[r] - 1]}"
        if not is_starter(goal[0], r):
            return f"{target} accepts nothing until its card {goal[0]} moves away"
        if next_card(goal[-1]) != card:
            return f"{card} does not build on {goal[-1]} (same suit, three ranks up)"
        return None

    def _interchange_problem(self, a: str, b: str) -> str | None:
        s = self._s
        if a not in _ROW_AT or b not in _ROW_AT:
            return "an interchange swaps the cards of two row piles"
        (row_a, pile_a), (row_b, pile_b) = _ROW_AT[a], _ROW_AT[b]
        if row_a == row_b:
            return "an interchange needs piles in two different rows"
        cards_a, cards_b = s.rows[row_a][pile_a], s.rows[row_b][pile_b]
        if len(cards_a) != 1 or len(cards_b) != 1:
            return "an interchange needs two piles of one card each"
        if not (is_starter(cards_a[0], row_b) and is_starter(cards_b[0], row_a)):
            return "each card must be the starting rank of the other's row"
        return None

    def _deal_problem(self) -> str | None:
        if self.stock_count == 0:
            return "the stock is empty"
        if not self.can_deal():
            return "deal only while every row pile holds a card"
        return None

    # Applying an action ----------------------------------------------------------------------

    def _take(self, location: str) -> str:
        if location in _ROW_AT:
            r, p = _ROW_AT[location]
            return self._s.rows[r][p].pop()
        return self._s.bottom[_BOTTOM_AT[location]].pop()

    def _put(self, location: str, card: str) -> None:
        if location == ACES:
            self._s.aces.append(card)
        elif location in _ROW_AT:
            r, p = _ROW_AT[location]
            self._s.rows[r][p].append(card)
        else:
            self._s.bottom[_BOTTOM_AT[location]].append(card)

    def apply(self, seat: int, action: Action) -> list[Event]:
        """Apply ``action`` for ``seat`` and return the events, or raise :class:`Rejected`."""
        self._check(seat, action)
        s = self._s
        events: list[Event] = []
        match action:
            case Move(source=source, target=target):
                card = self._take(source)
                self._put(target, card)
                events.append(Moved(card=card, source=source, target=target, score=self.score))
            case Interchange(a=a, b=b):
                card_a, card_b = self._take(a), self._take(b)
                self._put(a, card_b)
                self._put(b, card_a)
                events.append(
                    Interchanged(a=a, b=b, card_a=card_a, card_b=card_b, score=self.score)
                )
            case Deal():
                cards = s.order[s.revealed : s.revealed + PILES]
                s.revealed += len(cards)
                for pile, card in zip(s.bottom, cards, strict=False):
                    pile.append(card)
                events.append(Dealt(cards=cards, stock_count=self.stock_count))
            case Resign():
                return self._finish("resigned")
        s.moves += 1
        if self.score == DECK_SIZE:
            events.extend(self._finish("won"))
        elif not (self.can_deal() or self._moves() or self._interchanges()):
            events.extend(self._finish("no_moves"))
        elif self._check_progress():
            events.append(NoProgress(score=self.score))
        return events

    def _check_progress(self) -> bool:
        """Refresh ``progress``; return whether it has just become ``False``."""
        s = self._s
        if s.progress is False or s.config.progress_budget == 0:
            return False
        s.progress = progress_possible(s, s.config.progress_budget)
        return s.progress is False

    def _finish(self, ending: Ending) -> list[Event]:
        s = self._s
        s.over = True
        s.won = ending == "won"
        s.ending = ending
        if ending != "resigned":
            s.progress = False
        return [GameOver(score=self.score, won=s.won, ending=ending, seed=s.seed)]

    # Views, result, serialization ------------------------------------------------------------

    def view(self, viewer: int | None) -> View:
        """The game as ``viewer`` sees it (everyone sees the same: all but the stock is open)."""
        s = self._s
        return View(
            rows=[[list(pile) for pile in row] for row in s.rows],
            bottom=[list(pile) for pile in s.bottom],
            aces=list(s.aces),
            stock_count=self.stock_count,
            score=self.score,
            can_deal=self.can_deal(),
            moves=s.moves,
            progress=s.progress,
            over=s.over,
            won=s.won,
            ending=s.ending,
            commitment=s.commitment,
            seed=s.seed if s.over else None,
        )

    def event_view(self, event: Event, viewer: int | None) -> Event:
        """``event`` as ``viewer`` sees it: events never carry hidden cards, so unchanged."""
        return event

    def result(self) -> Result:
        """The final outcome; raises ``ValueError`` while the game is still running."""
        s = self._s
        if not s.over or s.ending is None:
            raise ValueError("the game is not over")
        return Result(score=self.score, won=s.won, ending=s.ending, moves=s.moves)

    def dump(self) -> bytes:
        """The whole state as msgpack bytes (deterministic)."""
        return _ENCODER.encode(self._s)

    @classmethod
    def load(cls, data: bytes) -> Self:
        """Restore a game from :meth:`dump` bytes."""
        return cls(_DECODER.decode(data))


def _well_formed(action: object) -> bool:
    """Whether ``action`` is an action whose locations exist (Structs do not check on creation)."""
    match action:
        case Move(source=source, target=target):
            return source in LOCATIONS and target in LOCATIONS
        case Interchange(a=a, b=b):
            return a in LOCATIONS and b in LOCATIONS
        case Deal() | Resign():
            return True
    return False
