"""BlackDrez: a multiplayer race to 11 with PokerDrez cards (RULES.md section 1).

Theory of operation
-------------------
A game is a series of rounds played from one stock that is shuffled once and never reshuffled.
The engine is created between rounds (round 0). The runtime starts every round with a
:class:`StartRound` action from the pseudo-seat :data:`SYSTEM`, naming the seats that play it,
and may end the game between rounds with :class:`EndGame` (when fewer than two seats can play).
Each of them gets two face-up cards, dealt one at a time from the seat right of the dealer round
to the dealer. Then the lowest hand acts until it is no longer lowest (ties go to the first tied
seat found going right from the last actor; at the start from the dealer). The round ends with one
winner (a hand of exactly 11, or the last player left), or a split (several 11s on the deal, or
everyone standing on level hands). Won cards go to piles and leave play; the most cards in a pile
wins the game. The game ends at a round's end, or at a start, when the stock cannot give two cards
to each player, after ``max_rounds`` rounds, or when the table ends it (``EndGame``).

Every card is dealt face up, so all viewers see the same thing: only the stock's order (and the
seed, until the game is over) is hidden.

Which action is allowed in which phase (``phase`` in the state)::

    phase            SYSTEM            seat on turn                    other seats
    ---------------  ----------------  ------------------------------  -------------
    between_rounds   start_round       -                               -
                     end_game
    playing          -                 hit (stock not empty)           -
                                       withdraw (always)
                                       stand (every hand level)
    over             -                 -                               -

Everything else is rejected: a wrong type with ``bad_action``, anything once over with
``game_over``, a seat outside the round with ``not_in_round``, a seat off turn (or the system
during a round, or a seat between rounds) with ``not_your_turn``, and a rule breach with
``illegal_action``.

Decisions where RULES.md is silent
----------------------------------
* **Dealer rotation.** After each round the deal passes to the seat right of the seat that dealt.
  If that seat does not play the next round, the first playing seat further right deals.
  ``state.dealer`` (and the view's ``dealer``) is the dealer of the round in play or, between
  rounds, of the round just played, so it always matches the last ``round_started``; the view's
  ``next_dealer`` names the seat due to deal next (before the first round, the first dealer).
* **Withdrawal.** A player withdrawing with ``n`` cards keeps the ``n // 2`` cards they received
  first; the later ones stay in the pot.
* **Bust and withdrawn cards** move from the hand to the ``pot``; the table is the pot, the hands
  still in the round and the carry-over.
* **Splits.** The table's cards are gathered in a fixed order (carry-over, pot, then the hands in
  seat order, each hand in the order dealt). The winners, in seat order, take consecutive equal
  shares; the remaining cards become the carry-over for the next round's winner (or are set aside
  when the game ends).
* **Newcomers.** ``StartRound.newcomers`` names seats taken by a new player since the last round:
  the pile there starts empty, and the cards of the player who left are set aside.
* **Ranking** covers the seats that played at least one round (since their last newcomer); equal
  piles share a place and the next place is skipped (1, 1, 3).
* ``legal_actions(SYSTEM)`` lists a :class:`StartRound` for every set of two or more seats (all
  seats first) without newcomers, then :class:`EndGame`; any valid ``newcomers`` subset of those
  seats is also accepted.
* **The table ends the game** (RULES.md, "fewer than two can play"): :class:`EndGame`, between
  rounds only, ends it with reason ``players`` and the usual ranking of the seats that played a
  round (none if no round was played). The carry-over is set aside, the stock stays where it is.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from typing import ClassVar, Literal, Self, cast

import msgspec

from blackdrez.games.base import Reason, Rejected
from blackdrez.games.blackdrez.model import (
    Action,
    Bust,
    Config,
    EndGame,
    Event,
    GameOver,
    Hit,
    HitCard,
    Place,
    PotSplit,
    Result,
    RoundStarted,
    RoundWon,
    SeatView,
    Stand,
    StartRound,
    State,
    Status,
    Stood,
    Turn,
    View,
    Withdraw,
    Withdrew,
)
from blackdrez.games.blackdrez.model import (
    Phase as Phase,  # (re-exported: the rules' names stay where they were)
)
from blackdrez.games.cards import FIGURE_POINTS, pokerdrez_deck
from blackdrez.games.shuffle import commitment, shuffled

SYSTEM = -1
"""The pseudo-seat of the runtime: it alone may start rounds."""

ELEVEN = 11
JOKER_EXTRA = 5
"""A Joker counts 1, or 6 (1 + this) when that does not take the hand over 11."""

_LOW_POINTS = {card: (1 if card[0] == "J" else FIGURE_POINTS[card[0]]) for card in pokerdrez_deck()}
_ACTIVE = ("playing", "stood")


def hand_value(cards: Sequence[str]) -> int:
    """Return the best value of ``cards``: the highest total not over 11, Jokers counting 6 or 1.

    A bust hand (over 11 even with every Joker at 1) returns that smallest total, so any result
    above 11 means bust.
    """
    low = 0
    jokers = 0
    for card in cards:
        low += _LOW_POINTS[card]
        if card[0] == "J":
            jokers += 1
    if low >= ELEVEN:
        return low
    return low + JOKER_EXTRA * min(jokers, (ELEVEN - low) // JOKER_EXTRA)


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(State)


class BlackDrez:
    """One BlackDrez game: see the module docstring."""

    game: ClassVar[str] = "blackdrez"

    def __init__(self, state: State) -> None:
        self.state = state

    def __reduce__(self) -> tuple[Callable[[bytes], BlackDrez], tuple[bytes]]:
        """Pickled as its :meth:`dump` (table snapshots, the records process): what a compiled
        engine (``tools/compile.py``), which has no instance dictionary to pickle, needs too;
        its MessagePack is made in a fifth of the time pickle takes over the state's fields,
        and read back faster. (A pickle of the state itself, as before, still loads.)"""
        return (restored, (self.dump(),))

    # Creation

    @classmethod
    def _create(cls, config: Config, order: list[str], seed: str | None, dealer: int) -> Self:
        n = config.seats
        state = State(
            config=config,
            seed=seed,
            commitment=commitment(seed) if seed is not None else None,
            order=order,
            dealer=dealer,
            status=["out"] * n,
            hands=[[] for _ in range(n)],
            values=[0] * n,
            piles=[[] for _ in range(n)],
            played=[False] * n,
        )
        return cls(state)

    @classmethod
    def new(cls, config: Config, seed: str) -> Self:
        """Start a game whose stock and first dealer come from the secret ``seed``."""
        dealer = config.first_dealer
        if dealer is None:
            dealer = shuffled(list(range(config.seats)), seed, "dealer")[0]
        return cls._create(config, cls.deal_order(config, seed)[0], seed, dealer)

    @classmethod
    def from_order(cls, config: Config, order: Sequence[str]) -> Self:
        """Start a game from an explicit stock, top card first.

        ``order`` may be shorter than the deck (a short stock), but holds only PokerDrez cards and
        no card more often than there are decks.
        """
        order = list(order)
        available = Counter(pokerdrez_deck(config.deck_count))
        for card, count in Counter(order).items():
            if count > available[card]:
                raise ValueError(
                    f"card {card!r} appears {count} times; the deck holds {available[card]}"
                )
        return cls._create(config, order, None, config.first_dealer or 0)

    @classmethod
    def deal_order(cls, config: Config, seed: str) -> list[list[str]]:
        """The order in which the single stock's cards are dealt for ``seed``."""
        return [shuffled(pokerdrez_deck(config.deck_count), seed, "deck")]

    def dealt(self) -> list[list[str]]:
        """The cards that have left the stock so far, in order."""
        state = self.state
        return [state.order[: state.drawn]]

    @property
    def seed(self) -> str | None:
        """The secret seed (``None`` for a game built from an explicit order)."""
        return self.state.seed

    @property
    def commitment(self) -> str | None:
        """The published SHA-256 commitment to the seed."""
        return self.state.commitment

    @property
    def over(self) -> bool:
        """Whether the game has ended."""
        return self.state.phase == "over"

    @property
    def stock(self) -> int:
        """How many cards the stock still holds."""
        return len(self.state.order) - self.state.drawn

    # Rules

    def legal_actions(self, seat: int) -> list[Action]:
        """Every action ``seat`` may take now (see the module docstring about SYSTEM)."""
        state = self.state
        if state.phase == "between_rounds":
            if seat != SYSTEM:
                return []
            seats = range(state.config.seats)
            starts: list[Action] = [
                StartRound(seats=list(chosen))
                for size in range(len(seats), 1, -1)
                for chosen in itertools.combinations(seats, size)
            ]
            return [*starts, EndGame()]
        if state.phase != "playing" or seat != state.to_act:
            return []
        actions: list[Action] = []
        if state.drawn < len(state.order):
            actions.append(Hit())
        if self._level():
            actions.append(Stand())
        actions.append(Withdraw())
        return actions

    def default_action(self, seat: int) -> Action | None:
        """What the turn timer does: withdraw for the seat on turn, nothing for anyone else."""
        state = self.state
        if state.phase == "playing" and seat == state.to_act:
            return Withdraw()
        return None

    def apply(self, seat: int, action: Action) -> list[Event]:
        """Apply ``action`` for ``seat``; return the events or raise :class:`Rejected`."""
        kind = type(action)
        state = self.state
        if kind is StartRound:
            if state.phase == "over":
                raise Rejected(Reason.GAME_OVER, "the game is over")
            if seat != SYSTEM:
                raise Rejected(Reason.NOT_YOUR_TURN, "only the table starts rounds")
            if state.phase == "playing":
                raise Rejected(Reason.ILLEGAL, "a round is in progress")
            return self._start_round(cast(StartRound, action))
        if kind is EndGame:
            if state.phase == "over":
                raise Rejected(Reason.GAME_OVER, "the game is over")
            if seat != SYSTEM:
                raise Rejected(Reason.NOT_YOUR_TURN, "only the table ends a game")
            if state.phase == "playing":
                raise Rejected(Reason.ILLEGAL, "a round is in progress")
            return [self._game_over("players")]
        if kind is not Hit and kind is not Withdraw and kind is not Stand:
            raise Rejected(Reason.BAD_ACTION, f"not a BlackDrez action: {action!r}")
        if state.phase != "playing":
            if state.phase == "over":
                raise Rejected(Reason.GAME_OVER, "the game is over")
            raise Rejected(Reason.NOT_YOUR_TURN, "no round is in progress")
        if seat != state.to_act:
            if (
                type(seat) is int
                and 0 <= seat < state.config.seats
                and state.status[seat] not in _ACTIVE
            ):
                raise Rejected(Reason.NOT_IN_ROUND, f"seat {seat} is not in the round")
            raise Rejected(Reason.NOT_YOUR_TURN, f"seat {state.to_act} is to act, not {seat!r}")
        if kind is Hit:
            if state.drawn >= len(state.order):
                raise Rejected(Reason.ILLEGAL, "the stock is empty: withdraw or stand")
            return self._hit(seat)
        if kind is Withdraw:
            return self._withdraw(seat)
        if not self._level():
            raise Rejected(Reason.ILLEGAL, "stand only when every hand in the round is level")
        return self._stand(seat)

    def _level(self) -> bool:
        state = self.state
        values = state.values
        seen = None
        for seat, status in enumerate(state.status):
            if status == "playing" or status == "stood":
                if seen is None:
                    seen = values[seat]
                elif values[seat] != seen:
                    return False
        return True

    def _lowest_from(self, last: int) -> int:
        """The lowest active hand, ties going to the first found right of ``last``."""
        state = self.state
        status = state.status
        values = state.values
        n = len(status)
        best = last
        best_value = ELEVEN + 1
        for step in range(1, n + 1):
            seat = (last + step) % n
            if (status[seat] == "playing" or status[seat] == "stood") and values[seat] < best_value:
                best = seat
                best_value = values[seat]
        return best

    def _start_round(self, action: StartRound) -> list[Event]:
        state = self.state
        n = state.config.seats
        seats = action.seats
        newcomers = action.newcomers
        if type(seats) is not list or type(newcomers) is not list:
            raise Rejected(Reason.BAD_ACTION, "seats and newcomers must be lists of seats")
        named: list[object] = [*seats, *newcomers]  # (not yet known to be ints: checked here)
        for seat in named:
            if type(seat) is not int or not 0 <= seat < n:
                raise Rejected(Reason.ILLEGAL, f"no seat {seat!r} at this table")
        if len(set(seats)) != len(seats) or len(set(newcomers)) != len(newcomers):
            raise Rejected(Reason.ILLEGAL, "a seat is named twice")
        if len(seats) < 2:
            raise Rejected(Reason.ILLEGAL, "a round needs at least two players")
        if not set(newcomers) <= set(seats):
            raise Rejected(Reason.ILLEGAL, "a newcomer must play the round")
        for seat in newcomers:
            state.set_aside.extend(state.piles[seat])
            state.piles[seat] = []
            state.played[seat] = False
        playing = sorted(seats)
        if len(state.order) - state.drawn < 2 * len(playing):
            return [self._game_over("stock")]
        dealer = state.dealer if state.round == 0 else (state.dealer + 1) % n
        while dealer not in playing:
            dealer = (dealer + 1) % n
        state.phase = "playing"
        state.round += 1
        state.dealer = dealer
        state.last_actor = None
        state.pot = []
        first = playing.index(dealer) + 1
        deal = playing[first:] + playing[:first]
        status: list[Status] = ["out"] * n
        hands: list[list[str]] = [[] for _ in range(n)]
        values = [0] * n
        order = state.order
        drawn = state.drawn
        count = len(deal)
        for position, seat in enumerate(deal):
            hand = [order[drawn + position], order[drawn + count + position]]
            hands[seat] = hand
            values[seat] = hand_value(hand)
            status[seat] = "playing"
            state.played[seat] = True
        state.drawn = drawn + 2 * count
        state.status = status
        state.hands = hands
        state.values = values
        events: list[Event] = [
            RoundStarted(
                round=state.round,
                seats=playing,
                dealer=dealer,
                hands=[list(hand) for hand in hands],
                values=[values[seat] if hands[seat] else None for seat in range(n)],
                stock=len(order) - state.drawn,
            )
        ]
        elevens = [seat for seat in playing if values[seat] == ELEVEN]
        if len(elevens) == 1:
            self._win(elevens[0], "eleven", events)
        elif elevens:
            self._split(elevens, "eleven", events)
        else:
            state.to_act = self._lowest_from(dealer)
            events.append(Turn(state.to_act))
        return events

    def _hit(self, seat: int) -> list[Event]:
        state = self.state
        card = state.order[state.drawn]
        state.drawn += 1
        hand = state.hands[seat]
        hand.append(card)
        value = hand_value(hand)
        state.values[seat] = value
        state.last_actor = seat
        status = state.status
        for other, other_status in enumerate(status):
            if other_status == "stood":
                status[other] = "playing"
        events: list[Event] = [HitCard(seat, card, value, len(state.order) - state.drawn)]
        if value > ELEVEN:
            status[seat] = "bust"
            state.pot.extend(hand)
            state.hands[seat] = []
            events.append(Bust(seat, value, hand))
            self._after_leaving(seat, events)
        elif value == ELEVEN:
            self._win(seat, "eleven", events)
        else:
            values = state.values
            to_act = seat  # the hitter keeps the turn unless a lower hand is now below it
            for other, other_status in enumerate(status):
                if other_status == "playing" and values[other] < value:
                    to_act = self._lowest_from(seat)
                    break
            state.to_act = to_act
            events.append(Turn(to_act))
        return events

    def _withdraw(self, seat: int) -> list[Event]:
        state = self.state
        hand = state.hands[seat]
        keep = len(hand) // 2
        kept = hand[:keep]
        left = hand[keep:]
        state.piles[seat].extend(kept)
        state.pot.extend(left)
        state.hands[seat] = []
        state.status[seat] = "withdrawn"
        state.last_actor = seat
        status = state.status
        for other, other_status in enumerate(status):
            if other_status == "stood":
                status[other] = "playing"
        events: list[Event] = [Withdrew(seat, kept, left)]
        self._after_leaving(seat, events)
        return events

    def _stand(self, seat: int) -> list[Event]:
        state = self.state
        status = state.status
        status[seat] = "stood"
        state.last_actor = seat
        events: list[Event] = [Stood(seat)]
        n = len(status)
        for step in range(1, n):
            other = (seat + step) % n
            if status[other] == "playing":
                state.to_act = other
                events.append(Turn(other))
                return events
        self._split([s for s in range(n) if status[s] == "stood"], "stand", events)
        return events

    def _after_leaving(self, seat: int, events: list[Event]) -> None:
        """Continue after ``seat`` went bust or withdrew: a last player wins, else next turn."""
        state = self.state
        remaining = [other for other, status in enumerate(state.status) if status in _ACTIVE]
        if len(remaining) == 1:
            self._win(remaining[0], "last_player", events)
            return
        state.to_act = self._lowest_from(seat)
        events.append(Turn(state.to_act))

    def _table(self) -> list[str]:
        """Gather every card on the table, in the documented order, and clear it."""
        state = self.state
        cards = state.carry_over + state.pot
        for seat, hand in enumerate(state.hands):
            if hand:
                cards.extend(hand)
                state.hands[seat] = []
        state.carry_over = []
        state.pot = []
        return cards

    def _mark_losers(self) -> None:
        status = self.state.status
        for seat, seat_status in enumerate(status):
            if seat_status in _ACTIVE:
                status[seat] = "lost"

    def _win(
        self, seat: int, reason: Literal["eleven", "last_player"], events: list[Event]
    ) -> None:
        state = self.state
        cards = self._table()
        state.piles[seat].extend(cards)
        self._mark_losers()
        state.status[seat] = "winner"
        events.append(RoundWon(seat, reason, cards))
        self._end_round(events)

    def _split(
        self, winners: list[int], reason: Literal["eleven", "stand"], events: list[Event]
    ) -> None:
        state = self.state
        cards = self._table()
        size = len(cards) // len(winners)
        shares = [cards[i * size : (i + 1) * size] for i in range(len(winners))]
        for seat, share in zip(winners, shares, strict=True):
            state.piles[seat].extend(share)
        state.carry_over = cards[len(winners) * size :]
        self._mark_losers()
        for seat in winners:
            state.status[seat] = "winner"
        events.append(PotSplit(winners, reason, shares, list(state.carry_over)))
        self._end_round(events)

    def _end_round(self, events: list[Event]) -> None:
        state = self.state
        state.to_act = None
        players = sum(1 for status in state.status if status != "out")
        max_rounds = state.config.max_rounds
        if max_rounds is not None and state.round >= max_rounds:
            events.append(self._game_over("max_rounds"))
        elif len(state.order) - state.drawn < 2 * players:
            events.append(self._game_over("stock"))
        else:
            state.phase = "between_rounds"

    def _game_over(self, reason: Literal["stock", "max_rounds", "players"]) -> GameOver:
        state = self.state
        state.phase = "over"
        state.to_act = None
        state.set_aside.extend(state.carry_over)
        state.carry_over = []
        sizes = [(len(pile), seat) for seat, pile in enumerate(state.piles) if state.played[seat]]
        sizes.sort(key=lambda item: (-item[0], item[1]))
        ranking: list[Place] = []
        place = 1
        for cards, group in itertools.groupby(sizes, key=lambda item: item[0]):
            seats = [seat for _, seat in group]
            ranking.append(Place(place, seats, cards))
            place += len(seats)
        state.result = Result(ranking, state.round, reason)
        return GameOver(state.result, state.seed, list(state.set_aside))

    # Views and storage

    def result(self) -> Result | None:
        """The final outcome once the game is over, else ``None``."""
        return self.state.result

    def view(self, viewer: int | None) -> View:
        """The game as ``viewer`` (a seat, SYSTEM or ``None`` for a spectator) sees it."""
        state = self.state
        over = state.phase == "over"
        seats = [
            SeatView(
                seat=seat,
                in_round=status != "out",
                status=status,
                hand=list(state.hands[seat]),
                value=state.values[seat] if state.hands[seat] else None,
                pile=list(state.piles[seat]),
            )
            for seat, status in enumerate(state.status)
        ]
        next_dealer = None
        if state.phase == "between_rounds":
            next_dealer = state.dealer if state.round == 0 else (state.dealer + 1) % len(seats)
        return View(
            round=state.round,
            phase=state.phase,
            dealer=state.dealer,
            next_dealer=next_dealer,
            to_act=state.to_act,
            last_actor=state.last_actor,
            seats=seats,
            pot=list(state.pot),
            carry_over=list(state.carry_over),
            set_aside=list(state.set_aside),
            stock=len(state.order) - state.drawn,
            decks=state.config.deck_count,
            commitment=state.commitment,
            seed=state.seed if over else None,
            result=state.result,
        )

    def event_view(self, event: Event, viewer: int | None) -> Event:
        """``event`` as ``viewer`` sees it: every BlackDrez event is public as it is."""
        return event

    def dump(self) -> bytes:
        """The whole state as MessagePack bytes."""
        return _ENCODER.encode(self.state)

    @classmethod
    def load(cls, data: bytes) -> Self:
        """Restore a game written by :meth:`dump`."""
        return cls(_DECODER.decode(data))


def restored(data: bytes) -> BlackDrez:
    """The game a pickle of a :class:`BlackDrez` holds (its :meth:`~BlackDrez.dump`)."""
    return BlackDrez.load(data)
