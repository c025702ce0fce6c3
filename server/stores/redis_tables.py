"""Leases and table logs on Redis: who hosts each table, and each table's log, with group commit.

Theory of operation
-------------------
Every key of one table carries its id as a hash tag (:mod:`blackdrez.server.stores.keys`), so
every fenced write (see "Hosting and fencing" in :mod:`blackdrez.server.stores.base`) is one Lua
script on one slot: a lost connection changes all or nothing. The sets ``bd:lobby:tables`` and
``bd:{hosted}:B`` live in other slots than a table's keys: they are updated in a second step, and
every reader tolerates and removes ids whose table is gone (``RedisLobby.listed``,
:meth:`RedisLeases.adoptable`). So the same keys work on a Redis Cluster: how, and why each
cross-table index is one key in one slot, is in :mod:`blackdrez.server.stores.redis_cluster`.

Group commit. A node's log appends are not sent one by one: :meth:`RedisTableLogs.append` queues
its append and waits; in the event-loop turn after the first one queued, every queued append goes
in one script call (``APPEND_SCRIPT``, at most ``MAX_BATCH`` a call), so the tables that acted in
the same turn share one round trip. While appends keep coming, batches go at most one every
``COALESCE`` (a millisecond): a write to Redis, and the reading of its reply, cost the node more
than the appends in them. Inside the script each append is fenced on its own (its
table's lease token and expected position), its announcement is published right after its entry
is logged, and the table's lobby record, when the append carries one, is replaced and its lobby
change published in the same step (most BlackDrez actions change the record: one call, not three,
and never ahead of the log). One table fenced out refuses its own append only, and nothing is
seen before it is logged. If the call fails every append of that batch gets
:class:`~blackdrez.server.stores.base.StoreUnavailable` (its table's host undoes that command)
and nothing else is touched. A table's appends keep their order because its host waits for each
before it runs the next command.

On one Redis (no TLS) the batches go on a connection of their own
(:class:`~blackdrez.server.stores.redis_link.CommitLink`) and are pipelined: a turn's batch goes
out without waiting for the reply of a batch still out, and each reply settles its appends from
the protocol callback that read it (a busy node's loop turns last milliseconds: each turn saved
shows in the tail latency). A lost connection fails the batches out on it (and no other); while
none is open, one committer task opens it and sends batch after batch until the queue is empty.
Outcomes are reported to the link's health like every call's. On a Redis Cluster the batch is
split by master (see :mod:`blackdrez.server.stores.redis_cluster`); there, and with a TLS URL
(``rediss://``), redis-py carries the batches, one at a time: whatever queued while one was out
goes in the next.

Lease renewals are batched too: a node renews every lease it holds several times a second
(``RENEWALS`` per TTL, :mod:`blackdrez.server.node.hosting`), so :meth:`RedisLeases.renew` sends
one script call for them all (``RENEW_SCRIPT``, at most ``MAX_RENEWALS`` a call), each lease
fenced on its own holder; on a Redis Cluster, one call per slot.

With ``wait_replicas`` (``--redis-wait-replicas``) a log append is pipelined with ``WAIT`` on the
same connection, and its announcement is published only once enough replicas hold the entry (these
appends are sent one by one, not grouped); an entry too few replicas took in time is taken back
(fenced) before the command is refused. The table's lobby record is written after that, apart:
one that cannot be written then is written by a background task once Redis answers (the newest
of the table's, never an older one after it).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import redis.exceptions

from blackdrez.server.stores import resp
from blackdrez.server.stores.base import (
    Append,
    Bus,
    LeaseLost,
    Leases,
    Lobby,
    LobbyRecord,
    Location,
    Settled,
    Share,
    StoreUnavailable,
    TableLogs,
    Whereabouts,
    bucket_of,
    in_share,
    share_buckets,
)
from blackdrez.server.stores.keys import (
    LEGACY_HOSTED_KEY,
    LOBBY_KEY,
    epoch_key,
    game_key,
    hosted_key,
    lease_key,
    log_key,
    player_tables_key,
    snapshot_key,
    state_key,
    table_key,
)
from blackdrez.server.stores.redis_link import (
    RECONNECT_BACKOFF,
    RedisLink,
    queue_script,
)
from blackdrez.server.tasks import cancel_until_done

log = logging.getLogger("blackdrez.store")

MAX_BATCH = 256
"""Log appends sent in one script call at most (a bigger batch would hold Redis for longer)."""
COALESCE = 0.001
"""Seconds at least between two batches sent on the commit link while appends keep coming: an
append queued sooner than this after the last batch went waits for the rest of the interval, so
that a busy node sends one batch a millisecond rather than one a turn; an append after a quiet
interval goes in the next turn, as before. Measured (``docs/benchmarks.md``, issue 35): the
node's CPU an action on Redis 9% lower at 2,000 actions/s, 12% at 3,500, 3.6% at 5,000, 1.7%
at 6,300 (batches there are large anyway); what it costs is latency while the node is busy:
act -> update at 3,500/s p50 0.7 -> 1.9 ms, p99 5.2 -> 6.0 ms (the loop's timers count whole
milliseconds)."""

READ_PAGE = 500
"""Entries a read of a table whose lease the reader holds takes from Redis at a time (see
:meth:`RedisTableLogs.read`): redis-py parses a log entry in 11-20 µs of the node's event loop,
so a closing table's whole log (its record keeps it) in one reply stalled every other table of
the node for as long: half a second for a table of a day's play. Such a read goes on the
snapshots' own connection where there is one (:class:`~.redis_link.CommitLink`), whose reader
takes a third of redis-py's time."""

MAX_RENEWALS = 1000
"""Leases renewed in one script call at most (a few hundred microseconds of Redis's time)."""
SCAN_CHUNK = 32
"""Tables an orphan scan locates per round trip. One pipeline for all of them held the node's
event loop while it packed and parsed them all (a few hundred script calls): under load that
showed as the worst act -> update latencies, a table's players waiting behind the scan."""

UNKNOWN_GRACE = 5.0
"""Seconds an orphan scan keeps a hosted id whose table it found nowhere (no lease, state, log or
record) before it forgets the id: only when a later scan, this long after the first, finds it
nowhere still. A table's keys may be missing for a moment while they exist: a Redis Cluster
master restarted without persistence comes back empty and, until its peers tell it that its
replica took its slots over, answers for them. Forgetting an id at once then removed a live table
from the hosted index for good: no scan found it again, and it answered ``moving`` until its
players gave up (seen in the failover tests: a master killed, then started again)."""

CLOSED, UNKNOWN = Whereabouts.CLOSED, Whereabouts.UNKNOWN

ACQUIRE_SCRIPT = """
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local holder = redis.call('GET', KEYS[1])
if holder then
  local node, incarnation = string.match(holder, '^(.*)/([^/]*)/[^/]*$')
  if node ~= ARGV[1] or incarnation >= ARGV[2] then return 0 end
end
local epoch = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '/' .. ARGV[2] .. '/' .. epoch, 'PX', ARGV[3])
return epoch
"""

RENEW_SCRIPT = """
local lost = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i + 1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
  else
    lost[#lost + 1] = i
  end
end
return lost
"""
"""Renews a batch of leases (KEYS: the lease keys; ARGV: the TTL in ms, then each lease's
holder): the (1-based) indexes of the leases not held with that holder, which stay untouched."""

APPEND_SCRIPT = """
local out = {}
for i = 1, #KEYS / 3 do
  local lease, log, record, a = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i], 10 * (i - 1)
  local position = ARGV[a + 2]
  local expected = tonumber(position) - 1
  local written = 1
  if redis.call('GET', lease) ~= ARGV[a + 1] then
    written = 0
  else
    if redis.call('XLEN', log) ~= expected then written = -1 end
  end
  if written == 1 and redis.pcall('XADD', log, position .. '-0', 'e', ARGV[a + 3]).err then
    written = -1
  end
  if written == 1 then
    if ARGV[a + 4] ~= '' and redis.call('PUBLISH', ARGV[a + 4], ARGV[a + 5]) == 0 then
      written = 2
    end
    if ARGV[a + 6] ~= '' then
      redis.call('HSET', record, 'node', ARGV[a + 6], 'record', ARGV[a + 7], 'listed', ARGV[a + 8])
      if ARGV[a + 9] ~= '' then
        redis.call('PUBLISH', ARGV[a + 9], ARGV[a + 10])
      end
    end
  end
  out[i] = written
end
return out
"""
"""Appends to the logs of a batch of tables (KEYS: lease, log and record of each; ARGV: holder,
position, entry, channel, announcement, then node, record, listed flag, lobby channel, lobby
announcement of each), each fenced on its own: 1 written, 2 written but nobody subscribed to
the announcement's channel, 0 lease not held, -1 log not at ``position - 1``. The announcement
is published right after its entry is logged; a node given ("" for none) means the table's
lobby record is replaced in the same step, and the lobby announcement (if its channel is not
"") published after it.

The position is checked by the log's length: a log's entries are numbered 1, 2, ... without a
gap (an append takes the next number, a take-back removes the last), so a log of ``position -
1`` entries ends at entry ``position - 1``. Reading its last entry back (``XREVRANGE``) copied
the entry into the script: with it, an append took 3.4-3.9 µs of Redis's time, now 1.8-2.2 (20
tables' appends a call). A log whose numbers do not run so (written by other hands) refuses the
append as a log at another position does (``XADD`` refuses a number not past the last), and the
batch's other appends go on."""

TAKE_BACK_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if #last == 0 or last[1][1] ~= ARGV[2] .. '-0' then return 0 end
redis.call('XDEL', KEYS[2], ARGV[2] .. '-0')
redis.call('XSETID', KEYS[2], (tonumber(ARGV[2]) - 1) .. '-0')
return 1
"""
"""Takes a table's last log entry back (KEYS: lease, log; ARGV: holder, the entry's position,
above 1) while the lease is held and the entry is still the last: the log is as it was before
it, and the next entry takes its position again. 1 taken back, 0 not (the lease moved, or the
log went on)."""

RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

PUT_SNAPSHOT_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local kept = redis.call('HGET', KEYS[2], 'position')
if kept and tonumber(kept) >= tonumber(ARGV[2]) then return 1 end
redis.call('HSET', KEYS[2], 'position', ARGV[2], 'data', ARGV[3])
return 1
"""

RETIRE_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[4], KEYS[5], KEYS[7])
redis.call('SET', KEYS[3], 'closed', 'PX', ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('SET', KEYS[6], ARGV[3], 'PX', ARGV[2])
return 1
"""

LOCATE_SCRIPT = """
if redis.call('EXISTS', KEYS[2]) == 1 then return {'closed'} end
local holder = redis.call('GET', KEYS[1])
if holder then return {'hosted', holder} end
if redis.call('EXISTS', KEYS[3]) == 1 or redis.call('EXISTS', KEYS[4]) == 1 then
  return {'moving'}
end
return {'unknown'}
"""

FORGET_SCRIPT = """
for i = 1, 4 do
  if redis.call('EXISTS', KEYS[i]) == 1 then return 0 end
end
return redis.call('DEL', KEYS[5], KEYS[6])
"""
"""Forgets a table id that was leased and never logged, its lease lapsed (KEYS: the lease,
state, log and record keys, then the epoch and snapshot keys): deletes the epoch counter (and a
snapshot, which cannot exist without a log) unless the table lives after all. Such an id is
never leased again (a new table draws a new id), so its counter has nothing left to fence."""


async def hosted_tables(client: Any, share: Share | None) -> set[str]:
    """The ids in the hosted index of ``share``'s buckets (and of the legacy set, in ``share``):
    a node reads its share only (``None``: every table's). Tables gone may be among them. (Two
    calls: a cluster pipeline refuses ``SUNION``.)"""
    members = await client.sunion([hosted_key(bucket) for bucket in share_buckets(share)])
    legacy = await client.smembers(LEGACY_HOSTED_KEY)
    hosted = {raw.decode() for raw in members}
    return hosted | {t for raw in legacy if in_share(t := raw.decode(), share)}


class RedisLeases(Leases):
    """The tables' leases and the index of hosted tables (see the module docstring)."""

    def __init__(self, link: RedisLink) -> None:
        self._link = link
        self._redis: Any = link.redis
        self._acquire = link.script(ACQUIRE_SCRIPT)
        self._renew = link.script(RENEW_SCRIPT)
        self._release = link.script(RELEASE_SCRIPT)
        self._locate = link.script(LOCATE_SCRIPT)
        self._forget = link.script(FORGET_SCRIPT)
        self.unknown_grace = UNKNOWN_GRACE
        self._unknown_since: dict[str, float] = {}
        """The hosted ids the scans found nowhere, and since when (monotonic): see
        :data:`UNKNOWN_GRACE`."""

    async def acquire(self, table_id: str, ttl: float) -> int | None:
        """See :meth:`Leases.acquire`. The table's id goes into the hosted index in the same
        transaction as the lease and epoch: an id leased where no orphan scan could find it
        would keep its keys for good once its node died. (The index entry of a lease not
        taken is removed by the next scan, which finds the id gone.)"""
        keys = [lease_key(table_id), epoch_key(table_id), state_key(table_id)]
        with self._link.reaching():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.sadd(hosted_key(bucket_of(table_id)), table_id)
                queue_script(pipe, self._acquire, keys, self._acquire_args(ttl))
                _, token = await pipe.execute()
        return int(token) or None

    def _acquire_args(self, ttl: float) -> list[Any]:
        return [self._link.node_id, self._link.incarnation, int(ttl * 1000)]

    async def renew(self, leases: dict[str, int], ttl: float) -> set[str]:
        """See :meth:`Leases.renew`: one script call per :data:`MAX_RENEWALS` leases (a node
        renews all of its leases several times a second), all in one round trip."""
        if not leases:
            return set()
        groups = self._renewal_groups(list(leases))
        holder = self._link.holder
        with self._link.reaching():
            async with self._redis.pipeline(transaction=False) as pipe:
                for group in groups:
                    holders = [holder(leases[table_id]) for table_id in group]
                    keys = [lease_key(table_id) for table_id in group]
                    queue_script(pipe, self._renew, keys, [int(ttl * 1000), *holders])
                replies = await pipe.execute()
        pairs = zip(groups, replies, strict=True)
        return {group[int(index) - 1] for group, lost in pairs for index in lost}

    def _renewal_groups(self, tables: list[str]) -> list[list[str]]:
        """The tables whose leases one script call renews (one Redis holds every key)."""
        return [tables[i : i + MAX_RENEWALS] for i in range(0, len(tables), MAX_RENEWALS)]

    async def release(self, table_id: str, token: int) -> None:
        with self._link.reaching():
            await self._release(keys=[lease_key(table_id)], args=[self._link.holder(token)])

    @staticmethod
    def _locate_keys(table_id: str) -> list[str]:
        return [lease_key(table_id), state_key(table_id), log_key(table_id), table_key(table_id)]

    @staticmethod
    def _location(found: list[bytes]) -> Location:
        where = Whereabouts(found[0].decode())
        if where is not Whereabouts.HOSTED:
            return Location(where)
        node_id, incarnation, _ = found[1].decode().rsplit("/", 2)
        return Location(where, node_id, incarnation)

    async def locate(self, table_id: str) -> Location:
        with self._link.reaching():
            found = await self._locate(keys=self._locate_keys(table_id))
        return self._location(found)

    async def adoptable(self, share: Share | None = None, held: Collection[str] = ()) -> list[str]:
        with self._link.reaching():
            hosted = sorted(await hosted_tables(self._redis, share) - set(held))
            if not hosted:
                return []
            found: list[Any] = []
            for start in range(0, len(hosted), SCAN_CHUNK):  # the loop runs between chunks
                async with self._redis.pipeline(transaction=False) as pipe:
                    for table_id in hosted[start : start + SCAN_CHUNK]:
                        queue_script(pipe, self._locate, self._locate_keys(table_id), [])
                    found += await pipe.execute()
            places = {t: self._location(f) for t, f in zip(hosted, found, strict=True)}
            gone = [t for t, p in places.items() if p.where is CLOSED or self._long_unknown(t, p)]
            if gone:
                async with self._redis.pipeline(transaction=False) as pipe:
                    for table_id in gone:
                        pipe.srem(hosted_key(bucket_of(table_id)), table_id)
                        if places[table_id].where is UNKNOWN:  # leased, never logged
                            forget = [*self._locate_keys(table_id), epoch_key(table_id)]
                            forget.append(snapshot_key(table_id))
                            queue_script(pipe, self._forget, forget, [])
                    pipe.srem(LEGACY_HOSTED_KEY, *gone)
                    await pipe.execute()
            for table_id in gone:
                self._unknown_since.pop(table_id, None)
            stale = time.monotonic() - 4 * self.unknown_grace  # (ids out of the index since,
            for table_id in [t for t, s in self._unknown_since.items() if s < stale]:  # or of
                if table_id not in places:  # this node's share: none kept for good)
                    del self._unknown_since[table_id]
        node_id, incarnation = self._link.node_id, self._link.incarnation
        return [
            table_id
            for table_id, place in places.items()
            if place.where is Whereabouts.MOVING
            or (place.node == node_id and (place.incarnation or "") < incarnation)
        ]

    def _long_unknown(self, table_id: str, place: Location) -> bool:
        """Whether a scan that found ``table_id`` at ``place`` forgets it: found nowhere, and
        by a scan at least :attr:`unknown_grace` s before this one too."""
        if place.where is not UNKNOWN:
            self._unknown_since.pop(table_id, None)
            return False
        now = time.monotonic()
        return now - self._unknown_since.setdefault(table_id, now) >= self.unknown_grace


class RedisTableLogs(TableLogs):
    """The tables' logs, snapshots and game records, appends grouped (see the module
    docstring). ``lobby`` and ``bus`` carry an append's lobby record and announcement when
    ``wait_replicas`` keeps them out of the append's own script."""

    def __init__(
        self,
        link: RedisLink,
        lobby: Lobby,
        bus: Bus,
        *,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 100,
    ) -> None:
        self._link = link
        self._redis: Any = link.redis
        self._lobby = lobby
        self._bus = bus
        self.wait_replicas = wait_replicas
        """Replicas that must hold a log entry before :meth:`append` returns (0: none)."""
        self.wait_timeout_ms = wait_timeout_ms
        self._append = link.script(APPEND_SCRIPT)
        self._take_back = link.script(TAKE_BACK_SCRIPT)
        self._put_snapshot = link.script(PUT_SNAPSHOT_SCRIPT)
        self._retire = link.script(RETIRE_SCRIPT)
        self._batch: list[PendingAppend] = []
        self._committer: asyncio.Task[None] | None = None
        self._commit_link = link.commit_link(APPEND_SCRIPT)
        self._snapshot_link = link.commit_link(PUT_SNAPSHOT_SCRIPT)
        """Snapshots' own connection, as the appends': redis-py's call cost ten times as much."""
        self._send_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop the appends run in, asked for at the first (:meth:`append`)."""
        self._sent_at = 0.0
        """When the last batch went out on the commit link (the loop's clock)."""
        self._resending: set[asyncio.Task[None]] = set()
        self._lobby_behind: dict[str, tuple[int, LobbyRecord]] = {}
        """With ``wait_replicas``: tables whose lobby record could not be written, and the
        newest one to write (see :meth:`_put_lobby_record`)."""
        self._lobby_catching_up: asyncio.Task[None] | None = None

    async def close(self) -> None:
        """Stop the group commit and answer every append still queued (unavailable)."""
        tasks = [
            t for t in (self._committer, self._lobby_catching_up, *self._resending) if t is not None
        ]
        await cancel_until_done(tasks)
        queued, self._batch = self._batch, []
        _settle(queued, [StoreUnavailable("redis: the store closed")] * len(queued))
        for link in (self._commit_link, self._snapshot_link):
            if link is not None:
                link.close()

    async def _queue_wait(self, pipe: Any, key: str) -> Callable[[], bool]:
        """Queue ``WAIT`` on the connection that carries the write of ``key`` just queued;
        return a check that the write did go there (always true with one server)."""
        pipe.execute_command("WAIT", self.wait_replicas, self.wait_timeout_ms)
        return lambda: True

    async def append(self, append: Append) -> bool:
        """See :meth:`TableLogs.append`; the append waits for the group commit (module
        docstring) and its outcome is this table's own. ``logged`` is called from the callback
        that settles the batch (:func:`_settle`), a turn of the event loop before this returns.
        Not heard: the script's ``PUBLISH`` reached no subscriber (on one Redis, every
        subscriber of the channel; a cluster's stores say heard, see ``redis_cluster``)."""
        if self.wait_replicas:
            await self._append_durably(append)
            if append.lobby is not None:  # replicated: only now may the lobby show it
                await self._put_lobby_record(append.table_id, append.token, append.lobby)
            return True  # (``logged``: the caller's call right after is as early)
        done: asyncio.Future[int] = self._running_loop().create_future()
        self._queue(append, done)
        written = await done
        self._check_appended(append.table_id, append.token, append.position, written)
        return written != UNHEARD

    @property
    def appends_soon(self) -> bool:  # type: ignore[override]
        """Every append but a durable one (``WAIT`` for replicas: :meth:`append` awaits it)."""
        return not self.wait_replicas

    def append_soon(self, append: Append, settled: Callable[[bool | BaseException], None]) -> None:
        """See :meth:`TableLogs.append_soon`: queued for the group commit as :meth:`append`'s
        are, its outcome handed to ``settled`` by :func:`_settle` (:func:`_tell`)."""
        self._queue(append, None, settled)

    def _queue(
        self, append: Append, done: asyncio.Future[int] | None, settled: Settled | None = None
    ) -> None:
        """Queue ``append`` for the group commit, its outcome for ``done`` (or ``settled``),
        and have the batch sent: from the next turn, or once ``COALESCE`` has passed since the
        last one went out."""
        loop = self._running_loop()
        pending = PendingAppend(append, self._link.holder(append.token), done, settled)
        if self._commit_link is not None:
            pending.packed_args = _packed_args(pending.holder, append)
        self._batch.append(pending)
        if self._committer is None and not self._send_scheduled:
            if self._commit_link is None:
                self._start_committer()
            else:
                self._send_scheduled = True
                wait = self._sent_at + COALESCE - loop.time()
                if wait > 0:  # a batch went out just now: this one gathers until COALESCE
                    loop.call_later(wait, self._send_queued)
                else:
                    loop.call_soon(self._send_queued)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None:  # (asked once: on Python 3.11 asking is a system call, every append)
            loop = self._loop = asyncio.get_running_loop()
        return loop

    def _start_committer(self) -> None:
        self._committer = asyncio.create_task(self._commit_batches(), name="redis-group-commit")

    def _send_queued(self) -> None:
        """On the commit link, from the turn after the first append queued: what queued goes
        out at once, without waiting for the replies of batches still out (pipelined), and each
        reply settles its appends from the callback that read it. No connection open: the
        committer opens one and sends batch after batch until nothing is left."""
        self._send_scheduled = False
        assert self._commit_link is not None
        assert self._loop is not None  # (an append scheduled this)
        self._sent_at = self._loop.time()
        while self._batch and self._committer is None:
            batch, self._batch = self._batch[:MAX_BATCH], self._batch[MAX_BATCH:]
            keys = b"".join([pending.packed_keys for pending in batch])
            args = b"".join([pending.packed_args for pending in batch])
            count = len(batch)
            then = functools.partial(self._replied, batch)
            if not self._commit_link.send(3 * count, keys, ARGS * count, args, then):
                self._batch[:0] = batch
                self._start_committer()

    def _replied(self, batch: list[PendingAppend], reply: Any) -> None:
        """A pipelined batch's reply (or failure): each append's outcome. Redis having
        forgotten the script (nothing ran), the batch is sent again once it is loaded."""
        if isinstance(reply, redis.exceptions.NoScriptError):
            task = asyncio.get_running_loop().create_task(self._send_again(batch))
            self._resending.add(task)
            task.add_done_callback(self._resending.discard)
            return
        try:
            with self._link.reaching():
                if isinstance(reply, BaseException):
                    raise reply
        except Exception as error:
            _settle(batch, [error] * len(batch))
            return
        _settle(batch, reply)

    async def _send_again(self, batch: list[PendingAppend]) -> None:
        await self._commit(batch, load=True)

    async def _commit_batches(self) -> None:
        """The group commit: runs from the event-loop turn after the first append queued, then
        sends whatever queued meanwhile, one batch at a time, until nothing is left."""
        try:
            while self._batch:
                batch, self._batch = self._batch[:MAX_BATCH], self._batch[MAX_BATCH:]
                await self._commit(batch)
        finally:
            self._committer = None

    async def _commit(self, batch: list[PendingAppend], load: bool = False) -> None:
        """Send ``batch`` and hand each append its outcome (:meth:`_send_appends`)."""
        try:
            outcomes = await self._send_appends(batch, load)
        except asyncio.CancelledError:
            _settle(batch, [StoreUnavailable("redis: the store closed")] * len(batch))
            raise
        except Exception as error:
            outcomes = [error] * len(batch)
        _settle(batch, outcomes)

    async def _send_appends(
        self, batch: list[PendingAppend], load: bool = False
    ) -> list[int | BaseException]:
        """One script call for the batch (one Redis holds every key), on the group commit's own
        connection (``load``: the script first, Redis said it forgot it): each append's result,
        or :class:`StoreUnavailable` for all if the call failed."""
        keys, args = _keys_and_args(batch)
        with self._link.reaching():
            if self._commit_link is None:  # a TLS URL: redis-py's pool carries the call
                return list(await self._append(keys=keys, args=args))
            return await self._commit_link.call(keys, args, load)

    @staticmethod
    def _check_appended(table_id: str, token: int, position: int, written: int) -> None:
        if written == 0:
            raise LeaseLost(f"{table_id}: the lease is not held with token {token}")
        if written < 0:
            raise LeaseLost(f"{table_id}: the log is not at entry {position - 1}")

    async def _append_durably(self, append: Append) -> None:
        """The append, then ``WAIT`` for ``wait_replicas`` replicas on the same connection (one
        round trip), then the announcement: nothing is acknowledged or seen that a failover
        could lose. Too few replicas in time: the entry is taken back (:data:`TAKE_BACK_SCRIPT`),
        then :class:`StoreUnavailable`: nothing changed, as the host tells its player, and its
        next write takes the same position. (Before, the entry stayed in the log: the player
        was told ``unavailable`` for an action the table then played, and the host's next
        write, fenced out by the log's position, had the table adopted again, at every refused
        action.) An entry that cannot be taken back (Redis gone meanwhile) may stay: the log
        position fences the host's next write, and the table is adopted again from the log."""
        table_id, token, position = append.table_id, append.token, append.position
        keys = [lease_key(table_id), log_key(table_id), table_key(table_id)]
        args = [self._link.holder(token), position, append.entry]
        args += [*NO_ANNOUNCEMENT, *NO_LOBBY_RECORD]
        with self._link.reaching():
            async with self._redis.pipeline(transaction=False) as pipe:
                queue_script(pipe, self._append, keys, args)  # a batch of one
                went_there = await self._queue_wait(pipe, keys[1])
                (written,), replicas = await pipe.execute()
        self._check_appended(table_id, token, position, written)
        if not went_there():
            raise StoreUnavailable(f"redis: {table_id}'s slot moved during the write")
        if replicas < self.wait_replicas:
            taken_back = await self._take_back_entry(table_id, token, position)
            raise StoreUnavailable(
                f"redis: {replicas} of {self.wait_replicas} replicas took entry {position} of "
                f"{table_id} within {self.wait_timeout_ms} ms"
                + ("" if taken_back else " (it may stay in the log)")
            )
        if append.announce is not None:
            # Logged and replicated: a lost announcement costs viewers one update, which the
            # next one's sequence number reveals; it does not undo the acknowledged command.
            with contextlib.suppress(StoreUnavailable), self._link.reaching():
                await self._redis.publish(append.channel, append.announce)

    async def _take_back_entry(self, table_id: str, token: int, position: int) -> bool:
        """Take back the entry at ``position`` of a table's log (:data:`TAKE_BACK_SCRIPT`);
        whether it was (never the create entry: a table whose creation failed is dropped)."""
        if position <= 1:
            return False
        keys = [lease_key(table_id), log_key(table_id)]
        args: list[Any] = [self._link.holder(token), position]
        try:
            with self._link.reaching():
                return bool(await self._take_back(keys=keys, args=args))
        except StoreUnavailable:
            return False

    async def _put_lobby_record(self, table_id: str, token: int, lobby: LobbyRecord) -> None:
        """The lobby record of an append made durable, and its announcement. The game does
        not wait on it: a write that fails leaves the table *behind* (:attr:`_lobby_behind`,
        its newest record kept) and :meth:`_catch_up_lobby` writes it once Redis answers. While
        a table is behind only that task writes its record, so an older one never lands after
        a newer one; a record whose lease is gone (the table moved or closed) is dropped."""
        if table_id in self._lobby_behind:
            self._lobby_behind[table_id] = (token, lobby)
            return
        try:
            await self._write_lobby_record(table_id, token, lobby)
        except LeaseLost:
            return
        except StoreUnavailable:
            self._lobby_behind[table_id] = (token, lobby)
            if self._lobby_catching_up is None:
                self._lobby_catching_up = asyncio.create_task(
                    self._catch_up_lobby(), name="redis-lobby-catch-up"
                )

    async def _write_lobby_record(self, table_id: str, token: int, lobby: LobbyRecord) -> None:
        await self._lobby.put(table_id, lobby.node, lobby.record, lobby.listed, token)
        if lobby.announce is not None:
            with contextlib.suppress(StoreUnavailable):  # listings read the record anyway
                await self._bus.publish(lobby.channel, lobby.announce)

    async def _catch_up_lobby(self) -> None:
        """Write the newest record of every table left behind, as soon as Redis answers (on
        :data:`RECONNECT_BACKOFF` between failed rounds), until none is left; then end."""
        delays = RECONNECT_BACKOFF.delays()
        try:
            while self._lobby_behind:
                for table_id, (token, lobby) in list(self._lobby_behind.items()):
                    try:
                        await self._write_lobby_record(table_id, token, lobby)
                    except StoreUnavailable:
                        break
                    except LeaseLost:
                        pass
                    newest = self._lobby_behind.get(table_id)
                    if newest is not None and newest[1] is lobby:
                        del self._lobby_behind[table_id]  # else a newer one came meanwhile
                else:
                    continue
                await asyncio.sleep(next(delays))
                await self._link.health.wait_up()
        finally:
            self._lobby_catching_up = None

    async def read(self, table_id: str, after: int = 0, *, held: bool = False) -> list[bytes]:
        """See :meth:`TableLogs.read`: ``held``, in pages of :data:`READ_PAGE` entries."""
        key, found, page = log_key(table_id), [], READ_PAGE if held else None
        link = self._snapshot_link if held else None  # (its own connection: see READ_PAGE)
        while True:
            with self._link.reaching():
                if link is not None:  # an entry: its id, and its one field (``e``) and value
                    command: list[str | int] = [
                        "XRANGE", key, f"{after + 1}-0", "+", "COUNT", READ_PAGE,
                    ]  # fmt: skip
                    entries = await link.command(command)
                    found += [fields[1] for _, fields in entries]
                else:
                    entries = await self._redis.xrange(key, min=f"{after + 1}-0", count=page)
                    found += [fields[b"e"] for _, fields in entries]
            if page is None or len(entries) < page:
                return found
            after = int(entries[-1][0].partition(b"-")[0])  # an entry's id: its position-0

    async def read_last(self, table_id: str, count: int) -> tuple[int, list[bytes]]:
        """One round trip, the count read first: an entry appended between the two shows in
        the count only."""
        key = log_key(table_id)
        with self._link.reaching():
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.xlen(key)
                pipe.xrevrange(key, count=max(count, 1))
                length, newest = await pipe.execute()
        return int(length), [fields[b"e"] for _, fields in reversed(newest[:count])]

    async def put_snapshot(self, table_id: str, token: int, position: int, data: bytes) -> None:
        keys = [lease_key(table_id), snapshot_key(table_id)]
        args: list[str | int | bytes] = [self._link.holder(token), position, data]
        with self._link.reaching():
            if self._snapshot_link is None:  # a TLS URL: redis-py's pool carries the call
                written = await self._put_snapshot(keys=keys, args=args)
            else:
                written = await self._snapshot_link.call(keys, args)
        if not written:
            raise LeaseLost(table_id)

    async def read_snapshot(self, table_id: str) -> tuple[int, bytes] | None:
        with self._link.reaching():
            position, data = await self._redis.hmget(snapshot_key(table_id), ["position", "data"])
        if position is None or data is None:
            return None
        return int(position), data

    async def retire(
        self,
        table_id: str,
        token: int,
        record: bytes,
        keep: float,
        players: Iterable[str] = (),
    ) -> None:
        keys = [
            lease_key(table_id),
            epoch_key(table_id),
            state_key(table_id),
            log_key(table_id),
            table_key(table_id),
            game_key(table_id),
            snapshot_key(table_id),
        ]
        with self._link.reaching():
            retired = await self._retire(
                keys=keys, args=[self._link.holder(token), max(1, int(keep * 1000)), record]
            )
            if not retired:
                raise LeaseLost(table_id)
            # The sets below live in other slots: a second step, which readers tolerate.
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.srem(hosted_key(bucket_of(table_id)), table_id)
                pipe.srem(LEGACY_HOSTED_KEY, table_id)
                pipe.srem(LOBBY_KEY, table_id)
                for player in players:
                    pipe.srem(player_tables_key(player), table_id)
                await pipe.execute()

    async def game_record(self, table_id: str) -> bytes | None:
        with self._link.reaching():
            return await self._redis.get(game_key(table_id))


UNHEARD = 2
"""``APPEND_SCRIPT``'s outcome for an entry written whose announcement reached no subscriber."""

NO_ANNOUNCEMENT: list[Any] = ["", b""]
"""An append's channel and announcement when it announces nothing."""

NO_LOBBY_RECORD: list[Any] = ["", b"", "", "", b""]
"""An append's node, record, listed flag, lobby channel and announcement when its lobby record
stays as it is."""

ARGS = 3 + len(NO_ANNOUNCEMENT) + len(NO_LOBBY_RECORD)
"""The arguments of one append in ``APPEND_SCRIPT``: holder, position and entry, the
announcement's two and the lobby record's five."""


class PendingAppend:
    """A log append waiting for the group commit: its keys, script arguments and outcome, for
    an awaiting caller (``done``, :meth:`RedisTableLogs.append`) or a callback (``settled``,
    :meth:`RedisTableLogs.append_soon`: given what ``append`` would have returned or raised,
    by :func:`_settle`, without a future's object and calls in between)."""

    __slots__ = ("append", "done", "holder", "keys", "logged", "packed_args", "packed_keys",
                 "settled", "table_id")  # fmt: skip

    def __init__(
        self,
        append: Append,
        holder: str,
        done: asyncio.Future[int] | None,
        settled: Settled | None = None,
    ) -> None:
        self.append = append
        self.holder = holder
        """The lease's value the append is fenced by (``Link.holder`` of its token)."""
        self.table_id = append.table_id
        self.keys, self.packed_keys = _append_keys(append.table_id)
        self.packed_args = b""
        """:attr:`args` packed (:func:`_packed_args`) for the commit link."""
        self.done = done
        self.settled = settled
        self.logged = append.logged

    @property
    def args(self) -> list[Any]:
        """The append's arguments of ``APPEND_SCRIPT`` (the paths through redis-py: a cluster,
        a TLS link, the committer's resends): holder, position and entry, the announcement's
        two and the lobby record's five."""
        append = self.append
        args: list[Any] = [self.holder, append.position, append.entry]
        announce = append.announce
        args += [append.channel, announce] if announce is not None else NO_ANNOUNCEMENT
        lobby = append.lobby
        if lobby is None:
            args += NO_LOBBY_RECORD
        else:
            args += [lobby.node, lobby.record, "1" if lobby.listed else "0"]
            args += [lobby.channel, lobby.announce] if lobby.announce is not None else ["", b""]
        return args


@functools.lru_cache(maxsize=8192)
def _text_bulk(text: str) -> bytes:
    """A string argument packed: holders, channels and node ids repeat from append to append."""
    return resp.bulks((text,))


_NO_ANNOUNCEMENT_PACKED = resp.bulks(NO_ANNOUNCEMENT)
_NO_LOBBY_RECORD_PACKED = resp.bulks(NO_LOBBY_RECORD)
_LISTED_PACKED = {True: resp.bulks(("1",)), False: resp.bulks(("0",))}


def _packed_args(holder: str, append: Append) -> bytes:
    """:attr:`PendingAppend.args` packed as :func:`resp.bulks` packs them, without a pass over
    the ten of them (an append's own cost on the hot path: only the entry, the position and the
    announcements differ from one append to the next)."""
    bulk = resp.bulk
    parts = [_text_bulk(holder), bulk(b"%d" % append.position), bulk(append.entry)]
    announce = append.announce
    if announce is None:
        parts.append(_NO_ANNOUNCEMENT_PACKED)
    else:
        parts += (_text_bulk(append.channel), bulk(announce))
    lobby = append.lobby
    if lobby is None:
        parts.append(_NO_LOBBY_RECORD_PACKED)
    else:
        parts += (_text_bulk(lobby.node), bulk(lobby.record), _LISTED_PACKED[lobby.listed])
        if lobby.announce is None:
            parts.append(_NO_ANNOUNCEMENT_PACKED)
        else:
            parts += (_text_bulk(lobby.channel), bulk(lobby.announce))
    return b"".join(parts)


@functools.lru_cache(maxsize=4096)
def _append_keys(table_id: str) -> tuple[tuple[str, str, str], bytes]:
    """The keys of a table's append (``APPEND_SCRIPT``'s three), and packed: the same for every
    append of the table (a node hosts a few thousand tables at most)."""
    keys = (lease_key(table_id), log_key(table_id), table_key(table_id))
    return keys, resp.bulks(keys)


def _keys_and_args(batch: Sequence[PendingAppend]) -> tuple[list[str], list[Any]]:
    """The keys and arguments of one ``APPEND_SCRIPT`` call for ``batch``."""
    keys = [key for pending in batch for key in pending.keys]
    return keys, [arg for pending in batch for arg in pending.args]


def _tell(pending: PendingAppend, settled: Settled, outcome: int | BaseException) -> None:
    """An ``append_soon``'s outcome to its callback: heard, or the error :meth:`append` would
    raise (a lease lost, the store unreachable)."""
    if not isinstance(outcome, BaseException):
        written = int(outcome)
        if written > 0:
            outcome = written != UNHEARD
        else:
            append = pending.append
            try:
                RedisTableLogs._check_appended(
                    append.table_id, append.token, append.position, written
                )
            except LeaseLost as lost:
                outcome = lost
    try:
        settled(outcome)  # type: ignore[arg-type]
    except Exception:  # a bug of the caller's: the batch's other appends are still settled
        log.exception("settling an append to %s failed", pending.table_id)


def _settle(batch: Sequence[PendingAppend], outcomes: Sequence[int | BaseException]) -> None:
    """Hand each waiting append its own outcome (one whose caller gave up is skipped); the
    logged ones' ``logged`` callbacks here, not a turn later in their awaiting callers, and
    after every outcome is set: a caller resumes a pass later all the same, and so before the
    frames its callback sends are written (the host holds its
    :class:`~blackdrez.server.connection.Outbox` for them): a player's reply to an action and
    its update go in one write."""
    logged = []
    for pending, outcome in zip(batch, outcomes, strict=True):
        settled = pending.settled
        if settled is not None:
            pending.settled = None  # (once: the store closing may settle the batch again)
            _tell(pending, settled, outcome)
            continue
        if pending.done is None or pending.done.done():
            continue
        if isinstance(outcome, BaseException):
            pending.done.set_exception(outcome)
            continue
        written = int(outcome)
        pending.done.set_result(written)
        if written > 0 and pending.logged is not None:
            logged.append(pending)
    for pending in logged:
        try:
            pending.logged()  # type: ignore[misc]
        except Exception:  # a bug of the caller's: the other appends are still settled
            log.exception("the logged callback of an append to %s failed", pending.table_id)
