"""The history checker itself: silent on a sound history, and it names each broken promise.

A real server (in this process) on the session's Redis plays one short game to the end; then the
history is damaged one way at a time (an acknowledgement the log lacks, an action logged twice
from a stale copy, a final view nobody played to, a key left without a lifetime) and the checker
must report exactly that.
"""

from __future__ import annotations

import copy
import zlib
from collections.abc import AsyncIterator

import msgspec
import pytest
import redis.asyncio as aioredis

from blackdrez.clients.bots import BotResult
from blackdrez.protocol import v1
from blackdrez.server.app import GameServer, Settings
from blackdrez.server.stores.keys import game_key
from blackdrez.server.table.commands import decode_entry
from blackdrez.server.table.records import decode_table_record, record_log
from tests.faults.history import check_history, wait_closed
from tests.faults.players import close_all, fault_options, open_table, play_tables


@pytest.fixture
async def finished_game(redis_url_clean: str) -> AsyncIterator[tuple[str, list[BotResult]]]:
    """A two-player game of three rounds (so some are played out, not all won on the deal)
    played to its end and its table closed; the players' records."""
    settings = Settings(
        port=0, redis_url=redis_url_clean, ping_interval=None, messages_per_second=1000.0
    )
    server = GameServer(settings)
    await server.start()
    try:
        url = f"ws://127.0.0.1:{server.port}/"
        table = await open_table([url], fault_options(seats=2, max_rounds=3))
        try:
            await play_tables([table], think=0.0)
        finally:
            await close_all(table.clients)
        await wait_closed(redis_url_clean, [table.id])
        yield redis_url_clean, table.results
    finally:
        await server.stop()


async def test_a_sound_history_passes(finished_game: tuple[str, list[BotResult]]) -> None:
    url, results = finished_game
    history = await check_history(url, results)
    history.assert_sound()
    assert history.figures["acked"] == sum(len(r.acked) for r in results) > 0
    assert history.figures["games finished"] == 1


async def test_an_acknowledged_action_missing_from_the_log_is_lost(
    finished_game: tuple[str, list[BotResult]],
) -> None:
    url, results = finished_game
    damaged = copy.deepcopy(results)
    damaged[0].acked.append(10_000)
    history = await check_history(url, damaged)
    assert history.figures["lost"] == 1
    assert any("10000 is not logged" in problem for problem in history.problems)


async def test_an_action_logged_again_from_a_stale_copy_is_caught(
    finished_game: tuple[str, list[BotResult]],
) -> None:
    url, results = finished_game
    table = results[0].table
    client = aioredis.Redis.from_url(url)
    try:  # the closed table's log lives in its game record: damage it there
        record = decode_table_record(await client.get(game_key(table)))
        log = record_log(record)
        first_act = next(data for data in log if isinstance(decode_entry(data).command, v1.Act))
        damaged = zlib.compress(msgspec.msgpack.encode([*log, first_act]))
        await client.set(
            game_key(table), msgspec.msgpack.encode(msgspec.structs.replace(record, log=damaged))
        )
    finally:
        await client.aclose()
    history = await check_history(url, results)
    assert history.figures["duplicated"] == 1
    assert history.figures["stale writes"] == 1
    assert any("does not replay" in problem for problem in history.problems)


async def test_an_end_the_log_does_not_replay_is_caught(
    finished_game: tuple[str, list[BotResult]],
) -> None:
    url, results = finished_game
    damaged = copy.deepcopy(results)
    damaged[1].final["pot"] = ["XX", *damaged[1].final["pot"]]
    history = await check_history(url, damaged)
    assert history.problems == [
        f"{damaged[1].table}: seat {damaged[1].seat} saw an end the log does not replay"
    ]


async def test_a_key_without_a_lifetime_is_caught(
    finished_game: tuple[str, list[BotResult]],
) -> None:
    url, results = finished_game
    client = aioredis.Redis.from_url(url)
    try:
        await client.sadd("bd:p:{someone}:tables", "t0")
        await client.set("bd:lb:{blue_jacket}:seq", 1)  # a fixed key: allowed
    finally:
        await client.aclose()
    history = await check_history(url, results)
    assert history.figures["keys without TTL"] == 1
    assert history.problems == ["1 key(s) left without a TTL: bd:p:{someone}:tables"]
