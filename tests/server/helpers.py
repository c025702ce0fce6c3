"""Shared moves for server tests: playing BlackDrez over the wire with the reference bots."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from clients.client import Client
from protocol import v1
from server.games import blackdrez, blackdrez_bots


def view_of(client: Client, table: str) -> blackdrez.View | None:
    """The client's current BlackDrez view of ``table`` as the engine's Struct."""
    raw = client.tables[table].view
    return None if raw is None else msgspec.convert(raw, blackdrez.View)


def game_over(client: Client, table: str) -> bool:
    """Whether the client has seen the game at ``table`` end."""
    state = client.tables.get(table)
    return bool(state and state.view and state.view["phase"] == "over")


async def play_out(client: Client, table: str, strategy: str = "threshold") -> list[int]:
    """Play the client's seat with a reference bot until the game ends; return acked seqs."""
    state = client.tables[table]
    bot = blackdrez_bots.STRATEGIES[strategy]
    acked: list[int] = []
    while True:
        await client.wait_until(lambda: state.legal or game_over(client, table), timeout=30)
        if game_over(client, table):
            return acked
        view = view_of(client, table)
        legal = [msgspec.convert(a, blackdrez.Action) for a in state.legal]
        seq = state.seq
        ok = await client.act(table, bot(view, legal))
        acked.append(ok.seq)
        await client.wait_until(lambda s=seq: state.seq > s, timeout=30)


async def seat_and_start(host: Client, others: list[Client], **options: Any) -> str:
    """Create a table with ``host``, seat ``others``, ready everyone, start; return the table id."""
    options.setdefault("seats", 1 + len(others))
    options.setdefault("round_pause_seconds", 0.0)
    joined = await host.request(v1.CreateTable(options=v1.TableOptions(**options)))
    table = joined.table.id
    for other in others:
        await other.request(v1.JoinTable(table=table))
    for player in [host, *others]:
        await player.request(v1.SetReady(table=table))
    await host.request(v1.StartGame(table=table))
    await asyncio.gather(
        *(c.wait_until(lambda c=c: c.tables[table].view is not None) for c in [host, *others])
    )
    return table
