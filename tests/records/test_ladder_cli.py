"""`blackdrez bots --ladder` against a real server keeping records (SQLite): rated tables of bots
that sign in as accounts, so their ratings carry over from run to run; and the leaderboard
ranking humans and bots apart and together."""

from __future__ import annotations

import asyncio
import json
import signal
import stat
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from blackdrez.clients.bots import play_table, run_bot
from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.server.app import GameServer, Settings
from tests.records.test_server_records import eventually

RUN_TIMEOUT = 240.0


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[GameServer]:
    game_server = GameServer(
        Settings(port=0, ping_interval=None, db_url=f"sqlite:///{tmp_path / 'records.db'}"),
        bot_client=run_bot,
    )
    await game_server.start()
    yield game_server
    await game_server.stop()


async def ladder(url: str, identities: Path, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "blackdrez.tools.cli", "bots", "--ladder", "--url", url,
        "--identities", str(identities), "--think", "0", "--round-pause", "0", *args,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        out, _ = await asyncio.wait_for(process.communicate(), RUN_TIMEOUT)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    return process.returncode or 0, out.decode()


async def board(server: GameServer, kind: str) -> list[dict[str, Any]]:
    def fetch() -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{server.port}/api/v1/leaderboards/blackdrez?kind={kind}"
        with urllib.request.urlopen(url, timeout=30) as response:
            return json.loads(response.read())["entries"]

    return await asyncio.to_thread(fetch)


async def rated_game_of_humans(url: str) -> list[str]:
    """Two people play a rated game to its end; their player ids."""
    ann = await Client.connect(url, name="Ann")
    bob = await Client.connect(url, name="Bob")
    options = v1.TableOptions(seats=2, rated=True, round_pause_seconds=0)
    table = (await ann.request(v1.CreateTable(options=options))).table.id
    await bob.request(v1.JoinTable(table=table))
    await bob.request(v1.SetReady(table=table))
    await ann.request(v1.StartGame(table=table))
    await asyncio.gather(play_table(ann, table), play_table(bob, table))
    players = [ann.player, bob.player]
    await ann.close()
    await bob.close()
    return players


async def test_the_ladder_keeps_rated_bot_tables_playing_as_the_same_accounts(
    server: GameServer, tmp_path: Path
) -> None:
    url = f"ws://127.0.0.1:{server.port}/"
    records = server.records
    assert records is not None
    humans = await rated_game_of_humans(url)
    identities = tmp_path / "ladder.json"

    code, out = await ladder(url, identities, "--tables", "1", "--per-table", "3", "--games", "2")
    assert code == 0, out
    assert "ladder: 2 rated games on 1 tables" in out
    kept = json.loads(identities.read_text())["servers"][url]
    assert sorted(kept) == ["0.0", "0.1", "0.2"]
    assert stat.S_IMODE(identities.stat().st_mode) == 0o600, "it holds passwords"
    bots = {entry["player"] for entry in kept.values()}
    for entry in kept.values():
        assert entry["name"] in out, "the bots' board is printed"
        player = await records.player(entry["player"])
        assert player is not None and player.bot and player.account

    async def two_ladder_games() -> Any:
        games, _ = await records.games(game="blackdrez")
        return len(games) >= 3 and games

    games = await eventually(two_ladder_games, "the ladder's games")
    ladder_games = [g for g in games if {p.player for p in g.players} == bots]
    assert len(ladder_games) == 2
    assert all(g.rated and all(p.bot for p in g.players) for g in ladder_games)

    # The next run comes back as the same accounts: with the kept token, or (expired or
    # revoked) by signing in again with the kept password.
    kept["0.1"]["token"] = "expired.token"
    identities.write_text(json.dumps({"servers": {url: kept}}))
    code, out = await ladder(url, identities, "--tables", "1", "--per-table", "3", "--games", "1")
    assert code == 0, out
    assert "ladder: 1 rated games on 1 tables" in out
    again = json.loads(identities.read_text())["servers"][url]
    assert {entry["player"] for entry in again.values()} == bots
    assert again["0.1"]["token"] != "expired.token"

    async def rated_three_times() -> bool:
        ratings = await records.ratings("blackdrez", sorted(bots))
        return {player: r.games for player, r in ratings.items()} == dict.fromkeys(bots, 3)

    await eventually(rated_three_times, "the third game's ratings")  # stored after the game

    # The leaderboard ranks humans and bots apart, and together
    everyone, people, machines = [await board(server, kind) for kind in ("all", "humans", "bots")]
    assert {e["player"] for e in people} == set(humans) and not any(e["bot"] for e in people)
    assert {e["player"] for e in machines} == bots and all(e["bot"] for e in machines)
    assert {e["player"] for e in everyone} == set(humans) | bots
    ordinals = [e["rating"]["ordinal"] for e in everyone]
    assert ordinals == sorted(ordinals, reverse=True)
    assert [e for e in everyone if e["bot"]] == machines
    assert [e for e in everyone if not e["bot"]] == people


async def test_the_ladder_needs_a_server_that_keeps_records(tmp_path: Path) -> None:
    bare = GameServer(Settings(port=0, ping_interval=None), bot_client=run_bot)
    await bare.start()
    try:
        url = f"ws://127.0.0.1:{bare.port}/"
        code, out = await ladder(url, tmp_path / "ladder.json", "--tables", "1", "--games", "1")
        assert code == 1, out
        assert "the server refused accounts" in out and "keeps no records" in out
        assert not (tmp_path / "ladder.json").exists()
    finally:
        await bare.stop()


async def test_the_ladder_plays_until_stopped_then_says_what_it_played(
    server: GameServer, tmp_path: Path
) -> None:
    url = f"ws://127.0.0.1:{server.port}/"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "blackdrez.tools.cli", "bots", "--ladder", "--url", url,
        "--identities", str(tmp_path / "ladder.json"), "--tables", "2", "--per-table", "2",
        "--think", "0", "--round-pause", "0",
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    records = server.records
    assert records is not None

    async def both_tables_played() -> Any:
        games, _ = await records.games(game="blackdrez")
        return len({g.table for g in games}) == 2

    try:
        await eventually(both_tables_played, "a game at each ladder table")
    finally:
        process.send_signal(signal.SIGINT)
        out, _ = await asyncio.wait_for(process.communicate(), RUN_TIMEOUT)
    assert process.returncode == 0, out
    played = int(out.decode().split("ladder: ")[1].split(" rated games")[0])
    assert played >= 2 and "on 2 tables" in out.decode()
