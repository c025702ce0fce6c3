"""The solitaire experts over many deals, in slices that can run side by side.

Usage::

    # play games START..STOP-1 (seeds 'SEED:i', as `blackdrez simulate` deals them), one JSON
    # line per game on stdout (score, won, rounds, CPU seconds)
    python3 benchmarks/experts.py play GAME --strategy S --seed SEED --start 0 --stop 500
    # summarize the lines of one or more slices (and, for Blackjack Piles, compare them with a
    # second strategy's lines on the same deals)
    python3 benchmarks/experts.py summary FILE... [--versus FILE...] [--json]
    # Blackjack Piles rounds played alone (deals 'SEED:R:i', as `simulate --per-round`)
    python3 benchmarks/experts.py rounds --strategy S --seed rounds --rounds 3,4,5 --deals 60
    # what one expert hint costs: positions met by the quick hint bot, every EVERY-th move
    python3 benchmarks/experts.py hints GAME --seed SEED --stop GAMES [--every 10]

``play`` plays exactly the games ``blackdrez simulate GAME --strategy S --games N --seed SEED``
plays (game ``i`` from the seed ``SEED:i``), so slices ``0..500`` and ``500..1000`` run on two
cores together give the 1,000-game figures. ``summary`` prints the number of games, the win rate
with its 95% Wilson interval, the mean score, CPU per game, and for Blackjack Piles the ratio of
mean scores to the ``--versus`` lines (paired by deal, with the 95% interval of the mean paired
difference) and, per round, how many games passed it of those that played it. ``hints`` times
the expert's hint (:func:`blackdrez.server.table.assist.expert_hint`, the function the node's hint
worker
runs) on positions of games the quick hint bot plays, and prints the CPU seconds of one hint
(median, 95th percentile, max) and the share over the node's budget (``blackdrez.server.hints``).

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

from blackdrez.games.stats import Z95, wilson


def _play(game: str, strategy: str, seed: str, start: int, stop: int) -> None:
    if game == "blue_jacket":
        from blackdrez.games.blue_jacket import bots
        from blackdrez.games.blue_jacket.expert import ExpertBot
        from blackdrez.games.blue_jacket.rules import BlueJacket, Config

        bot = ExpertBot() if strategy == "expert" else bots.STRATEGIES[strategy]
        for index in range(start, stop):
            engine = BlueJacket.new(Config(progress_budget=0), f"{seed}:{index}")
            began = time.process_time()
            bots.play(engine, bot)
            result = engine.result()
            line = {"i": index, "score": result.score, "won": bool(result.won)}
            _emit(line, began)
    elif game == "blackjack_piles":
        from blackdrez.games.blackjack_piles import bots
        from blackdrez.games.blackjack_piles.expert import PilesExpert
        from blackdrez.games.blackjack_piles.rules import LAST_ROUND, BlackjackPiles, Config

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


def _hints(game: str, seed: str, start: int, stop: int, every: int) -> dict[str, Any]:
    from blackdrez.games import GAMES
    from blackdrez.protocol import v1
    from blackdrez.server.hints import HINT_BUDGET
    from blackdrez.server.table.assist import expert_hint, hint_job, quick_hint

    spec = GAMES[game]
    seconds: list[float] = []
    for index in range(start, stop):
        engine = spec.create(v1.TableOptions(private=True), f"{seed}:{index}")  # as served
        moves = 0
        while not engine.over and (job := hint_job(game, engine, 0)) is not None:
            if moves % every == 0:
                began = time.process_time()
                expert_hint(job)
                seconds.append(time.process_time() - began)
            engine.apply(0, quick_hint(job)[0])
            moves += 1
    ordered = sorted(seconds)
    return {
        "game": game,
        "hints": len(seconds),
        "cpu_median": round(statistics.median(ordered), 3),
        "cpu_p95": round(ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)], 3),
        "cpu_max": round(ordered[-1], 3),
        "over_budget": round(sum(s > HINT_BUDGET for s in seconds) / len(seconds), 3),
        "budget": HINT_BUDGET,
    }


def _rounds_alone(strategy: str, seed: str, rounds: list[int], deals: int) -> list[dict[str, Any]]:
    from blackdrez.games.blackjack_piles import bots
    from blackdrez.games.blackjack_piles.expert import PilesExpert
    from blackdrez.games.blackjack_piles.rules import BlackjackPiles, Config

    report = []
    for number in rounds:
        passed, hands, began = 0, [], time.process_time()
        for index in range(deals):
            bot = PilesExpert() if strategy == "expert" else bots.STRATEGIES[strategy]
            engine = BlackjackPiles.new(Config(first_round=number), f"{seed}:{number}:{index}")
            while not engine.over and not engine.view(0).results:
                engine.apply(0, bot(engine.view(0), engine.legal_actions(0)))
            result = engine.view(0).results[0]
            passed += result.passed
            hands.append(result.hands)
        report.append(
            {
                "round": number,
                "deals": deals,
                "pass_rate": round(passed / deals, 3),
                "ci95": [round(bound, 3) for bound in wilson(passed, deals)],
                "mean_hands": round(statistics.fmean(hands), 2),
                "cpu_per_round": round((time.process_time() - began) / deals, 3),
            }
        )
    return report


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
    alone = commands.add_parser("rounds")
    alone.add_argument("--strategy", default="expert")
    alone.add_argument("--seed", default="rounds")
    alone.add_argument("--rounds", default="3,4,5")
    alone.add_argument("--deals", type=int, default=60)
    hints = commands.add_parser("hints")
    hints.add_argument("game", choices=["blue_jacket", "blackjack_piles"])
    hints.add_argument("--seed", required=True)
    hints.add_argument("--start", type=int, default=0)
    hints.add_argument("--stop", type=int, required=True)
    hints.add_argument("--every", type=int, default=10)
    summary = commands.add_parser("summary")
    summary.add_argument("files", nargs="+")
    summary.add_argument("--versus", nargs="*", default=[])
    summary.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.command == "play":
        _play(args.game, args.strategy, args.seed, args.start, args.stop)
        return
    if args.command == "rounds":
        numbers = [int(number) for number in args.rounds.split(",")]
        for line in _rounds_alone(args.strategy, args.seed, numbers, args.deals):
            print(json.dumps(line))
        return
    if args.command == "hints":
        print(json.dumps(_hints(args.game, args.seed, args.start, args.stop, args.every)))
        return
    report = _summary(args.files, args.versus)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for key, value in report.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
