"""Hints from the expert, computed off the event loop; the par of a finished game likewise.

Through a real node (in-memory store, real sockets): a hint is exactly the expert's move for
what the player sees (the expert run directly on the same view agrees); while a hint is being
computed the node goes on serving another table at once and keeps the table's 1 s lease; an
expert too slow for the budget is replaced by the quick bot, and the reply says so; a worker
process that dies costs one quick hint; a flood of hints gets ``rate_limited`` and changes
nothing; a finished game's par is found by the worker, logged, and emitted after ``game_over``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec
import pytest

from blackdrez.clients.client import Client, ServerError
from blackdrez.games import GAMES
from blackdrez.games.blackjack_piles import expert as piles_expert
from blackdrez.games.blue_jacket import expert as blue_jacket_expert
from blackdrez.games.blue_jacket.bots import heuristic
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.app import GameServer
from blackdrez.server.hints import HintWorker
from blackdrez.server.table.assist import expert_hint, hint_job
from blackdrez.server.table.commands import ParFound, Resume, decode_entry, rebuild
from tests.server.slow_expert import PAUSE, dying_expert_hint, slow_expert_hint

PATIENT = 120.0
"""A hint budget no expert reaches on a loaded machine: the expert always answers."""


async def start(client: Client, game: str, **fields: Any) -> str:
    joined = await client.request(v1.StartSolitaire(game=game, **fields))
    table = joined.table.id
    await client.wait_until(lambda: client.tables[table].view is not None)
    return table


def seen(client: Client, table: str) -> tuple[Any, list[Any]]:
    """The view and legal actions the player holds, as the game's types."""
    spec = GAMES[client.tables[table].info.game]
    state = client.tables[table]
    view = msgspec.convert(state.view, spec.view)
    return view, [msgspec.convert(action, spec.action) for action in state.legal]


def wire(action: Any) -> Any:
    return msgspec.json.decode(msgspec.json.encode(action))


def slow_worker(server: GameServer, budget: float) -> None:
    server.node.hosting.hints.close()
    server.node.hosting.hints = HintWorker(hint_budget=budget, expert=slow_expert_hint)


async def log_of(server: GameServer, table: str) -> list[Any]:
    return [decode_entry(data) for data in await server.store.logs.read(table)]


@pytest.mark.parametrize("game", ["blue_jacket", "blackjack_piles"])
async def test_a_hint_is_the_experts_move_for_what_the_player_sees(
    make_server, connect, game: str
) -> None:
    server = await make_server(hint_budget=PATIENT)
    client = await connect(server, name="Ann")
    table = await start(client, game, deal=3)
    view, legal = seen(client, table)
    reply = await client.request(v1.Hint(table=table), timeout=PATIENT)
    if game == "blue_jacket":
        expected = blue_jacket_expert.hint(view)
    else:
        expected = piles_expert.hint(view, legal, [])  # nothing cashed yet
    assert (reply.by, reply.hints) == ("expert", 1)
    assert reply.action == wire(expected) and reply.action in client.tables[table].legal
    entries = await log_of(server, table)
    assert entries[-1].hint.action == reply.action, "the hint given is logged"


async def test_the_node_serves_other_tables_and_keeps_its_lease_while_a_hint_is_computed(
    make_server, connect, caplog
) -> None:
    server = await make_server(lease_ttl=1.0)
    slow_worker(server, budget=PATIENT)
    ann, bob = await connect(server, name="Ann"), await connect(server, name="Bob")
    helped = await start(ann, "blue_jacket", deal=5)
    other = await start(bob, "blackjack_piles", deal=5)
    asked = time.monotonic()
    hint = asyncio.ensure_future(ann.request(v1.Hint(table=helped), timeout=PATIENT))
    latencies: list[float] = []
    while not hint.done():
        legal = [a for a in bob.tables[other].legal if a["type"] not in ("end_round", "resign")]
        began = time.monotonic()
        if legal:
            await bob.act(other, legal[0])
        else:
            await bob.resync(other)
        latencies.append(time.monotonic() - began)
        await asyncio.sleep(0.01)  # a player's pace: well within the message rate limit
    reply = await hint
    assert time.monotonic() - asked >= PAUSE
    assert reply.by == "expert" and reply.action in ann.tables[helped].legal
    # With the hint on the event loop, Bob would have waited PAUSE seconds for one answer.
    assert len(latencies) >= 5 and max(latencies) < PAUSE / 4, latencies
    assert helped in server.node.rooms, "the table stayed with its node"
    assert not [e for e in await log_of(server, helped) if isinstance(e.command, Resume)]
    assert "lease of" not in caplog.text


async def test_a_hint_the_expert_is_too_late_for_comes_from_the_quick_bot(
    make_server, connect
) -> None:
    server = await make_server()
    slow_worker(server, budget=0.2)
    client = await connect(server, name="Ann")
    table = await start(client, "blue_jacket", deal=9)
    view, legal = seen(client, table)
    reply = await client.request(v1.Hint(table=table))
    assert (reply.by, reply.hints) == ("heuristic", 1)
    assert reply.action == wire(heuristic(view, legal))


async def test_a_dead_worker_gives_a_quick_hint_and_the_next_hint_a_new_worker() -> None:
    engine = GAMES["blackjack_piles"].engine.new(
        GAMES["blackjack_piles"].engine_config(v1.TableOptions(private=True)), "dying:1"
    )
    job = hint_job("blackjack_piles", engine, 0)
    assert job is not None
    worker = HintWorker(hint_budget=PATIENT, expert=dying_expert_hint)
    try:
        move, by = await worker.move(job)
        assert by == "greedy" and move in job.legal
        worker.expert = expert_hint
        assert await worker.move(job) == (expert_hint(job), "expert")
    finally:
        worker.close()


async def test_a_flood_of_hints_is_rate_limited_and_changes_nothing(make_server, connect) -> None:
    server = await make_server(hints_per_second=0.001, hint_burst=2)
    client = await connect(server, name="Ann")
    table = await start(client, "blackjack_piles", deal=2)
    for count in (1, 2):
        assert (await client.request(v1.Hint(table=table))).hints == count
    logged = len(await server.store.logs.read(table))
    for _ in range(5):
        with pytest.raises(ServerError) as refused:
            await client.request(v1.Hint(table=table))
        assert refused.value.code == ErrorCode.RATE_LIMITED
    assert len(await server.store.logs.read(table)) == logged
    assert client.tables[table].info.hints == 2
    await client.act(table, client.tables[table].legal[0])  # the session itself goes on


async def test_the_par_is_found_off_the_loop_logged_and_emitted_after_game_over(
    server: GameServer, connect
) -> None:
    client = await connect(server, name="Ann")
    table = await start(client, "blue_jacket", deal=4)
    await client.act(table, {"type": "resign"})
    state = client.tables[table]
    await client.wait_until(lambda: any(e.event["type"] == "par" for e in state.events), 60)
    kinds = [e.event["type"] for e in state.events]
    assert kinds.index("game_over") < kinds.index("par")
    par = next(e.event for e in state.events if e.event["type"] == "par")
    assert par["par"] >= par["score"] == state.view["score"]
    entries = await log_of(server, table)
    (found,) = [e.command for e in entries if isinstance(e.command, ParFound)]
    assert found.par["par"] == par["par"]
    rebuilt = rebuild(await server.store.logs.read(table))
    assert rebuilt.log.kept_events()[-1].event == msgspec.to_builtins(msgspec.convert(par, v1.Par))


async def test_the_next_hint_is_computed_while_the_player_thinks(make_server, connect) -> None:
    """Once a game has asked for a hint, the host has the worker find the next position's
    move as soon as a move is made: the next hint, asked a human moment later, is there at
    once (the expert here takes PAUSE seconds a position: without it, PAUSE each hint)."""
    server = await make_server(hint_budget=PATIENT)
    slow_worker(server, PATIENT)
    client = await connect(server, name="Ann")
    table = await start(client, "blue_jacket", deal=3)
    first = await client.request(v1.Hint(table=table), timeout=PATIENT)
    assert first.by == "expert"
    for _ in range(2):
        await client.request(v1.Act(table=table, action=first.action))
        await asyncio.sleep(PAUSE + 1.0)  # the player thinks; the worker computes meanwhile
        asked = time.monotonic()
        first = await client.request(v1.Hint(table=table), timeout=PATIENT)
        assert first.by == "expert"
        assert time.monotonic() - asked < PAUSE / 2, "the hint was computed ahead"
        view, _ = seen(client, table)
        assert first.action == wire(blue_jacket_expert.hint(view))


async def test_the_worker_is_started_before_a_sessions_first_hint(make_server, connect) -> None:
    server = await make_server(hint_budget=PATIENT)
    hints = server.node.hosting.hints
    assert hints._pool is None
    client = await connect(server, name="Bo")
    table = await start(client, "blue_jacket", deal=3)
    assert hints._pool is not None, "started with the session, not at its first hint"
    await asyncio.wait_for(asyncio.shield(hints._warming), 30)  # its imports done
    asked = time.monotonic()
    await client.request(v1.Hint(table=table), timeout=PATIENT)
    assert time.monotonic() - asked < PATIENT
