"""The table core's own work, in one process, against another checkout's: a room replaying a
played log, and a connection's queueing and writing of frames.

    python3 benchmarks/core_paths.py [--against-tree DIR] [--rounds 7] [--json]

A node's maximum under the load tool moves by ±10% from run to run on this machine (the kernel's
loopback, the bots beside it, the hypervisor): a change of a few percent of the node's CPU is
lost in it. These two paths run without sockets or an event loop, so they time the core's code
alone, to a percent or two:

* ``replay``: ``commands.rebuild`` of a 2,000-entry log of a four-seat BlackDrez table (every
  command through the room, its seating, timers and events: what an action costs the room,
  without the views' encoding and the writes), ms;
* ``fanout``: 4,000 frames queued to four connections (``Connection.send_framed``) and written
  (``Outbox.flush``) to transports that only count, ms;
* ``update``: a BlackDrez action's update sent to its four seats 1,000 times (the fan-out's loop
  over a table's viewers, ``send_update``: each viewer class encoded once, queued, written), ms;
* ``snapshot``: 100 snapshots of that table (``snapshots.take``: pickled and compressed), ms;
* ``records``: the games that ended in that log pickled as the node sends them to its records
  process (``records.process.frame``), ms;
* ``closing``: what the node does on its event loop when that table closes: its record made
  (``records.table_record``) and the players who sat there found (``records.players_seated``),
  ms.

``--against-tree DIR`` runs the same paths with another checkout's modules (``DIR``, compiled or
not, e.g. a ``git worktree`` compiled with ``blackdrez compile --core`` run there), taking turns
with this one, ``--rounds`` times; each prints its medians and the ratio this / that. Compiled or
not is each tree's own state: compare like with like. A script, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
KEYS = ("replay_ms", "fanout_ms", "update_ms", "snapshot_ms", "records_ms", "closing_ms")


def _timed(work: Callable[[], object], repeat: int) -> float:
    """The median process time of ``repeat`` runs of ``work``, in ms."""
    times = []
    for _ in range(repeat):
        started = time.process_time()
        work()
        times.append(time.process_time() - started)
    return 1000 * statistics.median(times)


class _Transport:
    def __init__(self) -> None:
        self.writes = 0

    def write(self, data: bytes) -> None:
        self.writes += 1

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return 16384, 65536

    def get_write_buffer_size(self) -> int:
        return 0


class _Protocol:
    def __init__(self, state: Any) -> None:
        self._state = state
        self.extensions: list[Any] = []


class _WebSocket:
    """The part of websockets' connection a ``Connection`` reads when it writes."""

    def __init__(self, state: Any) -> None:
        self.protocol = _Protocol(state)
        self.transport = _Transport()
        self.paused = False


def measure() -> dict[str, Any]:
    """Both paths, timed here (with whichever modules this interpreter imports)."""
    from websockets.protocol import State

    from blackdrez.server.connection import Connection, Outbox
    from blackdrez.server.identity import Token
    from blackdrez.server.ratelimit import TokenBucket
    from blackdrez.server.table.commands import rebuild
    from blackdrez.server.testing.table_logs import play_table
    from blackdrez.tools.compile import compiled

    _, log = play_table(2000, seed=9)
    loop = asyncio.new_event_loop()
    outbox = Outbox()
    outbox._loop = loop
    viewers = [
        Connection(
            ws=_WebSocket(State.OPEN),  # type: ignore[arg-type]  # the part it reads
            binary=True,
            player=f"p{seat}",
            name=f"P{seat}",
            bucket=TokenBucket(1e9, 1_000_000, 0.0),
            max_buffer=1 << 20,
            token=Token("t", f"p{seat}", f"P{seat}", 0.0),
            outbox=outbox,
        )
        for seat in range(4)
    ]
    for viewer in viewers:
        viewer._deflate = False  # (as a connection knows after its first frame)
    frame = b"u" * 600

    try:
        from blackdrez.server.connection import send_update
    except ImportError:  # (a checkout from before it moved there)
        from blackdrez.server.node.fanout import _send_update as send_update
    from blackdrez.server.connection import Watch
    from blackdrez.server.table.commands import decode_entry, execute

    room = rebuild(log[:-1])
    execute(room, decode_entry(log[-1]))
    broadcast = room.flush()
    watches = [Watch(seat=seat, seq=0) for seat in range(4)]
    viewing = list(zip(viewers, watches, strict=True))

    def update() -> None:
        for _ in range(1000):
            for watch in watches:
                watch.seq = 0
            send_update(viewing, broadcast, {})
            outbox._scheduled = False
            outbox.flush()

    def fanout() -> None:
        for _ in range(1000):
            for viewer in viewers:
                viewer.send_framed(frame, None)
            outbox._scheduled = False  # (what the turn's end does)
            outbox.flush()

    from blackdrez.server.records.process import frame as records_frame
    from blackdrez.server.table.commands import rebuild_games
    from blackdrez.server.table.snapshots import take

    games = rebuild_games(log)[1]

    def snapshot() -> None:
        for _ in range(100):
            take(room)

    from blackdrez.server.table.records import players_seated, table_record

    def closing() -> None:
        table_record(log, 0.0)
        players_seated(log)

    found = {
        "compiled": compiled("blackdrez.server.table.room"),
        "snapshot_ms": _timed(snapshot, 15),
        "records_ms": _timed(lambda: records_frame(games), 31),
        "closing_ms": _timed(closing, 15),
        "replay_ms": _timed(lambda: rebuild(log), 15),
        "fanout_ms": _timed(fanout, 31),
        "update_ms": _timed(update, 15),
    }
    loop.close()
    return found


def _in_tree(tree: Path) -> dict[str, Any]:
    """:func:`measure` in a fresh interpreter importing ``tree``'s modules."""
    sys.path.insert(0, str(HERE.parent.parent))
    from blackdrez.tools.trees import module_in

    _, env = module_in(str(tree), "tools.cli")
    done = subprocess.run(
        [sys.executable, str(HERE), "--json", "--once"],
        env=env or dict(os.environ), capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)


def _here() -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(HERE), "--json", "--once"], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against-tree", type=Path, help="another checkout to compare with")
    parser.add_argument("--rounds", type=int, default=7, help="runs of each side")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.once:
        print(json.dumps(measure()))
        return
    sides: dict[str, list[dict[str, Any]]] = {"this": [], "that": []}
    for _ in range(args.rounds):
        sides["this"].append(_here())
        if args.against_tree is not None:
            sides["that"].append(_in_tree(args.against_tree.resolve()))
    report: dict[str, Any] = {}
    for side, runs in sides.items():
        if runs:
            report[side] = {
                "compiled": runs[0]["compiled"],
                **{key: round(statistics.median(run[key] for run in runs), 3) for key in KEYS},
                "runs": runs,
            }
    if sides["that"]:
        report["this/that"] = {
            key: round(report["this"][key] / report["that"][key], 3) for key in KEYS
        }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for side in ("this", "that"):
        if side in report:
            found = report[side]
            times = ", ".join(f"{key[:-3]} {found[key]:.3f} ms" for key in KEYS)
            runs = len(found["runs"])
            print(f"{side}: compiled {found['compiled']}, {times} (medians of {runs})")
    if "this/that" in report:
        ratio = report["this/that"]
        print("this / that: " + ", ".join(f"{key[:-3]} {ratio[key]:.3f}" for key in KEYS))


if __name__ == "__main__":
    main()
