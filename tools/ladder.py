"""The bot ladder: rated BlackDrez tables of bots that keep playing, so bots earn ratings.

Theory of operation
-------------------
``blackdrez serve --ladder-tables N`` runs :func:`run_ladder` beside the node: N tables, each
with :data:`SEATS` bots that connect to the node like any client (``clients.bots``), sit at a
*rated* table, and play one game after another for as long as the server runs. The records then
rate them like players (``server.records``), always labelled as bots.

A rating needs a stable identity: each ladder bot greets with a token this node signs itself for
a fixed player id, ``ladder_<table>_<seat>``, so the same bot comes back as the same player
after a restart. Seat ``k`` plays the ``k``-th reference strategy in turn, so every table pits
the strategies against each other. Run the ladder on one node of a deployment: two nodes would
seat the same identities twice.

A table that fails (its node went away, the store is down) is set up again after a pause.
"""

from __future__ import annotations

import asyncio
import logging

from clients.bots import BOT_CLIENT, STRATEGIES, _games_started, _setup_step, play_table
from clients.client import Client
from games.blackdrez.bots import BOT_NAMES, STRATEGY_LABELS
from protocol import v1
from server import identity

log = logging.getLogger("blackdrez.ladder")

SEATS = 4
"""Bots at each ladder table."""
THINK = 0.3
"""Seconds a ladder bot waits before each action, so spectators can follow."""
ROUND_PAUSE = 1.0
RETRY_PAUSE = 5.0
"""Seconds before a failed ladder table is set up again."""


def ladder_bots(table: int, seats: int = SEATS) -> list[tuple[str, str, str]]:
    """``(player id, name, strategy)`` of each seat of ladder table ``table`` (from 0)."""
    bots = []
    for seat in range(seats):
        strategy = STRATEGIES[seat % len(STRATEGIES)]
        number = table * seats + seat
        first = BOT_NAMES[number % len(BOT_NAMES)]
        label = STRATEGY_LABELS.get(strategy, strategy)
        name = identity.clean_name(f"{first}{number + 1} ({label})")
        bots.append((f"ladder_{table}_{seat}", name, strategy))
    return bots


async def run_ladder(
    url: str,
    secret: bytes,
    tables: int,
    node: str = "",
    *,
    games: int | None = None,
    think: float = THINK,
    round_pause: float = ROUND_PAUSE,
) -> None:
    """Keep ``tables`` rated tables of bots playing on the server at ``url`` (whose token
    ``secret`` this is); ``games``: stop each table after that many games (``None``: never)."""
    log.info("bot ladder: %d tables on %s %s", tables, node, url)
    await asyncio.gather(
        *(
            _keep_table(url, secret, index, games=games, think=think, round_pause=round_pause)
            for index in range(tables)
        )
    )


async def _keep_table(
    url: str, secret: bytes, index: int, *, games: int | None, think: float, round_pause: float
) -> None:
    played = 0
    while games is None or played < games:
        try:
            played += await _play_table(
                url, secret, index, games - played if games is not None else None, think,
                round_pause,
            )  # fmt: skip
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.warning("ladder table %d failed, set up again soon: %r", index, error)
            await asyncio.sleep(RETRY_PAUSE)


async def _play_table(
    url: str, secret: bytes, index: int, games: int | None, think: float, round_pause: float
) -> int:
    """Set one ladder table up and play ``games`` games at it; return how many were played."""
    bots = ladder_bots(index)
    clients = []
    try:
        for player, name, _ in bots:
            token = identity.issue_token(secret, player, name)
            clients.append(
                await Client.connect(
                    url, token=token.text, binary=True, reconnect=True, client_name=BOT_CLIENT
                )
            )
        host = clients[0]
        options = v1.TableOptions(
            name=f"Bot ladder {index + 1}",
            seats=len(bots),
            rated=True,
            round_pause_seconds=round_pause,
        )
        joined = await _setup_step(host, v1.CreateTable(options=options), dropped_ok=False)
        table = joined.table.id
        for client in clients[1:]:
            await _setup_step(client, v1.JoinTable(table=table))
        for client in clients:
            await _setup_step(client, v1.SetReady(table=table))
        played = 0
        while games is None or played < games:
            seen = [_games_started(client.tables[table]) for client in clients]
            await _setup_step(host, v1.StartGame(table=table), done=frozenset({"game_running"}))
            for client, before in zip(clients, seen, strict=True):
                state = client.tables[table]  # play the new game, not the last one's end
                await client.wait_until(lambda s=state, b=before: _games_started(s) > b, 60)
            await asyncio.gather(
                *(
                    play_table(client, table, strategy, think=think, timeout=3600)
                    for client, (_, _, strategy) in zip(clients, bots, strict=True)
                )
            )
            played += 1
        return played
    finally:
        for client in clients:
            await client.close()
