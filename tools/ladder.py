"""The bot ladder: rated BlackDrez tables of bots that keep playing, so bots earn ratings.

Theory of operation
-------------------
A ladder table has one bot per seat, each a client that connects like anyone else
(``blackdrez.clients.bots``), sits at a *rated* table and plays one game after another; the records
then
rate them like players (``blackdrez.server.records``), always labelled as bots. Seat ``k`` plays the
``k``-th strategy in turn, so every table pits the strategies against each other. A table that
fails (its node went away, the store is down) is set up again after a pause.

A rating needs a stable identity: the same bot must come back as the same player. There are two
ways to get one, and they differ only in how a bot connects (:data:`Connect`):

* ``blackdrez serve --ladder-tables N`` runs :func:`run_ladder` beside the node, which signs a
  token itself for a fixed player id, ``ladder_<table>_<seat>``. Run it on one node of a
  deployment: two nodes would seat the same identities twice.
* ``blackdrez bots --ladder`` runs :func:`run_account_ladder` against any server that keeps
  records, from anywhere: each bot claims an account (``sign_up``, a random password) the first
  time, and the names, passwords and session tokens are kept in an identities file (per server
  address) so the next run greets with the token, or signs in again once it has expired. Sign-ups
  and sign-ins are rate-limited per address by the server: the bots wait when told to.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import signal
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blackdrez.clients.bots import BOT_CLIENT, STRATEGIES, _games_started, _setup_step, play_table
from blackdrez.clients.client import Client, ServerError
from blackdrez.games.blackdrez.bots import BOT_NAMES, STRATEGY_LABELS
from blackdrez.protocol import v1
from blackdrez.server import identity

log = logging.getLogger("blackdrez.ladder")

SEATS = 4
"""Bots at each ladder table."""
THINK = 0.3
"""Seconds a ladder bot waits before each action, so spectators can follow."""
ROUND_PAUSE = 1.0
RETRY_PAUSE = 5.0
"""Seconds before a failed ladder table is set up again."""
RATE_LIMIT_PAUSE = 6.5
"""Seconds to wait after the server refused a sign-up or sign-in as too frequent (it allows
one every six seconds per address past a first burst)."""
ACCOUNT_TRIES = 20

Connect = Callable[[int, int], Awaitable[Client]]
"""Connects the bot of ``(table, seat)`` as its own stable identity."""


class LadderError(Exception):
    """The ladder cannot run against this server (no records, accounts refused...)."""


def bot_name(table: int, seat: int, seats: int, strategy: str) -> str:
    """The display name of the bot in ``seat`` of ladder table ``table``: ``Ada1 (threshold)``."""
    number = table * seats + seat
    first = BOT_NAMES[number % len(BOT_NAMES)]
    label = STRATEGY_LABELS.get(strategy, strategy)
    return identity.clean_name(f"{first}{number + 1} ({label})")


def ladder_bots(table: int, seats: int = SEATS) -> list[tuple[str, str, str]]:
    """``(player id, name, strategy)`` of each seat of the server's ladder table ``table``."""
    bots = []
    for seat in range(seats):
        strategy = STRATEGIES[seat % len(STRATEGIES)]
        bots.append((f"ladder_{table}_{seat}", bot_name(table, seat, seats, strategy), strategy))
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

    async def connect(table: int, seat: int) -> Client:
        player, name, _ = ladder_bots(table)[seat]
        token = identity.issue_token(secret, player, name)
        return await Client.connect(
            url, token=token.text, binary=True, reconnect=True, client_name=BOT_CLIENT
        )

    strategies = [strategy for _, _, strategy in ladder_bots(0)]
    await asyncio.gather(
        *(
            keep_table(
                connect, index, strategies, games=games, think=think, round_pause=round_pause
            )
            for index in range(tables)
        )
    )


async def keep_table(
    connect: Connect,
    index: int,
    strategies: list[str],
    *,
    games: int | None,
    think: float,
    round_pause: float,
    played: list[int] | None = None,
) -> None:
    """Keep ladder table ``index`` playing (set up again after a failure) until it has played
    ``games`` games (``None``: until cancelled). ``played[index]`` counts its games as they end."""
    done = 0

    def count() -> None:
        nonlocal done
        done += 1
        if played is not None:
            played[index] += 1

    while games is None or done < games:
        try:
            await _play_table(
                connect, index, strategies, games - done if games is not None else None, think,
                round_pause, count,
            )  # fmt: skip
        except (asyncio.CancelledError, LadderError):
            raise
        except Exception as error:
            log.warning("ladder table %d failed, set up again soon: %r", index, error)
            await asyncio.sleep(RETRY_PAUSE)


async def _play_table(
    connect: Connect,
    index: int,
    strategies: list[str],
    games: int | None,
    think: float,
    round_pause: float,
    count: Callable[[], None],
) -> None:
    """Set one ladder table up and play ``games`` games at it, counting each as it ends."""
    clients: list[Client] = []
    try:
        for seat in range(len(strategies)):
            clients.append(await connect(index, seat))
        host = clients[0]
        options = v1.TableOptions(
            name=f"Bot ladder {index + 1}",
            seats=len(strategies),
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
                    for client, strategy in zip(clients, strategies, strict=True)
                )
            )
            played += 1
            count()
    finally:
        for client in clients:
            await client.close()


# --------------------------------------------------------------------------- from anywhere


@dataclass
class Identity:
    """One ladder bot's account on one server, as the identities file keeps it."""

    name: str
    password: str
    token: str | None = None
    player: str | None = None


@dataclass
class Identities:
    """The identities file: per server address, per ``"<table>.<seat>"``, the bot's account.

    It holds passwords: it is written readable by its owner only.
    """

    path: Path
    servers: dict[str, dict[str, Identity]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Identities:
        """The identities kept at ``path`` (none if the file does not exist yet)."""
        if not path.exists():
            return cls(path)
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(
            path,
            {
                url: {key: Identity(**fields) for key, fields in bots.items()}
                for url, bots in data.get("servers", {}).items()
            },
        )

    def save(self) -> None:
        """Write the file (owner-only), replacing it at once."""
        data = {
            "servers": {
                url: {key: vars(bot) for key, bot in sorted(bots.items())}
                for url, bots in self.servers.items()
            }
        }
        temporary = self.path.with_name(self.path.name + ".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump(data, file, indent=2)
        os.replace(temporary, self.path)


class AccountBots:
    """Connects ladder bots as accounts of the server at ``url`` (see the module docstring)."""

    def __init__(self, url: str, identities: Identities, seats: int, strategies: list[str]):
        self.url = url
        self.identities = identities
        self.seats = seats
        self.strategies = strategies
        self._accounts = asyncio.Lock()
        """One account request at a time: they are rate-limited, and the file is rewritten."""

    async def connect(self, table: int, seat: int) -> Client:
        """The bot of ``(table, seat)``, greeted as its account (claimed now if it has none)."""
        bots = self.identities.servers.setdefault(self.url, {})
        key = f"{table}.{seat}"
        async with self._accounts:
            bot = bots.get(key)
            if bot is None:
                strategy = self.strategies[seat % len(self.strategies)]
                name = bot_name(table, seat, self.seats, strategy)
                bot = Identity(name=name, password=secrets.token_urlsafe(18))
            if bot.token is not None:
                try:
                    return await self._greet(bot.token)
                except ServerError as error:
                    if error.code != "bad_token":
                        raise
                    log.info("the token of %s expired: signing in again", bot.name)
            session = await self._account(bot)
            bot.token, bot.player, bot.name = session.token, session.player, session.name
            bots[key] = bot
            self.identities.save()
            return await self._greet(bot.token)

    async def _greet(self, token: str) -> Client:
        return await Client.connect(
            self.url, token=token, binary=True, reconnect=True, client_name=BOT_CLIENT
        )

    async def _account(self, bot: Identity) -> v1.Session:
        """Sign in to the bot's account, or claim one if it has none yet (another name if its
        name is taken by someone else)."""
        suffix = 1
        for _ in range(ACCOUNT_TRIES):
            guest = await Client.connect(self.url, name=bot.name, client_name=BOT_CLIENT)
            try:
                request: Any = (
                    v1.SignIn(name=bot.name, password=bot.password)
                    if bot.player is not None
                    else v1.SignUp(name=bot.name, password=bot.password)
                )
                return await guest.request(request)
            except ServerError as error:
                if error.code == "rate_limited":
                    await asyncio.sleep(RATE_LIMIT_PAUSE)
                elif error.code == "name_taken" and bot.player is None:
                    suffix += 1
                    bot.name = identity.clean_name(f"{bot.name.rsplit(' #', 1)[0]} #{suffix}")
                elif error.code == "unavailable":
                    message = f"the server refused accounts: {error.error.message}"
                    raise LadderError(message) from None
                else:
                    raise LadderError(f"{bot.name}: {error.code}: {error.error.message}") from None
            finally:
                await guest.close()
        raise LadderError(f"{bot.name}: the server kept refusing its account")


@dataclass
class LadderSummary:
    """What a ``blackdrez bots --ladder`` run did, and the bots' board when it stopped."""

    games: list[int]
    """Games each table finished."""
    board: list[dict[str, Any]] | None = None
    """The bots' leaderboard (``/api/v1/leaderboards/blackdrez?kind=bots``), if it could be
    read."""

    def lines(self) -> list[str]:
        """The summary as printed."""
        lines = [f"ladder: {sum(self.games)} rated games on {len(self.games)} tables"]
        if self.board is not None:
            lines.append("bots' ratings (mu - 3 sigma), rated games:")
            for rank, entry in enumerate(self.board, start=1):
                rating = entry.get("rating") or {}
                lines.append(
                    f"  {rank:>3}. {entry['name']:<24} {rating.get('ordinal', 0.0):7.2f}"
                    f"  {rating.get('games', 0):>5}"
                )
        return lines


async def run_account_ladder(
    url: str,
    tables: int,
    per_table: int,
    strategies: list[str],
    identities: Path,
    *,
    games: int | None = None,
    think: float = THINK,
    round_pause: float = ROUND_PAUSE,
) -> LadderSummary:
    """Keep ``tables`` rated tables of ``per_table`` bots playing on the server at ``url`` as
    accounts kept in ``identities``, until each has played ``games`` games (``None``: until
    SIGINT or SIGTERM); return what was played and the bots' leaderboard.

    Raises :class:`LadderError` when the server keeps no records (no accounts, no ratings).
    """
    seats = [strategies[seat % len(strategies)] for seat in range(per_table)]
    bots = AccountBots(url, Identities.load(identities), per_table, strategies)
    first = await bots.connect(0, 0)  # an unreachable server or one without records: say so now
    await first.close()
    played = [0] * tables
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stop.set)
    tasks = [
        loop.create_task(
            keep_table(
                bots.connect,
                index,
                seats,
                games=games,
                think=think,
                round_pause=round_pause,
                played=played,
            )
        )
        for index in range(tables)
    ]
    try:
        everything = asyncio.gather(*tasks)
        stopped = loop.create_task(stop.wait())
        await asyncio.wait([everything, stopped], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await everything
    finally:
        for number in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(number)
    ours = {bot.player for bot in bots.identities.servers.get(url, {}).values() if bot.player}
    return LadderSummary(games=played, board=await _board_with(url, ours))


async def _board_with(url: str, players: set[str], patience: float = 5.0) -> Any:
    """The bots' board once it shows every one of ``players`` (their games are stored a moment
    after they end: the records are written by their own process), or as it is after
    ``patience`` seconds."""
    deadline = time.monotonic() + patience
    while True:
        board = await asyncio.to_thread(_bots_board, url)
        shown = {entry.get("player") for entry in board or ()}
        if board is None or players <= shown or time.monotonic() >= deadline:
            return board
        await asyncio.sleep(0.1)


def _bots_board(url: str, limit: int = 20) -> list[dict[str, Any]] | None:
    """The bots' BlackDrez leaderboard from the server's records API, or ``None``."""
    http = "https" + url[3:] if url.startswith("wss") else "http" + url[2:]
    address = http.rstrip("/") + f"/api/v1/leaderboards/blackdrez?kind=bots&limit={limit}"
    try:
        with urllib.request.urlopen(address, timeout=10) as response:
            return json.loads(response.read())["entries"]
    except (OSError, ValueError, KeyError):
        return None
