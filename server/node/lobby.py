"""Lobby: the table list, quick join, create-and-sit, bots at a table, the lobby pushes.

Theory of operation
-------------------
The table list comes from the store's lobby (every node's listed tables); its changes arrive on
the lobby channel and are pushed to every lobby watcher of this node. Quick join picks an open
table with a free seat or creates one; bots are named here and started by the server's
``spawn_bot`` (the server gets the bot client from whoever started it).
"""

from __future__ import annotations

import logging

import msgspec

from games.blackdrez.bots import BOT_NAMES
from protocol import v1
from protocol.codec import encode
from server import bus
from server.connection import Connection
from server.node.routing import error_answer, refused
from server.table.commands import (
    Answer,
)
from server.table.room import Room, RoomError

log = logging.getLogger("blackdrez.node")


class Lobby:
    """The lobby and the requests that create or fill tables."""

    async def _quick_join(self, client: Connection, message: v1.QuickJoin) -> Answer:
        for info in await self.list_tables():
            if (
                info.game == v1.TABLE_GAME
                and info.status == "open"
                and not info.private
                and any(seat is None for seat in info.seats)
                and all(seat is None or seat.player != client.player for seat in info.seats)
            ):
                answer = await self.route(
                    client.player,
                    client.name,
                    info.id,
                    v1.JoinTable(id=message.id, table=info.id),
                    bot=client.bot,
                )
                if not refused(answer):
                    return answer
        return await self._create_and_sit(client, v1.TableOptions(), message.id)

    async def _create_and_sit(
        self, client: Connection, options: v1.TableOptions, request_id: int | None
    ) -> Answer:
        """A new BlackDrez table hosted here, with its creator in the first seat as host."""
        room = await self._new_room(v1.TABLE_GAME, client.player, options, None)
        sit = v1.JoinTable(id=request_id, table=room.id)
        return await self._execute(room, client.player, client.name, sit, bot=client.bot)

    async def list_tables(self) -> list[v1.TableInfo]:
        """The public tables of every node."""
        records = await self.store.list_tables()
        return [msgspec.msgpack.decode(record, type=v1.TableInfo) for record in records]

    def _add_bots(self, room: Room, player: str, message: v1.AddBots) -> Answer:
        try:
            count = room.bot_seats(player, message.count)
        except RoomError as error:
            return error_answer(message, error.code, error.message)
        # Names are picked before the bots sit down: skip the names given here before, so two
        # quick requests do not name two bots alike.
        spawned = self._bots_named.get(room.id, 0)
        self._bots_named[room.id] = spawned + count
        for name in room.bot_names(count, message.strategy, skip=spawned % len(BOT_NAMES)):
            self.spawn_bot(room.id, message.strategy, room.invite, name)
        return Answer(replies=[v1.Ok(id=message.id, seq=room.seq)])

    def _on_lobby_message(self, data: bytes) -> None:
        if not self.lobby_watchers:
            return
        try:
            message = bus.decode(data)
        except msgspec.DecodeError:
            log.warning("undecodable lobby update dropped")
            return
        if not isinstance(message, bus.LobbyChanged):
            return
        update = message.update
        frames: dict[bool, str | bytes] = {}
        for client in list(self.lobby_watchers):
            frame = frames.get(client.binary)
            if frame is None:
                frame = frames[client.binary] = encode(update, client.binary)
            client.send_frame(frame)
