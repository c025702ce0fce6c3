"""The Redis store: one lobby shared by any number of server nodes.

Theory of operation
-------------------
Key layout. Every key of one table, player or game carries its id as a Redis Cluster hash tag, so
a multi-key write about one of them stays in one slot. Each key has an owner (who writes it) and a
lifetime (when it goes); ``retention`` is the node's ``--record-retention`` (default one day)::

    key                    type    owner              lifetime
    bd:t:{T}:lease         string  the table's host   TTL = lease TTL, renewed by its holder;
                                                      deleted when the table is retired
    bd:t:{T}:epoch         string  lease acquisitions the table's life; TTL = retention once retired
                                                      (deleted by the orphan scan if the lease
                                                      lapsed before the first log entry)
    bd:t:{T}:log           stream  the table's host   the table's life; deleted when retired
    bd:t:{T}:record        hash    the table's host   the table's life; deleted when retired
    bd:t:{T}:snap          hash    the table's host   the table's life; deleted when retired
    bd:t:{T}:state         string  the retiring host  set ("closed") at retirement, TTL = retention
    bd:t:{T}:game          string  the retiring host  set at retirement, TTL = retention
    bd:p:{P}:tables        set     the tables' hosts  TTL PLAYER_TABLES_TTL, renewed by each add;
                                                      members removed when the seat is freed or
                                                      the table retired (empty: gone)
    bd:p:{P}:attach        string  every node         the order of the player's latest connection
                                                      (``bd:attaches``'s step); TTL
                                                      PLAYER_TABLES_TTL, renewed by each hello
    bd:secret              string  every node         fixed (no TTL): the token-signing secret
    bd:revoked:{ID}        string  the node a player  TTL = the token's remaining lifetime: a
                           logged out on      token ended by ``logout``
    bd:nodes               zset    every node         fixed; a member expires by its score
    {bd:nodes}:incarnations
                           hash    every node         fixed; per node, until when and under which
                                                      process incarnation it heartbeats (in the
                                                      slot of ``bd:nodes``: its hash tag)
    bd:{hosted}:B          set     tables' hosts      fixed; the tables of bucket B (of 1,024:
                                                      a node's scan reads its share's buckets);
                                                      a member leaves when its table is retired
                                                      (or is found gone by a scan). ``bd:hosted``,
                                                      the one set of older versions, is read and
                                                      emptied the same way, never added to
    bd:lobby:tables        set     tables' hosts      fixed; a member leaves when its table is
                                                      retired (or is found gone by a listing)
    bd:lb:{B}, bd:lb:{B}:entries, bd:lb:{B}:names, bd:lb:{B}:seq
                           zset, hash, hash, string   fixed: the leaderboards (one entry per
                                                      player and board; ``names`` holds each
                                                      player's entry as the board shows it)
    bd:rec:{G}             string  the game's host    fixed while a leaderboard entry shows the
                                                      game (one kept for good per entry placed;
                                                      a game placed nowhere: the record TTL)
    bd:daily:{D}           string  every node         fixed: a daily deal's seed (set once,
                                                      never changed; revealed once its day ends)
    bd:daily:{D}:players, bd:daily:{D}:ranked
                           set, hash  every node      who started the deal, and per player the
                                                      table of their ranked session (a
                                                      reference: whether its game still runs is
                                                      read from the table's own keys); TTL = a
                                                      day past the deal's day, set at each claim
    bd:attaches            string  every node         fixed: a counter, one step per greeted
                                                      connection, that orders a player's
                                                      connections across nodes
    bd:limit:K:{A}         hash    every node         a client address's token bucket for K
                                                      (``handshake``, ``api``): TTL = until it
                                                      would be full again (a new one is the same)

The fixed keys above are the only ones that may exist without a TTL, besides a live table's
epoch, log, record and snapshot (owned by its host, deleted or given a TTL when it is retired; a
table whose host died is adopted by another node, so its keys always have an owner; one that
died before logging anything is forgotten by the orphan scan, which finds its id in the hosted
index: the id goes there in the lease's own transaction). Fields:
``record`` holds node, record, listed ("1" / "0"); ``snap`` holds position and data (the room just
after that log entry: :mod:`blackdrez.server.table.snapshots`); ``lease`` holds
``node/incarnation/token``;
``log`` entries have the field ``e`` and the ID ``<position>-0``, position 1 being the create
command; ``game`` is the table's compact game record
(``blackdrez.server.table.records.TableRecord``).

Writes that touch several keys of one slot run in one Lua script (every fenced write: see
"Hosting and fencing" in :mod:`blackdrez.server.stores.base`) or one MULTI/EXEC transaction, so a
lost
connection changes all or nothing. The sets ``bd:lobby:tables`` and ``bd:{hosted}:B`` live in
other slots than a table's keys: they are updated in a second step, and every reader tolerates and
removes ids whose table is gone (:meth:`RedisStore.list_tables`,
:meth:`RedisStore.adoptable_tables`). So the same keys work on a Redis Cluster: how, and why each
cross-table index is one key in one slot, is in :mod:`blackdrez.server.stores.redis_cluster`.

Group commit. A node's log appends are not sent one by one: :meth:`RedisStore.append_log` queues
its append and waits; in the event-loop turn after the first one queued, every queued append goes
in one script call (``APPEND_SCRIPT``, at most ``MAX_BATCH`` a call), so the tables that acted in
the same turn share one round trip. Inside the script each append is fenced on its own (its
table's lease token and expected position), its announcement is published right after its entry
is logged, and the table's lobby record, when the append carries one, is replaced and its lobby
change published in the same step (most BlackDrez actions change the record: one call, not three,
and never ahead of the log). One table fenced out refuses its own append only, and nothing is
seen before it is logged. If the call fails every append of that batch gets
:class:`StoreUnavailable` (its table's host undoes that command) and nothing else is touched. A
table's appends keep their order because its host waits for each before it runs the next command.

On one Redis (no TLS) the batches go on a connection of their own (:class:`CommitLink`) and are
pipelined: a turn's batch goes out without waiting for the reply of a batch still out, and each
reply settles its appends from the protocol callback that read it (a busy node's loop turns last
milliseconds: each turn saved shows in the tail latency). The connection is not redis-py's: at
moderate load most batches hold one append, so the cost of one call is the node's cost per
action, and redis-py's client, pool and parser made it about 300 µs of CPU against about 150 µs
on this small RESP connection (:mod:`blackdrez.server.stores.resp`; measured in
``docs/benchmarks.md``,
"Group commit"). It sends ``EVALSHA`` (the script is loaded when the connection opens; a
``NOSCRIPT`` reply, Redis having forgotten it, means nothing ran: the batch is sent again behind
a ``SCRIPT LOAD``). A lost connection fails the batches out on it (and no other); while none is
open, one committer task opens it and sends batch after batch until the queue is empty; a failed
opening waits on :data:`RECONNECT_BACKOFF` before the next, unless the store's health sees Redis
back first. Outcomes are reported to the health like every call's. On a Redis Cluster the batch
is split by master (see :mod:`blackdrez.server.stores.redis_cluster`); there, and with a TLS URL
(``rediss://``), redis-py carries the batches, one at a time: whatever queued while one was out
goes in the next.

Lease renewals are batched too: a node renews every lease it holds several times a second
(``RENEWALS`` per TTL, :mod:`blackdrez.server.node.hosting`), so :meth:`RedisStore.renew_leases`
sends one
script call for them all (``RENEW_SCRIPT``, at most ``MAX_RENEWALS`` a call), each lease fenced
on its own holder; on a Redis Cluster, one call per slot.

With ``wait_replicas`` (``--redis-wait-replicas``) a log append is pipelined with ``WAIT`` on the
same connection, and its announcement is published only once enough replicas hold the entry (these
appends are sent one by one, not grouped); an entry too few replicas took in time is taken back
(fenced) before the command is refused. The table's lobby record is written after that, apart:
one that cannot be written then is written by a background task once Redis answers (the newest
of the table's, never an older one after it).

Presence and leaderboards run as Lua scripts: presence reads Redis's clock so nodes need no
synchronised clocks, and a leaderboard entry is compared and replaced atomically. Equal scores
rank by who reached them first: a member starts with ``999999999999999 - seq``, zero-padded, so
``ZREVRANGE`` (equal scores in reverse lexicographic order) puts the earlier entry first.

The bus uses one pub/sub connection per store, read by one background task that hands each
message to the channel's handlers with ``loop.call_soon`` (the same as the in-memory store).
When the connection drops the task reconnects on the retry policy's backoff (woken at once when
the store's health sees Redis back) and subscribes every channel that still has handlers;
messages published while it was down are lost, as Redis pub/sub never keeps them: once Redis has
confirmed every subscription (a PING sent after them is answered) the node is told
(``on_bus_recovered``) and fetches what it may have missed. Commands fail
fast (short socket timeouts, no retries) and raise :class:`StoreUnavailable`, so the caller can
answer ``unavailable`` at once; every outcome is reported to the store's health, and the
connection pool reconnects on the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import socket
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any

import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.maint_notifications import MaintNotificationsConfig

from blackdrez.server.retry import Backoff
from blackdrez.server.stores import resp
from blackdrez.server.stores.base import (
    Handler,
    LeaseLost,
    LobbyRecord,
    Location,
    Share,
    Store,
    StoreRefused,
    StoreUnavailable,
    Whereabouts,
    bucket_of,
    holder_value,
    in_share,
    share_buckets,
)
from blackdrez.server.tasks import cancel_until_done

log = logging.getLogger("blackdrez.store")

UNREACHABLE = (
    redis.exceptions.ConnectionError,  # includes "no connection available" from a full pool
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.ClusterError,  # a cluster refusing a slot mid-failover (CLUSTERDOWN)...
    redis.exceptions.TryAgainError,  # ...or mid-resharding
    redis.exceptions.SlotNotCoveredError,
    TimeoutError,
    OSError,
)
"""What a lost, refused or stalled connection raises (or a replica refusing writes mid-failover,
or a Redis Cluster whose slot has no master for a moment)."""


def lost_connection(error: BaseException) -> bool:
    """Whether ``error`` is, or was raised while handling, a lost or refused connection
    (:data:`UNREACHABLE`): a Redis master killed mid-read can end in another exception from the
    client's cleanup, with the lost connection as its context. Under uvloop, a write to a
    connection the kernel has dropped meanwhile (:data:`UNACKED_TIMEOUT`) raises a
    ``RuntimeError`` saying its handler is closed."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, UNREACHABLE):
            return True
        if isinstance(current, RuntimeError) and "handler is closed" in str(current):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def refuses_writes(error: BaseException) -> bool:
    """Whether Redis refused a command because it cannot persist writes (``MISCONF``: its
    append-only file or snapshot failed to be written, a full disk): it takes writes again by
    itself once its disk does, so the caller waits as for an outage. It refuses PING too; a
    script's refused write says ``MISCONF`` inside the script's error (Redis 6) or first (7)."""
    return isinstance(error, redis.exceptions.ResponseError) and "MISCONF" in str(error)


POOL_SIZE = 64
"""Connections to Redis per node, beside the pub/sub one."""
CONNECT_TIMEOUT = 1.0
COMMAND_TIMEOUT = 2.0
UNACKED_TIMEOUT = COMMAND_TIMEOUT / 2
"""Seconds a command's bytes may go unacknowledged by Redis's host before the kernel drops the
connection (``TCP_USER_TIMEOUT``), its unsent bytes with it. Without it, a command sent into a
network partition and given up on (its caller answered, the socket closed) stayed queued in the
kernel and reached Redis when the link healed, seconds or minutes later: a stale write. Shorter
than COMMAND_TIMEOUT, so the connection is gone before its caller stops waiting for it."""
KEEP_NOTHING_QUEUED: dict[str, Any] = (
    {
        "socket_keepalive": True,
        "socket_keepalive_options": {socket.TCP_USER_TIMEOUT: int(UNACKED_TIMEOUT * 1000)},
    }
    if hasattr(socket, "TCP_USER_TIMEOUT")  # Linux
    else {}
)
"""redis-py's connection options that set UNACKED_TIMEOUT."""
SUBSCRIBE_TIMEOUT = 2.0
"""How long :meth:`RedisStore.subscribe` waits for the connection and for Redis's confirmation."""
KEEPALIVE = 5.0
"""Idle seconds before the pub/sub reader pings; no reply by the next idle period is a dead link."""
PROBE_TIMEOUT = 0.5
"""How long a health probe (PING) waits: a frozen Redis must not hold the probe for long."""
RECONNECT_BACKOFF = Backoff(first=0.1, cap=2.0)
"""Between attempts to reconnect the pub/sub link or the group commit's connection (either is
woken early when the store's health sees Redis back)."""
PLAYER_TABLES_TTL = 7 * 24 * 3600
"""Seconds a player's table set lives after its last addition (its tables close long before)."""
MAX_BATCH = 256
"""Log appends sent in one script call at most (a bigger batch would hold Redis for longer)."""
MAX_RENEWALS = 1000
"""Leases renewed in one script call at most (a few hundred microseconds of Redis's time)."""
READ_CHUNK = 1000
"""Keys read in one pipeline at most by a read of many players' keys (after a bus outage)."""
SCAN_CHUNK = 32
"""Tables an orphan scan locates per round trip. One pipeline for all of them held the node's
event loop while it packed and parsed them all (a few hundred script calls): under load that
showed as the worst act -> update latencies, a table's players waiting behind the scan."""

CLOSED, UNKNOWN = Whereabouts.CLOSED, Whereabouts.UNKNOWN
FIXED_KEYS: tuple[str, ...] = (
    "bd:secret", "bd:nodes", "{bd:nodes}:incarnations", "bd:hosted", "bd:{hosted}:*",
    "bd:lobby:tables", "bd:lb:*", "bd:rec:*", "bd:daily:{*}", "bd:attaches",
)  # fmt: skip
"""Patterns (``fnmatch``) of the only keys that may live without a TTL (see the key table)."""
LEGACY_HOSTED_KEY = "bd:hosted"
"""The one set of hosted tables before the buckets: still read and emptied by scans, so that a
table a node of an older version hosted is found (a rolling upgrade); never added to."""


def hosted_key(bucket: int) -> str:
    """The set of hosted tables of one bucket (``blackdrez.server.stores.base.bucket_of``). Every
    bucket
    is in one slot (the hash tag), so one ``SUNION`` reads a share's buckets, on a cluster too."""
    return f"bd:{{hosted}}:{bucket}"


SECRET_KEY = "bd:secret"
LOBBY_KEY = "bd:lobby:tables"
NODES_KEY = "bd:nodes"
ATTACHES_KEY = "bd:attaches"
LATEST_ATTACH_SCRIPT = """
local latest = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > latest then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
"""
"""Keeps the greatest order given to a player's connections (KEYS: the player's key; ARGV: the
order, the TTL in ms): two hellos at once may note theirs in either order."""
TAKE_TOKEN_SCRIPT = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local saved = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens, at = tonumber(saved[1]), tonumber(saved[2])
if tokens == nil or at == nil then
  tokens, at = burst, now_ms
end
tokens = math.min(burst, tokens + math.max(0, now_ms - at) * rate / 1000)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'at', now_ms)
redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil((burst - tokens) * 1000 / rate)))
return wait
"""
"""A token bucket shared by every node (KEYS: the bucket; ARGV: rate a second, burst): spend a
token if there is one and return 0, else the milliseconds until there is. Timed by Redis's own
clock, so nodes whose clocks differ share one bucket; the key lives until it would be full."""
INCARNATIONS_KEY = "{bd:nodes}:incarnations"
"""Per node, ``<expiry ms>/<incarnation>`` of its last heartbeat. Its hash tag is the whole name
of ``bd:nodes``, so both are in one slot and one script writes them on a cluster too. A separate
key, not new members of ``bd:nodes``, so that nodes of older versions (which read only
``bd:nodes``, and whose heartbeats write only there) work alongside newer ones."""


def lease_key(table_id: str) -> str:
    """The key whose value names the node hosting a table."""
    return f"bd:t:{{{table_id}}}:lease"


def log_key(table_id: str) -> str:
    """The stream of a table's commands."""
    return f"bd:t:{{{table_id}}}:log"


def epoch_key(table_id: str) -> str:
    """The counter of a table's lease acquisitions: the fencing tokens."""
    return f"bd:t:{{{table_id}}}:epoch"


def state_key(table_id: str) -> str:
    """Set when a table is retired: it can never be leased again."""
    return f"bd:t:{{{table_id}}}:state"


def snapshot_key(table_id: str) -> str:
    """A table's latest snapshot (see :mod:`blackdrez.server.table.snapshots`)."""
    return f"bd:t:{{{table_id}}}:snap"


def game_key(table_id: str) -> str:
    """A retired table's compact game record."""
    return f"bd:t:{{{table_id}}}:game"


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
    local last = redis.call('XREVRANGE', log, '+', '-', 'COUNT', 1)
    if expected == 0 then
      if #last ~= 0 then written = -1 end
    elseif #last == 0 or last[1][1] ~= expected .. '-0' then
      written = -1
    end
  end
  if written == 1 then
    redis.call('XADD', log, position .. '-0', 'e', ARGV[a + 3])
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
"") published after it."""

PUT_RECORD_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[2], 'node', ARGV[2], 'record', ARGV[3], 'listed', ARGV[4])
return 1
"""

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

CLAIM_DAILY_SCRIPT = """
local first
if redis.call('SADD', KEYS[1], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  first = ARGV[2]
else
  first = redis.call('HGET', KEYS[2], ARGV[1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return first
"""
"""Claims a daily deal for a player (KEYS: the deal's players set and ranked hash; ARGV: the
player, the table of the session, how long to keep the claims in ms): the table of the player's
ranked session of the deal, this one if the player is new to it (``nil``: an older version's
claim named none). The set is the claim older versions make too (a rolling upgrade)."""


def table_key(table_id: str) -> str:
    """The hash holding a table's hosting node, record and listed flag."""
    return f"bd:t:{{{table_id}}}:record"


def limit_key(kind: str, key: str) -> str:
    """A client address's (``key``) token bucket for ``kind`` of request, shared by every node
    (``Store.take_token``)."""
    return f"bd:limit:{kind}:{{{key}}}"


def latest_attach_key(player: str) -> str:
    """The order of the player's latest connection (``Store.next_attach``)."""
    return f"bd:p:{{{player}}}:attach"


def player_tables_key(player: str) -> str:
    """The set of tables where a player holds a seat."""
    return f"bd:p:{{{player}}}:tables"


def leaderboard_keys(board: str) -> list[str]:
    """The board, members, entries and counter keys of one leaderboard."""
    key = f"bd:lb:{{{board}}}"
    return [key, f"{key}:entries", f"{key}:names", f"{key}:seq"]


def kept_record_key(game_id: str) -> str:
    """The key of a ranked game's kept record."""
    return f"bd:rec:{{{game_id}}}"


def daily_key(game: str, day: str) -> str:
    """The key of a daily deal's seed (and, with ``:players``, of who started it)."""
    return f"bd:daily:{{{game}:{day}}}"


HEARTBEAT_SCRIPT = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local expiry = ms + tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
redis.call('ZADD', KEYS[1], expiry, ARGV[1])
local beats = redis.call('HGETALL', KEYS[2])
for i = 1, #beats, 2 do
  local until_ms = tonumber(string.match(beats[i + 1], '^(%d+)/'))
  if not until_ms or until_ms <= ms then redis.call('HDEL', KEYS[2], beats[i]) end
end
redis.call('HSET', KEYS[2], ARGV[1], string.format('%d', expiry) .. '/' .. ARGV[3])
"""

LIVE_INCARNATIONS_SCRIPT = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', ms), '+inf')
local found = {}
for _, node in ipairs(live) do
  local beat = redis.call('HGET', KEYS[2], node)
  local incarnation = ''
  if beat then
    local until_ms, named = string.match(beat, '^(%d+)/(.*)$')
    if until_ms and tonumber(until_ms) > ms then incarnation = named end
  end
  table.insert(found, node)
  table.insert(found, incarnation)
end
return found
"""
"""Each live node and its incarnation ('' if none is known: a node of an older version, or one
whose last heartbeat with an incarnation has lapsed while it beats without, a rollback)."""

SUBMIT_SCORE_SCRIPT = """
local old = redis.call('HGET', KEYS[2], ARGV[1])
if old then
  local best = tonumber(redis.call('ZSCORE', KEYS[1], old))
  if best and tonumber(ARGV[3]) <= best then
    if redis.call('HGET', KEYS[3], ARGV[1]) == ARGV[2] then return 1 end
    return 0
  end
  redis.call('ZREM', KEYS[1], old)
end
local seq = redis.call('INCR', KEYS[4])
local member = string.format('%015d', 999999999999999 - seq) .. ':' .. ARGV[1]
redis.call('ZADD', KEYS[1], ARGV[3], member)
redis.call('HSET', KEYS[2], ARGV[1], member)
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
return 1
"""

TOP_SCORES_SCRIPT = """
local ranked = redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
local out = {}
for i = 1, #ranked, 2 do
  local player = string.sub(ranked[i], 17)
  out[#out + 1] = player
  out[#out + 1] = redis.call('HGET', KEYS[3], player) or ''
  out[#out + 1] = ranked[i + 1]
end
return out
"""


class RedisStore(Store):
    """The lobby, presence, leaderboards and bus in Redis (see the module docstring)."""

    shared = True

    def __init__(
        self, url: str, node_id: str, *, wait_replicas: int = 0, wait_timeout_ms: int = 100
    ) -> None:
        super().__init__(node_id)
        if wait_replicas < 0 or not 0 < wait_timeout_ms < COMMAND_TIMEOUT * 1000:
            raise ValueError(
                "wait_replicas must be 0 or more and wait_timeout_ms between 1 and "
                f"{int(COMMAND_TIMEOUT * 1000) - 1}"
            )
        self.wait_replicas = wait_replicas
        """Replicas that must hold a log entry before :meth:`append_log` returns (0: none)."""
        self.wait_timeout_ms = wait_timeout_ms
        self._refusing_writes = False
        """Redis refused a write (``MISCONF``): down until it answers the probe's PING (it
        serves reads meanwhile, which must not count as back: the health would flap)."""
        self._redis: Any = self._client(url)
        self._heartbeat = self._redis.register_script(HEARTBEAT_SCRIPT)
        self._latest_attach = self._redis.register_script(LATEST_ATTACH_SCRIPT)
        self._take_token = self._redis.register_script(TAKE_TOKEN_SCRIPT)
        self._live_incarnations = self._redis.register_script(LIVE_INCARNATIONS_SCRIPT)
        self._submit_score = self._redis.register_script(SUBMIT_SCORE_SCRIPT)
        self._top_scores = self._redis.register_script(TOP_SCORES_SCRIPT)
        self._acquire = self._redis.register_script(ACQUIRE_SCRIPT)
        self._forget = self._redis.register_script(FORGET_SCRIPT)
        self._renew = self._redis.register_script(RENEW_SCRIPT)
        self._append = self._redis.register_script(APPEND_SCRIPT)
        self._put_record = self._redis.register_script(PUT_RECORD_SCRIPT)
        self._release = self._redis.register_script(RELEASE_SCRIPT)
        self._take_back = self._redis.register_script(TAKE_BACK_SCRIPT)
        self._retire = self._redis.register_script(RETIRE_SCRIPT)
        self._put_snapshot = self._redis.register_script(PUT_SNAPSHOT_SCRIPT)
        self._locate = self._redis.register_script(LOCATE_SCRIPT)
        self._claim_daily = self._redis.register_script(CLAIM_DAILY_SCRIPT)
        self._pubsub: PubSub = self._new_pubsub()
        self._handlers: dict[str, list[Handler]] = {}
        self._confirmations: dict[str, asyncio.Future[None]] = {}
        self._subscriptions = asyncio.Lock()
        self._online = asyncio.Event()
        self._recovery_unannounced = False
        """Reconnected after an outage: ``on_bus_recovered`` is due at the PONG that follows."""
        self._retry_now = asyncio.Event()
        self._attempt_failed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self._batch: list[PendingAppend] = []
        self._committer: asyncio.Task[None] | None = None
        self._commit_link = CommitLink(url) if resp.supports(url) else None
        self._limit_link = CommitLink(url, TAKE_TOKEN_SCRIPT) if resp.supports(url) else None
        self._send_scheduled = False
        self._resending: set[asyncio.Task[None]] = set()
        self._lobby_behind: dict[str, tuple[int, LobbyRecord]] = {}
        """With ``wait_replicas``: tables whose lobby record could not be written, and the
        newest one to write (see :meth:`_put_lobby_record`)."""
        self._lobby_catching_up: asyncio.Task[None] | None = None
        self.health.listeners.append(self._retry_now.set)
        for link in (self._commit_link, self._limit_link):
            if link is not None:
                self.health.listeners.append(link.retry_now)

    def _client(self, url: str) -> aioredis.Redis:
        """The command client for ``url`` (fails fast: no retries, short timeouts)."""
        # A bounded pool that makes a burst of commands wait for a connection (for at most
        # COMMAND_TIMEOUT) instead of failing with "too many connections". Maintenance
        # notifications (a Redis Enterprise feature, "auto" by default) off: while they may be
        # on, redis-py 8 skips its check of a pooled connection before handing it out, so
        # after a Redis restart each stale connection failed the command sent on it.
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=POOL_SIZE,
            timeout=COMMAND_TIMEOUT,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=COMMAND_TIMEOUT,
            maint_notifications_config=MaintNotificationsConfig(enabled=False),
            **KEEP_NOTHING_QUEUED,
        )
        return aioredis.Redis(connection_pool=pool, retry=Retry(NoBackoff(), 0))

    def _new_pubsub(self) -> PubSub:
        """The pub/sub link (made once: it reconnects to the same server)."""
        return self._redis.pubsub()

    async def _pubsub_for_next_attempt(self) -> PubSub:
        """The pub/sub link the reader should connect next (the same one, for one server)."""
        return self._pubsub

    @staticmethod
    def _queue_script(
        pipe: Any, script: AsyncScript, keys: Sequence[str], args: Sequence[Any]
    ) -> None:
        """Queue a script call in a pipeline. EVAL sends the body (a few hundred bytes) but
        needs no SCRIPT EXISTS round trip first, and works where EVALSHA could meet a server
        that never saw the script (a promoted replica, another cluster node)."""
        pipe.execute_command("EVAL", script.script, len(keys), *keys, *args)

    async def _queue_wait(self, pipe: Any, key: str) -> Callable[[], bool]:
        """Queue ``WAIT`` on the connection that carries the write of ``key`` just queued;
        return a check that the write did go there (always true with one server)."""
        pipe.execute_command("WAIT", self.wait_replicas, self.wait_timeout_ms)
        return lambda: True

    @contextlib.contextmanager
    def _reaching(self) -> Iterator[None]:
        """Turn a lost or refused Redis connection into :class:`StoreUnavailable`, and tell the
        store's health how the call went."""
        try:
            yield
        except UNREACHABLE as error:
            self.health.failed(error)
            raise StoreUnavailable(f"redis: {error}") from error
        except redis.exceptions.ResponseError as error:
            if refuses_writes(error):
                self._refusing_writes = True
                self.health.failed(error)
                raise StoreUnavailable(f"redis: {error}") from error
            # Protected mode answers every command of a client from another host with DENIED.
            if not str(error).startswith("DENIED"):
                raise
            refused = StoreUnavailable(
                "redis: protected mode refuses clients from other hosts "
                "(run redis-server with --protected-mode no, a password or a bind address)"
            )
            self.health.failed(refused)
            raise refused from error
        if not self._refusing_writes:
            self.health.succeeded()

    async def ping(self) -> None:
        with self._reaching():
            async with asyncio.timeout(PROBE_TIMEOUT):
                await self._redis.ping()
            self._refusing_writes = False  # (PING is refused as writes are)

    async def start(self) -> None:
        """Start the pub/sub reader; Redis need not be up yet (it connects when it can)."""
        if self._reader is None:
            self._reader = asyncio.create_task(self._read_forever(), name="redis-store-pubsub")

    async def close(self) -> None:
        """Stop the pub/sub reader and close every connection."""
        # The reader takes a lost cancellation for a quiet link and reads on (see
        # blackdrez.server.tasks).
        tasks = [
            t
            for t in (self._reader, self._committer, self._lobby_catching_up, *self._resending)
            if t is not None
        ]
        await cancel_until_done(tasks)
        self._reader = None
        queued, self._batch = self._batch, []
        _settle(queued, [StoreUnavailable("redis: the store closed")] * len(queued))
        for link in (self._commit_link, self._limit_link):
            if link is not None:
                link.close()
        self.health.close()
        self._online.clear()
        self._handlers.clear()
        with contextlib.suppress(*UNREACHABLE):
            await self._pubsub.aclose()
        with contextlib.suppress(*UNREACHABLE):
            await self._redis.aclose()
        # The client does not own the pool it was given: its connections stay open otherwise.
        pool = getattr(self._redis, "connection_pool", None)  # (a cluster client has none)
        if pool is not None:
            with contextlib.suppress(*UNREACHABLE):
                await pool.disconnect()

    # ------------------------------------------------------------------ secrets
    async def shared_secret(self, proposed: bytes) -> bytes:
        return (await self._offer_secret(proposed))[1]

    async def restore_secret(self, secret: bytes) -> bytes | None:
        return (await self._offer_secret(secret))[0]

    async def _offer_secret(self, secret: bytes) -> tuple[bytes | None, bytes]:
        """Write ``secret`` unless one is stored, in one transaction: the secret stored before
        (``None``: none) and the one stored now."""
        try:
            with self._reaching():
                async with self._redis.pipeline(transaction=True) as pipe:
                    pipe.get(SECRET_KEY)
                    pipe.set(SECRET_KEY, secret, nx=True)
                    pipe.get(SECRET_KEY)
                    before, _, now = await pipe.execute()
        except redis.exceptions.ResponseError as error:  # an error reply, not a lost link
            raise StoreRefused(str(error)) from error
        return before, now

    # ------------------------------------------------------------------ lobby records
    async def put_table(
        self, table_id: str, node_id: str, record: bytes, listed: bool, token: int | None = None
    ) -> None:
        flag = "1" if listed else "0"
        with self._reaching():
            if token is None:
                fields = {"node": node_id, "record": record, "listed": flag}
                await self._redis.hset(table_key(table_id), mapping=fields)
            else:
                written = await self._put_record(
                    keys=[lease_key(table_id), table_key(table_id)],
                    args=[self._holder(token), node_id, record, flag],
                )
                if not written:
                    raise LeaseLost(table_id)
            # The lobby set lives in another slot: a second step (listings drop stale ids).
            if listed:
                await self._redis.sadd(LOBBY_KEY, table_id)
            else:
                await self._redis.srem(LOBBY_KEY, table_id)

    async def get_table(self, table_id: str) -> tuple[str, bytes] | None:
        with self._reaching():
            node, record = await self._redis.hmget(table_key(table_id), ["node", "record"])
        if node is None or record is None:
            return None
        return node.decode(), record

    async def remove_table(self, table_id: str) -> None:
        # The lobby set lives in another slot: not one transaction (listings drop stale ids).
        with self._reaching():
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.delete(table_key(table_id))
                pipe.srem(LOBBY_KEY, table_id)
                await pipe.execute()

    async def all_tables(self) -> list[tuple[str, str, bytes]]:
        with self._reaching():
            table_ids = sorted(await self._hosted(None))
            async with self._redis.pipeline(transaction=False) as pipe:
                for table_id in table_ids:
                    pipe.hmget(table_key(table_id), ["node", "record"])
                found = await pipe.execute() if table_ids else []
        return [
            (table_id, node.decode(), record)
            for table_id, (node, record) in zip(table_ids, found, strict=True)
            if node is not None and record is not None
        ]

    async def list_tables(self) -> list[bytes]:
        with self._reaching():
            table_ids = sorted(raw.decode() for raw in await self._redis.smembers(LOBBY_KEY))
            if not table_ids:
                return []
            async with self._redis.pipeline(transaction=False) as pipe:
                for table_id in table_ids:
                    pipe.hget(table_key(table_id), "record")
                records = await pipe.execute()
            vanished = [
                tid for tid, record in zip(table_ids, records, strict=True) if record is None
            ]
            if vanished:
                await self._redis.srem(LOBBY_KEY, *vanished)
        return [record for record in records if record is not None]

    # ------------------------------------------------------------------ hosting
    def _holder(self, token: int) -> str:
        return holder_value(self.node_id, self.incarnation, token)

    async def acquire_lease(self, table_id: str, ttl: float) -> int | None:
        """See :meth:`Store.acquire_lease`. The table's id goes into the hosted index in the
        same transaction as the lease and epoch: an id leased where no orphan scan could find
        it would keep its keys for good once its node died. (The index entry of a lease not
        taken is removed by the next scan, which finds the id gone.)"""
        keys = [lease_key(table_id), epoch_key(table_id), state_key(table_id)]
        with self._reaching():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.sadd(hosted_key(bucket_of(table_id)), table_id)
                self._queue_script(pipe, self._acquire, keys, self._acquire_args(ttl))
                _, token = await pipe.execute()
        return int(token) or None

    def _acquire_args(self, ttl: float) -> list[Any]:
        return [self.node_id, self.incarnation, int(ttl * 1000)]

    async def renew_leases(self, leases: dict[str, int], ttl: float) -> set[str]:
        """See :meth:`Store.renew_leases`: one script call per :data:`MAX_RENEWALS` leases (a
        node renews all of its leases several times a second), all in one round trip."""
        if not leases:
            return set()
        groups = self._renewal_groups(list(leases))
        with self._reaching():
            async with self._redis.pipeline(transaction=False) as pipe:
                for group in groups:
                    holders = [self._holder(leases[table_id]) for table_id in group]
                    keys = [lease_key(table_id) for table_id in group]
                    self._queue_script(pipe, self._renew, keys, [int(ttl * 1000), *holders])
                replies = await pipe.execute()
        pairs = zip(groups, replies, strict=True)
        return {group[int(index) - 1] for group, lost in pairs for index in lost}

    def _renewal_groups(self, tables: list[str]) -> list[list[str]]:
        """The tables whose leases one script call renews (one Redis holds every key)."""
        return [tables[i : i + MAX_RENEWALS] for i in range(0, len(tables), MAX_RENEWALS)]

    async def release_lease(self, table_id: str, token: int) -> None:
        with self._reaching():
            await self._release(keys=[lease_key(table_id)], args=[self._holder(token)])

    def _locate_keys(self, table_id: str) -> list[str]:
        return [lease_key(table_id), state_key(table_id), log_key(table_id), table_key(table_id)]

    def _forget_keys(self, table_id: str) -> list[str]:
        return [*self._locate_keys(table_id), epoch_key(table_id), snapshot_key(table_id)]

    def _location(self, found: list[bytes]) -> Location:
        where = Whereabouts(found[0].decode())
        if where is not Whereabouts.HOSTED:
            return Location(where)
        node_id, incarnation, _ = found[1].decode().rsplit("/", 2)
        return Location(where, node_id, incarnation)

    async def locate(self, table_id: str) -> Location:
        with self._reaching():
            found = await self._locate(keys=self._locate_keys(table_id))
        return self._location(found)

    async def _hosted(self, share: Share | None) -> set[str]:
        """The ids in the hosted index of ``share``'s buckets (and of the legacy set, in
        ``share``): a node reads its share only. (Two calls: a cluster pipeline refuses
        ``SUNION``.)"""
        members = await self._redis.sunion([hosted_key(bucket) for bucket in share_buckets(share)])
        legacy = await self._redis.smembers(LEGACY_HOSTED_KEY)
        hosted = {raw.decode() for raw in members}
        return hosted | {t for raw in legacy if in_share(t := raw.decode(), share)}

    async def adoptable_tables(
        self, share: Share | None = None, held: Collection[str] = ()
    ) -> list[str]:
        with self._reaching():
            hosted = sorted(await self._hosted(share) - set(held))
            if not hosted:
                return []
            found: list[Any] = []
            for start in range(0, len(hosted), SCAN_CHUNK):  # the loop runs between chunks
                async with self._redis.pipeline(transaction=False) as pipe:
                    for table_id in hosted[start : start + SCAN_CHUNK]:
                        self._queue_script(pipe, self._locate, self._locate_keys(table_id), [])
                    found += await pipe.execute()
            places = {t: self._location(f) for t, f in zip(hosted, found, strict=True)}
            gone = [t for t, p in places.items() if p.where in (CLOSED, UNKNOWN)]
            if gone:
                async with self._redis.pipeline(transaction=False) as pipe:
                    for table_id in gone:
                        pipe.srem(hosted_key(bucket_of(table_id)), table_id)
                        if places[table_id].where is UNKNOWN:  # leased, never logged
                            self._queue_script(pipe, self._forget, self._forget_keys(table_id), [])
                    pipe.srem(LEGACY_HOSTED_KEY, *gone)
                    await pipe.execute()
        return [
            table_id
            for table_id, place in places.items()
            if place.where is Whereabouts.MOVING
            or (place.node == self.node_id and (place.incarnation or "") < self.incarnation)
        ]

    async def append_log(
        self,
        table_id: str,
        token: int,
        position: int,
        entry: bytes,
        channel: str = "",
        announce: bytes | None = None,
        lobby: LobbyRecord | None = None,
        logged: Callable[[], None] | None = None,
    ) -> bool:
        """See :meth:`Store.append_log`; the append waits for the group commit (module
        docstring) and its outcome is this table's own. ``logged`` is called from the callback
        that settles the batch (:func:`_settle`), a turn of the event loop before this returns.
        Not heard: the script's ``PUBLISH`` reached no subscriber (on one Redis, every
        subscriber of the channel; a cluster's stores say heard, see ``redis_cluster``)."""
        if self.wait_replicas:
            await self._append_durably(table_id, token, position, entry, channel, announce)
            if lobby is not None:  # replicated: only now may the lobby show it
                await self._put_lobby_record(table_id, token, lobby)
            return True  # (``logged``: the caller's call right after is as early)
        args = [self._holder(token), position, entry]
        args += [channel, announce] if announce is not None else NO_ANNOUNCEMENT
        if lobby is None:
            args += NO_LOBBY_RECORD
        else:
            args += [lobby.node, lobby.record, "1" if lobby.listed else "0"]
            args += [lobby.channel, lobby.announce] if lobby.announce is not None else ["", b""]
        pending = PendingAppend(table_id, args, asyncio.get_running_loop().create_future(), logged)
        self._batch.append(pending)
        if self._committer is None and not self._send_scheduled:
            if self._commit_link is None:
                self._start_committer()
            else:
                self._send_scheduled = True
                asyncio.get_running_loop().call_soon(self._send_queued)
        written = await pending.done
        self._check_appended(table_id, token, position, written)
        return written != UNHEARD

    def _start_committer(self) -> None:
        self._committer = asyncio.create_task(self._commit_batches(), name="redis-group-commit")

    def _send_queued(self) -> None:
        """On the commit link, from the turn after the first append queued: what queued goes
        out at once, without waiting for the replies of batches still out (pipelined), and each
        reply settles its appends from the callback that read it. No connection open: the
        committer opens one and sends batch after batch until nothing is left."""
        self._send_scheduled = False
        assert self._commit_link is not None
        while self._batch and self._committer is None:
            batch, self._batch = self._batch[:MAX_BATCH], self._batch[MAX_BATCH:]
            keys, args = _keys_and_args(batch)
            if not self._commit_link.send(keys, args, functools.partial(self._replied, batch)):
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
            with self._reaching():
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
        with self._reaching():
            if self._commit_link is None:  # a TLS URL: redis-py's pool carries the call
                return list(await self._append(keys=keys, args=args))
            return await self._commit_link.append(keys, args, load)

    @staticmethod
    def _check_appended(table_id: str, token: int, position: int, written: int) -> None:
        if written == 0:
            raise LeaseLost(f"{table_id}: the lease is not held with token {token}")
        if written < 0:
            raise LeaseLost(f"{table_id}: the log is not at entry {position - 1}")

    async def _append_durably(
        self,
        table_id: str,
        token: int,
        position: int,
        entry: bytes,
        channel: str,
        announce: bytes | None,
    ) -> None:
        """The append, then ``WAIT`` for ``wait_replicas`` replicas on the same connection (one
        round trip), then the announcement: nothing is acknowledged or seen that a failover
        could lose. Too few replicas in time: the entry is taken back (:data:`TAKE_BACK_SCRIPT`),
        then :class:`StoreUnavailable`: nothing changed, as the host tells its player, and its
        next write takes the same position. (Before, the entry stayed in the log: the player
        was told ``unavailable`` for an action the table then played, and the host's next
        write, fenced out by the log's position, had the table adopted again, at every refused
        action.) An entry that cannot be taken back (Redis gone meanwhile) may stay: the log
        position fences the host's next write, and the table is adopted again from the log."""
        keys = [lease_key(table_id), log_key(table_id), table_key(table_id)]
        with self._reaching():
            async with self._redis.pipeline(transaction=False) as pipe:
                args = [self._holder(token), position, entry, *NO_ANNOUNCEMENT, *NO_LOBBY_RECORD]
                self._queue_script(pipe, self._append, keys, args)  # a batch of one
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
        if announce is not None:
            # Logged and replicated: a lost announcement costs viewers one update, which the
            # next one's sequence number reveals; it does not undo the acknowledged command.
            with contextlib.suppress(StoreUnavailable), self._reaching():
                await self._redis.publish(channel, announce)

    async def _take_back_entry(self, table_id: str, token: int, position: int) -> bool:
        """Take back the entry at ``position`` of a table's log (:data:`TAKE_BACK_SCRIPT`);
        whether it was (never the create entry: a table whose creation failed is dropped)."""
        if position <= 1:
            return False
        keys, args = [lease_key(table_id), log_key(table_id)], [self._holder(token), position]
        try:
            with self._reaching():
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
        await self.put_table(table_id, lobby.node, lobby.record, lobby.listed, token)
        if lobby.announce is not None:
            with contextlib.suppress(StoreUnavailable):  # listings read the record anyway
                await self.publish(lobby.channel, lobby.announce)

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
                await self.health.wait_up()
        finally:
            self._lobby_catching_up = None

    async def read_log(self, table_id: str, after: int = 0) -> list[bytes]:
        with self._reaching():
            entries = await self._redis.xrange(log_key(table_id), min=f"{after + 1}-0")
        return [fields[b"e"] for _, fields in entries]

    async def put_snapshot(self, table_id: str, token: int, position: int, data: bytes) -> None:
        with self._reaching():
            written = await self._put_snapshot(
                keys=[lease_key(table_id), snapshot_key(table_id)],
                args=[self._holder(token), position, data],
            )
        if not written:
            raise LeaseLost(table_id)

    async def read_snapshot(self, table_id: str) -> tuple[int, bytes] | None:
        with self._reaching():
            position, data = await self._redis.hmget(snapshot_key(table_id), ["position", "data"])
        if position is None or data is None:
            return None
        return int(position), data

    async def retire_table(
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
        with self._reaching():
            retired = await self._retire(
                keys=keys, args=[self._holder(token), max(1, int(keep * 1000)), record]
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
        with self._reaching():
            return await self._redis.get(game_key(table_id))

    # ------------------------------------------------------------------ players
    async def add_player_table(self, player: str, table_id: str) -> None:
        with self._reaching():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.sadd(player_tables_key(player), table_id)
                pipe.expire(player_tables_key(player), PLAYER_TABLES_TTL)
                await pipe.execute()

    async def remove_player_table(self, player: str, table_id: str) -> None:
        with self._reaching():
            await self._redis.srem(player_tables_key(player), table_id)

    async def player_tables(self, player: str) -> list[str]:
        with self._reaching():
            members = await self._redis.smembers(player_tables_key(player))
        return sorted(member.decode() for member in members)

    async def next_attach(self, player: str) -> int:
        with self._reaching():
            order = int(await self._redis.incr(ATTACHES_KEY))
            await self._latest_attach(
                keys=[latest_attach_key(player)], args=[order, PLAYER_TABLES_TTL * 1000]
            )
        return order

    async def take_token(self, kind: str, key: str, rate: float, burst: int) -> float:
        keys, args = [limit_key(kind, key)], [repr(float(rate)), int(burst)]
        with self._reaching():
            if self._limit_link is not None:  # (a handshake's: redis-py's call cost 0.2 ms)
                wait_ms = await self._limit_link.append(keys, args)
            else:
                wait_ms = await self._take_token(keys=keys, args=args)
        return int(wait_ms) / 1000

    async def latest_attaches(self, players: list[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        with self._reaching():
            for start in range(0, len(players), READ_CHUNK):
                group = players[start : start + READ_CHUNK]
                async with self._redis.pipeline(transaction=False) as pipe:
                    for player in group:
                        pipe.get(latest_attach_key(player))
                    orders = await pipe.execute()
                found |= {p: int(o) for p, o in zip(group, orders, strict=True) if o is not None}
        return found

    # ------------------------------------------------------------------ presence
    async def heartbeat(self, ttl: float) -> None:
        with self._reaching():
            await self._heartbeat(
                keys=[NODES_KEY, INCARNATIONS_KEY],
                args=[self.node_id, round(ttl * 1000), self.incarnation],
            )

    async def live_incarnations(self) -> dict[str, str | None]:
        with self._reaching():
            found = await self._live_incarnations(keys=[NODES_KEY, INCARNATIONS_KEY])
        return {
            node.decode(): incarnation.decode() or None
            for node, incarnation in zip(found[::2], found[1::2], strict=True)
        }

    # ------------------------------------------------------------------ leaderboards
    async def submit_score(self, board: str, player: str, entry: bytes, score: int) -> bool:
        with self._reaching():
            placed = await self._submit_score(
                keys=leaderboard_keys(board), args=[player, entry, score]
            )
        return bool(placed)

    async def top_scores(self, board: str, limit: int) -> list[tuple[str, bytes, int]]:
        if limit <= 0:
            return []
        with self._reaching():
            flat = await self._top_scores(keys=leaderboard_keys(board), args=[limit])
        return [
            (flat[i].decode(), bytes(flat[i + 1]), int(float(flat[i + 2])))
            for i in range(0, len(flat), 3)
        ]

    async def keep_record(self, game_id: str, data: bytes, ttl: float | None = None) -> None:
        with self._reaching():
            expiry = None if ttl is None else max(1, int(ttl * 1000))
            await self._redis.set(kept_record_key(game_id), data, px=expiry)

    async def kept_record(self, game_id: str) -> bytes | None:
        with self._reaching():
            data = await self._redis.get(kept_record_key(game_id))
        return None if data is None else bytes(data)

    async def daily_seed(self, game: str, day: str, candidate: str | None) -> str | None:
        key = daily_key(game, day)
        with self._reaching():
            if candidate is None:
                kept = await self._redis.get(key)
                return None if kept is None else kept.decode()
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.set(key, candidate, nx=True)
                pipe.get(key)
                _, seed = await pipe.execute()
        return seed.decode()

    async def claim_daily(
        self, game: str, day: str, player: str, table: str, keep: float
    ) -> str | None:
        key = daily_key(game, day)
        with self._reaching():
            ranked = await self._claim_daily(
                keys=[f"{key}:players", f"{key}:ranked"],
                args=[player, table, max(1, int(keep * 1000))],
            )
        return None if ranked is None else ranked.decode()

    async def daily_table(self, game: str, day: str, player: str) -> str | None:
        with self._reaching():
            ranked = await self._redis.hget(f"{daily_key(game, day)}:ranked", player)
        return None if ranked is None else ranked.decode()

    # ------------------------------------------------------------------ bus
    async def publish(self, channel: str, data: bytes) -> None:
        with self._reaching():
            await self._redis.publish(channel, data)

    async def subscribe(self, channel: str, handler: Handler) -> None:
        try:
            async with asyncio.timeout(SUBSCRIBE_TIMEOUT):
                if channel not in self._handlers:
                    await self._wait_online()
                async with self._subscriptions:
                    await self._add_handler(channel, handler)
        except TimeoutError as error:
            raise StoreUnavailable(f"redis: cannot subscribe to {channel}") from error

    async def _add_handler(self, channel: str, handler: Handler) -> None:
        """Register ``handler``; on a new channel, subscribe and wait for Redis's confirmation."""
        handlers = self._handlers.get(channel)
        if handlers is not None:
            handlers.append(handler)
            return
        self._handlers[channel] = [handler]
        confirmed = asyncio.get_running_loop().create_future()
        self._confirmations[channel] = confirmed
        try:
            await self._send_on_pubsub("SUBSCRIBE", channel)
            await confirmed
        except BaseException:
            # Not confirmed: drop the handler so a later reconnection does not subscribe it.
            del self._handlers[channel]
            raise
        finally:
            del self._confirmations[channel]
            if confirmed.done() and not confirmed.cancelled():
                confirmed.exception()  # retrieved: the reader may have failed it after our error

    async def unsubscribe(self, channel: str, handler: Handler) -> None:
        """Stop calling ``handler``; never unavailable, as a lost link drops the subscription."""
        async with self._subscriptions:
            handlers = self._handlers.get(channel)
            if not handlers or handler not in handlers:
                return
            handlers.remove(handler)
            if handlers:
                return
            del self._handlers[channel]
            # On failure the reader reconnects and subscribes only the channels with handlers.
            with contextlib.suppress(StoreUnavailable):
                await self._send_on_pubsub("UNSUBSCRIBE", channel)

    async def _wait_online(self) -> None:
        """Wake the reader from its backoff and wait for its next attempt to connect."""
        if self._online.is_set():
            return
        if self._reader is None:
            raise StoreUnavailable("redis: store not started")
        self._attempt_failed.clear()
        self._retry_now.set()
        online = asyncio.ensure_future(self._online.wait())
        failed = asyncio.ensure_future(self._attempt_failed.wait())
        try:
            await asyncio.wait([online, failed], return_when=asyncio.FIRST_COMPLETED)
        finally:
            online.cancel()
            failed.cancel()
        if not self._online.is_set():
            raise StoreUnavailable("redis: pub/sub connection is down")

    async def _send_on_pubsub(self, *command: str) -> None:
        """Send a command on the live pub/sub connection; only the reader may (re)connect it."""
        connection = self._pubsub.connection
        if not self._online.is_set() or connection is None or not connection.is_connected:
            raise StoreUnavailable("redis: pub/sub connection is down")
        try:  # only written: Redis answers the reader, so it is no sign that Redis is up
            await self._pubsub.execute_command(*command)
        except UNREACHABLE as error:
            self.health.failed(error)
            raise StoreUnavailable(f"redis: {error}") from error

    # ------------------------------------------------------------------ pub/sub reader
    async def _read_forever(self) -> None:
        """Keep the pub/sub connection up and dispatch what it receives, until cancelled."""
        delays = RECONNECT_BACKOFF.delays()
        outage = False
        while True:
            try:
                await self._connect_pubsub(announce=outage)
                delays = RECONNECT_BACKOFF.delays()
                outage = True  # whatever ends the next dispatch is one
                await self._dispatch_until_lost()
            except UNREACHABLE as error:
                # Warn once per outage, not at every failed attempt while Redis is down.
                level = logging.WARNING if self._online.is_set() else logging.DEBUG
                self._online.clear()
                log.log(level, "redis pub/sub connection lost: %s; reconnecting", error)
            except Exception as error:
                self._online.clear()
                if lost_connection(error):  # (redis-py failing again while it cleans up)
                    log.warning("redis pub/sub connection lost: %r; reconnecting", error)
                else:
                    log.exception("redis pub/sub reader failed; reconnecting")
            self._retry_now.clear()  # a wake from before this failure was answered by it
            self._attempt_failed.set()
            for confirmed in self._confirmations.values():
                if not confirmed.done():
                    confirmed.set_exception(StoreUnavailable("redis: pub/sub connection lost"))
            async with self._subscriptions:
                if self._pubsub.connection is not None:
                    with contextlib.suppress(*UNREACHABLE):
                        await self._pubsub.connection.disconnect(nowait=True)
            # At most one attempt per first delay however often the reader is woken.
            first = RECONNECT_BACKOFF.first / 2
            await asyncio.sleep(first)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, next(delays) - first)):
                    await self._retry_now.wait()

    async def _connect_pubsub(self, announce: bool) -> None:
        """Connect and subscribe every channel that has handlers; to ``announce`` a recovery,
        also PING: its PONG comes after every subscription is confirmed, and only then is
        ``on_bus_recovered`` called (what was published before that, it must fetch; what is
        published after, the handlers hear)."""
        async with self._subscriptions:
            self._pubsub = await self._pubsub_for_next_attempt()
            await self._pubsub.connect()
            if self._handlers:
                await self._pubsub.execute_command("SUBSCRIBE", *self._handlers)
            if announce:
                await self._pubsub.execute_command("PING")
            self._recovery_unannounced = announce
            self._online.set()

    async def _dispatch_until_lost(self) -> None:
        """Read messages and hand them to their handlers until the connection fails."""
        loop = asyncio.get_running_loop()
        awaiting_pong = False
        while True:
            connection = self._pubsub.connection
            if connection is None or not connection.is_connected:
                # Someone else's failed command closed it; reconnecting here would not resubscribe.
                raise redis.exceptions.ConnectionError("pub/sub connection closed")
            try:
                message = await self._pubsub.get_message(timeout=KEEPALIVE)
            except redis.exceptions.ResponseError as error:
                if not refuses_writes(error):
                    raise
                # Redis answered a PING by refusing it, as it refuses writes while it cannot
                # persist them: the link is alive, and the answer counts as the pong.
                message = {"type": "pong"}
            if message is None:
                if awaiting_pong:
                    raise redis.exceptions.ConnectionError("no reply to PING")
                await self._pubsub.execute_command("PING")
                awaiting_pong = True
                continue
            awaiting_pong = False
            kind = message["type"]
            if kind == "message":
                channel = message["channel"].decode()
                for handler in self._handlers.get(channel, ()):
                    loop.call_soon(handler, message["data"])
            elif kind == "subscribe":
                confirmed = self._confirmations.get(message["channel"].decode())
                if confirmed is not None and not confirmed.done():
                    confirmed.set_result(None)
            elif kind == "pong" and self._recovery_unannounced:
                self._recovery_unannounced = False
                if self.on_bus_recovered is not None:
                    loop.call_soon(self.on_bus_recovered)

    # ------------------------------------------------------------------ revoked session tokens
    async def revoke_token(self, token_id: str, ttl: float) -> None:
        """``bd:revoked:{TOKEN}`` (string), expiring with the token itself."""
        with self._reaching():
            await self._redis.set(revoked_key(token_id), b"1", px=max(1, round(ttl * 1000)))

    async def token_revoked(self, token_id: str) -> bool:
        with self._reaching():
            return bool(await self._redis.exists(revoked_key(token_id)))


def revoked_key(token_id: str) -> str:
    """The key whose presence says a session token was revoked (it expires with the token)."""
    return f"bd:revoked:{{{token_id}}}"


UNHEARD = 2
"""``APPEND_SCRIPT``'s outcome for an entry written whose announcement reached no subscriber."""

NO_ANNOUNCEMENT: list[Any] = ["", b""]
"""An append's channel and announcement when it announces nothing."""

NO_LOBBY_RECORD: list[Any] = ["", b"", "", "", b""]
"""An append's node, record, listed flag, lobby channel and announcement when its lobby record
stays as it is."""


class PendingAppend:
    """A log append waiting for the group commit: its keys, script arguments and outcome."""

    __slots__ = ("args", "done", "keys", "logged", "table_id")

    def __init__(
        self,
        table_id: str,
        args: list[Any],
        done: asyncio.Future[int],
        logged: Callable[[], None] | None = None,
    ) -> None:
        self.table_id = table_id
        self.keys = [lease_key(table_id), log_key(table_id), table_key(table_id)]
        self.args = args
        self.done = done
        self.logged = logged


def _keys_and_args(batch: Sequence[PendingAppend]) -> tuple[list[str], list[Any]]:
    """The keys and arguments of one ``APPEND_SCRIPT`` call for ``batch``."""
    keys = [key for pending in batch for key in pending.keys]
    return keys, [arg for pending in batch for arg in pending.args]


def _settle(batch: Sequence[PendingAppend], outcomes: Sequence[int | BaseException]) -> None:
    """Hand each waiting append its own outcome (one whose caller gave up is skipped); a
    logged one's ``logged`` callback first, here, not a turn later in its awaiting caller."""
    for pending, outcome in zip(batch, outcomes, strict=True):
        if pending.done.done():
            continue
        if isinstance(outcome, BaseException):
            pending.done.set_exception(outcome)
            continue
        written = int(outcome)
        if written > 0 and pending.logged is not None:
            try:
                pending.logged()
            except Exception:  # a bug of the caller's: the other appends are still settled
                log.exception("the logged callback of an append to %s failed", pending.table_id)
        pending.done.set_result(written)


class CommitLink:
    """A script's own connection to one Redis: ``EVALSHA`` of ``script`` (the group commit's
    ``APPEND_SCRIPT``; the rate limits' ``TAKE_TOKEN_SCRIPT``) on a
    :class:`~blackdrez.server.stores.resp.RespConnection`, opened on demand and again after a
    failure on
    :data:`RECONNECT_BACKOFF` (see "Group commit" in the module docstring): no pool, no
    redis-py encoder, a fraction of the CPU of redis-py's call."""

    def __init__(self, url: str, script: str = APPEND_SCRIPT) -> None:
        self._url = url
        self._connection: resp.RespConnection | None = None
        self._delays = RECONNECT_BACKOFF.delays()
        self._not_before = 0.0
        self._closed = False
        self._load = [b"SCRIPT", b"LOAD", script.encode()]
        self._sha = hashlib.sha1(script.encode()).hexdigest().encode()

    def retry_now(self) -> None:
        """Redis answers again: the next batch connects at once, whatever the backoff said."""
        self._not_before = 0.0

    def send(self, keys: list[str], args: list[Any], then: resp.Then) -> bool:
        """Run ``APPEND_SCRIPT`` on the open connection, ``then`` getting the reply or failure
        (see :meth:`~server.stores.resp.RespConnection.call_then`). False, nothing sent, when
        no connection is open: :meth:`append` opens one."""
        connection = self._connection
        if connection is None or connection.lost:
            return False
        command = [b"EVALSHA", self._sha, len(keys), *keys, *args]
        connection.call_then(command, COMMAND_TIMEOUT, then)
        return True

    async def append(self, keys: list[str], args: list[Any], load: bool = False) -> Any:
        """Run the script with ``keys`` and ``args``: its reply. Raises what
        :class:`~blackdrez.server.stores.resp.RespConnection` raises (redis-py's exceptions).
        ``load``:
        Redis said it forgot the script: load it first, in the same round trip."""
        connection = self._connection
        if connection is None or connection.lost:
            connection = await self._connect()
        command = [b"EVALSHA", self._sha, len(keys), *keys, *args]
        if not load:
            try:
                return await connection.call(command, COMMAND_TIMEOUT)
            except redis.exceptions.NoScriptError:
                pass  # Redis lost its scripts but not this connection (SCRIPT FLUSH): nothing ran
        loaded = connection.call(self._load, COMMAND_TIMEOUT)
        _, written = await asyncio.gather(loaded, connection.call(command, COMMAND_TIMEOUT))
        return written

    async def _connect(self) -> resp.RespConnection:
        """A new connection with the script loaded (a restarted Redis has forgotten it)."""
        if self._closed:
            raise redis.exceptions.ConnectionError("the store is closed")
        loop = asyncio.get_running_loop()
        if loop.time() < self._not_before:
            raise redis.exceptions.ConnectionError("redis: waiting to reconnect (backoff)")
        try:
            connection = await resp.RespConnection.open(
                self._url, CONNECT_TIMEOUT, unacked=UNACKED_TIMEOUT
            )
            try:
                await connection.call(self._load, COMMAND_TIMEOUT)
            except BaseException:
                connection.close()
                raise
        except BaseException:
            self._not_before = loop.time() + next(self._delays)
            raise
        self._delays = RECONNECT_BACKOFF.delays()
        self._connection = connection
        return connection

    def close(self) -> None:
        """Close the connection for good: later appends fail."""
        self._closed = True
        if self._connection is not None:
            self._connection.close()
