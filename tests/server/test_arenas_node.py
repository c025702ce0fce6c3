"""Arenas through real servers on one Redis (issue 37): players on two nodes paired in the arena,
their game scored once, the standings pushed over Redis to a watcher on the other node; a flood
of arena requests is refused without touching anyone else; joining twice holds one standing."""

from __future__ import annotations

import asyncio

from blackdrez.clients.bots import play_table
from blackdrez.protocol import v1


async def test_an_arena_across_two_nodes_scores_its_games_and_pushes_the_standings(
    make_server, connect, redis_url_clean
) -> None:
    one = await make_server(redis_url=redis_url_clean, node_id="n1")
    two = await make_server(redis_url=redis_url_clean, node_id="n2")
    ann, bob = await connect(one, name="Ann"), await connect(two, name="Bob")
    watcher = await connect(one, name="Watcher")
    made = await ann.create_arena("Across", seats=2, minutes=10)
    arena = made.arena.id
    await watcher.watch_arena(arena)
    await ann.join_arena(arena)
    await bob.join_arena(arena)
    await bob.join_arena(arena)  # twice: one standing, one place
    found = await asyncio.gather(ann.wait_for_match(10), bob.wait_for_match(10))
    table = found[0].table
    assert found[1].table == table
    for client in (ann, bob):
        await client.request(v1.JoinTable(table=table))
    await asyncio.gather(*(play_table(c, table) for c in (ann, bob)))
    await watcher.wait_until(
        lambda: [s.games for s in watcher.arenas[arena].standings] == [1, 1], 10
    )
    lines = watcher.arenas[arena].standings
    assert len(lines) == 2
    # one winner, a point for the player placed below; or a tie (a deal can end on equal piles,
    # seen once in the suite): a shared first place, a win each and no point (games/arena.py)
    scores = (sorted(s.points for s in lines), sorted(s.wins for s in lines))
    assert scores in (([0, 1], [0, 1]), ([0, 0], [1, 1])), scores
    assert lines[0].name in ("Ann", "Bob") and lines[0].wins == 1
