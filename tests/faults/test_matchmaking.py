"""Faults of the matchmaking queue: the node leading it killed while players wait.

Real ``serve`` processes on a Redis (or Redis Cluster) of the test's own, players over real
sockets that reconnect to the other node by themselves (and ask for a game again there, which
keeps their place)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from blackdrez.protocol import v1
from blackdrez.server.node.matchmaking import KEEP, LEAD_TTL
from blackdrez.server.stores.keys import MATCH_LEAD_KEY
from blackdrez.server.testing.nodes import lease_holders
from blackdrez.server.testing.redis_cluster import direct_client
from tests.faults.conftest import LaunchNodes
from tests.faults.players import close_all, connect, play, request, until

pytestmark = pytest.mark.timeout(120)


def leader(store_url: str) -> str | None:
    """The node id of the process leading the queue, if one does."""
    with direct_client(store_url) as direct:
        held = direct.get(MATCH_LEAD_KEY)
    return None if held is None else held.decode().rsplit("/", 2)[0]


async def test_a_queue_whose_leading_node_is_killed_loses_no_place(
    launch_nodes: LaunchNodes, store_url: str, figures: dict[str, Any]
) -> None:
    """Three players wait for a table of four, on both nodes; the node leading the queue is
    killed (SIGKILL). Its players reconnect to the other node and ask again; a fourth player
    comes. All four must be seated at one table, each credited with the whole wait since they
    first asked (nobody's place lost), and the table must be playable."""
    nodes = launch_nodes(2)
    urls = nodes.urls
    players = [await connect(urls[i % 2], also=urls, name=f"P{i}") for i in range(3)]
    asked = [await player.find_game(4) for player in players]
    await until(lambda: leader(store_url) is not None, 10)
    led_by = leader(store_url)
    assert led_by in ("node0", "node1")
    killed = int(led_by[-1])
    await asyncio.sleep(3.0)  # a wait long enough to tell a kept place from a new one
    nodes[killed].kill()
    killed_at = time.monotonic()
    fourth = await connect(urls[1 - killed], also=urls, name="P3")
    try:
        await fourth.find_game(4)
        everyone = [*players, fourth]
        patience = LEAD_TTL + KEEP + 10
        await until(lambda: all(p.matched for p in everyone), patience)
        figures["matched s after the kill"] = round(time.monotonic() - killed_at, 2)
        found = [p.matched for p in everyone]
        assert all(f is not None for f in found)
        tables = {f.table for f in found if f is not None}
        figures["tables"] = len(tables)
        figures["reconnected"] = sum(p.reconnects for p in players)
        assert len(tables) == 1, f"one table for the four, not {tables}"
        assert found[0] is not None and found[0].players == ["P0", "P1", "P2", "P3"]
        for first, player in zip(asked, players, strict=True):
            match = player.matched
            assert match is not None
            waited_since_first = time.time() - first.since
            assert match.waited >= waited_since_first - 2.0, (
                f"{player.welcome.name} waited {match.waited} s by the queue's count, "
                f"{waited_since_first:.1f} s since first asking: the place was lost"
            )
        table = found[0].table if found[0] is not None else ""
        for player in everyone:
            joined = await request(player, v1.JoinTable(table=table))
            assert joined.seat == player.matched.seat  # type: ignore[union-attr]
        await until(
            lambda: (
                fourth.tables[table].info is not None
                and fourth.tables[table].info.status == "playing"
                and all(s is not None and s.connected for s in fourth.tables[table].info.seats)
            ),
            15,
        )
    finally:
        await close_all([*players, fourth])
    assert sum(p.reconnects for p in players) >= 1, "the killed node's players moved"


async def test_an_arena_whose_node_is_killed_mid_game_scores_each_game_once(
    launch_nodes: LaunchNodes, store_url: str, figures: dict[str, Any]
) -> None:
    """Four players in an arena of two-seat tables, on two nodes, playing; node 0 (host of some
    of the tables, perhaps leading the queue) SIGKILLed mid-game. The tables go on at node 1,
    every game ends, and each is scored exactly once: every player has one game in the
    standings, pushed to a watcher."""
    nodes = launch_nodes(2)
    urls = nodes.urls
    maker = await connect(urls[1], also=urls, name="Maker")
    players = [await connect(urls[i % 2], also=urls, name=f"P{i}") for i in range(4)]
    everyone = [maker, *players]
    try:
        arena = (await maker.create_arena("Fault arena", seats=2, minutes=10)).arena.id
        await maker.watch_arena(arena)
        for player in players:
            await player.join_arena(arena)
        await until(lambda: all(p.matched for p in players), 15)
        tables = {p.matched.table for p in players if p.matched is not None}
        assert len(tables) == 2
        for player in players:
            assert player.matched is not None
            await request(player, v1.JoinTable(table=player.matched.table))
        hosted_at_0 = {t for t, node in lease_holders(store_url).items() if node == "node0"}
        figures["tables on the killed node"] = len(hosted_at_0 & tables)
        games = [
            asyncio.create_task(play(p, p.matched.table, think=0.1, deadline=90))  # type: ignore[union-attr]
            for p in players
        ]
        await asyncio.sleep(1.0)
        nodes[0].kill()
        killed_at = time.monotonic()
        results = await asyncio.gather(*games)
        figures["games ended s after the kill"] = round(time.monotonic() - killed_at, 2)
        problems = [r.problem for r in results if r.problem]
        assert not problems, problems

        def scored() -> bool:
            state = maker.arenas.get(arena)
            return state is not None and sorted(s.games for s in state.standings) == [1] * 4

        await until(scored, 20)
        await asyncio.sleep(1.0)  # a second scoring of a game would show by now
        state = maker.arenas[arena]
        assert sorted(s.games for s in state.standings) == [1, 1, 1, 1], "each game once"
        assert sum(s.points for s in state.standings) <= 2
        figures["points"] = sorted(s.points for s in state.standings)
    finally:
        await close_all(everyone)
