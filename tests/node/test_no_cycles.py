"""No command leaves garbage for the cycle collector: what an action allocates (its log entry,
the update's views, the callbacks that carry them to the store) is freed by reference counting
as soon as the action is answered.

A reference cycle per command (a callback holding the append that holds the callback) kept every
update's views alive until the collector ran; with the node's thresholds
(``blackdrez.server.app``: a young collection every 100,000 allocations) that is megabytes, and
the collections stalled the node's loop 50-80 ms at a time (``docs/benchmarks-log.md``)."""

from __future__ import annotations

import collections
import gc

from blackdrez.protocol import v1
from blackdrez.server.testing.node_harness import Cluster, on_nodes
from tests.node.helpers import act_once, phase, seat_and_start

ACTIONS = 40


@on_nodes(1)
async def test_actions_restarts_and_timers_leave_no_reference_cycles(cluster: Cluster) -> None:
    (node,) = cluster.nodes
    players = [await cluster.connect(node, f"P{n}") for n in range(4)]
    spectator = await cluster.connect(node, "Spectator", binary=True)
    table = await seat_and_start(cluster, players[0], players[1:])
    await spectator.ok(v1.Spectate(table=table))
    await act_once(cluster, players, table)  # (what is made once, at the first action)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        games = 0
        for _ in range(ACTIONS):
            if phase(players[0], table) == "over":  # the game's end and restart: host commands
                games += 1
                for player in players:
                    await player.ok(v1.SetReady(table=table))
                await players[0].ok(v1.StartGame(table=table))
            await act_once(cluster, players, table)
        found = gc.collect()
        kinds = collections.Counter(type(o).__qualname__ for o in gc.garbage)
        functions = collections.Counter(
            o.__qualname__ for o in gc.garbage if type(o).__name__ == "function"
        )
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert games >= 1  # the restarts' commands (awaited, not actions) were in it too
    assert found == 0, f"{found} objects in cycles: {kinds.most_common(8)} {functions}"
