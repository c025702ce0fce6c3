"""A server node: hosts rooms, routes requests to the node hosting a table, fans updates out.

Theory of operation
-------------------
Every table (and solitaire session) is hosted by exactly one node process: the one holding its
lease (see "Hosting and fencing" in ``blackdrez.server.stores.base``). Its
:class:`~blackdrez.server.table.room.Room` lives there, and only there are its commands executed
(synchronously, under the table's lock, so one table's commands never interleave). A node that
receives a request for a table hosted elsewhere forwards it over the store's bus to the host
(typed messages: ``blackdrez.server.bus``) and relays the answer; the host publishes every table
update on the table's channel, and each node with viewers of that table fans the update out to
them. With the in-memory store there is one node and everything is local.

The node is thin asyncio code around the table core (``blackdrez.server.table``), one concern a
module, each a component with the state it owns, declared in its ``__init__``, and its
collaborators given to it there; :class:`~blackdrez.server.node.node.Node` composes them, keeps
the connected clients, answers what needs no table, and runs the periodic work:

* ``hosting``: hosted rooms, their fenced log appends, undoing a failed write, timers, the outbox
  of side effects outside the room, and handing the tables over at shutdown;
* ``leases``: the leases hosting holds, their validity deadline, and their renewals (in the loop
  or a thread of their own);
* ``routing``: a table request handled here or forwarded to the table's host over the bus, and
  this node's view of the live nodes;
* ``failover``: the orphan scans, adopting orphaned tables, same-id takeover;
* ``fanout``: watchers, updates to clients, following tables hosted elsewhere, catch-up;
* ``lobby``: the table list, quick join, create-and-sit, daily deals, leaderboards, the lobby
  pushes, and the bots the host adds at a table (``TableBots``, asked by hosting);
* ``matchmaking``: "find a game": the players queueing here, and, on the one node holding the
  matcher's lease, pairing the shared queue and making its tables (``Matchmaker``; the pure
  pairing is ``blackdrez.server.matchmaking.pairing``);
* ``arenas``: arenas (tournaments): their requests, and the standings pushed to the
  connections here that follow them (``ArenaHall``); an arena's tables are the matchmaker's,
  its games scored by their host's outbox (``arena_scores``);
* ``friends``: follows, blocks, the whereabouts of this node's players, challenges
  (``Friendships``); a challenge reaches its player on any node through ``Node.tell``;
* ``clock``: the clock every component reads (wall and monotonic time), injected so a test can
  turn it.

The store's health (``blackdrez.server.retry``) is shared by the whole node: while the store is
down, no command runs (requests are answered ``unavailable`` at once), timers wait for the store
to be back rather than retrying on their own, and the periodic work (heartbeat, lease renewals,
orphan scans) waits too; when it is back, leases are renewed and orphans looked for at once. A
failed log write undoes its command by rebuilding the room from the log once; then the table
waits. Log appends of all tables are sent to the store together (its group commit); each table
waits for its own. Every ``SNAPSHOT_EVERY`` entries the room is snapshotted
(``blackdrez.server.table.snapshots``), so an adoption or an undo replays only the entries after
the latest snapshot. Side effects outside the room (lobby record, player sets, scores,
retirement) are done in order by one outbox task, retried on the shared backoff while the store
is down.
"""

from blackdrez.server.node.node import LEASE_TTL, RECORD_RETENTION, SOLE_LEASE_TTL, Node

__all__ = ["LEASE_TTL", "RECORD_RETENTION", "SOLE_LEASE_TTL", "Node"]
