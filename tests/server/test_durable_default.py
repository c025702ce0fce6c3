"""The default server (``blackdrez serve``, no Redis given) keeps everything across its restart.

It runs a Redis of its own with its append-only file in its data folder
(``blackdrez.server.stores.embedded``): a player's identity and account, a BlackDrez game and a
solitaire
session in play, and every action acknowledged before the stop are all there after a graceful
restart (SIGTERM) and after a SIGKILL; the players reconnect with their tokens and carry on.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from blackdrez.clients.client import Client, TableState
from blackdrez.protocol import v1
from blackdrez.server.testing.default_server import DefaultServer, redis_pid
from blackdrez.server.testing.redis_server import free_port
from tests.faults.players import request

pytestmark = pytest.mark.timeout(180)


async def play_one(client: Client, table: str) -> v1.Ok:
    """Play the first legal action of ``client``'s seat once it is offered."""
    state = client.tables[table]
    await client.wait_until(lambda: bool(state.legal), 30)
    return await client.act(table, state.legal[0])


async def on_turn(clients: list[Client], table: str) -> Client:
    """The client whose seat has legal actions at ``table``, once one has."""
    for _ in range(300):
        for client in clients:
            if client.tables[table].legal:
                return client
        await asyncio.sleep(0.1)
    raise AssertionError("nobody was offered an action")


async def test_a_restart_of_the_default_server_keeps_identities_tables_and_sessions(
    tmp_path: Path,
) -> None:
    server = DefaultServer(tmp_path, free_port())
    clients: list[Client] = []
    try:
        await server.start()
        assert str(tmp_path / "blackdrez-data" / "redis") in server.first_line
        ann = await Client.connect(server.url, name="Ann")
        bob = await Client.connect(server.url, name="Bob")
        clients += [ann, bob]
        session = await ann.request(v1.SignUp(name="ann-durable", password="a long passphrase"))
        tokens = {"ann": session.token, "bob": bob.token}
        players = {"ann": ann.player, "bob": bob.player}
        solitaire = (await ann.request(v1.StartSolitaire(game="blackjack_piles"))).table.id
        options = v1.TableOptions(seats=2, turn_seconds=300.0, grace_seconds=300.0)
        table = (await ann.request(v1.CreateTable(options=options))).table.id
        await bob.request(v1.JoinTable(table=table))
        for client in (ann, bob):
            await client.request(v1.SetReady(table=table))
        await ann.request(v1.StartGame(table=table))
        acked = {solitaire: (await play_one(ann, solitaire)).seq}
        mover = await on_turn([ann, bob], table)
        acked[table] = (await play_one(mover, table)).seq
        seen: dict[str, Any] = {}
        for client, t in ((ann, solitaire), (mover, table)):
            await client.wait_until(lambda c=client, t=t: c.tables[t].seq >= acked[t], 10)
            seen[t] = client.tables[t].view

        for how in (signal.SIGTERM, signal.SIGKILL):
            for client in clients:
                await client.close()
            clients.clear()
            code = await asyncio.to_thread(server.stop, how)
            assert code == (0 if how == signal.SIGTERM else -signal.SIGKILL)
            await server.start()
            ann = await Client.connect(server.url, token=tokens["ann"], name="Ann")
            bob = await Client.connect(server.url, token=tokens["bob"], name="Bob")
            clients += [ann, bob]
            assert (ann.player, bob.player) == (players["ann"], players["bob"]), how.name
            for client, t in ((ann, solitaire), (ann, table), (bob, table)):
                client.tables[t] = TableState(t)
                answer = await request(client, v1.Resync(table=t, since=0))
                assert answer.seq >= acked[t], (how.name, t)
            assert ann.tables[solitaire].view == seen[solitaire], how.name
            mover_now = ann if mover.player == ann.player else bob
            assert mover_now.tables[table].view == seen[table], how.name
            # ...and they carry on: an action at each is acknowledged after the restart.
            acked[solitaire] = (await play_one(ann, solitaire)).seq
            mover = await on_turn([ann, bob], table)
            acked[table] = (await play_one(mover, table)).seq
            for client, t in ((ann, solitaire), (mover, table)):
                await client.wait_until(lambda c=client, t=t: c.tables[t].seq >= acked[t], 10)
                seen[t] = client.tables[t].view
        signed_in = await Client.connect(server.url, name="Ann again")
        clients.append(signed_in)
        again = await signed_in.request(v1.SignIn(name="ann-durable", password="a long passphrase"))
        assert again.player == players["ann"]
    finally:
        for client in clients:
            await client.close()
        if server.process is not None and server.process.poll() is None:
            await asyncio.to_thread(server.stop, signal.SIGTERM)
    data = tmp_path / "blackdrez-data"
    left = redis_pid(data)
    if left is not None:
        os.kill(left, signal.SIGKILL)  # (not to outlive the test)
    assert left is None, "the data folder's Redis outlived a graceful stop"
    assert any((data / "redis").glob("appendonly*")), "no append-only file in the data folder"
