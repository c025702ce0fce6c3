"""The fourth game end to end, registered by one line and edited nowhere else: played through a
real server over WebSocket, stored as a record that ``blackdrez verify`` accepts and the records
API replays, ranked on its leaderboard."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.fourth_game.server import environment, play, running_server

GAME = "higher_or_lower"


def always_higher(view: dict[str, Any], legal: list[dict[str, Any]]) -> dict[str, Any]:
    """Guess higher until the game ends (a wrong guess ends it, so it always does)."""
    return next(action for action in legal if action["type"] == "higher")


def get(base: str, path: str) -> Any:
    with urllib.request.urlopen(f"{base}{path}", timeout=10) as response:
        return json.load(response)


def stored_games(base: str) -> list[dict[str, Any]]:
    return get(base, f"/api/v1/games?game={GAME}")["games"]


@pytest.fixture
def server(tmp_path: Path) -> Any:
    with running_server(tmp_path) as base:
        yield base


async def test_the_fourth_game_plays_to_the_end_through_the_server(server: str) -> None:
    state = await play(server, GAME, always_higher)
    view = state["view"]
    assert view["over"] and view["seed"] is not None
    assert state["info"]["game"] == GAME and state["info"]["status"] == "finished"
    kinds = [event["type"] for event in state["events"]]
    assert kinds[0] == "seat_taken" or "game_started" in kinds
    assert kinds.count("turned") == len(view["turned"]) - 1
    assert kinds[-1] == "game_over"


async def test_its_record_is_stored_verifies_and_replays(server: str, tmp_path: Path) -> None:
    state = await play(server, GAME, always_higher)
    for _ in range(100):  # the records are written after the game, off the hot path
        if stored_games(server):
            break
        await asyncio.sleep(0.1)
    [summary] = stored_games(server)
    record = get(server, f"/api/v1/games/{summary['id']}")
    assert record["game"] == GAME and record["players"][0]["score"] == state["view"]["score"]
    path = tmp_path / "game.json"
    path.write_text(json.dumps(record))
    for command in ("verify", "replay"):
        done = subprocess.run(
            [sys.executable, "-m", "blackdrez.tools.cli", command, str(path)],
            env=environment(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
    replay = get(server, f"/api/v1/games/{summary['id']}/replay")
    assert replay["fairness"]["verified"] is True
    assert replay["steps"][-1]["view"]["turned"] == state["view"]["turned"]
