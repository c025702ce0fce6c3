"""Fixtures for server tests: real servers on free ports, real clients over real sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from blackdrez.clients.bots import run_bot
from blackdrez.clients.client import Client
from blackdrez.server.app import GameServer, Settings

ServerFactory = Callable[..., Awaitable[GameServer]]
ClientFactory = Callable[..., Awaitable[Client]]


@pytest.fixture
async def make_server() -> AsyncIterator[ServerFactory]:
    """Start servers (in memory unless ``redis_url`` is given); all are stopped afterwards."""
    servers: list[GameServer] = []

    async def start(**overrides: Any) -> GameServer:
        overrides.setdefault("messages_per_second", 1000.0)
        overrides.setdefault("burst", 1000)
        overrides.setdefault("ping_interval", None)
        settings = Settings(port=0, **overrides)
        server = GameServer(settings, bot_client=run_bot)
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


@pytest.fixture
async def server(make_server: ServerFactory) -> GameServer:
    """One in-memory server."""
    return await make_server()


@pytest.fixture
async def connect() -> AsyncIterator[ClientFactory]:
    """Connect clients to a server (``connect(server, name=...)``); all closed afterwards."""
    clients: list[Client] = []

    async def open_client(server: GameServer, **options: Any) -> Client:
        client = await Client.connect(f"ws://127.0.0.1:{server.port}/", **options)
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        await client.close()
