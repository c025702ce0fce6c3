"""What a larger search budget buys the par scores, and what it costs, per finished game.

Usage::

    python3 benchmarks/par_budgets.py [--games 20] [--budgets 1000,5000,20000] [--game G] [--json]

Plays ``--games`` games of each solitaire with its reference bot (Blackjack Piles ``greedy``,
seeds ``par:i``; Blue Jacket ``heuristic``, seeds ``par:i``), then computes each game's par at
each budget (nodes per round for Piles, per search for Blue Jacket) and prints, per game and
budget: the mean par, the share of games whose par is exact, and the CPU seconds (median and
max, ``time.process_time``) one par takes. A par is computed by the node's worker process, off
the event loop (``blackdrez.server.hints``), so its budget is bounded by what a worker may spend per
game.

This is a script, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from blackdrez.games.blackjack_piles import bots as piles_bots
from blackdrez.games.blackjack_piles import solver as piles_solver
from blackdrez.games.blackjack_piles.rules import LAST_ROUND, BlackjackPiles
from blackdrez.games.blackjack_piles.rules import Config as PilesConfig
from blackdrez.games.blue_jacket import bots as blue_jacket_bots
from blackdrez.games.blue_jacket import solver as blue_jacket_solver
from blackdrez.games.blue_jacket.rules import BlueJacket
from blackdrez.games.blue_jacket.rules import Config as BlueJacketConfig


def _piles_games(games: int) -> list[BlackjackPiles]:
    played = []
    for index in range(games):
        engine = BlackjackPiles.new(PilesConfig(), f"par:{index}")
        while not engine.over and len(engine.view(0).results) < LAST_ROUND:
            view = engine.view(0)
            engine.apply(0, piles_bots.greedy(view, engine.legal_actions(0)))
        played.append(engine)
    return played


def _blue_jacket_games(games: int) -> list[BlueJacket]:
    played = []
    for index in range(games):
        engine = BlueJacket.new(BlueJacketConfig(progress_budget=0), f"par:{index}")
        blue_jacket_bots.play(engine, blue_jacket_bots.STRATEGIES["heuristic"])
        played.append(engine)
    return played


def _measure(engines: list[Any], par: Any, budget: int) -> dict[str, Any]:
    scores, exact, seconds = [], 0, []
    for engine in engines:
        began = time.process_time()
        score, whole = par(engine, budget)
        seconds.append(time.process_time() - began)
        scores.append(score)
        exact += whole
    return {
        "budget": budget,
        "mean_par": round(statistics.fmean(scores), 2),
        "exact": round(exact / len(engines), 3),
        "cpu_median": round(statistics.median(seconds), 3),
        "cpu_max": round(max(seconds), 3),
    }


def _piles_par(engine: BlackjackPiles, budget: int) -> tuple[int, bool]:
    rounds = piles_solver.game_par(engine, budget)
    return sum(r.score for r in rounds), all(r.exact for r in rounds)


def _blue_jacket_par(engine: BlueJacket, budget: int) -> tuple[int, bool]:
    par = blue_jacket_solver.deal_par(engine, budget)
    return par.score, par.exact


def main() -> None:
    """Parse the command line, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--budgets", default="1000,5000,20000")
    parser.add_argument("--game", choices=["blackjack_piles", "blue_jacket"], action="append")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    chosen = args.game or ["blackjack_piles", "blue_jacket"]
    report: dict[str, Any] = {"games": args.games}
    if "blackjack_piles" in chosen:
        piles = _piles_games(args.games)
        report["blackjack_piles"] = {
            "mean_score": statistics.fmean(e.result().score for e in piles),
            "budgets": [_measure(piles, _piles_par, b) for b in budgets],
        }
    if "blue_jacket" in chosen:
        blue_jacket = _blue_jacket_games(args.games)
        report["blue_jacket"] = {
            "mean_score": statistics.fmean(e.result().score for e in blue_jacket),
            "budgets": [_measure(blue_jacket, _blue_jacket_par, b) for b in budgets],
        }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for game in chosen:
        print(f"{game}: {args.games} games, mean player score {report[game]['mean_score']:.1f}")
        for row in report[game]["budgets"]:
            print(
                f"  budget {row['budget']:>7}: mean par {row['mean_par']:>7}  exact "
                f"{row['exact']:.0%}  CPU median {row['cpu_median']:.3f} s  "
                f"max {row['cpu_max']:.3f} s"
            )


if __name__ == "__main__":
    main()
