"""Reading the records API (``/api/v1``, ``docs/api.md``) from a client, and checking an arena's
standings against the games it stored.

The records API is plain HTTP and JSON; this module reads it with the standard library (in a
worker thread, so an asyncio client is not blocked) and decodes what it needs with the same rules
the server scores by (:mod:`blackdrez.games.arena`).
"""

from __future__ import annotations

import asyncio
import urllib.parse
import urllib.request

import msgspec

from blackdrez.clients.client import Client
from blackdrez.games.arena import ArenaGame, Standing, scored_games, standings_of
from blackdrez.protocol import v1

PAGE = 100
"""Games read per request (the API's largest page)."""
TIMEOUT = 10.0
"""Seconds one request may take."""


class _Page(msgspec.Struct):
    games: list[ArenaGame]
    next: str | None


_page = msgspec.json.Decoder(_Page)


def http_base(url: str) -> str:
    """The HTTP address of the node whose WebSocket address is ``url`` (``ws://host:port`` to
    ``http://host:port``)."""
    parts = urllib.parse.urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    return f"{scheme}://{parts.netloc}"


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
        data: bytes = response.read()
        return data


async def arena_games(base: str, arena: str) -> list[ArenaGame]:
    """Every stored game of ``arena`` (the records API at ``base``, ``http://host:port``)."""
    if urllib.parse.urlsplit(base).scheme not in ("http", "https"):
        raise ValueError(f"not an http(s) address: {base!r}")
    games: list[ArenaGame] = []
    cursor: str | None = None
    while True:
        query = {"arena": arena, "limit": str(PAGE)}
        if cursor is not None:
            query["before"] = cursor
        url = f"{base.rstrip('/')}/api/v1/games?{urllib.parse.urlencode(query)}"
        page = _page.decode(await asyncio.to_thread(_get, url))
        games += page.games
        if page.next is None:
            return games
        cursor = page.next


def disagreements(live: list[v1.StandingInfo], games: list[ArenaGame], ends: float) -> list[str]:
    """What differs between the standings pushed (``live``) and those ``games`` make in an arena
    ending at ``ends``: one line per player whose points, games, wins or points per game differ
    (players who joined and never played are only in ``live``, with no game: not a
    difference). Empty when they agree."""
    stored: dict[str, Standing] = {s.player: s for s in standings_of(games, ends)}
    problems: list[str] = []
    for line in live:
        mine = stored.pop(line.player, None)
        got = (line.points, line.games, line.wins, list(line.results))
        want = (
            (mine.points, mine.games, mine.wins, list(mine.results))
            if mine is not None
            else (0, 0, 0, [])
        )
        if got != want:
            problems.append(
                f"{line.name}: standings say {got[0]} points in {got[1]} games "
                f"({got[2]} wins, {got[3]}); the stored games make {want[0]} in {want[1]} "
                f"({want[2]} wins, {want[3]})"
            )
    for mine in stored.values():
        problems.append(
            f"{mine.name}: in {mine.games} stored games ({mine.points} points) but not in the "
            "standings"
        )
    return problems


class ArenaCheck(msgspec.Struct, frozen=True):
    """An arena's standings checked against its stored games."""

    arena: v1.ArenaInfo
    standings: list[v1.StandingInfo]
    games: int
    """Its stored games that it scores (those that ended before it did)."""
    late: int
    """Its stored games that ended after it (kept, not scored)."""
    problems: list[str]
    """:func:`disagreements`: empty when the standings agree with the games."""


async def check_arena(
    url: str, arena: str, invite: str | None = None, *, patience: float = 10.0
) -> ArenaCheck:
    """Read ``arena``'s standings over the protocol (the server at ``url``) and its games from
    the same node's records API, and compare them; while they disagree, read both again for up
    to ``patience`` seconds (a game ended just now is stored within moments)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    client = await Client.connect(url, name="Arena check", binary=True)
    try:
        while True:
            found = await client.watch_arena(arena, invite)
            games = await arena_games(http_base(url), arena)
            problems = disagreements(found.standings, games, found.arena.ends)
            if not problems or loop.time() >= deadline:
                scored, late = scored_games(games, found.arena.ends)
                return ArenaCheck(found.arena, found.standings, scored, late, problems)
            await asyncio.sleep(0.5)
    finally:
        await client.close()
