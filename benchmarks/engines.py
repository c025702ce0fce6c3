"""Engine throughput on one core: how many actions per second each engine applies.

Usage::

    python3 benchmarks/engines.py [--repeat 7] [--games 2000] [--json]

Measured, each ``--repeat`` times (medians, min and max are printed):

* ``blackdrez_apply_{2,4,8}_seats``: BlackDrez actions per second, timing ``apply`` only. Random
  legal actions for ``--games`` complete games are drawn first (a seeded generator; the table
  starts every round with every seat); the timed part builds nothing and chooses nothing.
* ``blackdrez_games_4_seats``: complete random BlackDrez games per second, everything included
  (``new`` with its shuffle, ``legal_actions``, the random choice, ``apply``).
* ``blackjack_piles_apply`` and ``blue_jacket_apply``: moves per second, ``apply`` only, random
  legal moves other than resign. Blue Jacket is measured with its default progress search after
  every move (as served) and with the search off (``progress_budget=0``, the engine alone).

This is a script, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from blackdrez.games.blackdrez import rules as blackdrez
from blackdrez.games.blackjack_piles import rules as blackjack_piles
from blackdrez.games.blue_jacket import rules as blue_jacket

Game = tuple[Callable[[], Any], list[tuple[int, Any]]]
"""A game to replay: a factory for a fresh engine and the ``(seat, action)`` pairs to apply."""


def _random_blackdrez_game(seats: int, seed: str, rng: random.Random) -> list[tuple[int, Any]]:
    engine = blackdrez.BlackDrez.new(blackdrez.Config(seats=seats), seed)
    everyone = list(range(seats))
    actions: list[tuple[int, Any]] = []
    while not engine.over:
        if engine.state.phase == "between_rounds":
            seat, action = blackdrez.SYSTEM, blackdrez.StartRound(seats=everyone)
        else:
            seat = engine.state.to_act
            action = rng.choice(engine.legal_actions(seat))
        engine.apply(seat, action)
        actions.append((seat, action))
    return actions


def _random_solitaire_game(engine: Any, rng: random.Random, resign: type) -> list[tuple[int, Any]]:
    actions: list[tuple[int, Any]] = []
    while not engine.over:
        legal = engine.legal_actions(0)
        plays = [action for action in legal if not isinstance(action, resign)] or legal
        action = rng.choice(plays)
        engine.apply(0, action)
        actions.append((0, action))
    return actions


def blackdrez_games(seats: int, games: int) -> list[Game]:
    """``games`` random BlackDrez games at a table of ``seats``."""
    rng = random.Random(f"bench:{seats}")
    config = blackdrez.Config(seats=seats)
    played = []
    for index in range(games):
        seed = f"bench:{seats}:{index}"
        played.append(
            (
                lambda seed=seed: blackdrez.BlackDrez.new(config, seed),
                _random_blackdrez_game(seats, seed, rng),
            )
        )
    return played


def blackjack_piles_games(games: int) -> list[Game]:
    """``games`` random Blackjack Piles games."""
    rng = random.Random("bench:piles")
    config = blackjack_piles.Config()
    played = []
    for index in range(games):
        seed = f"bench:piles:{index}"
        engine = blackjack_piles.BlackjackPiles.new(config, seed)
        actions = _random_solitaire_game(engine, rng, blackjack_piles.Resign)
        played.append((lambda seed=seed: blackjack_piles.BlackjackPiles.new(config, seed), actions))
    return played


def blue_jacket_games(games: int, progress_budget: int) -> list[Game]:
    """``games`` random Blue Jacket games (the moves are drawn with the search off)."""
    rng = random.Random("bench:blue")
    played = []
    for index in range(games):
        seed = f"bench:blue:{index}"
        engine = blue_jacket.BlueJacket.new(blue_jacket.Config(progress_budget=0), seed)
        actions = _random_solitaire_game(engine, rng, blue_jacket.Resign)
        config = blue_jacket.Config(progress_budget=progress_budget)
        played.append((lambda seed=seed, c=config: blue_jacket.BlueJacket.new(c, seed), actions))
    return played


def apply_rate(games: list[Game]) -> float:
    """Actions applied per second over ``games``, timing ``apply`` alone."""
    engines = [(factory(), actions) for factory, actions in games]
    count = sum(len(actions) for _, actions in engines)
    started = time.perf_counter()
    for engine, actions in engines:
        apply = engine.apply
        for seat, action in actions:
            apply(seat, action)
    return count / (time.perf_counter() - started)


def random_games_rate(seats: int, games: int, repetition: int) -> float:
    """Complete random BlackDrez games per second, construction and choices included."""
    rng = random.Random(f"games:{repetition}")
    config = blackdrez.Config(seats=seats)
    everyone = list(range(seats))
    start_round = blackdrez.StartRound(seats=everyone)
    started = time.perf_counter()
    for index in range(games):
        engine = blackdrez.BlackDrez.new(config, f"games:{repetition}:{index}")
        state = engine.state
        while not engine.over:
            if state.phase == "between_rounds":
                engine.apply(blackdrez.SYSTEM, start_round)
            else:
                seat = state.to_act
                engine.apply(seat, rng.choice(engine.legal_actions(seat)))
    return games / (time.perf_counter() - started)


def summary(rates: list[float], unit: str) -> dict[str, Any]:
    """Median, min and max of the repetitions' rates."""
    return {
        "unit": unit,
        "median": round(statistics.median(rates)),
        "min": round(min(rates)),
        "max": round(max(rates)),
        "runs": [round(rate) for rate in rates],
    }


def main(argv: list[str] | None = None) -> int:
    """Run every measurement and print a table (or JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="repetitions (default 7)")
    parser.add_argument("--games", type=int, default=2000, help="games per repetition (2000)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)

    workloads: dict[str, tuple[Callable[[int], float], str]] = {}
    for seats in (2, 4, 8):
        games = blackdrez_games(seats, args.games)
        workloads[f"blackdrez_apply_{seats}_seats"] = (
            lambda _, games=games: apply_rate(games),
            "actions/s",
        )
    workloads["blackdrez_games_4_seats"] = (
        lambda repetition: random_games_rate(4, args.games, repetition),
        "games/s",
    )
    piles = blackjack_piles_games(max(args.games // 4, 1))
    workloads["blackjack_piles_apply"] = (lambda _: apply_rate(piles), "moves/s")
    blue_served = blue_jacket_games(max(args.games // 10, 1), blue_jacket.DEFAULT_PROGRESS_BUDGET)
    workloads["blue_jacket_apply_with_progress_search"] = (
        lambda _: apply_rate(blue_served),
        "moves/s",
    )
    blue_bare = blue_jacket_games(max(args.games // 4, 1), 0)
    workloads["blue_jacket_apply_search_off"] = (lambda _: apply_rate(blue_bare), "moves/s")

    results = {
        name: summary([measure(repetition) for repetition in range(args.repeat)], unit)
        for name, (measure, unit) in workloads.items()
    }
    report = {
        "python": sys.version.split()[0],
        "repeat": args.repeat,
        "games": args.games,
        "results": results,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"Python {report['python']}, {args.repeat} repetitions, --games {args.games}")
    width = max(len(name) for name in results)
    print(f"{'measurement'.ljust(width)}  {'median':>10}  {'min':>10}  {'max':>10}  unit")
    for name, figures in results.items():
        print(
            f"{name.ljust(width)}  {figures['median']:>10,}  {figures['min']:>10,}  "
            f"{figures['max']:>10,}  {figures['unit']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
