"""The solitaire experts over many deals, in slices that can run side by side.

Usage::

    # play games START..STOP-1 (seeds 'SEED:i', as `blackdrez simulate` deals them), one JSON
    # line per game on stdout (score, won, rounds, CPU seconds)
    python3 benchmarks/experts.py play GAME --strategy S --seed SEED --start 0 --stop 500
    # summarize the lines of one or more slices (and, for Blackjack Piles, compare them with a
    # second strategy's lines on the same deals)
    python3 benchmarks/experts.py summary FILE... [--versus FILE...] [--json]

``play`` plays exactly the games ``blackdrez simulate GAME --strategy S --games N --seed SEED``
plays (game ``i`` from the seed ``SEED:i``), so slices ``0..500`` and ``500..1000`` run on two
cores together give the 1,000-game figures. ``summary`` prints the number of games, the win rate
with its 95% Wilson interval, the mean score, CPU per game, and for Blackjack Piles the ratio of
mean scores to the ``--versus`` lines (paired by deal, with the 95% interval of the mean paired
difference) and, per round, how many games passed it of those that played it.

This is a script, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from games.stats import Z95, wilson


def _play(game: str, strategy: str, seed: str, start: int, stop: int) -> None:
    if game == "blue_jacket":
        from games.blue_jacket import bots
        from games.blue_jacket.expert import ExpertBot
        from games.blue_jacket.rules import BlueJacket, Config

        bot = ExpertBot() if strategy == "expert" else bots.STRATEGIES[strategy]
        for index in range(start, stop):
            engine = BlueJacket.new(Config(progress_budget=0), f"{seed}:{index}")
            began = time.process_time()
            bots.play(engine, bot)
            result = engine.result()
            line = {"i": index, "score": result.score, "won": bool(result.won)}
            _emit(line, began)
    elif game == "blackjack_piles":
        from games.blackjack_piles import bots
        from games.blackjack_piles.expert import PilesExpert
        from games.blackjack_piles.rules import LAST_ROUND, BlackjackPiles, Config

        bot = PilesExpert() if strategy == "expert" else bots.STRATEGIES[strategy]
        for index in range(start, stop):
            engine = BlackjackPiles.new(Config(), f"{seed}:{index}")
            began = time.process_time()
            while not engine.over and len(engine.view(0).results) < LAST_ROUND:
                engine.apply(0, bot(engine.view(0), engine.legal_actions(0)))
            result = engine.result()
            rounds = [bool(r.passed) for r in engine.view(0).results]
            line = {"i": index, "score": result.score, "rounds": rounds}
            _emit(line, began)
    else:
        raise SystemExit(f"unknown game {game!r}")


def _emit(line: dict[str, Any], began: float) -> None:
    line["cpu"] = round(time.process_time() - began, 3)
    print(json.dumps(line), flush=True)


def _load(paths: list[str]) -> dict[int, dict[str, Any]]:
    games: dict[int, dict[str, Any]] = {}
    for path in paths:
        for text in Path(path).read_text().splitlines():
            if text.strip():
                line = json.loads(text)
                games[line["i"]] = line
    return games


def _summary(paths: list[str], versus: list[str]) -> dict[str, Any]:
    games = _load(paths)
    if not games:
        raise SystemExit("no games in those files")
    scores = [line["score"] for line in games.values()]
    cpu = [line["cpu"] for line in games.values()]
    report: dict[str, Any] = {
        "games": len(games),
        "first": min(games),
        "last": max(games),
        "mean_score": round(statistics.fmean(scores), 2),
        "cpu_per_game": round(statistics.fmean(cpu), 3),
    }
    if "won" in next(iter(games.values())):
        wins = sum(line["won"] for line in games.values())
        low, high = wilson(wins, len(games))
        report |= {"wins": wins, "win_rate": wins / len(games), "ci95": [low, high]}
    else:
        report["rounds"] = _rounds(games)
    if versus:
        other = _load(versus)
        paired = sorted(set(games) & set(other))
        mine = [games[i]["score"] for i in paired]
        theirs = [other[i]["score"] for i in paired]
        differences = [a - b for a, b in zip(mine, theirs, strict=True)]
        half = Z95 * statistics.stdev(differences) / math.sqrt(len(differences))
        base = statistics.fmean(theirs)
        mean = statistics.fmean(differences)
        report["versus"] = {
            "paired_games": len(paired),
            "mean_score": round(statistics.fmean(mine), 2),
            "other_mean_score": round(base, 2),
            "ratio": round(statistics.fmean(mine) / base, 4),
            "ratio_ci95": [round(1 + (mean - half) / base, 4), round(1 + (mean + half) / base, 4)],
            "mean_difference": round(mean, 2),
            "other_rounds": _rounds({i: other[i] for i in paired}),
        }
    return report


def _rounds(games: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    played = [0] * 7
    passed = [0] * 7
    for line in games.values():
        for number, ok in enumerate(line["rounds"]):
            played[number] += 1
            passed[number] += ok
    return [
        {
            "round": number + 1,
            "played": played[number],
            "passed": passed[number],
            "pass_rate": round(passed[number] / played[number], 3) if played[number] else None,
        }
        for number in range(7)
    ]


def main() -> None:
    """Parse the command line and run ``play`` or ``summary``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    play = commands.add_parser("play")
    play.add_argument("game", choices=["blue_jacket", "blackjack_piles"])
    play.add_argument("--strategy", default="expert")
    play.add_argument("--seed", required=True)
    play.add_argument("--start", type=int, default=0)
    play.add_argument("--stop", type=int, required=True)
    summary = commands.add_parser("summary")
    summary.add_argument("files", nargs="+")
    summary.add_argument("--versus", nargs="*", default=[])
    summary.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.command == "play":
        _play(args.game, args.strategy, args.seed, args.start, args.stop)
        return
    report = _summary(args.files, args.versus)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for key, value in report.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
