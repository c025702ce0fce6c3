"""What waiting for the log costs the node: in memory, in memory with every append answered later
(no I/O), and on Redis, taking turns in one sitting.

    python3 benchmarks/deferral.py [--runs 4] [--delay 0.002] [--tables 300] [--duration 8]
        [--json FILE]

Theory of operation
-------------------
On Redis a node's action waits for its log append (the group commit's round trip) before its
update goes out; in memory the append returns without a turn of the event loop. The node's CPU an
action is dearer on Redis (issue 35: 60-97% of the in-memory maximum, sitting to sitting), and the
question this answers is how much of that is Redis (the script call, its bytes, its reply) and
how much is the wait itself: the action's coroutine suspended, resumed a turn or more later
among the other tables' actions, its objects cold by then.

The third side is this checkout copied to a scratch folder (its compiled modules with it) whose
in-memory append first sleeps ``--delay`` seconds: the same work as in memory, plus the wait and
nothing else. All three are driven by the load tool as ``benchmarks/compare.py`` drives them
(``--tables`` tables of 4 bots, ``--mode play``, the maximum rate, the server on CPU 0, the bots,
Redis and the records process on CPU 1), taking turns ``--runs`` times. Printed: each side's
runs and medians of max actions/s and of the node's CPU µs an action, and each against memory.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from compare import PINNED, side_row, turns

ROOT = Path(__file__).resolve().parent.parent
SKIPPED = ("build", ".git", ".venv")
"""Folders of the checkout whose compiled modules are not the server's."""

DEFERRED_APPEND = """

# benchmarks/deferral.py: every append answered ``_DELAY`` seconds later, as a remote store would.
import asyncio as _asyncio  # noqa: E402

_DELAY = {delay!r}
_undeferred_append = MemoryTableLogs.append


async def _deferred_append(self: MemoryTableLogs, append: Append) -> bool:
    await _asyncio.sleep(_DELAY)
    return await _undeferred_append(self, append)


MemoryTableLogs.append = _deferred_append  # type: ignore[method-assign]
"""


def deferred_copy(delay: float) -> Path:
    """This checkout (its work tree and compiled modules) in a scratch folder, its in-memory
    append deferred by ``delay`` seconds."""
    tree = Path(tempfile.mkdtemp(prefix="bd-deferral-"))
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout.splitlines()  # fmt: skip
    compiled = [
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.so")
        if path.relative_to(ROOT).parts[0] not in SKIPPED
    ]
    for name in [*listed, *compiled]:
        source = ROOT / name
        if source.is_file():
            target = tree / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    memory = tree / "server" / "stores" / "memory.py"
    memory.write_text(memory.read_text() + DEFERRED_APPEND.format(delay=delay))
    return tree


def main(argv: list[str] | None = None) -> int:
    """Run the three sides in turns (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=4, help="runs of each side")
    p.add_argument("--delay", type=float, default=0.002, help="seconds an append waits")
    p.add_argument("--tables", type=int, default=300, help="tables of 4 bots")
    p.add_argument("--duration", type=float, default=8.0, help="seconds measured per run")
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    tree = deferred_copy(args.delay)
    common = [
        "--spawn-server", *PINNED, "-c", str(4 * args.tables), "--mode", "play",
        "--duration", str(args.duration), "--warmup", str(args.warmup),
    ]  # fmt: skip
    sides = {
        "memory": [],
        f"memory, appends answered after {args.delay * 1000:g} ms": ["--server-dir", str(tree)],
        "redis": ["--redis"],
    }
    try:
        reports = turns(common, sides, args.runs)
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    rows = {side: side_row(runs) for side, runs in reports.items()}
    memory = rows["memory"]
    for side, row in rows.items():
        row["actions_vs_memory"] = row["actions_per_s"] / max(memory["actions_per_s"], 1e-9)
        row["us_over_memory"] = row["server_cpu_us_per_action"] - memory["server_cpu_us_per_action"]
        print(
            f"{side:<40} {row['actions_per_s']:>7,.0f} actions/s {row['actions_per_s_each']} "
            f"({row['actions_vs_memory']:.0%} of memory) | node "
            f"{row['server_cpu_us_per_action']:.1f} µs an action "
            f"{row['server_cpu_us_per_action_each']} ({row['us_over_memory']:+.1f})",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
