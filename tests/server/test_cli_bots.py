"""`blackdrez bot` and `blackdrez bots` against a real server."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from protocol import v1
from tests.server.helpers import play_out


async def run_cli(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "server.cli", *args,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode, out.decode()


async def test_bots_swarm_prints_a_summary(server) -> None:
    url = f"ws://127.0.0.1:{server.port}/"
    code, out = await run_cli("bots", "--url", url, "--tables", "4", "--per-table", "3")
    assert code == 0, out
    assert "tables: 4, bots: 12, finished games: 4" in out
    assert "mismatches: 0" in out
    assert "every pot and ranking agrees" in out


async def test_one_bot_joins_a_table_and_verifies_the_game(server, connect) -> None:
    host = await connect(server, name="Host")
    joined = await host.request(
        v1.CreateTable(options=v1.TableOptions(seats=2, round_pause_seconds=0))
    )
    table = joined.table.id
    url = f"ws://127.0.0.1:{server.port}/"
    bot = asyncio.create_task(
        run_cli("bot", "--url", url, "--table", table, "--strategy", "bust_probability")
    )
    await host.wait_until(lambda: host.tables[table].info.seats[1] is not None, timeout=30)
    await host.request(v1.SetReady(table=table))
    await host.request(v1.StartGame(table=table))
    await host.wait_until(lambda: host.tables[table].view is not None)
    await play_out(host, table)
    code, out = await bot
    assert code == 0, out
    assert f"table {table}, seat 1" in out
    assert "fairness proof: verified" in out


async def test_bot_needs_a_table_or_quick() -> None:
    code, out = await run_cli("bot", "--url", "ws://127.0.0.1:9/")
    assert code == 2
    assert "--table ID or --quick" in out
