"""What hints, undo and auto-finish cost a solitaire session, per action, on one core.

Usage::

    python3 benchmarks/assist.py [--games 20] [--json]

Plays ``--games`` games of each solitaire on a table core (``blackdrez.server.table.room.Room``, no
I/O) with
the hint bot choosing every move (a hint is asked before each move, as a player leaning on them
would), and prints the mean and 95th percentile time of:

* ``act``: one ``act`` command (the engine's apply, the undo bookkeeping: a dump and the dealt
  cards before each move, and for Blue Jacket the auto-finish check);
* ``hint``: one ``hint`` command (the hint bot's choice);
* ``undo``: one ``undo`` right after a move that can be taken back (then the move is replayed);
* ``forced_finish``: the auto-finish check alone, in Blue Jacket positions with an empty stock
  (the only ones where it does more than look at the stock).

This is a script, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from blackdrez.protocol import v1
from blackdrez.server.table.assist import forced_finish
from blackdrez.server.table.commands import Begin, Create, LogEntry, execute, new_room


def _timed(timings: dict[str, list[float]], name: str, call: Callable[..., Any], *args: Any) -> Any:
    started = time.perf_counter()
    result = call(*args)
    timings.setdefault(name, []).append(time.perf_counter() - started)
    return result


def _run(room: Any, command: Any) -> Any:
    return execute(room, LogEntry(now=0.0, command=command, player="p", name="P"))


def play(game: str, seed: str, timings: dict[str, list[float]]) -> None:
    """One session of ``game`` played by following hints, timing each command."""
    create = Create(
        table="s1", game=game, host="p", options=v1.TableOptions(private=True), listed=False
    )
    room = new_room(create, 0.0)
    _run(room, v1.JoinTable(table="s1"))
    execute(room, LogEntry(now=0.0, command=Begin(), player="p", seed=seed))
    for step in range(2000):
        if room.engine.over:
            break
        answer = _timed(timings, "hint", _run, room, v1.Hint(table="s1"))
        action = msgspec.json.decode(msgspec.json.encode(answer.replies[0].action))
        act = v1.Act(table="s1", action=action)
        _timed(timings, "act", _run, room, act)
        if game == "blue_jacket" and not room.engine.over and room.engine.stock_count == 0:
            _timed(timings, "forced_finish", forced_finish, game, room.engine)
        if step % 3 == 0 and room.assist is not None and room.assist.undo:
            _timed(timings, "undo", _run, room, v1.Undo(table="s1"))
            _run(room, act)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict[str, dict[str, float]] = {}
    for game in ("blackjack_piles", "blue_jacket"):
        timings: dict[str, list[float]] = {}
        for index in range(args.games):
            play(game, f"bench:{index}", timings)
        for name, values in timings.items():
            ordered = sorted(values)
            report[f"{game}.{name}"] = {
                "count": len(values),
                "mean_ms": statistics.fmean(values) * 1000,
                "p95_ms": ordered[int(0.95 * (len(ordered) - 1))] * 1000,
            }
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for name, figures in report.items():
            print(
                f"{name:32} n={figures['count']:6d}  mean {figures['mean_ms']:7.3f} ms"
                f"  p95 {figures['p95_ms']:7.3f} ms"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
