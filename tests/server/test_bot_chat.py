"""Bots in the table's chat: the bots that play tables (``run_bot``: the ones a host adds and
``blackdrez bot``) say "Good game!" once when a game they played ends, over the same ``say`` as
people; with the chat off they say nothing, and a chat that refuses them never stops their play."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest

from blackdrez.clients.bots import run_bot
from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.app import GameServer
from blackdrez.server.table.chat import TableChat
from blackdrez.server.table.lifecycle import RoomError
from tests.server.test_table_bots import play_a_game


def said(client: Client, table: str) -> list[dict[str, Any]]:
    """The ``said`` events ``client`` holds for ``table`` (its chat), oldest first."""
    return [n.event for n in client.tables[table].chat]


def event_seq(client: Client, table: str, kind: str) -> list[int]:
    return [n.seq for n in client.tables[table].events if n.event["type"] == kind]


async def heard_everything(host: Client, table: str) -> None:
    """The host writes a line and waits until it comes back: whatever was said before (the
    events are in order) has reached the host by then."""
    await host.say(table, quick="thanks")
    await host.wait_until(
        lambda: any(
            s["player"] == host.player and s["quick"] == "thanks" for s in said(host, table)
        )
    )


async def test_a_host_added_bot_says_good_game_once_after_each_game(
    server: GameServer, connect
) -> None:
    host = await connect(server, name="Host")
    options = v1.TableOptions(seats=2, round_pause_seconds=0.0, max_rounds=1, turn_seconds=600.0)
    table = (await host.request(v1.CreateTable(options=options))).table.id
    await host.request(v1.AddBots(table=table, count=1))
    state = host.tables[table]
    await host.wait_until(lambda: state.info.seats[1] is not None, timeout=30)
    bot = state.info.seats[1]

    def bots_lines() -> list[dict[str, Any]]:
        return [s for s in said(host, table) if s["player"] == bot.player]

    for game in (1, 2):
        await play_a_game(host, table)
        await host.wait_until(lambda g=game: len(bots_lines()) >= g, timeout=10)
        line = bots_lines()[-1]
        assert line["quick"] == "good_game" and line["text"] == "Good game!"
        assert line["bot"] is True and line["seat"] == 1 and line["name"] == bot.name
        # Said after the game ended, not during it.
        said_at = [n.seq for n in state.chat if n.event["player"] == bot.player][-1]
        assert said_at > event_seq(host, table, "game_over")[-1]
    await heard_everything(host, table)
    assert [s["quick"] for s in bots_lines()] == ["good_game", "good_game"]  # once a game


async def test_a_bot_with_the_chat_off_says_nothing(server: GameServer, connect) -> None:
    """``blackdrez bot --no-chat`` (``run_bot(chat=False)``) plays and says nothing."""
    host = await connect(server, name="Host")
    options = v1.TableOptions(seats=2, round_pause_seconds=0.0, max_rounds=1)
    table = (await host.request(v1.CreateTable(options=options))).table.id
    url = f"ws://127.0.0.1:{server.port}/"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "blackdrez.tools.cli", "bot", "--url", url, "--table", table,
        "--no-chat", stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    state = host.tables[table]
    await host.wait_until(lambda: state.info.seats[1] is not None, timeout=30)
    await play_a_game(host, table)
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, out.decode()
    assert "fairness proof: verified" in out.decode()
    await heard_everything(host, table)
    assert [s["player"] for s in said(host, table)] == [host.player]


@pytest.mark.parametrize("refusal", ["chat_closed", "rate_limited"])
async def test_a_bot_whose_chat_is_refused_still_plays_its_games(
    server: GameServer, connect, monkeypatch: pytest.MonkeyPatch, refusal: str
) -> None:
    tries: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> bool:
        tries.append(refusal)
        if refusal == "chat_closed":
            raise RoomError(ErrorCode.CHAT_CLOSED, "no chat at this table")
        return False  # over the limit, for longer than a client waits (retry_after below)

    if refusal == "chat_closed":
        monkeypatch.setattr(TableChat, "say", refuse)
    else:
        buckets = server.node.hosting._chat_buckets
        monkeypatch.setattr(buckets, "take", refuse)
        monkeypatch.setattr(buckets, "retry_after", lambda *args: 60.0)
    host = await connect(server, name="Host")
    options = v1.TableOptions(seats=2, round_pause_seconds=0.0, max_rounds=1, turn_seconds=600.0)
    table = (await host.request(v1.CreateTable(options=options))).table.id
    bot = asyncio.create_task(
        run_bot(f"ws://127.0.0.1:{server.port}/", table=table, games=2, chat=True)
    )
    state = host.tables[table]
    await host.wait_until(lambda: state.info.seats[1] is not None, timeout=30)
    for _ in range(2):
        await play_a_game(host, table)
    result = await asyncio.wait_for(bot, 30)
    assert result.games == 2 and result.fair is True and not result.removed
    assert result.final == state.view
    assert tries == [refusal, refusal]  # it tried once a game, and was refused
    assert said(host, table) == []
