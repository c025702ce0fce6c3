"""Where an action's CPU goes: node CPU µs per action by stage, from a profile of a max-rate run.

    python3 benchmarks/budget.py [--against REV] [--tables 300] [--duration 10] [--redis]
        [--runs 1] [--json FILE]

Theory of operation
-------------------
The load tool runs ``--tables`` tables of 4 bots at full speed (``--mode play``, the server pinned
to CPU 0, the bots on CPU 1) and py-spy samples the server over the measured window
(``blackdrez loadtest --profile``: 200 samples a second of the thread holding the GIL). Every
sampled stack is put in one *stage* by its innermost frame that a rule of :data:`STAGES` names
(so ``encode`` called from the fan-out counts as encoding, and the fan-out's own lines as
sending); a stack no rule names is ``other``. A sample is 1/200 s of the GIL held, so a stage's
µs per action is its samples x 5,000 µs / the window's actions. What the process spent without
the GIL (the event loop's polling in libuv, the kernel's share of reads and writes done outside a
Python call, SQLite's C code) is the process's CPU time per action minus the sampled total,
shown as ``outside the GIL``.

With ``--against REV`` the same is measured for REV (built as ``benchmarks/compare.py`` builds
it), taking turns with this checkout, and both columns are printed side by side. The rules name
functions and files of every version since the first (``04d0b93``), whose files differ.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from blackdrez.tools.loadtest import cli as loadtest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import PINNED, export

RATE = 200
"""py-spy's samples per second (``tools/loadtest/profiler.py``)."""

Frame = tuple[str, str]
"""A sampled frame: its function (qualified name) and its file."""


def _in(*parts: str) -> Callable[[Frame], bool]:
    return lambda frame: any(part in frame[1] for part in parts)


def _named(*names: str) -> Callable[[Frame], bool]:
    return lambda frame: frame[0].rsplit(".", 1)[-1] in names or frame[0] in names


def _both(a: Callable[[Frame], bool], b: Callable[[Frame], bool]) -> Callable[[Frame], bool]:
    return lambda frame: a(frame) and b(frame)


_WS = _in("websockets/")
_TABLE = _in("server/table/", "server/room.py", "games/")
# fmt: off
STAGES: list[tuple[str, Callable[[Frame], bool]]] = [
    # Stacks of other threads are sorted by their root first (see _stage).
    ("metrics", _in("prometheus_client/", "server/metrics.py")),
    ("timers", _named("_set_timer", "_on_timer", "call_later", "call_at", "cancel", "_arm")),
    ("timers", _in("server/table/timers.py")),
    ("encode", _both(_in("protocol/codec.py"), _named("encode"))),
    ("decode", _both(_in("protocol/codec.py"), _named("decode", "decode_client", "_classify"))),
    ("views", _both(_TABLE, _named("view", "event_view", "for_seat", "info", "snapshot",
                                   "legal", "flush", "variant", "_views"))),
    ("send", _both(_WS, _named("send_data", "send_frame", "broadcast", "send_binary",
                               "send_text", "serialize", "write", "prepare_data",
                               "prepare_ctrl", "check"))),
    ("send", _in("server/node/fanout.py", "server/fanout.py", "server/connection.py")),
    ("decode", _both(_WS, _named("data_received", "receive_data", "parse", "parse_buffer",
                                 "recv", "get", "put", "__anext__", "__aiter__", "read_exact",
                                 "read_line", "feed_data", "feed_eof", "discard", "recv_frame",
                                 "recv_data", "send_context", "recv_messages"))),
    ("decode", _in("websockets/asyncio/messages.py", "websockets/frames.py",
                   "websockets/streams.py", "websockets/protocol.py")),
    ("lock/lease", _in("server/node/leases.py")),
    ("lock/lease", _named("lock", "__aenter__", "__aexit__", "_leave", "confirmed")),
    ("log/store", _in("server/stores/", "server/bus.py", "server/table/snapshots.py",
                      "server/table/records.py")),
    ("log/store", _named("append_entry", "logged", "encode_entry", "_lobby_record",
                         "drain_outbox", "_publish", "_take_snapshot", "_store_snapshot",
                         "append", "put_snapshot")),
    ("records", _in("server/records/", "games/verify.py", "sqlite3/")),
    ("engine", _in("games/", "server/games/")),
    ("room", _in("server/table/", "server/room.py")),
    ("decode", _in("server/session.py", "server/ratelimit.py")),
    ("decode", _both(_in("server/app.py"), _named("_serve", "_play", "connection", "handle"))),
    ("routing", _in("server/node/routing.py", "server/node/node.py", "server/node.py")),
    ("host", _in("server/node/hosting.py", "server/hosting.py")),
    ("loop", _in("asyncio/", "uvloop/", "<frozen runpy>", "tools/cli.py", "server/cli.py",
                 "threading.py", "concurrent/")),
]
# fmt: on
"""Stages and the frames that put a stack in them, the first rule that names a frame winning
(a frame's function is its last name: ``Room.info`` and ``Seat.info`` both are ``info``)."""

ORDER = [
    "decode", "routing", "lock/lease", "host", "engine", "room", "views", "log/store", "encode",
    "send", "metrics", "records", "timers", "loop", "other",
]  # fmt: skip
"""The stages as printed, roughly in the order an action meets them."""

STAGE_HELP = {
    "decode": "reading a frame: websockets' parsing and message queue, our decoder, the session",
    "routing": "the node's dispatch of a request to the table's host (here: a local call)",
    "lock/lease": "the table's lock and its lease check",
    "host": "running the command on the hosted room, and publishing its change",
    "engine": "the game's rules: applying the action, dealing",
    "room": "the table around the engine: seats, statuses, events, what changed",
    "views": "what each seat and the spectators may see, the table's info",
    "log/store": "the log entry, its append, the lobby record and bus messages, snapshots",
    "encode": "encoding updates and replies (once per view and encoding)",
    "send": "the fan-out and websockets' framing and writes (the kernel's work inside write)",
    "metrics": "counters and histograms",
    "records": "verifying and storing finished games (threads of the server process)",
    "timers": "arming and cancelling each table's timer",
    "loop": "the event loop's own Python: tasks, callbacks, futures",
    "other": "anything no rule names",
}


def _frames(stack: str) -> list[Frame]:
    frames = []
    for text in stack.split(";"):
        name, _, where = text.partition(" (")
        frames.append((name, where.rsplit(":", 1)[0]))
    return frames


def _stage(frames: list[Frame]) -> str:
    if any(f[0].endswith("Thread._bootstrap") for f in frames[:2]):
        threaded = [f for f in frames if "server/records/" in f[1] or "games/verify" in f[1]]
        return "records" if threaded else "other"
    for frame in reversed(frames):
        for stage, rule in STAGES:
            if rule(frame):
                return stage
    return "other"


def stage_samples(raw: Path) -> dict[str, int]:
    """Samples per stage of a py-spy ``--format raw`` file."""
    counts: dict[str, int] = dict.fromkeys(ORDER, 0)
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            counts[_stage(_frames(stack))] += int(count)
    return counts


def measure(common: list[str], extra: list[str]) -> dict[str, Any]:
    """One profiled run: per-stage µs per action, with the run's figures."""
    with tempfile.TemporaryDirectory(prefix="bd-budget-") as folder:
        raw = Path(folder) / "profile.raw"
        report = loadtest.report_of([*common, *extra, "--profile", str(raw)])
        if not raw.is_file():
            raise SystemExit("no profile: is py-spy installed? (pip install py-spy)")
        counts = stage_samples(raw)
    actions = report["actions_per_s"]
    window = report["window_s"]
    profiled = min(window, float(max(1, int(window))))  # py-spy records whole seconds
    per_action = 1e6 / max(actions, 1e-9)
    cpu_us = report["server_cpu_share"] * per_action
    stages = {
        stage: count * (1e6 / RATE) / max(actions * profiled, 1e-9)
        for stage, count in counts.items()
    }
    stages["outside the GIL"] = max(0.0, cpu_us - sum(stages.values()))
    return {
        "actions_per_s": actions,
        "cpu_us_per_action": cpu_us,
        "frames_per_action": report["frames_per_s"] / max(actions, 1e-9),
        "stages_us": stages,
        "samples": sum(counts.values()),
    }


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each figure over ``runs``."""
    stages = {
        stage: statistics.median(run["stages_us"][stage] for run in runs)
        for stage in runs[0]["stages_us"]
    }
    return {
        "actions_per_s": statistics.median(r["actions_per_s"] for r in runs),
        "cpu_us_per_action": statistics.median(r["cpu_us_per_action"] for r in runs),
        "frames_per_action": statistics.median(r["frames_per_action"] for r in runs),
        "stages_us": stages,
        "runs": len(runs),
    }


def table(columns: dict[str, dict[str, Any]]) -> str:
    """The budget as a Markdown table, one column per side."""
    names = list(columns)
    lines = [
        "| stage | " + " | ".join(names) + " | what it is |",
        "|---|" + "---:|" * len(names) + "---|",
    ]
    for stage in [*ORDER, "outside the GIL"]:
        cells = [f"{columns[n]['stages_us'].get(stage, 0.0):.0f}" for n in names]
        help_text = STAGE_HELP.get(stage, "the loop's polling, kernel work, C code without the GIL")
        lines.append(f"| {stage} | " + " | ".join(cells) + f" | {help_text} |")
    lines.append(
        "| **CPU per action** | "
        + " | ".join(f"**{columns[n]['cpu_us_per_action']:.0f}**" for n in names)
        + " | the server process's CPU time over the window / its actions |"
    )
    lines.append(
        "| max actions/s | "
        + " | ".join(f"{columns[n]['actions_per_s']:,.0f}" for n in names)
        + " | (profiled: py-spy costs a little) |"
    )
    lines.append(
        "| frames per action | "
        + " | ".join(f"{columns[n]['frames_per_action']:.2f}" for n in names)
        + " | frames in and out / actions |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure and print the budget (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--against", metavar="REV", help="also measure this commit, taking turns")
    p.add_argument("--tables", type=int, default=300, help="tables of 4 bots")
    p.add_argument("--duration", type=float, default=10.0, help="seconds measured per run")
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--runs", type=int, default=1, help="runs of each side (medians)")
    p.add_argument("--redis", action="store_true", help="the server on a Redis of its own")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    common = [
        "--spawn-server", *PINNED, "-c", str(4 * args.tables), "--mode", "play",
        "--duration", str(args.duration), "--warmup", str(args.warmup),
        *(["--redis"] if args.redis else []),
    ]  # fmt: skip
    sides: dict[str, list[str]] = {}
    if args.against:
        sides[args.against] = ["--server-dir", str(export(args.against))]
    sides["this checkout"] = []
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for _ in range(args.runs):
        for side, extra in sides.items():
            run = measure(common, extra)
            runs[side].append(run)
            print(
                f"  {side}: {run['actions_per_s']:,.0f} actions/s, "
                f"{run['cpu_us_per_action']:.0f} µs CPU per action",
                file=sys.stderr,
                flush=True,
            )
    columns = {side: medians(each) for side, each in runs.items()}
    print(table(columns))
    if args.json:
        Path(args.json).write_text(json.dumps({"columns": columns, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
