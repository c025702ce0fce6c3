"""An arena's data as the store keeps it, and scoring a finished game there (no node state).

Used by hosting, which scores its arena tables' games from its outbox, and by the arena
requests (``blackdrez.server.node.arenas``), which read and write the same standings.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Literal

import msgspec

from blackdrez.games.arena import Standing, ordered, scored
from blackdrez.games.spec import GameSpec
from blackdrez.protocol import v1
from blackdrez.server.stores import Stores

if TYPE_CHECKING:
    from blackdrez.server.table.room import GameOver

log = logging.getLogger("blackdrez.arenas")

RETRIES = 20
"""Times a standing written over by another game meanwhile is read and scored again."""


class StoredArena(msgspec.Struct, array_like=True, frozen=True):
    """An arena as the store keeps it."""

    id: str
    name: str
    maker: str
    starts: float
    ends: float
    seats: int
    rated: bool
    private: bool
    invite: str | None

    def info(self, now: float, players: int = 0) -> v1.ArenaInfo:
        status: Literal["upcoming", "running", "finished"] = (
            "upcoming" if now < self.starts else "running" if now < self.ends else "finished"
        )
        return v1.ArenaInfo(
            id=self.id,
            name=self.name,
            maker=self.maker,
            starts=self.starts,
            ends=self.ends,
            seats=self.seats,
            rated=self.rated,
            private=self.private,
            status=status,
            players=players,
        )


arena_decoder = msgspec.msgpack.Decoder(StoredArena)
standing_decoder = msgspec.msgpack.Decoder(Standing)
encode = msgspec.msgpack.encode


def standing_lines(kept: dict[str, bytes]) -> list[v1.StandingInfo]:
    """The standings as the protocol shows them, best first."""
    rows = ordered(standing_decoder.decode(data) for data in kept.values())
    return [
        v1.StandingInfo(
            rank=rank,
            player=s.player,
            name=s.name,
            bot=s.bot,
            points=s.points,
            games=s.games,
            wins=s.wins,
            streak=s.streak,
            on_fire=s.on_fire,
            results=list(s.results),
            active=s.active,
        )
        for rank, s in enumerate(rows, start=1)
    ]


async def score_in_arena(store: Stores, arena: str, spec: GameSpec, game: GameOver) -> bool:
    """Score a finished game of an arena table (its host's outbox; again after a failover:
    a game is scored once), bots included (they enter arenas as people do, labelled). Games
    that end after the arena are not scored. Whether it was
    scored now. Raises :class:`StoreUnavailable` (the outbox tries again)."""
    data = await store.arenas.info(arena)
    if data is None:
        return False
    kept = arena_decoder.decode(data)
    if game.ended_at >= kept.ends:
        return False
    result = game.engine.result()
    places = {player: spec.outcome(result, seat)[0] for seat, player, _, _ in game.players}
    ranks = [place for place in places.values() if place is not None]
    names = {player: (name, bot) for _, player, name, bot in game.players}
    for _ in range(RETRIES):
        standings = await store.arenas.standings(arena)
        changes: dict[str, tuple[bytes | None, bytes]] = {}
        for player, place in places.items():
            if place is None:
                continue
            old = standings.get(player)
            name, bot = names[player]
            before = (
                standing_decoder.decode(old)
                if old is not None
                else Standing(player=player, name=name, bot=bot, joined=game.started_at)
            )
            changes[player] = (old, encode(scored(before, place, ranks)))
        written = await store.arenas.update(arena, changes, game.game_id)
        if written != 0:
            return written == 1
    log.warning("arena %s: game %s could not be scored (contended)", arena, game.game_id)
    return False
