"""A node paused (SIGSTOP) while its hint worker computes a hint, then resumed (SIGCONT).

The hint worker is a process of its own (``blackdrez.server.hints``): it goes on computing while its
node
is frozen, and the node finds the job done, or its budget past, and its lease lapsed, when it
wakes up. The player must get an answer (the hint) or a clear typed refusal (``moving`` or
``unavailable``, retryable), never silence or an internal error; the table must go on (a move,
and another hint, are answered); and the paused node's worker pool must still work (a later hint
at that node is the expert's). Alone, the node adopts its table again from the log; with a second
node, that one adopts it during the pause.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import pytest

from blackdrez.clients.client import Client, ServerError
from blackdrez.protocol import v1
from blackdrez.server.testing.nodes import CpuSampler
from tests.faults.conftest import LaunchNodes
from tests.faults.history import keys_without_ttl, wait_closed
from tests.faults.players import NEVER, close_all, connect, errors_seen, request
from tests.faults.processes import cpu_used, hint_workers, signal_all, until_busy, until_idle

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.parametrize("store_url", ["redis"], indirect=True),
]

PAUSE = 3.0
"""Seconds the node stays frozen: past its 1 s lease."""
SLOW_DEAL = 7
"""A Blue Jacket deal whose first hint costs the expert about a second of CPU."""
REFUSALS = {"moving", "unavailable"}


async def start(client: Client, game: str, deal: int) -> str:
    """Open a solitaire session at the client's node; return its table."""
    table = (await request(client, v1.StartSolitaire(game=game, deal=deal))).table.id
    await client.wait_until(lambda: client.tables[table].view is not None, 30)
    return table


@pytest.mark.parametrize("count", [1, 2])
async def test_a_node_paused_while_its_worker_computes_a_hint_answers_or_refuses_it(
    launch_nodes: LaunchNodes, store_url: str, cpu: CpuSampler, figures: dict[str, Any], count: int
) -> None:
    nodes = launch_nodes(count)
    paused = nodes[0]
    ann = await connect(paused.url, also=nodes.urls, name="Ann")
    clients = [ann]
    try:
        warm = await start(ann, "blackjack_piles", deal=3)
        await request(ann, v1.Hint(table=warm), deadline=60)  # the worker pool starts
        workers = hint_workers(paused.pid)
        assert workers, "no hint worker process"
        await until_idle(workers)
        table = await start(ann, "blue_jacket", deal=SLOW_DEAL)
        used = cpu_used(workers)
        asking = asyncio.ensure_future(ann.request(v1.Hint(table=table), timeout=60))
        await until_busy(workers, used)
        paused.pause()
        try:
            await asyncio.sleep(PAUSE)
        finally:
            paused.resume()
        try:
            reply = await asking
        except ServerError as error:
            assert error.code in REFUSALS, error
            figures["paused hint"] = f"refused: {error.code}"
        else:
            assert reply.action in ann.tables[table].legal
            figures["paused hint"] = f"answered by {reply.by}"
        # The client library waits out ``moving`` by itself: what the server said is in its frames.
        errors = errors_seen([ann])
        figures["errors the player was sent"] = dict(errors)
        assert not set(errors) & set(NEVER), errors
        adopted = f"adopted table {table}"
        figures["adopted by"] = [n.node_id for n in nodes if any(adopted in x for x in n.output())]

        # The table goes on: a move, and another hint, are answered.
        state = ann.tables[table]
        await ann.wait_until(lambda: state.legal, 30)
        move = next(a for a in state.legal if a["type"] != "resign")
        seq = state.seq
        await request(ann, v1.Act(table=table, action=move))
        assert state.seq > seq
        reply = await request(ann, v1.Hint(table=table), deadline=60)
        assert reply.action in state.legal

        # The paused node's worker pool still works: a hint there is the expert's.
        bob = await connect(paused.url, name="Bob", reconnect=False)
        clients.append(bob)
        other = await start(bob, "blackjack_piles", deal=5)
        reply = await request(bob, v1.Hint(table=other), deadline=60)
        assert reply.by == "expert", reply
        assert hint_workers(paused.pid) == workers, "the same worker processes"

        for client, session in ((ann, warm), (ann, table), (bob, other)):
            await request(client, v1.LeaveTable(table=session))
        await wait_closed(store_url, [warm, table, other])
        left = await keys_without_ttl(store_url)
        assert not [key for key in left if any(t in key for t in (warm, table, other))], left
        output = "".join(line for node in nodes for line in node.output())
        for bad in ("Traceback", "Task exception was never retrieved", "hint worker died"):
            assert bad not in output, output
    finally:
        await close_all(clients)
        signal_all(hint_workers(paused.pid), signal.SIGCONT)
