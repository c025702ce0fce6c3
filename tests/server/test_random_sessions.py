"""Random sessions against a live server: several players do whatever the protocol offers a
client, at random, across tables, and the server stays sound after every step; then everyone
goes, and every table comes to its end, leaving nothing behind in the node nor in its store (in
memory, and on a real Redis: no key of a table but its record, and every key with its TTL).

Each walk is seeded (``random.Random(seed)``): a failure names its seed and step, and the same
seed plays the same requests again (the bots the host adds and the timers are live, so a
failure that depends on their timing may need a few runs to show again).
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import random
import string
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from blackdrez.games import SOLITAIRES
from blackdrez.protocol import v1
from blackdrez.protocol.codec import SERVER_DECODERS, encode
from blackdrez.protocol.errors import CloseCode, ErrorCode
from blackdrez.protocol.handshake import Hello
from blackdrez.server.app import GameServer
from blackdrez.server.stores.keys import FIXED_KEYS
from blackdrez.server.stores.memory import MemoryLobby, MemoryPlayers, MemoryTableLogs
from tests.faults.history import keys_without_ttl

SERVER = SERVER_DECODERS[1]
PLAYERS = 4
STEPS = 300
SEEDS = [1, 2, 3, 4]
ANSWER_TIMEOUT = 10.0
"""Seconds a request may wait for its answer before it counts as dropped (a hint waits for
the expert at most ``hint_budget``)."""
CODES = {code.value for code in ErrorCode} - {ErrorCode.INTERNAL}
NO_TABLE = "t" + "0" * 10
REPLIES: dict[type, tuple[type, ...]] = {
    v1.Ping: (v1.Pong,),
    v1.ListTables: (v1.Tables,),
    v1.WatchLobby: (v1.Tables,),
    v1.UnwatchLobby: (v1.Ok,),
    v1.CreateTable: (v1.Joined,),
    v1.JoinTable: (v1.Joined,),
    v1.QuickJoin: (v1.Joined,),
    v1.Spectate: (v1.Joined,),
    v1.LeaveTable: (v1.Ok,),
    v1.SetReady: (v1.Ok,),
    v1.StartGame: (v1.Ok,),
    v1.AddBots: (v1.Ok,),
    v1.RemoveBot: (v1.Ok,),
    v1.Act: (v1.Ok,),
    v1.Resync: (v1.Update, v1.Snapshot),
    v1.StartSolitaire: (v1.Joined,),
    v1.Hint: (v1.HintReply,),
    v1.Undo: (v1.Ok,),
    v1.GetDaily: (v1.Daily,),
    v1.Logout: (v1.Ok,),
}
"""The documented answers of each request (besides an ``error``): docs/protocol.md."""


class Closed(Exception):
    """The connection closed while a request waited for its answer."""


@dataclass
class Seen:
    """What a player last saw of a table."""

    seq: int = 0
    seat: int | None = None
    info: v1.TableInfo | None = None
    legal: list[Any] = field(default_factory=list)

    def info_host(self) -> str | None:
        """The table's host, as last seen."""
        return None if self.info is None else self.info.host


class Line:
    """One greeted connection: answers go to the requests waiting for them, the rest to the
    inbox, as they come."""

    def __init__(self, ws: ClientConnection, welcome: v1.Welcome, node: int = 0) -> None:
        self.ws = ws
        self.welcome = welcome
        self.node = node
        """Which of the walk's servers it is connected to."""
        self.inbox: asyncio.Queue[Any] = asyncio.Queue()
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for frame in self.ws:
                message = SERVER.decode(frame)
                waiter = self.waiting.pop(getattr(message, "id", None), None)  # type: ignore[arg-type]
                if waiter is not None:
                    waiter.set_result(message)
                else:
                    self.inbox.put_nowait(message)
        for waiter in self.waiting.values():
            waiter.set_exception(Closed(self.close_code))
        self.waiting.clear()

    @property
    def close_code(self) -> int | None:
        return self.ws.close_code


@dataclass
class Player:
    """A person at a browser: a name, a session token, at most one live connection."""

    name: str
    token: str | None = None
    id: str = ""
    line: Line | None = None
    tables: dict[str, Seen] = field(default_factory=dict)
    invites: dict[str, str] = field(default_factory=dict)

    def take(self, message: Any) -> None:
        """Note what a pushed message or reply says of a table."""
        if isinstance(message, v1.Joined):
            seen = self.tables.setdefault(message.table.id, Seen())
            seen.info, seen.seat = message.table, message.seat
            if message.invite is not None:
                self.invites[message.table.id] = message.invite
        elif isinstance(message, v1.Snapshot | v1.Update):
            seen = self.tables.setdefault(message.table, Seen())
            seen.seq, seen.legal = message.seq, message.legal
            info = message.info
            if info is not None:
                seen.info = info
                seen.seat = next(
                    (i for i, s in enumerate(info.seats) if s is not None and s.player == self.id),
                    None,
                )
        elif isinstance(message, v1.Shutdown):
            raise AssertionError(f"{self.name} was told the server shuts down: {message}")

    def drain(self) -> None:
        """Take every message received so far."""
        line = self.line
        while line is not None and not line.inbox.empty():
            self.take(line.inbox.get_nowait())


class Walk:
    """A seeded random walk of ``PLAYERS`` players against one server, or several sharing one
    Redis (each connection goes to one of them at random: a player's tables, watches and
    replaced connections then cross nodes)."""

    def __init__(self, servers: list[GameServer], seed: int) -> None:
        self.servers = servers
        self.rng = random.Random(seed)
        self.seed = seed
        self.urls = [f"ws://127.0.0.1:{server.port}/" for server in servers]
        self.players = [Player(name=f"P{i}") for i in range(PLAYERS)]
        self.ids = iter(range(1, 2**40))
        self.step = 0
        self.known: set[str] = {NO_TABLE}
        """Every table id seen (closed ones too), and one that never was."""
        self.listed: list[str] = []
        """The tables of the latest list."""
        self.observer: Line | None = None
        self.log: list[str] = []
        self.crossed = 0
        """Requests sent to one node for a table another node hosted."""

    # ------------------------------------------------------------------ wire
    async def greet(self, player: Player, token: str | None) -> Line | None:
        """Open a connection for ``player`` (with ``token``, or as a new guest)."""
        node = 0 if len(self.urls) == 1 else self.rng.randrange(len(self.urls))
        ws = await ws_connect(self.urls[node], compression=None, max_size=2**22)
        await ws.send(encode(Hello(versions=[1], name=player.name, token=token), False))
        reply = SERVER.decode(await asyncio.wait_for(ws.recv(), ANSWER_TIMEOUT))
        if isinstance(reply, v1.Error):
            assert reply.code == ErrorCode.BAD_TOKEN, reply
            await asyncio.wait_for(ws.wait_closed(), ANSWER_TIMEOUT)
            assert ws.close_code == CloseCode.BAD_TOKEN, ws.close_code
            return None
        assert isinstance(reply, v1.Welcome), reply
        if token is None:
            player.tables.clear()
            player.invites.clear()
        player.token, player.id = reply.token, reply.player
        return Line(ws, reply, node)

    async def ask(self, player: Player, message: Any) -> Any:
        """Send a request and return its answer, checking it is one the protocol documents."""
        line = player.line
        assert line is not None
        message.id = next(self.ids)
        table = getattr(message, "table", None)
        if any(table in s.node.rooms for i, s in enumerate(self.servers) if i != line.node):
            self.crossed += 1
        answer = line.waiting[message.id] = asyncio.get_running_loop().create_future()
        self.log.append(f"{self.step}: {player.name} {message}")
        try:
            await line.ws.send(encode(message, message.id % 3 == 0))
        except ConnectionClosed:
            line.waiting.pop(message.id, None)
            raise Closed(line.close_code) from None
        try:
            got = await asyncio.wait_for(answer, ANSWER_TIMEOUT)
        except TimeoutError:
            raise AssertionError(f"no answer to {message}") from None
        player.drain()
        if isinstance(got, v1.Error):
            assert got.code in CODES, (message, got)
        else:
            assert isinstance(got, REPLIES[type(message)]), (message, got)
            player.take(got)
        self.log.append(f"   -> {got}")
        return got

    # ------------------------------------------------------------------ the walk
    async def run(self, steps: int) -> None:
        self.observer = await self.greet(Player(name="Watcher"), None)
        for player in self.players:
            player.line = await self.greet(player, None)
        for self.step in range(steps):
            if self.rng.random() < 0.25:  # a rush: several players at once
                rush = self.rng.sample(self.players, self.rng.randrange(2, PLAYERS + 1))
                seeds = [self.rng.random() for _ in rush]
                for player in rush:
                    player.drain()
                await asyncio.gather(
                    *(
                        self.move(p, random.Random(seed))
                        for p, seed in zip(rush, seeds, strict=True)
                    )
                )
            else:
                player = self.rng.choice(self.players)
                player.drain()
                await self.move(player, self.rng)
            await self.check()

    async def move(self, player: Player, rng: random.Random, alone: bool = True) -> None:
        """One random thing ``player`` does (``alone``: no other request of theirs is on its
        way, so they may also drop, log out or connect again)."""
        if player.line is None:
            token = player.token if rng.random() < 0.8 else None
            if token is None:
                player.name = "G" + "".join(rng.choices(string.ascii_letters, k=5))
            player.line = await self.greet(player, token)
            if player.line is None:  # a logged-out token: a new guest
                player.line = await self.greet(player, None)
            return
        playable = sorted(t for t, s in player.tables.items() if s.legal)
        mine = sorted(t for t, s in player.tables.items() if s.seat is not None)
        if playable and rng.random() < 0.5:
            table, kind = rng.choice(playable), "act"
        else:
            kind = rng.choice(KINDS if alone else REQUESTS)
            if mine and rng.random() < 0.6:
                table = rng.choice(mine)
            elif self.listed and rng.random() < 0.7:
                table = rng.choice(self.listed)
            else:
                table = rng.choice(sorted(self.known | set(player.tables)))
        seen = player.tables.get(table, Seen())
        if kind == "drop":
            await self.drop(player)
        elif kind == "again":
            await self.connect_again(player)
        elif kind == "pipeline":
            seeds = [rng.random() for _ in range(rng.randrange(2, 5))]
            await asyncio.gather(
                *(self.move(player, random.Random(seed), alone=False) for seed in seeds)
            )
        elif kind == "cut":
            await self.cut(
                player, rng.choice([v1.LeaveTable, v1.SetReady, v1.StartGame])(table=table)
            )
        elif kind == "logout" and rng.random() < 0.3:
            await self.ask(player, v1.Logout())
            await asyncio.wait_for(player.line.ws.wait_closed(), ANSWER_TIMEOUT)
            assert player.line.close_code == CloseCode.NORMAL
            player.line = None
        elif kind == "create":
            options = v1.TableOptions(
                seats=rng.choice([2, 2, 3, 4, 9]),
                private=rng.random() < 0.4,
                grace_seconds=rng.choice([0.0, 0.3, 2.0, 2.0, 60.0]),
                turn_seconds=rng.choice([1.0, 5.0, 30.0]),
                round_pause_seconds=rng.choice([0.0, 0.5]),
                max_rounds=rng.choice([None, 1, 2]),
            )
            await self.ask(player, v1.CreateTable(options=options))
        elif kind == "solitaire":
            game = rng.choice(SOLITAIRES)
            deal = rng.choice([None, None, rng.randrange(100)])
            daily = deal is None and rng.random() < 0.3
            await self.ask(player, v1.StartSolitaire(game=game, deal=deal, daily=daily))
        elif kind == "join":
            invite = self.invite(table, rng)
            seat = rng.choice([None, None, rng.randrange(8)])
            reply = await self.ask(player, v1.JoinTable(table=table, seat=seat, invite=invite))
            if isinstance(reply, v1.Joined) and rng.random() < 0.7:
                await self.ask(player, v1.SetReady(table=table))
        elif kind == "quick_join":
            await self.ask(player, v1.QuickJoin())
        elif kind == "spectate":
            await self.ask(player, v1.Spectate(table=table, invite=self.invite(table, rng)))
        elif kind == "leave":
            await self.ask(player, v1.LeaveTable(table=table))
        elif kind == "ready":
            await self.ask(player, v1.SetReady(table=table, ready=rng.random() < 0.8))
        elif kind == "start":
            hosting = sorted(t for t in mine if player.tables[t].info_host() == player.id)
            table = rng.choice(hosting) if hosting and rng.random() < 0.8 else table
            await self.ask(player, v1.StartGame(table=table))
        elif kind == "add_bots":
            await self.ask(player, v1.AddBots(table=table, count=rng.choice([1, 1, 2, 7])))
        elif kind == "remove_bot":
            seats = seen.info.seats if seen.info is not None else []
            bots = [i for i, s in enumerate(seats) if s is not None and s.bot]
            seat = rng.choice(bots) if bots else rng.randrange(8)
            await self.ask(player, v1.RemoveBot(table=table, seat=seat))
        elif kind == "act":
            if seen.legal and rng.random() < 0.8:
                action = rng.choice(seen.legal)
            else:
                action = rng.choice(NONSENSE)
            await self.ask(player, v1.Act(table=table, action=action))
        elif kind == "hint":
            await self.ask(player, v1.Hint(table=table))
        elif kind == "undo":
            await self.ask(player, v1.Undo(table=table))
        elif kind == "resync":
            since = rng.choice([0, seen.seq, seen.seq + 3, max(seen.seq - 2, 0), 2**53 - 1])
            await self.ask(player, v1.Resync(table=table, since=since))
        elif kind == "lobby":
            request = rng.choice([v1.ListTables(), v1.WatchLobby(), v1.UnwatchLobby()])
            reply = await self.ask(player, request)
            if isinstance(reply, v1.Tables):
                self.known |= {info.id for info in reply.tables}
        elif kind == "daily":
            await self.ask(player, v1.GetDaily(game=rng.choice(SOLITAIRES)))
        else:
            await self.ask(player, v1.Ping())
        for seen_table in player.tables:
            self.known.add(seen_table)

    def invite(self, table: str, rng: random.Random) -> str | None:
        """The table's invite if some player knows it (or a wrong one, or none)."""
        right = next((p.invites[table] for p in self.players if table in p.invites), None)
        return rng.choice([right, right, None, "wrong-code"])

    async def drop(self, player: Player) -> None:
        """The player's connection is cut (no close frame)."""
        line = player.line
        assert line is not None
        self.log.append(f"{self.step}: {player.name} drops")
        line.ws.transport.abort()
        await line.reader
        player.line = None

    async def cut(self, player: Player, message: Any) -> None:
        """The player's connection is cut right after a request, before its answer."""
        line = player.line
        assert line is not None
        message.id = next(self.ids)
        self.log.append(f"{self.step}: {player.name} {message} and drops")
        await line.ws.send(encode(message, False))
        line.ws.transport.abort()
        await line.reader
        player.line = None

    async def connect_again(self, player: Player) -> None:
        """A second connection with the same token: it replaces the first (closed 4004)."""
        old = player.line
        assert old is not None
        self.log.append(f"{self.step}: {player.name} connects again")
        player.line = await self.greet(player, player.token)
        assert player.line is not None
        await asyncio.wait_for(old.reader, ANSWER_TIMEOUT)
        assert old.close_code == CloseCode.REPLACED, old.close_code

    # ------------------------------------------------------------------ invariants
    async def check(self) -> None:
        """What holds after every step."""
        nodes = [server.node for server in self.servers]
        for player in self.players:
            if player.line is not None:
                assert player.line.close_code is None, (player.name, player.line.close_code)
        assert self.observer is not None
        pong = await self.ask_observer(v1.Ping())
        assert isinstance(pong, v1.Pong)
        listed = await self.ask_observer(v1.ListTables())
        assert isinstance(listed, v1.Tables)
        self.listed = sorted(info.id for info in listed.tables)
        self.known.update(self.listed)
        for info in listed.tables:
            if not any(info.id in node.rooms for node in nodes):  # closed since: its retirement
                for node in nodes:  # takes it off the list
                    await node._settled()
                still = {info.id for info in await nodes[0].lobby.list_tables()}
                assert info.id not in still, f"{info.id} is listed but hosted nowhere"
        hosts = [room.id for node in nodes for room in node.rooms.values()]
        assert len(hosts) == len(set(hosts)), f"a table hosted twice: {sorted(hosts)}"
        for room in (room for node in nodes for room in node.rooms.values()):
            players = [s.player for s in room.seats if s is not None]
            assert len(players) == len(set(players)), (room.id, room.seats)

    async def ask_observer(self, message: Any) -> Any:
        observer = Player(name="Watcher", line=self.observer)
        return await self.ask(observer, message)

    # ------------------------------------------------------------------ the end
    async def everyone_goes(self) -> None:
        """Every player leaves every table they know of, and disconnects."""
        for player in self.players:
            player.drain()
            if player.line is None:
                continue
            for table in list(player.tables):
                await self.ask(player, v1.LeaveTable(table=table))
            await player.line.ws.close()
            await player.line.reader
            player.line = None
        assert self.observer is not None
        await self.observer.ws.close()
        await self.observer.reader


KINDS = (
    ["create"] * 4
    + ["solitaire"] * 2
    + ["join"] * 8
    + ["quick_join"] * 2
    + ["spectate"] * 2
    + ["leave"] * 3
    + ["ready"] * 6
    + ["start"] * 5
    + ["add_bots"] * 2
    + ["remove_bot", "hint", "undo", "lobby", "daily", "ping", "logout", "drop", "again"]
    + ["pipeline"] * 3
    + ["cut"]
    + ["act"] * 6
    + ["resync"] * 3
)
"""What a player does, weighted (besides acting where they have legal actions: half the
time)."""
REQUESTS = [kind for kind in KINDS if kind not in ("logout", "drop", "again", "pipeline", "cut")]
"""What a player does while other requests of theirs are on their way."""
NONSENSE = [
    {"type": "hit"},
    {"type": "stand"},
    {"type": "withdraw"},
    {"type": "fly"},
    {"type": "start_round", "seats": [0, 1]},
    {},
]


async def fast_forward(server: GameServer, seconds: float, limit: float = 30.0) -> None:
    """Let the node's clock run ``seconds`` ahead in steps, firing each room's timer at once,
    until no room, connection or bot is left (or ``limit`` real seconds passed): the waits that
    end a deserted table run up to an hour (a solitaire's disconnect grace), and the timers
    follow the node's clock."""
    node = server.node
    ahead = 0.0
    node.clock.time = lambda: time.time() + ahead
    deadline = time.monotonic() + limit
    while (node.rooms or node.clients or server._bots) and time.monotonic() < deadline:
        ahead += seconds
        for room in list(node.rooms.values()):
            node.hosting._set_timer(room)
        await asyncio.sleep(0.2)
        await node._settled()


def leftovers(server: GameServer) -> dict[str, Any]:
    """What the node and its store still hold for tables or connections (all empty when every
    table has ended and everyone has gone)."""
    node, store = server.node, server.store
    held = {
        "rooms": node.rooms,
        "watchers": node.fanout.watchers,
        "lobby_watchers": node.lobby.watchers,
        "clients": node.clients,
        "leases": node.hosting.leases.held,
        "command_logs": node.hosting._command_logs,
        "snapshots": node.hosting._snapshots,
        "closing": node.hosting.closing,
        "locks": node.hosting._locks,
        "timers": node.hosting._timers,
        "retry_at": node.hosting._retry_at,
        "viewed_from": node.hosting._viewed_from,
        "remote_tables": node.fanout.remote_tables,
        "pending": node.routing._pending,
        "hint_buckets": node.hosting._hint_buckets,
        "bots_named": node.hosting.bots._named,
        "bots_coming": node.hosting.bots.coming,
        "ratings_wanted": node.hosting._ratings_wanted,
        "per_address": server.sessions.per_address,
        "bots": server._bots,
    }
    lobby, players, tables = store.lobby, store.players, store.logs
    if isinstance(tables, MemoryTableLogs):  # on Redis: redis_leftovers
        assert isinstance(lobby, MemoryLobby) and isinstance(players, MemoryPlayers)
        held |= {
            "store tables": lobby._records,
            "store player tables": players._tables,
            "store leases": tables._leases,
            "store hosted": tables._hosted,
            "store logs": tables._logs,
            "store snapshots": tables._snapshots,
        }
    return {name: value for name, value in held.items() if value}


KEPT_ON_REDIS = (
    *FIXED_KEYS, "bd:t:{*}:record", "bd:t:{*}:epoch", "bd:t:{*}:state", "bd:t:{*}:game",
    "bd:p:{*}:attach", "bd:revoked:{*}", "bd:daily:{*}:players", "bd:daily:{*}:ranked",
    "bd:limit:*:{*}",
)  # fmt: skip
"""What may stay in Redis once every table has ended: the fixed keys, a retired table's record
(its epoch, state and game kept beside it), a player's last attachment, revoked tokens, the day's
daily deal players, an address's rate limit buckets; all but the fixed keys with a TTL."""


async def redis_leftovers(url: str) -> list[str]:
    """The keys left in Redis that are none of :data:`KEPT_ON_REDIS` (a table's lease, log or
    snapshot, a player's tables...), and the others that have no TTL where they should."""
    with redis.Redis.from_url(url) as client:
        keys = [key.decode() for key in client.scan_iter(count=1000)]
    left = [k for k in keys if not any(fnmatch.fnmatchcase(k, p) for p in KEPT_ON_REDIS)]
    return left + [f"{key} (no TTL)" for key in await keys_without_ttl(url) if key not in left]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("store", ["memory", "redis", "redis+records"])
async def test_random_sessions_keep_the_server_sound_and_every_table_ends(
    make_server, store: str, seed: int, request: pytest.FixtureRequest, tmp_path
) -> None:
    """``redis+records``: with a records database too (15-19 games finished a walk), each
    stored once by the time the tables have ended, none waiting, no write failed."""
    redis_url = request.getfixturevalue("redis_url_clean") if store != "memory" else None
    db_url = f"sqlite:///{tmp_path / 'records.db'}" if store.endswith("records") else None
    server = await make_server(redis_url=redis_url, db_url=db_url)
    server.bot_think = 0.0
    walk = Walk([server], seed)
    try:
        await walk.run(STEPS)
        await walk.everyone_goes()
    except BaseException:
        print("\n".join(walk.log[-40:]))
        raise
    await fast_forward(server, 600.0)
    assert not leftovers(server), leftovers(server)
    if redis_url is not None:
        left = await redis_leftovers(redis_url)
        assert not left, "\n".join(left)
    if server.writer is not None:
        await stored_once(server)


async def stored_once(server: GameServer) -> None:
    """Every game finished in the walk was stored once (verified on the way in: the writer
    refuses a record that does not replay), and nothing waits or failed."""
    assert server.writer is not None and server.records is not None
    assert server.writer.failures == 0 and server.writer._unstored == 0
    rows = await server.records.db.fetch("SELECT id FROM games")
    ids = [row["id"] for row in rows]
    assert len(ids) == len(set(ids)) == server.writer.written_count
