"""The two minimal bots of docs/bots.md (Python on the client library, JavaScript on the raw
protocol) play full games against a real server: each hosting a game against a server bot, and
both seated at a table someone else hosts, playing each other."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from blackdrez.clients.bots import play_table
from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from tests.server.helpers import run_to_end

ROOT = Path(__file__).resolve().parents[2]
PY_BOT = ["-m", "blackdrez.tools.examples.bot"]
JS_BOT = ROOT / "tools" / "examples" / "bot.mjs"


def node() -> list[str]:
    """The command that runs the JavaScript bot: Node.js with a WebSocket (Node 22+, or 20
    behind its flag). CI's machine image has one; without it this test fails, it does not skip."""
    found = shutil.which("node")
    probe = "process.exit(typeof WebSocket === 'function' ? 0 : 1)"
    if found is not None:
        command = [found, "--experimental-websocket"]
        if subprocess.run([*command, "-e", probe], capture_output=True, timeout=30).returncode == 0:
            return [*command, str(JS_BOT)]
    pytest.fail("the JavaScript bot needs Node.js 20 or newer (with WebSocket) on PATH")


async def run(command: list[str], *args: str) -> str:
    """Run a bot to its end; return its output, asserting it exited 0."""
    return await run_to_end(*command, *args, cwd=ROOT, timeout=240)


def test_both_bots_are_under_sixty_lines() -> None:
    for path in (ROOT / "tools" / "examples" / "bot.py", JS_BOT):
        assert len(path.read_text().splitlines()) < 60, path


@pytest.mark.parametrize("language", ["python", "javascript"])
async def test_a_minimal_bot_hosts_and_plays_a_game_against_a_server_bot(
    make_server, language: str
) -> None:
    server = await make_server()
    command = [sys.executable, *PY_BOT] if language == "python" else node()
    output = await run(command, f"ws://127.0.0.1:{server.port}/")
    assert "game over:" in output and "place" in output  # the ranking the server sent


async def test_both_bots_sit_at_a_hosted_table_and_play_each_other(make_server) -> None:
    server = await make_server()
    url = f"ws://127.0.0.1:{server.port}/"
    host = await Client.connect(url, name="Host")
    try:
        options = v1.TableOptions(seats=3, max_rounds=1, round_pause_seconds=0)
        table = (await host.request(v1.CreateTable(options=options))).table.id
        await host.request(v1.SetReady(table=table))
        bots = [
            asyncio.create_task(run([sys.executable, *PY_BOT], url, table)),
            asyncio.create_task(run(node(), url, table)),
        ]
        state = host.tables[table]
        await host.wait_until(
            lambda: (
                state.info is not None and all(s is not None and s.ready for s in state.info.seats)
            ),
            timeout=60,
        )
        await host.request(v1.StartGame(table=table))
        result = await play_table(host, table)
        outputs = await asyncio.gather(*bots)
        assert result.fair and result.final["phase"] == "over"
        names = {s.name for s in state.info.seats if s is not None}
        assert names == {"Host", "MiniPy", "MiniJS"}
        for output in outputs:
            assert "game over:" in output
    finally:
        await host.close()
