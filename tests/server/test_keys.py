"""Nothing is left behind in Redis: every key has an owner and a lifetime.

Bots play tables on a Redis-backed node until every table has closed; then no key may remain
without a TTL except the documented fixed ones (``server/stores/redis.py``), and once the game
records' retention has passed, Redis's memory is back where it started.
"""

from __future__ import annotations

import asyncio
import fnmatch
import time

import redis.asyncio as aioredis

from blackdrez.games import shuffle
from blackdrez.protocol import v1
from blackdrez.server.stores.keys import FIXED_KEYS, daily_key
from blackdrez.server.table import assist
from blackdrez.server.table.commands import rebuild
from blackdrez.server.table.records import decode_table_record, record_games, record_log
from tests.server.helpers import play_out, seat_and_start

TABLES = 4


def fixed(key: str) -> bool:
    return any(fnmatch.fnmatchcase(key, pattern) for pattern in FIXED_KEYS)


async def used_memory(raw: aioredis.Redis) -> int:
    return int((await raw.info("memory"))["used_memory"])


async def test_no_key_outlives_its_table(make_server, connect, redis_url_clean) -> None:
    retention = 2.0
    server = await make_server(redis_url=redis_url_clean, record_retention=retention)
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        before = await used_memory(raw)
        players = [
            await connect(server, name=f"Bot {i}", client_name="blackdrez-bot/test")
            for i in range(2 * TABLES)
        ]
        tables = [
            await seat_and_start(players[2 * t], [players[2 * t + 1]], grace_seconds=0)
            for t in range(TABLES)
        ]
        await asyncio.gather(
            *(
                play_out(p, table)
                for t, table in enumerate(tables)
                for p in players[2 * t : 2 * t + 2]
            )
        )
        for player in players:
            await player.close()  # away, then (no grace) their seats are freed: the tables close
        deadline = time.monotonic() + 30
        while server.node.rooms or server.node.hosting.closing:
            assert time.monotonic() < deadline, f"tables still open: {list(server.node.rooms)}"
            await asyncio.sleep(0.05)
        await server.node._settled()

        keys = sorted(key.decode() for key in await raw.keys("*"))
        for key in keys:  # (-2: gone since it was listed; a rate limit's lives milliseconds)
            assert fixed(key) or await raw.pttl(key) != -1, f"{key} has no lifetime"
        hosted = [key for key in keys if key.startswith(("bd:{hosted}:", "bd:hosted"))]
        assert not hosted, "no closed table counts as hosted"
        assert not await raw.smembers("bd:lobby:tables"), "no closed table is listed"
        for table in tables:
            record = decode_table_record(await server.store.logs.game_record(table))
            [game] = record_games(record)
            assert game.commitment == shuffle.commitment(game.seed), "the seed is revealed"
            assert game.result is not None, "played to its end"
            assert rebuild(record_log(record)).status == "closed", "the whole log is kept"

        await asyncio.sleep(retention + 0.5)
        left = sorted(key.decode() for key in await raw.keys("*"))
        assert [key for key in left if not fixed(key)] == []
        assert await used_memory(raw) - before < 256 * 1024, "memory back to a bounded level"


async def test_a_ranked_games_record_is_kept_for_good_only_if_a_board_shows_it(
    make_server, connect, redis_url_clean
) -> None:
    """Every ranked solitaire game's record used to be kept for good, even one resigned at once
    that beat none of the player's entries: any client could add a key per game. A game that
    goes on a board keeps its record for good; one that does not, for the record retention."""
    server = await make_server(redis_url=redis_url_clean, record_retention=60.0)
    ann = await connect(server, name="Ann")
    for _ in range(2):  # resigned at once: the second scores no better than the first
        joined = await ann.request(v1.StartSolitaire(game="blackjack_piles"))
        table = joined.table.id
        await ann.wait_until(lambda t=table: ann.tables[t].view is not None)
        await ann.act(table, {"type": "resign"})
        await ann.wait_until(lambda t=table: ann.tables[t].view["over"])
    async with aioredis.Redis.from_url(redis_url_clean) as raw:

        async def kept() -> list[bytes]:
            return sorted([k async for k in raw.scan_iter("bd:rec:*")])

        deadline = time.monotonic() + 10
        while len(await kept()) < 2:
            assert time.monotonic() < deadline, await kept()
            await asyncio.sleep(0.05)
        board = await ann.request(v1.GetLeaderboard(game="blackjack_piles", deal="random"))
        shown = {e.record for e in board.entries}
        ttls = {key.decode(): await raw.pttl(key) for key in await kept()}
        for key, ttl in ttls.items():
            game = key[len("bd:rec:{") : -1]
            assert (ttl == -1) == (game in shown), ttls
        assert sorted(ttl == -1 for ttl in ttls.values()) == [False, True], ttls


async def test_a_daily_deals_claims_end_a_day_after_the_deals_day(
    make_server, connect, redis_url_clean
) -> None:
    """Only the day's seed is kept for good (``GetDaily`` reveals it for any past day); who
    started the deal, and the table of each one's ranked session, matter only while that day's
    sessions can start: their keys end a day after the deal's day does."""
    server = await make_server(redis_url=redis_url_clean)
    ann = await connect(server, name="Ann")
    joined = await ann.request(v1.StartSolitaire(game="blue_jacket", daily=True))
    assert joined.table.ranked
    day = assist.day_of(server.node.clock.time())
    _, ends = assist.day_bounds(day)
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        keys = sorted([key.decode() async for key in raw.scan_iter("bd:daily:*")])
        seed = daily_key("blue_jacket", day)
        assert keys == [seed, f"{seed}:players", f"{seed}:ranked"]
        assert fixed(seed) and await raw.ttl(seed) == -1
        longest = ends - time.time() + assist.DAY
        for key in keys[1:]:
            assert not fixed(key), key
            assert 0 < await raw.pttl(key) / 1000 <= longest + 1, key
