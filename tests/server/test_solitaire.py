"""Solitaire sessions over the wire: both games to the end, reconnects, leaderboards."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from blackdrez.clients.client import Client, ServerError
from blackdrez.games.blackjack_piles import bots as blackjack_piles_bots
from blackdrez.games.blackjack_piles import rules as blackjack_piles
from blackdrez.games.blue_jacket import bots as blue_jacket_bots
from blackdrez.games.blue_jacket import rules as blue_jacket
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode

GAMES = {
    "blackjack_piles": (blackjack_piles, blackjack_piles_bots.greedy),
    "blue_jacket": (blue_jacket, blue_jacket_bots.heuristic),
}


async def play_session(client: Client, table: str, game: str, limit: int = 2000) -> dict:
    module, bot = GAMES[game]
    state = client.tables[table]
    for _ in range(limit):
        if not state.legal:
            break
        view = msgspec.convert(state.view, module.View)
        legal = [msgspec.convert(a, module.Action) for a in state.legal]
        seq = state.seq
        await client.act(table, bot(view, legal))
        await client.wait_until(lambda s=seq: state.seq > s)
    return state.view


@pytest.mark.parametrize("game", sorted(GAMES))
async def test_a_session_plays_to_the_end_and_scores(server, connect, game: str) -> None:
    client = await connect(server, name="Solo")
    joined = await client.request(v1.StartSolitaire(game=game))
    table = joined.table.id
    assert joined.seat == 0
    await client.wait_until(lambda: client.tables[table].view is not None)
    view = await play_session(client, table, game)
    state = client.tables[table]
    assert not state.legal
    assert state.info is not None and state.info.status == "finished"
    assert view["seed"] is not None
    started = (
        next(e.event for e in state.events if e.event["type"] == "game_started")
        if (state.events and state.events[0].event["type"] == "game_started")
        else None
    )
    module, _ = GAMES[game]
    score = module.__dict__["BlackjackPiles" if game == "blackjack_piles" else "BlueJacket"].load
    assert score
    board = await client.request(v1.GetLeaderboard(game=game, deal="random"))
    assert [e.name for e in board.entries] == ["Solo"]
    assert board.entries[0].score == view["score"]
    assert started is None or started["commitment"]


async def test_numbered_deals_are_the_same_for_everyone(server, connect) -> None:
    first, second = [await connect(server, name=n) for n in ("A", "B")]
    one = await first.request(v1.StartSolitaire(game="blue_jacket", deal=42))
    two = await second.request(v1.StartSolitaire(game="blue_jacket", deal=42))
    await first.wait_until(lambda: first.tables[one.table.id].view is not None)
    await second.wait_until(lambda: second.tables[two.table.id].view is not None)
    assert first.tables[one.table.id].view == second.tables[two.table.id].view


async def test_a_session_survives_a_reconnect(server, connect) -> None:
    client = await connect(server, name="Solo")
    joined = await client.request(v1.StartSolitaire(game="blackjack_piles"))
    table = joined.table.id
    await client.wait_until(lambda: client.tables[table].view is not None)
    state = client.tables[table]
    seq = state.seq
    await client.act(table, state.legal[0])
    await client.wait_until(lambda: state.seq > seq)
    view = state.view
    await client.close()
    back = await Client.connect(f"ws://127.0.0.1:{server.port}/", token=client.token)
    assert table in back.welcome.tables
    reply = await back.resync(table)
    assert reply.view == view
    assert back.tables[table].legal


async def test_solitaire_actions_are_checked(server, connect) -> None:
    client = await connect(server, name="Solo")
    joined = await client.request(v1.StartSolitaire(game="blackjack_piles"))
    table = joined.table.id
    with pytest.raises(ServerError) as error:
        await client.act(table, {"type": "place", "pile": 99})
    assert error.value.code in (ErrorCode.ILLEGAL_ACTION, ErrorCode.BAD_ACTION)
    with pytest.raises(ServerError) as error:
        await client.act(table, {"type": "hit"})
    assert error.value.code == ErrorCode.BAD_ACTION
    other = await connect(server, name="Other")
    with pytest.raises(ServerError) as error:
        await other.act(table, {"type": "end_round"})
    assert error.value.code == ErrorCode.NOT_SEATED


async def test_leaving_a_session_resigns_and_closes_it(server, connect) -> None:
    client = await connect(server, name="Quitter")
    joined = await client.request(v1.StartSolitaire(game="blue_jacket"))
    table = joined.table.id
    await client.wait_until(lambda: client.tables[table].view is not None)
    await client.request(v1.LeaveTable(table=table))
    assert table not in server.node.rooms
    board = await client.request(v1.GetLeaderboard(game="blue_jacket", deal="random"))
    assert [entry.name for entry in board.entries] == ["Quitter"]
    with pytest.raises(ServerError) as error:
        await client.act(table, {"type": "deal"})
    assert error.value.code == ErrorCode.NOT_FOUND


@pytest.mark.parametrize("game", sorted(GAMES))
async def test_an_abandoned_session_is_resigned_and_closed(make_server, connect, game) -> None:
    server = await make_server()
    client = await connect(server, name="Gone")
    joined = await client.request(v1.StartSolitaire(game=game))
    table = joined.table.id
    assert joined.table.status == "playing"
    room = server.node.rooms[table]
    room.options = msgspec.structs.replace(room.options, grace_seconds=0.2)
    await client.close()
    for _ in range(100):
        if table not in server.node.rooms:
            break
        await asyncio.sleep(0.05)
    assert table not in server.node.rooms, "the abandoned session was closed"
    other = await connect(server, name="Other")
    board = await other.request(v1.GetLeaderboard(game=game, deal="random"))
    assert [entry.name for entry in board.entries] == ["Gone"], "resigned, and scored"
