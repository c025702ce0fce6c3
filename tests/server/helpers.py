"""Shared moves for server tests: playing BlackDrez over the wire with the reference bots."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
import redis.asyncio

from blackdrez.clients.client import Client, ServerError, TableState
from blackdrez.games.blackdrez import bots as blackdrez_bots
from blackdrez.games.blackdrez import rules as blackdrez
from blackdrez.protocol import v1
from blackdrez.server import bus
from blackdrez.server.stores.base import table_channel


def view_of(client: Client, table: str) -> blackdrez.View | None:
    """The client's current BlackDrez view of ``table`` as the engine's Struct."""
    raw = client.tables[table].view
    return None if raw is None else msgspec.convert(raw, blackdrez.View)


def game_over(client: Client, table: str) -> bool:
    """Whether the client has seen the game at ``table`` end."""
    state = client.tables.get(table)
    return bool(state and state.view and state.view["phase"] == "over")


def games_started(state: TableState) -> int:
    """How many games the client has seen start at a table."""
    return sum(1 for e in state.events if e.event["type"] == "game_started")


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
    """Create a table with ``host``, seat ``others`` (with its invite, if private), ready
    everyone, start; return the table id."""
    options.setdefault("seats", 1 + len(others))
    options.setdefault("round_pause_seconds", 0.0)
    joined = await host.request(v1.CreateTable(options=v1.TableOptions(**options)))
    table = joined.table.id
    for other in others:
        await other.request(v1.JoinTable(table=table, invite=joined.invite))
    for player in [host, *others]:
        await player.request(v1.SetReady(table=table))
    await host.request(v1.StartGame(table=table))
    await asyncio.gather(
        *(c.wait_until(lambda c=c: c.tables[table].view is not None) for c in [host, *others])
    )
    return table


async def player_on_turn(players: list[Client], table: str, timeout: float = 30.0) -> Client:
    """The player with legal actions, once one has them (a round won on the deal is followed by
    the pause: then nobody has any until the next deal, which the clients see one by one)."""
    async with asyncio.timeout(timeout):
        while True:
            for player in players:
                if player.tables[table].legal:
                    return player
            await asyncio.sleep(0.02)


RETRY = ("unavailable", "moving", "not_your_turn")
"""Answers a player meets while a table moves between nodes: look again and retry."""


async def retrying(call: Callable[[], Awaitable[Any]], timeout: float = 60.0) -> Any:
    """Run ``call`` until it is not refused as moving or unavailable (bounded in time)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await call()
        except ServerError as error:
            if error.code not in RETRY or time.monotonic() > deadline:
                raise
        except (ConnectionError, TimeoutError):
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


async def act_once(players: list[Client], table: str, timeout: float = 60.0) -> tuple[Client, int]:
    """Let whoever is on turn play one move with a reference bot; return them and the ack."""
    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline, "nobody could act in time"
        mover = next((p for p in players if p.tables[table].legal), None)
        if mover is None:
            await asyncio.sleep(0.1)
            continue
        state = mover.tables[table]
        view = msgspec.convert(state.view, blackdrez.View)
        legal = [msgspec.convert(action, blackdrez.Action) for action in state.legal]
        try:
            ok = await mover.act(table, blackdrez_bots.threshold(view, legal))
        except ServerError as error:
            if error.code not in RETRY:
                raise
            await asyncio.sleep(0.2)
            await retrying(lambda m=mover: m.resync(table))
            continue
        except (ConnectionError, TimeoutError):
            await asyncio.sleep(0.2)
            continue
        return mover, ok.seq


async def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting: {what}"
        await asyncio.sleep(0.05)


async def queued_at(node: Any, table: str, waiters: int) -> None:
    """Wait until ``waiters`` requests wait for ``table``'s lock on ``node`` besides its holder."""

    def queued() -> bool:
        held = node.hosting._locks.get(table)
        return held is not None and held.users - 1 >= waiters

    await wait_for(queued, f"{waiters} requests queued on the table", timeout=5.0)


class RedisUser:
    """A Redis user of one node's own (``url``), so a test can cut that node off its store
    while the others go on: :meth:`cut` refuses its new connections and drops those it has
    (all, or its pub/sub link alone), :meth:`restore` lets it connect again."""

    def __init__(self, admin: redis.asyncio.Redis, name: str, url: str) -> None:
        self.admin, self.name, self.url = admin, name, url

    async def cut(self, *, bus_only: bool = False) -> None:
        await self.admin.execute_command("ACL", "SETUSER", self.name, "off")
        kind = ["TYPE", "pubsub"] if bus_only else []
        assert await self.admin.execute_command("CLIENT", "KILL", *kind, "USER", self.name)

    async def restore(self) -> None:
        await self.admin.execute_command("ACL", "SETUSER", self.name, "on")

    async def bus_connections(self) -> int:
        """How many pub/sub connections of this user Redis holds."""
        clients = await self.admin.client_list(_type="pubsub")
        return sum(client.get("user") == self.name for client in clients)


@contextlib.asynccontextmanager
async def redis_user(url: str, name: str) -> AsyncIterator[RedisUser]:
    """A :class:`RedisUser` ``name`` on the Redis of ``url`` (deleted at the end)."""
    admin = redis.asyncio.Redis.from_url(url)
    await admin.execute_command("ACL", "SETUSER", name, "on", ">pw", "~*", "&*", "+@all")
    try:
        yield RedisUser(admin, name, url.replace("//", f"//{name}:pw@"))
    finally:
        await admin.execute_command("ACL", "DELUSER", name)
        await admin.aclose()


class Listener:
    """A raw subscriber of a table's channel that never asks the host for the table: it hears
    exactly what the host announces."""

    def __init__(self, url: str, table: str) -> None:
        self.client = redis.asyncio.Redis.from_url(url)
        self.pubsub = self.client.pubsub()
        self.table = table
        self.heard: list[int] = []
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.pubsub.subscribe(table_channel(self.table))
        self.task = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        async for message in self.pubsub.listen():
            if message["type"] == "message":
                update = bus.decode(message["data"])
                assert isinstance(update, bus.TableUpdate)
                self.heard.append(update.broadcast.seq)

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        await self.pubsub.aclose()
        await self.client.aclose()


async def run_to_end(
    *command: str,
    cwd: Any,
    env: dict[str, str] | None = None,
    timeout: float = 300.0,
) -> str:
    """Run a program to its end; return its output (standard error too), asserting it exited 0."""
    process = await asyncio.create_subprocess_exec(
        *command, cwd=cwd, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout)
    finally:
        if process.returncode is None:
            process.kill()
    text = output.decode()
    assert process.returncode == 0, text
    return text
