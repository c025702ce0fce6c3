"""The Redis store on a Redis Cluster: the same keys and scripts, spread over shards.

Theory of operation
-------------------
``blackdrez serve --redis-url redis+cluster://HOST:PORT[,HOST:PORT...]`` runs the stores of
:mod:`blackdrez.server.stores.redis` on a Redis Cluster through redis-py's asyncio
``RedisCluster`` (:func:`cluster_stores`): the seed nodes are only where it learns the cluster's
map of slots, and it follows the map as masters fail over or slots move. Everything in
:mod:`blackdrez.server.stores.redis` holds; what a cluster adds (:class:`ClusterLink`,
:class:`ClusterLeases`, :class:`ClusterTableLogs`, :class:`ClusterBus`):

Keys and slots. Every key of one table carries the table id as a hash tag (``bd:t:{T}:...``), so
a table's lease, epoch, log, record, snapshot, state and game record share one slot, and every
Lua script (acquire, renew, append, put-record, put-snapshot, release, retire, locate) names keys
of one table only (a batch of appends or of lease renewals: of one slot, see "Group commit"
below). A player's set (``bd:p:{P}:tables``) and a game's leaderboard keys (``bd:lb:{G}...``)
are one slot each too. The cross-table structures are each one key, so each lives in one slot
on purpose:

* ``bd:{hosted}:B`` (every live table's id, in 1,024 buckets of one slot), read by the orphan
  scan, each node one ``SUNION`` of its share's buckets;
* ``bd:lobby:tables`` (the listed tables' ids), read by every lobby listing;
* ``bd:nodes`` (one member per server node), ``bd:secret`` (one value).

They hold ids, not data: 250,000 live tables (a million seated players at four a table) make a
hosted index of about 14 MB (measured, with our 11-character ids, as one set), and the listed
(waiting) tables are a small share of those. One slot per index keeps each read one command; the
per-table reads that follow a listing or a scan are pipelined, and a cluster pipeline sends each
master its own share in parallel. The price: these keys live on at most four masters, which see
more traffic than the others. The orphan scan reads a node's share of the hosted index only (its
buckets, the same hash as its share of the tables), so all the nodes together read the index
once per full scan, not once each (as one set, a thousand nodes would have read 14 MB each every
10 s); the LOCATE per table of its share follows, spread over the tables' slots.

Writes to these indexes are a second step after the table's own script (they are in other slots):
every reader already tolerates an id whose table is gone, so nothing needs a cross-slot
transaction. Single-slot transactions (the secret, a player's set with its TTL) stay MULTI/EXEC.

Pipelined scripts are sent as EVAL (a cluster pipeline refuses EVALSHA, and a replica promoted
by a failover may not have the script cached). Commands fail fast as on one Redis: no retries
(``Retry(NoBackoff(), 0)``); a refused connection or ``CLUSTERDOWN`` is
:class:`~blackdrez.server.stores.base.StoreUnavailable`, and the client rereads the slot map
before its next command, so once a replica has taken over a dead master's slots the next call
reaches it. The health probe pings every master: the store is up again when all of them answer.

Pub/sub. ``PUBLISH`` on a cluster reaches the subscribers of every node (the cluster bus forwards
each message to all nodes), and so does the ``PUBLISH`` inside the append script, which runs on
the table's master. So the bus needs one pub/sub connection to any node: the reader takes the
nodes of the slot map in turn (masters and replicas alike), and when its node dies it connects
the next one and subscribes every channel again, like after an outage of one Redis. Sharded
pub/sub (``SPUBLISH``/``SSUBSCRIBE``, Redis 7) would keep a table's updates inside its shard but
needs a connection per shard and resubscription when a slot moves. Broadcasting costs every
node of the cluster one message per update: small beside the log write for a few shards (see
``docs/benchmarks.md``), but it does not shrink as shards are added, so past some tens of
thousands of actions/s across the cluster sharded pub/sub is the next step.

Group commit. The batch of log appends of :mod:`blackdrez.server.stores.redis_tables` is split
by master and sent to every master at once, each its own cluster pipeline of one script call per
slot (a script may name the keys of one slot only). Each master's share succeeds or fails on its
own: a dead master fails the appends of its tables (their hosts undo those commands), not those
of the others.

Durability. With ``wait_replicas`` (``--redis-wait-replicas``) a log append is followed, on the
same connection of the table's master, by ``WAIT``: see
:meth:`~blackdrez.server.stores.redis_tables.RedisTableLogs.append`. Without it, Redis
replicates asynchronously and a master killed before its replica received an acknowledged append
loses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import traceback
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import PRIMARY, ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from blackdrez.server.stores.base import (
    Bus,
    Lobby,
    PartlyRenewed,
    Stores,
    StoreUnavailable,
    bucket_of,
)
from blackdrez.server.stores.keys import epoch_key, hosted_key, lease_key, state_key
from blackdrez.server.stores.redis import RedisLobby, check_wait, redis_bundle
from blackdrez.server.stores.redis_bus import RedisBus
from blackdrez.server.stores.redis_link import (
    COMMAND_TIMEOUT,
    CONNECT_TIMEOUT,
    KEEP_NOTHING_QUEUED,
    PROBE_TIMEOUT,
    UNREACHABLE,
    RedisLink,
    queue_script,
)
from blackdrez.server.stores.redis_tables import (
    MAX_RENEWALS,
    PendingAppend,
    RedisLeases,
    RedisTableLogs,
)

SCHEME = "redis+cluster"
SLOT_MAP_RETRY = 0.05
"""Seconds between reads of a slot map that still names a master whose renewal failed."""
ANSWER_GRACE = 0.02
"""Seconds the nodes pinged before a slot map is read are given after the first answered."""
RENEWAL_SHARE = 0.25
"""Share of a lease's TTL one master's renewals may take when the node's leases are on several
masters (a node renews four times per TTL): see :meth:`ClusterLeases._renew_share`."""
DEFAULT_PORT = 6379
POOL_SIZE = 256
"""Connections per cluster node at most. redis-py's cluster pools refuse (rather than queue)
a command past this, so it is larger than a single Redis's blocking pool."""


@contextlib.contextmanager
def _unreachable_cluster() -> Iterator[None]:
    """Errors of redis-py's cluster client that mean "this connection is gone", as a
    ``ConnectionError``: its generic cluster exception for "no node of the cluster answers",
    and a command whose pooled connection another command's failure closed under it (redis-py
    8.1 disconnects a node's free connections while other commands may be taking them: seen
    as these two errors, at start-up and during failovers)."""
    try:
        yield
    except redis.exceptions.RedisClusterException as error:
        if "cannot be connected" not in str(error):
            raise
        raise redis.exceptions.ConnectionError(str(error)) from error
    except (RuntimeError, AttributeError) as error:
        if not _closed_under_us(error):
            raise
        raise redis.exceptions.ConnectionError(f"connection closed meanwhile: {error}") from error


def _closed_under_us(error: BaseException) -> bool:
    """Whether ``error`` is a write on a transport that was closed, raised inside redis-py."""
    frames = traceback.extract_tb(error.__traceback__)
    inside = bool(frames) and any(
        part in frames[-1].filename for part in ("/redis/", "/asyncio/", "uvloop")
    )
    text = str(error)
    closed = "handler is closed" in text or "'NoneType' object has no attribute" in text
    return inside and closed


def parse_cluster_url(url: str) -> tuple[list[tuple[str, int]], dict[str, Any]]:
    """``redis+cluster://[user:password@]host:port[,host:port...]`` as seed nodes and the
    credentials; raises :class:`ValueError` for anything else."""
    parts = urlsplit(url)
    if parts.scheme != SCHEME:
        raise ValueError(f"a Redis Cluster URL starts with {SCHEME}://, not {url!r}")
    if parts.path not in ("", "/", "/0") or parts.query or parts.fragment:
        raise ValueError(f"a Redis Cluster URL names nodes only (no database, no options): {url}")
    credentials, _, hosts = parts.netloc.rpartition("@")
    options: dict[str, Any] = {}
    if credentials:
        user, _, password = credentials.partition(":")
        if user:
            options["username"] = unquote(user)
        if password:
            options["password"] = unquote(password)
    seeds = []
    for seed in hosts.split(","):
        host, _, port = seed.rpartition(":") if ":" in seed else (seed, "", "")
        if not host or (port and not port.isdigit()):
            raise ValueError(f"bad node {seed!r} in {url}: give host:port")
        seeds.append((host, int(port) if port else DEFAULT_PORT))
    return seeds, options


class ClusterLink(RedisLink):
    """The link on a Redis Cluster: redis-py's cluster client (see the module docstring)."""

    def _client(self, url: str) -> Any:
        seeds, options = parse_cluster_url(url)
        return RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in seeds],
            require_full_coverage=False,
            retry=Retry(NoBackoff(), 0),
            max_connections=POOL_SIZE,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=COMMAND_TIMEOUT,
            **KEEP_NOTHING_QUEUED,
            **options,
        )

    @contextlib.contextmanager
    def reaching(self) -> Iterator[None]:
        with super().reaching(), _unreachable_cluster():
            yield

    async def refresh_map(self) -> None:
        """Read the slot map again if the cluster answers (else the next command will)."""
        with contextlib.suppress(*UNREACHABLE), _unreachable_cluster():
            await self.redis.initialize()

    async def start(self) -> None:
        """Read the slot map now if the cluster answers (else at the first call): redis-py's
        first reading races with commands sent while it is under way."""
        with contextlib.suppress(StoreUnavailable), self.reaching():
            await self.redis.initialize()

    async def ping(self) -> None:
        """Most masters of the slot map answer. A node that reaches most of the cluster is
        not cut off: one master failing over (its slots refused until its replica takes
        over, as each call to them says) must not make every node call its store lost and
        send its players away; a node on the minority side of a partition reaches fewer."""
        with self.reaching():
            with _unreachable_cluster():
                if not self.redis.get_primaries():
                    # No slot map yet (the renewal thread's store is not started, or the
                    # cluster did not answer at start): read it, else there is nothing to ask.
                    await self.redis.initialize()
                primaries = self.redis.get_primaries()
            replies = await asyncio.gather(
                *(self._ping_one(node) for node in primaries), return_exceptions=True
            )
            failures = [reply for reply in replies if isinstance(reply, BaseException)]
            if not primaries or 2 * len(failures) >= len(primaries):
                raise failures[0] if failures else redis.exceptions.ConnectionError("no master")
            self.refusing_writes = False  # (PING is refused as writes are)

    async def _ping_one(self, node: ClusterNode) -> None:
        """Ping one master on its own connection, not through the cluster client, whose every
        command first reads the slot map again if an error asked for it: that read asks the
        nodes one after another, waits out one that answers nothing for this probe's whole
        timeout, and holds up meanwhile the lease renewal's own read of the map."""
        async with asyncio.timeout(PROBE_TIMEOUT):
            await node.execute_command("PING")


async def _answering(nodes: list[ClusterNode], timeout: float) -> list[ClusterNode]:
    """Those of ``nodes`` that answer a ``PING`` within ``timeout`` s, pinged at once: every
    one that answered by :data:`ANSWER_GRACE` s after the first did (the rest are given up on
    then, and end in the background)."""
    pings = {asyncio.ensure_future(node.execute_command("PING")): node for node in nodes}
    answered: list[ClusterNode] = []
    loop = asyncio.get_running_loop()
    try:
        pending = set(pings)
        deadline = loop.time() + timeout
        while pending:
            left = deadline - loop.time()
            if left <= 0:
                break
            done, pending = await asyncio.wait(
                pending, timeout=left, return_when=asyncio.FIRST_COMPLETED
            )
            found = [pings[ping] for ping in done if ping.exception() is None]
            if found and not answered:
                deadline = min(deadline, loop.time() + ANSWER_GRACE)
            answered += found
    finally:
        for ping in pings:  # (not waited for: a ping cancelled while it connects to a
            ping.cancel()  # node that answers nothing may take its connect timeout to end)
            ping.add_done_callback(_retrieved)
    return answered


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Take a task's outcome, so that asyncio does not report its error as never retrieved."""
    if not task.cancelled():
        task.exception()


def _replicas_of(slots: dict[int, list[ClusterNode]], masters: set[str]) -> set[str]:
    """The names of the replicas of ``masters`` in a slot map (``slots``: a slot's master and
    its replicas, one list for each range of slots)."""
    ranges = {id(nodes): nodes for nodes in slots.values()}
    return {
        replica.name
        for nodes in ranges.values()
        if nodes and nodes[0].name in masters
        for replica in nodes[1:]
    }


def master_name(cluster: RedisCluster, slot: int) -> str:
    """The name of the master serving ``slot`` ("" while the slot map has none for it)."""
    try:
        name: str = cluster.nodes_manager.get_node_from_slot(slot).name
    except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException, LookupError):
        return ""  # (a slot not in the map is SlotNotCoveredError: not a RedisError)
    return name


class ClusterLeases(RedisLeases):
    """Leases on a cluster: the hosted index is in another slot than the lease, and a renewal
    script names the leases of one slot."""

    async def acquire(self, table_id: str, ttl: float) -> int | None:
        """See :meth:`RedisLeases.acquire`: the hosted index is in another slot, so no
        transaction holds both. The id goes into the index first (the lease is only tried once
        it is there) and again after a lease is taken, in case an orphan scan read the index
        in between and forgot the id as gone."""
        bucket = hosted_key(bucket_of(table_id))
        keys = [lease_key(table_id), epoch_key(table_id), state_key(table_id)]
        with self._link.reaching():
            await self._redis.sadd(bucket, table_id)
            token = await self._acquire(keys=keys, args=self._acquire_args(ttl))
            if token:
                await self._redis.sadd(bucket, table_id)
        return int(token) or None

    async def renew(self, leases: dict[str, int], ttl: float) -> set[str]:
        """See :meth:`RedisLeases.renew`: each master's leases on their own, in parallel, so
        that a master that does not answer (failing over, or cut off) holds up the renewal of
        its own leases only; then :class:`PartlyRenewed` says which were renewed."""
        if not leases:
            return set()
        shares = self._shares(leases)
        reading = self._slot_map_read
        if reading is not None and not reading.done() and not self._failed.isdisjoint(shares):
            # A renewal failed at a master of these leases and the slot map is being read
            # again: a renewal sent now (the store back: renew at once) would go to that
            # master again and the leases just taken at its successor would lapse. Given a
            # share of the TTL (renewals of other masters' leases only do not wait).
            await asyncio.wait({reading}, timeout=ttl * RENEWAL_SHARE)
            shares = self._shares(leases)
        # (one share too: a renewal waiting for a cut master's timeouts, longer than the TTL,
        # would hold up the next one, at the successor once the cluster has failed over)
        results = await asyncio.gather(
            *(self._renew_share(share, ttl) for share in shares.values()),
            return_exceptions=True,
        )
        failures = [result for result in results if isinstance(result, BaseException)]
        lost = {table for result in results if isinstance(result, set) for table in result}
        if not failures:
            return lost
        # A master that does not answer may have been replaced: read the slot map again, so
        # that a later renewal goes to its successor (the renewal thread's client sends
        # nothing else that would). In the background: with no node answering its pings the
        # read falls back to redis-py's, which may wait out a silent node longer than the
        # TTL, and the leases renewed just now would lapse before the next renewal (which
        # waits for the read a share of the TTL at most, above).
        failed = {
            master
            for master, result in zip(shares, results, strict=True)
            if isinstance(result, BaseException)
        }
        self._read_slot_map_soon(failed, ttl)
        renewed = {
            table
            for share, result in zip(shares.values(), results, strict=True)
            if isinstance(result, set)
            for table in share
        }
        if not renewed:
            raise failures[0]
        raise PartlyRenewed(failures[0], renewed, lost)

    _slot_map_read: asyncio.Task[None] | None = None
    _failed: frozenset[str] = frozenset()
    """The masters whose renewals failed, for which the slot map is being read again."""

    def _shares(self, leases: dict[str, int]) -> dict[str, dict[str, int]]:
        """``leases`` by the name of their master in the slot map."""
        shares: dict[str, dict[str, int]] = {}
        for table_id, token in leases.items():
            master = master_name(self._redis, self._redis.keyslot(lease_key(table_id)))
            shares.setdefault(master, {})[table_id] = token
        return shares

    def _read_slot_map_soon(self, failed: set[str], within: float) -> None:
        """Read the cluster's slot map again, in a task of its own (one at a time), from
        nodes other than the ``failed`` masters, until it names none of them as a master or
        ``within`` s have passed."""
        if self._slot_map_read is None or self._slot_map_read.done():
            self._failed = frozenset(failed)
            self._slot_map_read = asyncio.get_running_loop().create_task(
                self._read_slot_map(failed, within)
            )

    async def _read_slot_map(self, failed: set[str], within: float) -> None:
        """Read the slot map until it no longer names a ``failed`` master, or ``within`` s.
        The other nodes learn of a failover from its successor's messages, some tens of ms
        after it took over: a map read from one of them then still names the failed master,
        and a renewal that trusted it would go there again (seen: the leases taken at the
        successor lapsed). So the map is read again every :data:`SLOT_MAP_RETRY` s while it
        does and the failed master does not answer (a failover that has not happened yet keeps
        it so until ``within``); a master that answers again failed for a moment of its own (a
        timeout, this node's pause), and the map that names it is right."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        manager = self._redis.nodes_manager
        while True:
            alive = await self._read_slot_map_once(failed)
            cache = manager.nodes_cache
            if (
                alive  # (it answers: the failure was its own moment, the map is right)
                or not any(name in cache and cache[name].server_type == PRIMARY for name in failed)
                or loop.time() + SLOT_MAP_RETRY >= deadline
            ):
                return
            await asyncio.sleep(SLOT_MAP_RETRY)

    async def _read_slot_map_once(self, failed: set[str]) -> bool:
        """The slot map read from nodes that answer now. redis-py asks its nodes in a random
        order, one after another; a node that accepts connections but answers nothing (on the
        far side of a cut, or frozen) holds the read for the socket timeout, twice the TTL, and
        the leases taken at a failed master's successor since the last read lapse meanwhile.
        So every known node but the failed ones is pinged at once, and the read asks only those
        that answered within :data:`PROBE_TIMEOUT` (any of them, when none did): the failed
        masters' replicas among them, if any answered. The failed masters are pinged too:
        whether one of them answered (then it is alive, and a map naming it is right)."""
        manager = self._redis.nodes_manager
        known = dict(manager.startup_nodes)
        masters = {
            name: node for name, node in {**manager.nodes_cache, **known}.items() if name in failed
        }
        answering = await _answering(
            [node for name, node in known.items() if name not in failed] + [*masters.values()],
            PROBE_TIMEOUT,
        )
        alive = any(node.name in failed for node in answering)
        answering = [node for node in answering if node.name not in failed]
        heirs = _replicas_of(manager.slots_cache, failed)
        if any(node.name in heirs for node in answering):
            # A failed master's successor is one of its replicas, and knows first: the other
            # nodes learn of the failover from it, tens of ms later.
            answering = [node for node in answering if node.name in heirs]
        if answering:
            manager.startup_nodes = {node.name: node for node in answering}
        read = manager.slots_cache
        try:
            # (no node answered: read again at the next renewal that fails)
            with contextlib.suppress(
                *UNREACHABLE, redis.exceptions.RedisError, redis.exceptions.RedisClusterException
            ):
                await manager.initialize()
        finally:
            if manager.slots_cache is read:  # not read: the seeds as they were (once read,
                manager.startup_nodes = known  # the nodes of the new map are the seeds)
        return alive

    async def _renew_share(self, share: dict[str, int], ttl: float) -> set[str]:
        """One master's leases, given :data:`RENEWAL_SHARE` of the TTL at most: a master that
        does not answer (cut off: the call would wait for the socket timeout, longer than the
        TTL) must not hold up the next renewal of the others' leases, or they lapse too. Its
        timeout is :class:`StoreUnavailable` like any unreachable master (a bare ``TimeoutError``
        ended the renewal thread of the node cut off)."""
        with self._link.reaching():
            async with asyncio.timeout(ttl * RENEWAL_SHARE):
                return await super().renew(share, ttl)

    def _renewal_groups(self, tables: list[str]) -> list[list[str]]:
        """One script call per slot (a script names the keys of one slot); the cluster
        pipeline sends each master its own calls."""
        slots: dict[int, list[str]] = {}
        for table_id in tables:
            slots.setdefault(self._redis.keyslot(lease_key(table_id)), []).append(table_id)
        return [
            group[i : i + MAX_RENEWALS]
            for group in slots.values()
            for i in range(0, len(group), MAX_RENEWALS)
        ]


class ClusterTableLogs(RedisTableLogs):
    """Table logs on a cluster: a batch of appends split by master, ``WAIT`` on the key's
    master."""

    def __init__(
        self,
        link: ClusterLink,
        lobby: Lobby,
        bus: Bus,
        *,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 100,
    ) -> None:
        super().__init__(
            link, lobby, bus, wait_replicas=wait_replicas, wait_timeout_ms=wait_timeout_ms
        )
        self._cluster = link

    async def _send_appends(
        self, batch: list[PendingAppend], load: bool = False
    ) -> list[int | BaseException]:
        """The batch split by master: to each, in parallel, a pipeline of one script call per
        slot (a script names the keys of one slot). Each master's share succeeds or fails on
        its own, so a dead master fails only the appends of its tables. (``load`` is moot:
        scripts go as EVAL here.)"""
        await self._cluster.refresh_map()
        slots: dict[int, list[int]] = {}
        for index, pending in enumerate(batch):
            slots.setdefault(self._redis.keyslot(pending.keys[1]), []).append(index)
        masters: dict[str, list[list[int]]] = {}
        for slot, indexes in slots.items():
            masters.setdefault(master_name(self._redis, slot), []).append(indexes)
        shares = list(masters.values())
        results = await asyncio.gather(*(self._send_share(batch, share) for share in shares))
        outcomes: list[int | BaseException] = [0] * len(batch)
        for share, found in zip(shares, results, strict=True):
            for index, outcome in zip((i for group in share for i in group), found, strict=True):
                outcomes[index] = outcome
        return outcomes

    async def _send_share(
        self, batch: list[PendingAppend], share: list[list[int]]
    ) -> list[int | BaseException]:
        """One master's share of a batch (its slots' groups of appends): the outcomes, in the
        order of ``share``'s groups."""
        count = sum(len(group) for group in share)
        try:
            with self._link.reaching():
                async with self._redis.pipeline(transaction=False) as pipe:
                    for group in share:
                        keys = [key for i in group for key in batch[i].keys]
                        args = [arg for i in group for arg in batch[i].args]
                        queue_script(pipe, self._append, keys, args)
                    replies = await pipe.execute()
        except Exception as error:
            return [error] * count
        # A cluster's PUBLISH counts the subscribers of the master it ran on, not those the
        # cluster bus forwards it to: never "unheard" here (2, written, becomes 1).
        return [min(int(written), 1) for reply in replies for written in reply]

    async def _queue_wait(self, pipe: Any, key: str) -> Callable[[], bool]:
        """``WAIT`` must run on the connection that made the write: the pipeline sends the
        commands of one node on one connection, so ``WAIT`` is addressed to the key's master.
        Should the slot have moved meanwhile (the write redirected), the check says so."""
        with _unreachable_cluster():
            await self._redis.initialize()
        master = self._redis.get_node_from_key(key)
        pipe.execute_command("WAIT", self.wait_replicas, self.wait_timeout_ms, target_nodes=master)
        return lambda: bool(self._redis.get_node_from_key(key).name == master.name)


class ClusterBus(RedisBus):
    """The bus on a cluster: one pub/sub connection to any node, the next one in turn when it
    dies (see "Pub/sub" in the module docstring)."""

    def __init__(self, link: ClusterLink) -> None:
        self._seeds, self._credentials = parse_cluster_url(link.url)
        self._next_bus_node = random.randrange(1 << 16)  # nodes spread their links over the cluster
        self._bus_client: aioredis.Redis | None = None
        super().__init__(link)

    def _new_pubsub(self) -> PubSub:
        host, port = self._seeds[0]
        return self._bus_link(host, port).pubsub()

    def _bus_link(self, host: str, port: int) -> aioredis.Redis:
        self._bus_client = aioredis.Redis(
            host=host,
            port=port,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=COMMAND_TIMEOUT,
            retry=Retry(NoBackoff(), 0),
            **KEEP_NOTHING_QUEUED,
            **self._credentials,
        )
        return self._bus_client

    async def _pubsub_for_next_attempt(self) -> PubSub:
        """A fresh link to the next node of the slot map (the seeds until the map is known)."""
        with contextlib.suppress(*UNREACHABLE), _unreachable_cluster():
            await self._link.redis.initialize()
        known = sorted({(node.host, node.port) for node in self._link.redis.get_nodes()})
        candidates = known or self._seeds
        host, port = candidates[self._next_bus_node % len(candidates)]
        self._next_bus_node += 1
        old = self._bus_client
        with contextlib.suppress(Exception):
            await self._pubsub.aclose()
        if old is not None:
            with contextlib.suppress(Exception):
                await old.aclose()
        return self._bus_link(host, port).pubsub()

    async def close(self) -> None:
        await super().close()
        if self._bus_client is not None:
            with contextlib.suppress(Exception):
                await self._bus_client.aclose()


def cluster_stores(
    url: str,
    node_id: str,
    *,
    incarnation: str | None = None,
    wait_replicas: int = 0,
    wait_timeout_ms: int = 100,
) -> Stores:
    """Every concern's store on the Redis Cluster of ``url`` (``redis+cluster://``), for node
    ``node_id`` (the options: see :func:`~blackdrez.server.stores.redis.redis_stores`)."""
    check_wait(wait_replicas, wait_timeout_ms)
    link = ClusterLink(url, node_id, incarnation)
    lobby, bus = RedisLobby(link), ClusterBus(link)
    logs = ClusterTableLogs(
        link, lobby, bus, wait_replicas=wait_replicas, wait_timeout_ms=wait_timeout_ms
    )
    return redis_bundle(link, lobby, bus, ClusterLeases(link), logs)
