"""permessage-deflate (``--compression``): a client that negotiates it gets every reply and
update compressed, through websockets' own path, the same messages as anyone else."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from websockets.asyncio.client import connect as ws_connect

from blackdrez.protocol import v1
from blackdrez.protocol.codec import SERVER_DECODERS, encode
from blackdrez.protocol.handshake import Hello


async def test_a_compressing_client_plays_a_game_against_a_bot(make_server: Any) -> None:
    server = await make_server(compression=True)
    decoder = SERVER_DECODERS[1]
    async with ws_connect(f"ws://127.0.0.1:{server.port}/", compression="deflate") as ws:
        assert ws.protocol.extensions, "permessage-deflate negotiated"
        await ws.send(encode(Hello(versions=[1], name="Squeezed"), False))
        assert isinstance(decoder.decode(await ws.recv()), v1.Welcome)
        ids = iter(range(1, 10_000))
        replies: dict[int, Any] = {}
        updates: list[v1.Update] = []

        async def request(message: Any, *, refused: str | None = None) -> Any:
            request_id = next(ids)
            await ws.send(encode(msgspec.structs.replace(message, id=request_id), False))
            while request_id not in replies:
                received = decoder.decode(await asyncio.wait_for(ws.recv(), 10))
                if isinstance(received, v1.Update):
                    updates.append(received)
                elif getattr(received, "id", None) is not None:
                    replies[received.id] = received
            reply = replies.pop(request_id)
            if isinstance(reply, v1.Error) and reply.code == refused:
                return None
            assert not isinstance(reply, v1.Error), reply
            return reply

        options = v1.TableOptions(seats=2, round_pause_seconds=0.0)
        table = (await request(v1.CreateTable(options=options))).table.id
        await request(v1.AddBots(table=table, count=1))
        await request(v1.SetReady(table=table))
        async with asyncio.timeout(30):  # the bot connects as anyone does, then is ready
            while await request(v1.StartGame(table=table), refused="not_enough_players") is None:
                await asyncio.sleep(0.05)
        moves = 0
        async with asyncio.timeout(30):
            while moves < 3:
                legal = updates[-1].legal if updates else []
                if legal:
                    await request(v1.Act(table=table, action=legal[0]))
                    moves += 1
                    continue
                received = decoder.decode(await ws.recv())
                if isinstance(received, v1.Update):
                    updates.append(received)
        assert [u.seq for u in updates] == sorted({u.seq for u in updates})
        assert updates[-1].view is not None
