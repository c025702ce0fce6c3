"""How long a solitaire player waits for a hint, asking at a human pace.

    python3 benchmarks/hints.py [--game blue_jacket] [--hints 30] [--think 2.0]
        [--server-dir TREE] [--json FILE]

Theory of operation
-------------------
A server is started for the run (``serve --in-memory``, no records, the default hint settings:
one worker process, a 1.5 s budget), from this checkout or from ``--server-dir`` (another tree,
e.g. the commit before a change: ``git worktree add /tmp/before REV``). One player starts a
session of ``--game`` right after the server is up, thinks ``--think`` seconds, asks for a hint,
plays it, and so on, ``--hints`` times (a new deal when a game ends). The script prints the
time from the ``hint`` request to its reply, as a median, a 95th percentile and a maximum, the
first hint apart (the first of a session: the worker's start is paid there, or not), and which
bot answered (the expert, or the quick bot when the expert was late).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.tools.loadtest.procfs import wait_listening
from blackdrez.tools.trees import cli_module, keep_known, module_in, serve_flags


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def session(url: str, game: str, hints: int, think: float) -> dict[str, object]:
    client = await Client.connect(url, name="Hinted")

    async def new_deal() -> str:
        joined = await client.request(v1.StartSolitaire(game=game))
        table: str = joined.table.id
        await client.wait_until(lambda: client.tables[table].view is not None)
        return table

    try:
        table = await new_deal()
        waits: list[float] = []
        by: dict[str, int] = {}
        for _ in range(hints):
            await asyncio.sleep(think)
            if not client.tables[table].legal:  # over: a new deal
                table = await new_deal()
                await asyncio.sleep(think)
            asked = time.perf_counter()
            reply = await client.request(v1.Hint(table=table), timeout=30)
            waits.append(time.perf_counter() - asked)
            by[reply.by] = by.get(reply.by, 0) + 1
            if reply.action is not None:
                await client.request(v1.Act(table=table, action=reply.action))
    finally:
        await client.close()
    rest = sorted(waits[1:])
    return {
        "first_ms": round(waits[0] * 1000, 1),
        "median_ms": round(statistics.median(rest) * 1000, 1),
        "p95_ms": round(rest[max(0, round(0.95 * len(rest)) - 1)] * 1000, 1),
        "max_ms": round(rest[-1] * 1000, 1),
        "by": by,
        "hints": len(waits),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="blue_jacket", choices=("blue_jacket", "blackjack_piles"))
    parser.add_argument("--hints", type=int, default=30)
    parser.add_argument("--think", type=float, default=2.0, help="seconds before each hint")
    parser.add_argument("--server-dir", help="start the server from this tree (default: here)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    port = free_port()
    module, env = module_in(args.server_dir, cli_module(args.server_dir))
    command = [
        sys.executable, "-m", module, "serve", "--host", "127.0.0.1", "--port", str(port),
        "--in-memory", "--db-url", "none",
    ]  # fmt: skip
    command = command[:3] + keep_known(command[3:], serve_flags(args.server_dir))
    with tempfile.TemporaryDirectory(prefix="bd-hints-") as folder:
        log = (Path(folder) / "server.log").open("wb")
        where = args.server_dir or folder
        server = subprocess.Popen(command, cwd=where, env=env, stdout=log, stderr=log)
        try:
            wait_listening("127.0.0.1", port, server, 30.0)
            url = f"ws://127.0.0.1:{port}/"
            figures = asyncio.run(session(url, args.game, args.hints, args.think))
        finally:
            server.terminate()
            server.wait(10)
    figures.update(game=args.game, think_s=args.think, server=args.server_dir or ".")
    print(
        f"{args.game}, a hint every {args.think:g} s of thought, {figures['hints']} hints: "
        f"first {figures['first_ms']} ms; then median {figures['median_ms']} ms, "
        f"p95 {figures['p95_ms']} ms, max {figures['max_ms']} ms; by {figures['by']}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
