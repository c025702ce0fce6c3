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

*Hints*: the expert's move (:func:`expert_hint`, the game's ``GameSpec.expert_hint``) for what
the player sees (:class:`HintJob`: the view, the legal actions, and what the game's
``hint_context`` adds, all shown to the player: in Blackjack Piles the cards cashed this round),
so a hint tells nothing about the stock. The expert takes up to about a second of CPU,
so the node runs :func:`expert_hint` in its hint worker (``blackdrez.server.hints``), off the event
loop,
and logs the move it got with the ``hint`` command (``LogEntry.hint``): a table rebuilt from its
log recomputes nothing. When the expert is busy or late, the best quick reference bot answers
(:func:`quick_hint`: ``heuristic``, else ``greedy``; tens of milliseconds); the reply says which.
A room run without a node (the table harness) asks the quick bot inline.

*Par* (:func:`par_of`): what perfect play scores on a finished game's deal, by the game's bounded
search; the node computes it in the same worker and logs it (``commands.ParFound``).

*Auto-finish* (:func:`forced_finish`): the game's ``GameSpec.forced_finish`` says when the rest
of a game is forced (Blue Jacket: an empty stock and scoring moves that win in any order), and
the room plays it.

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
        """What a command can change here, as one comparable value (``commands.state_key``)."""
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
    context: Any
    """What the game's expert may know besides the view (``GameSpec.hint_context``)."""

    def key(self) -> bytes:
        """The job as bytes: equal jobs have equal keys (a remembered answer serves both)."""
        return msgspec.msgpack.encode([self.game, self.view, self.legal, self.context])


def hint_job(game: str, engine: Any, seat: int) -> HintJob | None:
    """The job of a hint for ``seat`` now, or ``None`` when it has no legal action."""
    legal = engine.legal_actions(seat)
    if not legal:
        return None
    return HintJob(game, engine.view(seat), legal, GAMES[game].hint_context(engine))


def expert_hint(job: HintJob) -> Any:
    """The expert's move for ``job``: one of its legal actions. Pure, and up to about a second
    of CPU (Blue Jacket): the node runs it in a worker process."""
    move = GAMES[job.game].expert_hint(job.view, job.legal, job.context)
    # A game without an expert, or an expert that finds nothing worth playing (no line helps):
    # the quick bot's move, which is then what the expert's own bot plays too.
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


def forced_finish(game: str, engine: Any) -> list[Any]:
    """The actions that finish ``game``'s ``engine`` when its rest is forced, else ``[]``."""
    return GAMES[game].forced_finish(engine)


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
        won=GAMES[engine.game].outcome(result, 0)[2],
        daily=daily,
        hints=assist.hints,
        undos=assist.undos,
        record=encode_record(record_of(engine, assist.played)),
    )


def board(game: str, deal: str, assisted: bool, day: str | None) -> str:
    """The name of one leaderboard: game, kind of deal, class, and UTC day (``None``: all
    time)."""
    return f"{game}/{deal}/{'assisted' if assisted else 'clean'}/{day or 'all'}"
