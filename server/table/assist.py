"""Solitaire sessions beyond the rules: hints, undo, auto-finish, daily deals, ranked results.

Theory of operation
-------------------
Everything here is pure (no I/O, no clock of its own): the room calls it while it runs a
command, so a session rebuilt from its log gets the same hints, undos and results.

*Undo* (:class:`Assist`). Before each action the room notes the engine's dump and the cards it
has revealed (``engine.dealt()``). An action that revealed nothing and did not end the game can
be taken back: its "before" dump goes on the undo stack. An action that revealed a card (a deal
in Blue Jacket, a new stock card or round in Blackjack Piles) or ended the game (the seed is
then shown) empties the stack. So an undo restores exactly an earlier state, and never one
from before a reveal: nothing new can be learnt by undoing and playing again. ``played`` is the
game's actions with the undone ones taken out: the record of the game as it stands, which
replays from the seed to the same state.

*Hints*: the expert's move (:func:`expert_hint`) for what the player sees (:class:`HintJob`: the
view, the legal actions, and in Blackjack Piles the cards cashed this round, all shown to the
player), so a hint tells nothing about the stock. The expert takes up to about a second of CPU,
so the node runs :func:`expert_hint` in its hint worker (``blackdrez.server.hints``), off the event
loop,
and logs the move it got with the ``hint`` command (``LogEntry.hint``): a table rebuilt from its
log recomputes nothing. When the expert is busy or late, the best quick reference bot answers
(:func:`quick_hint`: ``heuristic``, else ``greedy``; tens of milliseconds); the reply says which.
A room run without a node (the table harness) asks the quick bot inline.

*Par* (:func:`par_of`): what perfect play scores on a finished game's deal, by the game's bounded
search; the node computes it in the same worker and logs it (``commands.ParFound``).

*Auto-finish* (:func:`forced_finish`): in Blue Jacket, once the stock is empty, if playing
scoring moves in any order wins (each card to the Aces pile, a foundation, or its row by
interchange), the rest is forced and the room plays it. Blackjack Piles needs nothing more: its
engine already ends a round as soon as nothing can be played.

*Daily deals*: one per solitaire per UTC day (:func:`day_of`, :func:`day_bounds`); the store
draws its seed the first time it is asked for and keeps it; the commitment is published at
once, the seed only once the day has ended (the room never shows a daily game's seed).

*Ranked results* (:class:`Finished`): a ranked session's finished game, with its verifiable
record, goes on two boards (:func:`board`): its UTC day's and all time's, for its game, its
kind of deal (daily or random) and its class (played without help, or with hints or undos).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

import msgspec

from blackdrez.games import GAMES
from blackdrez.games.blackjack_piles import expert as piles_expert
from blackdrez.games.blue_jacket import expert as blue_jacket_expert
from blackdrez.games.blue_jacket import rules as blue_jacket
from blackdrez.games.records import encode_record
from blackdrez.games.verify import record_of

HINT_STRATEGIES = ("heuristic", "greedy")
"""The bots a hint asks, best first: the first one a game has gives its hints."""

DAY = 86_400.0


# --------------------------------------------------------------------------- undo


@dataclass
class Assist:
    """A solitaire session's game as played: its actions, its undo stack, its help counts."""

    played: list[tuple[int, Any]] = field(default_factory=list)
    """``(seat, action)`` applied in the current game, undone ones taken out."""
    undo: list[tuple[bytes, int]] = field(default_factory=list)
    """For each move that can be taken back (last on top): the engine's dump before it, and
    its position in ``played``."""
    hints: int = 0
    undos: int = 0

    def key(self) -> tuple[int, ...]:
        """What a command can change here, as one comparable value (``Room.state_key``)."""
        return (len(self.played), len(self.undo), self.hints, self.undos)

    def new_game(self) -> None:
        """Forget the last game: a new one starts with nothing played and no help."""
        self.played.clear()
        self.undo.clear()
        self.hints = self.undos = 0

    def applied(
        self, seat: int, action: Any, before: bytes, revealed: list[list[str]], engine: Any
    ) -> None:
        """Note an applied action: ``before`` is the engine's dump and ``revealed`` its dealt
        cards before it; ``engine`` is the game after it."""
        self.played.append((seat, action))
        if engine.over or engine.dealt() != revealed:
            self.undo.clear()
        else:
            self.undo.append((before, len(self.played) - 1))

    def take_back(self, engine: Any) -> Any:
        """Restore ``engine`` (in place) to before the last move that can be taken back, and
        return that move. The caller checks that :attr:`undo` is not empty."""
        dump, position = self.undo.pop()
        _, action = self.played[position]
        del self.played[position:]
        # In place: the room's engine object stands for its game (see hosting.table_record).
        engine.__dict__.update(type(engine).load(dump).__dict__)
        self.undos += 1
        return action


# --------------------------------------------------------------------------- hints


def hint_strategy(game: str) -> str:
    """The name of the quick bot that answers ``game``'s hints when the expert cannot."""
    strategies = GAMES[game].strategies
    return next((name for name in HINT_STRATEGIES if name in strategies), next(iter(strategies)))


@dataclass(frozen=True)
class HintJob:
    """What a hint is computed from: what the player sees, nothing more (picklable: it goes
    to a worker process)."""

    game: str
    view: Any
    legal: list[Any]
    cashed: list[str]
    """Blackjack Piles: the cards cashed this round (all shown to the player); else empty."""

    def key(self) -> bytes:
        """The job as bytes: equal jobs have equal keys (a remembered answer serves both)."""
        return msgspec.msgpack.encode([self.game, self.view, self.legal, self.cashed])


def hint_job(game: str, engine: Any, seat: int) -> HintJob | None:
    """The job of a hint for ``seat`` now, or ``None`` when it has no legal action."""
    legal = engine.legal_actions(seat)
    if not legal:
        return None
    cashed = piles_expert.seen_cashed(engine) if game == "blackjack_piles" else []
    return HintJob(game, engine.view(seat), legal, cashed)


def expert_hint(job: HintJob) -> Any:
    """The expert's move for ``job``: one of its legal actions. Pure, and up to about a second
    of CPU (Blue Jacket): the node runs it in a worker process."""
    if job.game == "blue_jacket":
        move = blue_jacket_expert.hint(job.view)
    elif job.game == "blackjack_piles":
        move = piles_expert.hint(job.view, job.legal, job.cashed)
    else:
        move = GAMES[job.game].strategies[hint_strategy(job.game)](job.view, job.legal)
    # The Blue Jacket expert finds nothing worth playing only when no line helps: then dealing
    # (or anything but resigning) is what its bot plays too.
    if move in job.legal:
        return move
    return quick_hint(job)[0]


def quick_hint(job: HintJob) -> tuple[Any, str]:
    """The quick bot's move for ``job`` and the bot's name (tens of milliseconds)."""
    name = hint_strategy(job.game)
    return GAMES[job.game].strategies[name](job.view, job.legal), name


def hint(game: str, engine: Any, seat: int) -> Any:
    """The quick bot's move for ``seat`` now (``None`` when it has no legal action): the hint
    of a room run without a node's worker."""
    job = hint_job(game, engine, seat)
    return None if job is None else quick_hint(job)[0]


def par_of(game: str, dump: bytes) -> dict[str, Any] | None:
    """The par of a finished game (the engine's ``dump``), as the fields of the ``par`` event;
    ``None`` for a game without one. Pure; bounded by node counts, up to a few seconds of CPU:
    the node runs it in its worker."""
    spec = GAMES[game]
    return spec.par(spec.engine.load(dump))


# --------------------------------------------------------------------------- auto-finish


def _scores(action: Any) -> bool:
    """Whether a Blue Jacket action puts a card on a foundation: a move to the Aces pile or to
    a row pile (a row pile takes only a card that builds on it, or its row's starter), or an
    interchange (both cards become their rows' starters)."""
    match action:
        case blue_jacket.Move(target=target):
            return not target.startswith("b")
        case blue_jacket.Interchange():
            return True
    return False


def forced_finish(game: str, engine: Any) -> list[Any]:
    """The actions that win a Blue Jacket game whose rest is forced, else ``[]``.

    The rest is forced once the stock is empty and scoring moves alone, played in any order,
    win: a scoring move never takes a card off a foundation, so none can spoil another.
    """
    if game != "blue_jacket" or engine.over or engine.stock_count > 0:
        return []
    trial = type(engine).load(engine.dump())
    line: list[Any] = []
    while not trial.over:
        action = next((a for a in trial.legal_actions(0) if _scores(a)), None)
        if action is None:
            return []
        trial.apply(0, action)
        line.append(action)
    return line if trial.result().won else []


# --------------------------------------------------------------------------- daily deals


def day_of(now: float) -> str:
    """The UTC day (``YYYY-MM-DD``) of the Unix time ``now``."""
    return datetime.datetime.fromtimestamp(now, datetime.UTC).date().isoformat()


def day_bounds(day: str) -> tuple[float, float]:
    """The first second of ``day`` and the first second after it (Unix times)."""
    start = datetime.datetime.combine(
        datetime.date.fromisoformat(day), datetime.time(), datetime.UTC
    ).timestamp()
    return start, start + DAY


def sealed(day: str | None, now: float) -> bool:
    """Whether a daily deal's seed (and its games' records) must still be kept hidden."""
    return day is not None and now < day_bounds(day)[1]


# --------------------------------------------------------------------------- ranked results


class Finished(msgspec.Struct, kw_only=True):
    """A ranked session's finished game, as the leaderboards keep it."""

    id: str
    """The game's id: its table and the event number where it started."""
    game: str
    player: str
    name: str
    score: int
    won: bool
    daily: str | None
    hints: int
    undos: int
    record: bytes
    """The game's record file (JSON), which ``blackdrez verify`` accepts."""
    ranked_at: float | None = None
    """When the node first put it on the boards: a retry then submits the very same entry."""


class KeptRecord(msgspec.Struct, kw_only=True):
    """A ranked game's record as the store keeps it, with the day that seals it (daily)."""

    daily: str | None
    record: bytes


def ranked_result(
    game_id: str, engine: Any, assist: Assist, player: str, name: str, daily: str | None
) -> Finished:
    """The ranked result of ``engine``'s finished game, played as ``assist`` says."""
    result = engine.result()
    return Finished(
        id=game_id,
        game=engine.game,
        player=player,
        name=name,
        score=int(result.score),
        won=bool(getattr(result, "won", getattr(result, "completed", False))),
        daily=daily,
        hints=assist.hints,
        undos=assist.undos,
        record=encode_record(record_of(engine, assist.played)),
    )


def board(game: str, deal: str, assisted: bool, day: str | None) -> str:
    """The name of one leaderboard: game, kind of deal, class, and UTC day (``None``: all
    time)."""
    return f"{game}/{deal}/{'assisted' if assisted else 'clean'}/{day or 'all'}"
