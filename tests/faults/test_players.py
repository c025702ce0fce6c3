"""Faults that players cause: a connection dropped again and again on one's own turn, a game
left with fewer than two players who can play (issue 9, section 2), and a table that everyone
leaves by the spectators' door (section 4).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import msgspec
import pytest

from blackdrez.clients.bots import BotResult, check_fairness
from blackdrez.clients.client import Client, ServerError
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.stores import open_stores
from blackdrez.server.testing.nodes import CpuSampler, resident_bytes
from tests.faults.conftest import LaunchNodes
from tests.faults.history import check_history, wait_closed
from tests.faults.players import (
    act_on_turn,
    close_all,
    connect,
    fault_options,
    forbidden_errors,
    game_over,
    next_move,
    open_table,
    play,
    request,
    until,
)

pytestmark = pytest.mark.timeout(150)

DROPS_PER_TURN = 3
FROZEN_WINDOW = 5.0
"""Seconds a table with fewer than two players who can play is watched."""
FROZEN_ENTRIES = 5
"""Log entries such a table may write in that window (a decision, not a loop)."""
FROZEN_CPU = 25.0
"""Mean CPU (% of one core) its node may use meanwhile."""


async def log_length(redis_url: str, table: str) -> int:
    """How many entries the table's log holds."""
    store = open_stores(redis_url, "fault-test")
    try:
        return len(await store.logs.read(table))
    finally:
        await store.close()


async def reconnected(client: Client, table: str, before: int) -> None:
    """Wait until ``client`` has reconnected (more than ``before`` times) and holds the table
    as the server has it now (its own resync, answered after everything already sent)."""
    await until(lambda: client.reconnects > before, 30)
    await request(client, v1.Resync(table=table, since=client.tables[table].seq))


async def test_a_player_who_drops_again_and_again_on_their_turn_loses_nothing(
    launch_nodes: LaunchNodes,
    store_url: str,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    """On each of their turns a player's connection drops three times (reconnecting to the
    other node each time), and on every other turn it drops again right after the move is sent,
    before its answer. Their seat is never freed nor their turn timed out, every move they saw
    acknowledged is logged once, and the game ends as everyone saw it."""
    nodes = launch_nodes(2)
    table = await open_table(nodes.urls, fault_options(seats=2, turn_seconds=30.0))
    dropper, other = table.clients
    state = dropper.tables[table.id]
    mine = BotResult(table=table.id, seat=state.seat or 0, player=dropper.player)
    turns = drops = unanswered = 0
    try:
        other_plays = asyncio.create_task(play(other, table.id, think=0.05))
        async with asyncio.timeout(90):
            while not game_over(dropper, table.id):
                await dropper.wait_until(lambda: state.legal or game_over(dropper, table.id), 30)
                if game_over(dropper, table.id):
                    break
                turns += 1
                for _ in range(DROPS_PER_TURN):
                    before = dropper.reconnects
                    await dropper.drop()
                    drops += 1
                    await reconnected(dropper, table.id, before)
                move = next_move(dropper, table.id)
                if move is None:
                    continue
                if turns % 2 == 0:  # the move is sent, and the connection drops at once
                    before = dropper.reconnects
                    await dropper.send(v1.Act(table=table.id, action=msgspec.to_builtins(move)))
                    await dropper.drop()
                    drops += 1
                    unanswered += 1
                    await reconnected(dropper, table.id, before)
                    continue
                seq = state.seq
                ok = await dropper.act(table.id, move)
                mine.acked.append(ok.seq)
                await dropper.wait_until(lambda s=seq: state.seq > s, 30)
        mine.final = state.view
        mine.problem = check_fairness(state)
        mine.fair = mine.problem is None
        await request(dropper, v1.LeaveTable(table=table.id))
        theirs = await asyncio.wait_for(other_plays, 60)
    finally:
        await close_all(table.clients)
    figures["turns, drops"] = f"{turns}, {drops}"
    figures["moves sent without an answer"] = unanswered
    events = [numbered.event for numbered in state.events]
    ended = [e["type"] for e in events].index("game_over")
    lost_turns = [
        e["type"]
        for e in events[:ended]
        if e["type"] in ("seat_freed", "timed_out") and e.get("seat") == mine.seat
    ]
    figures["seat freed or turns timed out"] = len(lost_turns)
    found, problems = forbidden_errors([table])
    figures["forbidden errors"] = found
    await wait_closed(store_url, [table.id])
    history = await check_history(store_url, [mine, theirs], cpu=cpu, nodes=nodes)
    figures.update(history.figures)
    if lost_turns:
        problems.append(f"the dropping player lost their seat or a turn: {lost_turns}")
    assert not problems + history.problems, "\n".join(problems + history.problems)


def between_rounds(client: Client, table: str) -> bool:
    """Whether the client sees the game waiting for its next round (or over)."""
    view = client.tables[table].view
    return bool(view and view["phase"] in ("between_rounds", "over"))


@pytest.mark.parametrize("how", ["unready", "leave"])
async def test_a_game_left_with_one_player_who_can_play_does_not_spin(
    how: str,
    launch_nodes: LaunchNodes,
    store_url: str,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    """Two players, no pause between rounds; after the start one of them says they are not
    ready (or leaves), and the round is played out. With fewer than two seats able to play the
    next round, the table must wait or end the game: never tick, log and burn a core in a loop.
    Then the other leaves too, and the table closes."""
    nodes = launch_nodes(1)
    node = nodes[0]
    # A deserted game waits out its grace for players to sit down again before it closes:
    # 8 s, past the frozen window, so that the window sees the table waiting (not 30).
    options = fault_options(seats=2, round_pause_seconds=0.0, grace_seconds=8.0)
    table = await open_table(nodes.urls, options)
    stayer, quitter = table.clients
    try:
        if how == "unready":
            await request(quitter, v1.SetReady(table=table.id, ready=False))
            players = [stayer, quitter]
        else:
            await request(quitter, v1.LeaveTable(table=table.id))
            players = [stayer]
        async with asyncio.timeout(60):
            while not between_rounds(stayer, table.id):
                with contextlib.suppress(TimeoutError):
                    await act_on_turn(players, table.id, timeout=2.0)
        figures["round played out to event"] = stayer.tables[table.id].seq
        start = time.monotonic()
        entries = await log_length(store_url, table.id)
        memory = resident_bytes(node.pid) or 0
        await asyncio.sleep(FROZEN_WINDOW)
        end = time.monotonic()
        written = await log_length(store_url, table.id) - entries
        grown = (resident_bytes(node.pid) or 0) - memory
        stats = cpu.stats(node.node_id, start, end)
        figures["log entries in window"] = written
        figures["node CPU % mean/max in window"] = f"{stats.mean:.0f}/{stats.peak:.0f}"
        figures["node memory MiB grown"] = round(grown / 2**20, 1)
        for player in table.clients:
            with contextlib.suppress(ServerError):
                await request(player, v1.LeaveTable(table=table.id))
    finally:
        await close_all(table.clients)
    await wait_closed(store_url, [table.id])
    history = await check_history(
        store_url, tables=[table.id], finished=False, cpu=cpu, nodes=nodes
    )
    figures.update(history.figures)
    problems = list(history.problems)
    if written > FROZEN_ENTRIES:
        problems.append(f"the table wrote {written} log entries in {FROZEN_WINDOW:.0f} s")
    if stats.mean > FROZEN_CPU:
        problems.append(f"its node used {stats.mean:.0f}% CPU meanwhile")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("how", ["leave", "disconnect"])
async def test_a_table_closes_when_its_host_then_its_last_spectator_goes(
    how: str,
    launch_nodes: LaunchNodes,
    store_url: str,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    """A host creates a table, someone watches it, the host goes, then the spectator goes
    (by leaving, or by dropping their connection): once the grace period has passed the table
    is closed, gone from the lobby, and nothing of it is left in Redis without a lifetime."""
    grace = 1.0
    nodes = launch_nodes(1)
    host = await connect(nodes.urls[0], name="Host", reconnect=False)
    spectator = await connect(nodes.urls[0], name="Watcher", reconnect=False)
    clients = [host, spectator]
    try:
        options = fault_options(seats=2, grace_seconds=grace)
        joined = await request(host, v1.CreateTable(options=options))
        table = joined.table.id
        await request(spectator, v1.Spectate(table=table))
        for player in (host, spectator):
            if how == "leave":
                try:
                    await request(player, v1.LeaveTable(table=table))
                except ServerError as error:
                    # spectators alone do not keep a table open: it may be closed already
                    assert player is spectator and error.code == ErrorCode.NOT_FOUND
            else:
                await player.close()
            await asyncio.sleep(grace + 0.5)
        gone = time.monotonic()
        waited = await wait_closed(store_url, [table], timeout=grace + 10.0)
        figures["closed after s"] = round(time.monotonic() - gone + grace + 0.5, 2)
        figures["waited for close s"] = round(waited, 2)
        lister = await connect(nodes.urls[0], name="Lister", reconnect=False)
        clients.append(lister)
        listed = await request(lister, v1.ListTables())
        still_listed = table in {info.id for info in listed.tables}
    finally:
        await close_all(clients)
    figures["still listed"] = still_listed
    history = await check_history(store_url, tables=[table], finished=False, cpu=cpu, nodes=nodes)
    figures.update(history.figures)
    problems = list(history.problems)
    if still_listed:
        problems.append("the lobby still lists the table")
    assert not problems, "\n".join(problems)
