"""Three pure paths every game goes through, timed on one core: the shuffle, an action's wire
form into the game's action, and a finished game's verification before it is stored.

    python3 benchmarks/hot_paths.py [--repeat 7] [--json]

* ``shuffle_52`` / ``shuffle_104``: ``blackdrez.games.shuffle.shuffled`` of one and two decks (every
deal,
  live at a table and again in every replay and verification), µs each.
* ``action_of`` against ``convert_union``: a BlackDrez action's wire dict to its Struct through
  ``GameSpec.action_of`` (what ``Room.act`` and the replays use), and through
  ``msgspec.convert(wire, union)`` (what they used), in the same run, µs each.
* ``verify_<game>``: ``ingest.finished_game`` of real bot-played records (the replay and checks
  the records writer runs for each finished game), µs a game.

Medians of ``--repeat`` timings (min and max beside). A script, not a test: it asserts nothing.
Compare two trees by running it in each (``git worktree add``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from blackdrez.games import GAMES, verify
from blackdrez.games.blackdrez import rules as blackdrez
from blackdrez.games.shuffle import shuffled
from blackdrez.server.records.ingest import finished_game
from blackdrez.server.records.model import SeatPlayer


def _timed(work: Callable[[], object], count: int, repeat: int) -> list[float]:
    """µs per call of ``work`` (``count`` calls a timing), ``repeat`` timings."""
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(count):
            work()
        timings.append((time.perf_counter() - start) / count * 1e6)
    return timings


def main(argv: list[str] | None = None) -> int:
    """Time the paths (module docstring) and print µs per call."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    deck = list(range(104))
    spec = GAMES["blackdrez"]
    wires = [{"type": "hit"}, {"type": "stand"}, {"type": "start_round", "seats": [0, 1, 2, 3],
                                                 "newcomers": []}]  # fmt: skip
    paths: dict[str, Callable[[], object]] = {
        "shuffle_52": lambda: shuffled(deck[:52], "bench-seed"),
        "shuffle_104": lambda: shuffled(deck, "bench-seed"),
        "convert_union": lambda: [msgspec.convert(wire, spec.action) for wire in wires],
    }
    if hasattr(spec, "action_of"):  # (a tree from before it has none)
        paths["action_of"] = lambda: [spec.action_of(wire) for wire in wires]
    counts = {"shuffle_52": 2000, "shuffle_104": 1000, "action_of": 5000, "convert_union": 5000}
    records = {
        "blackdrez": [
            verify.play_bots("blackdrez", f"bench-{n}", blackdrez.Config(seats=4))
            for n in range(20)
        ],
        "blackjack_piles": [verify.play_bots("blackjack_piles", f"bench-{n}") for n in range(5)],
        "blue_jacket": [verify.play_bots("blue_jacket", f"bench-{n}") for n in range(5)],
    }
    for name, group in records.items():
        players = [
            SeatPlayer(seat=seat, player=f"p{seat}", name=f"P{seat}")
            for seat in range(4 if name == "blackdrez" else 1)
        ]

        def verify_all(group: list[verify.Record] = group, players: list = players) -> None:
            for record in group:
                finished_game(
                    game_id="g", record=record, players=players, started_at=0.0, ended_at=1.0
                )

        paths[f"verify_{name}"] = verify_all
        counts[f"verify_{name}"] = 3
    figures = {}
    for name, work in paths.items():
        timings = _timed(work, counts[name], args.repeat)
        if name in ("action_of", "convert_union"):
            timings = [t / len(wires) for t in timings]
        if name.startswith("verify_"):
            timings = [t / len(records[name.removeprefix("verify_")]) for t in timings]
        figures[name] = {
            "median_us": statistics.median(timings),
            "min_us": min(timings),
            "max_us": max(timings),
        }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for name, row in figures.items():
            print(
                f"{name:<24} {row['median_us']:>9.1f} µs "
                f"(min {row['min_us']:.1f}, max {row['max_us']:.1f})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
