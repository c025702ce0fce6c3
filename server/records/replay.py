"""A stored game, step by step, as its spectators saw it: what the replay viewer shows.

Theory of operation
-------------------
:func:`game_replay` is pure and CPU-bound (one replay of the record and a spectator's view after
each action: call it in a worker thread). It replays the record with the games' own engines
(``verify.steps``), so the viewer needs no rules of its own: step 0 is the game before any
action, step ``n`` the game after the record's ``n``-th action, each with the events that action
made and the round it belongs to, everything through the engine's spectator filter
(``view(None)``, ``event_view(event, None)``) exactly as a spectator's client received it. The
fairness check is the one ``blackdrez verify`` runs (``verify.verification``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from blackdrez.games import GAMES, verify
from blackdrez.server.records.model import GameRecord, GameSummary, summary_fields


class ReplayStep(msgspec.Struct, frozen=True, kw_only=True):
    """The game after one action (step 0: before any), as a spectator saw it."""

    index: int
    """0 for the start; ``n`` after the record's ``n``-th action (``actions[n - 1]``)."""
    seat: int | None
    """Who acted (``None`` at the start; the engine's system seat for a deal)."""
    action: dict[str, Any] | None
    events: list[Any]
    """The events the action made, as spectators saw them."""
    round: int
    view: Any
    """The spectator's view of the whole game after the action."""


class Fairness(msgspec.Struct, frozen=True, kw_only=True):
    """``blackdrez verify`` on the record: the seed against the commitment, the deal, the
    replay, the end."""

    verified: bool
    problems: list[str]
    seed: str | None
    commitment: str | None


class GameReplay(GameSummary, frozen=True, kw_only=True):
    """A stored game for the replay viewer: who played, how it ended, and every step."""

    fairness: Fairness
    rounds: list[int]
    """For each round, in order, the index of the step after its first action (to jump to a
    round)."""
    steps: list[ReplayStep]


def game_replay(record: GameRecord) -> GameReplay:
    """Every step of a stored game as its spectators saw it (see the module docstring)."""
    checked = verify.verification(record)
    adapter = GAMES[record.game]
    engine = verify.start(record)
    steps = [
        ReplayStep(
            index=0,
            seat=None,
            action=None,
            events=[],
            round=adapter.round_number(engine),
            view=msgspec.to_builtins(engine.view(None)),
        )
    ]
    rounds: list[int] = []
    try:
        for step in verify.steps(engine, record):
            number = adapter.round_number(engine)
            if number and (not rounds or number != steps[rounds[-1]].round):
                rounds.append(step.index + 1)
            steps.append(
                ReplayStep(
                    index=step.index + 1,
                    seat=step.seat,
                    action=record.actions[step.index][1],
                    events=[msgspec.to_builtins(engine.event_view(e, None)) for e in step.events],
                    round=number,
                    view=msgspec.to_builtins(engine.view(None)),
                )
            )
    except verify.ReplayError:
        pass  # the steps up to the refused action; ``fairness`` says what is wrong
    return GameReplay(
        **summary_fields(record),
        fairness=Fairness(
            verified=not checked.problems,
            problems=checked.problems,
            seed=record.seed,
            commitment=record.commitment,
        ),
        rounds=rounds,
        steps=steps,
    )
