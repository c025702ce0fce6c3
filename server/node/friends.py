"""Friends: following and blocking players, where they are, and challenging them to a table.

Theory of operation
-------------------
Follows and blocks are each player's own lists in the store (``Stores.social``): following is
one-way and tells nobody; blocking ends the follow, refuses the blocked player's challenges, and
the clients hide their chat lines (the list comes with ``friends``). Where a player is (online,
playing at a table, watching one) is what the node of their connection last wrote for them: at
their hello, then every :data:`SEEN_EVERY` seconds for all its connections, with a TTL of
:data:`SEEN_TTL` (a node that dies stops writing, and its players show offline a minute later);
their connection's close deletes it.

A challenge names a connected player; it is kept in the store for
:data:`~blackdrez.protocol.v1.CHALLENGE_SECONDS` and pushed to the challenged player on whichever
node they are connected (``Node.tell``: a :class:`~blackdrez.server.bus.Tell` on every other
node's channel). The answer takes it out of the store in one step, so it is answered once; an
accepted challenge makes a table of two (the matchmaker's ``seat_table``: both seated, counted
away until they watch it, the game started) and both are told ``match_found``; a declined one
tells the challenger. A player may send :data:`CHALLENGE_BURST` challenges at once, then one
every ``1 / CHALLENGE_RATE`` seconds.

The state this component owns: the challenge rate limits of the players connected here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable, Coroutine
from typing import Any

import msgspec

from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.connection import Connection
from blackdrez.server.node.clock import Clock
from blackdrez.server.node.matchmaking import Matchmaker, QueueTicket
from blackdrez.server.node.seams import error_answer
from blackdrez.server.ratelimit import KeyedBuckets
from blackdrez.server.records.ratings import DISPLAY_BASE
from blackdrez.server.stores import Stores, StoreUnavailable
from blackdrez.server.table.commands import Answer

log = logging.getLogger("blackdrez.friends")

SEEN_EVERY = 20.0
"""Seconds between two notes of where this node's players are."""
SEEN_TTL = 60.0
"""Seconds a player's whereabouts are believed without a new note."""
CHALLENGE_RATE = 1 / 10
CHALLENGE_BURST = 3
"""Challenges a player may send: 3 at once, then one every 10 s."""
CHALLENGE_KEYS = 10_000

Tell = Callable[[str, Any], Coroutine[Any, Any, None]]
"""Pushes a message to a player wherever they are connected (``Node.tell``)."""


class Whereabouts(msgspec.Struct, array_like=True, frozen=True):
    """Where a connected player is, as the store keeps it (with their name then)."""

    status: str
    table: str | None = None
    name: str = ""


class PendingChallenge(msgspec.Struct, array_like=True, frozen=True):
    """A challenge as the store keeps it until it is answered."""

    id: str
    player: str
    name: str
    bot: bool
    target: str
    rated: bool
    expires: float


_whereabouts = msgspec.msgpack.Decoder(Whereabouts)
_challenge = msgspec.msgpack.Decoder(PendingChallenge)


def whereabouts(client: Connection) -> Whereabouts:
    """Where ``client``'s player is: seated at a table they watch, watching one, or online."""
    seated = [table for table, watch in client.tables.items() if watch.seat is not None]
    if seated:
        return Whereabouts("playing", seated[0], client.name)
    if client.tables:
        return Whereabouts("watching", next(iter(client.tables)), client.name)
    return Whereabouts("online", None, client.name)


class Friendships:
    """Follows, blocks, whereabouts and challenges (see the module docstring)."""

    def __init__(
        self,
        store: Stores,
        clock: Clock,
        clients: dict[str, Connection],
        matchmaker: Matchmaker,
        *,
        tell: Tell,
    ) -> None:
        self.store = store
        self.clock = clock
        self._clients = clients
        """The node's connections by player (``Node.clients``), whose whereabouts it notes."""
        self.matchmaker = matchmaker
        self._tell = tell
        self._challenges = KeyedBuckets(CHALLENGE_RATE, CHALLENGE_BURST, CHALLENGE_KEYS)
        """Per player, the challenges' rate limit."""

    # ------------------------------------------------------------------ lists
    async def follow(self, client: Connection, message: v1.Follow) -> Answer:
        if message.player == client.player:
            return error_answer(message, ErrorCode.BAD_MESSAGE, "you cannot follow yourself")
        name = await self._name_of(message.player)
        if name is None:
            return error_answer(message, ErrorCode.NOT_FOUND, "no such player is known here")
        await self.store.social.follow(client.player, message.player, name)
        return Answer(replies=[v1.Ok(id=message.id)])

    async def unfollow(self, client: Connection, message: v1.Unfollow) -> Answer:
        await self.store.social.unfollow(client.player, message.player)
        return Answer(replies=[v1.Ok(id=message.id)])

    async def block(self, client: Connection, message: v1.Block) -> Answer:
        if message.player == client.player:
            return error_answer(message, ErrorCode.BAD_MESSAGE, "you cannot block yourself")
        name = await self._name_of(message.player) or message.player
        await self.store.social.block(client.player, message.player, name)
        return Answer(replies=[v1.Ok(id=message.id)])

    async def unblock(self, client: Connection, message: v1.Unblock) -> Answer:
        await self.store.social.unblock(client.player, message.player)
        return Answer(replies=[v1.Ok(id=message.id)])

    async def friends(self, client: Connection, message: v1.GetFriends) -> Answer:
        social = self.store.social
        following = await social.following(client.player)
        blocked = await social.blocked(client.player)
        where = await social.statuses(following)
        friends = []
        for player, name in sorted(following.items(), key=lambda item: item[1].casefold()):
            seen = where.get(player)
            found = _whereabouts.decode(seen) if seen is not None else Whereabouts("offline")
            status: Any = found.status
            friends.append(v1.Friend(player=player, name=name, status=status, table=found.table))
        blocks = [v1.Friend(player=p, name=n) for p, n in sorted(blocked.items())]
        return Answer(replies=[v1.Friends(id=message.id, following=friends, blocked=blocks)])

    async def _name_of(self, player: str) -> str | None:
        """A player's name, if they are connected (here, or anywhere: their whereabouts)."""
        client = self._clients.get(player)
        if client is not None:
            return client.name
        seen = (await self.store.social.statuses([player])).get(player)
        return None if seen is None else _whereabouts.decode(seen).name or player

    # ------------------------------------------------------------------ whereabouts
    async def note_whereabouts(self) -> None:
        """Every :data:`SEEN_EVERY` seconds, where each player connected here is."""
        while True:
            await asyncio.sleep(SEEN_EVERY)
            await self.seen(list(self._clients.values()))

    async def seen(self, clients: list[Connection]) -> None:
        """Note where these players are now (a failure waits for the next note)."""
        statuses = {
            c.player: msgspec.msgpack.encode(whereabouts(c)) for c in clients if not c.closing
        }
        with contextlib.suppress(StoreUnavailable):
            await self.store.social.seen(statuses, SEEN_TTL)

    async def gone(self, client: Connection) -> None:
        """``client`` closed: its player is offline (unless connected again elsewhere)."""
        if self._clients.get(client.player) is None:
            with contextlib.suppress(StoreUnavailable):
                await self.store.social.gone(client.player)

    # ------------------------------------------------------------------ challenges
    async def challenge(self, client: Connection, message: v1.Challenge) -> Answer:
        """Challenge a connected player to a table of two."""
        target = message.player
        if target == client.player:
            return error_answer(message, ErrorCode.BAD_MESSAGE, "you cannot challenge yourself")
        if not self._challenges.take(client.player, self.clock.monotonic()):
            wait = self._challenges.retry_after(client.player)
            return error_answer(
                message, ErrorCode.RATE_LIMITED, "too many challenges: wait a moment", wait
            )
        if not await self.store.social.statuses([target]):
            return error_answer(message, ErrorCode.NOT_FOUND, "that player is not connected now")
        if client.player in await self.store.social.blocked(target):
            return error_answer(
                message, ErrorCode.CHALLENGE_REFUSED, "that player does not take your challenges"
            )
        expires = self.clock.time() + v1.CHALLENGE_SECONDS
        pending = PendingChallenge(
            id=f"c{secrets.token_hex(6)}",
            player=client.player,
            name=client.name,
            bot=client.bot,
            target=target,
            rated=message.rated,
            expires=expires,
        )
        await self.store.social.put_challenge(
            pending.id, msgspec.msgpack.encode(pending), v1.CHALLENGE_SECONDS
        )
        told = v1.Challenged(
            challenge=pending.id,
            player=client.player,
            name=client.name,
            rated=message.rated,
            expires=expires,
        )
        await self._tell(target, told)
        sent = v1.ChallengeSent(id=message.id, challenge=pending.id, expires=expires)
        return Answer(replies=[sent])

    async def answer(self, client: Connection, message: v1.AnswerChallenge) -> Answer:
        """Accept (a table of two is made, both told) or decline a challenge."""
        data = await self.store.social.take_challenge(message.challenge)
        if data is None:
            return error_answer(message, ErrorCode.NOT_FOUND, "no such challenge waits for you")
        pending = _challenge.decode(data)
        if pending.target != client.player:
            # not theirs to answer: put it back for its player, untouched
            left = max(1.0, pending.expires - self.clock.time())
            await self.store.social.put_challenge(pending.id, data, left)
            return error_answer(message, ErrorCode.NOT_FOUND, "no such challenge waits for you")
        if not message.accept:
            answered = v1.ChallengeAnswered(challenge=pending.id, accepted=False)
            await self._tell(pending.player, answered)
            return Answer(replies=[v1.Ok(id=message.id)])
        now = self.clock.time()
        people = [
            QueueTicket(
                player=player,
                name=name,
                rating=float(DISPLAY_BASE),
                seats=2,
                rated=pending.rated,
                since=now,
                bots_after=None,
                bot=bot,
            )
            for player, name, bot in (
                (pending.player, pending.name, pending.bot),
                (client.player, client.name, client.bot),
            )
        ]
        name = f"{pending.name} challenges {client.name}"[:64]
        table = await self.matchmaker.seat_table(name, people, 2, pending.rated)
        if table is None:
            return error_answer(message, ErrorCode.UNAVAILABLE, "the table could not be made")
        self.matchmaker.start_when_seated(table, people[0], 2)
        names = [p.name for p in people]
        for seat, person in enumerate(people):
            found = v1.MatchFound(
                table=table, seat=seat, players=names, bots=0, rated=pending.rated, waited=0.0
            )
            await self._tell(person.player, found)
        return Answer(replies=[v1.Ok(id=message.id)])
