"""Every Redis key of the store: its name, its owner and its lifetime, in one place.

Theory of operation
-------------------
Every key of one table, player or game carries its id as a Redis Cluster hash tag, so a
multi-key write about one of them stays in one slot. Each key has an owner (who writes it) and a
lifetime (when it goes); ``retention`` is the node's ``--record-retention`` (default one day).
The concern column names the store interface (:mod:`blackdrez.server.stores.base`) whose Redis
implementation reads and writes the key::

    key                    type    concern       owner              lifetime
    bd:t:{T}:lease         string  leases        the table's host   TTL = lease TTL, renewed by its
                                                                    holder; deleted when the table
                                                                    is retired
    bd:t:{T}:epoch         string  leases        lease acquisitions the table's life; TTL =
                                                                    retention once retired (deleted
                                                                    by the orphan scan if the lease
                                                                    lapsed before the first entry)
    bd:t:{T}:log           stream  logs          the table's host   the table's life; deleted when
                                                                    retired
    bd:t:{T}:record        hash    lobby         the table's host   the table's life; deleted when
                                                                    retired
    bd:t:{T}:snap          hash    logs          the table's host   the table's life; deleted when
                                                                    retired
    bd:t:{T}:state         string  logs          the retiring host  set ("closed") at retirement,
                                                                    TTL = retention
    bd:t:{T}:game          string  logs          the retiring host  set at retirement, TTL =
                                                                    retention
    bd:p:{P}:tables        set     players       the tables' hosts  TTL PLAYER_TABLES_TTL, renewed
                                                                    by each add; members removed
                                                                    when the seat is freed or the
                                                                    table retired (empty: gone)
    bd:p:{P}:attach        string  players       every node         the order of the player's
                                                                    latest connection (a step of
                                                                    ``bd:attaches``); TTL
                                                                    PLAYER_TABLES_TTL, renewed by
                                                                    each hello
    bd:attaches            string  players       every node         fixed: a counter, one step per
                                                                    greeted connection, that orders
                                                                    a player's connections across
                                                                    nodes
    bd:secret              string  tokens        every node         fixed (no TTL): the
                                                                    token-signing secret
    bd:revoked:{ID}        string  tokens        the node a player  TTL = the token's remaining
                                                 logged out on      lifetime: a token ended by
                                                                    ``logout``
    bd:limit:K:{A}         hash    tokens        every node         a client address's token bucket
                                                                    for K (``handshake``, ``api``):
                                                                    TTL = until it would be full
                                                                    again (a new one is the same)
    bd:nodes               zset    presence      every node         fixed; a member expires by its
                                                                    score
    {bd:nodes}:incarnations
                           hash    presence      every node         fixed; per node, until when
                                                                    and under which process
                                                                    incarnation it heartbeats (in
                                                                    the slot of ``bd:nodes``: its
                                                                    hash tag)
    bd:{hosted}:B          set     leases        tables' hosts      fixed; the tables of bucket B
                                                                    (of 1,024: a node's scan reads
                                                                    its share's buckets); a member
                                                                    leaves when its table is
                                                                    retired (or is found gone by a
                                                                    scan). ``bd:hosted``, the one
                                                                    set of older versions, is read
                                                                    and emptied the same way, never
                                                                    added to
    bd:lobby:tables        set     lobby         tables' hosts      fixed; a member leaves when its
                                                                    table is retired (or is found
                                                                    gone by a listing)
    bd:lb:{B}, bd:lb:{B}:entries, bd:lb:{B}:names, bd:lb:{B}:seq
                           zset, hash, hash, string
                                   leaderboards  the game's host    fixed: the leaderboards (one
                                                                    entry per player and board;
                                                                    ``names`` holds each player's
                                                                    entry as the board shows it)
    bd:rec:{G}             string  leaderboards  the game's host    fixed while a leaderboard entry
                                                                    shows the game (one kept for
                                                                    good per entry placed; a game
                                                                    placed nowhere: the record TTL)
    bd:daily:{D}           string  daily         every node         fixed: a daily deal's seed (set
                                                                    once, never changed; revealed
                                                                    once its day ends)
    bd:daily:{D}:players, bd:daily:{D}:ranked
                           set, hash  daily      every node         who started the deal, and per
                                                                    player the table of their
                                                                    ranked session (a reference:
                                                                    whether its game still runs is
                                                                    read from the table's own
                                                                    keys); TTL = a day past the
                                                                    deal's day, set at each claim
    bd:reports             zset    reports       the tables' hosts  the chat lines players reported
                                                                    (score: when filed); older than
                                                                    the reports' retention dropped
                                                                    at each report, the newest
                                                                    10,000 kept; TTL = the
                                                                    retention, set at each report
    bd:{mm}:tickets, bd:{mm}:expires
                           hash, zset  matchmaking  every node      the players queueing for a
                                                                    table: each one's ticket, and
                                                                    until when it lives (score,
                                                                    wall-clock s; refreshed by the
                                                                    node of the player's
                                                                    connection, dropped once past);
                                                                    TTL MATCH_KEY_TTL, renewed at
                                                                    each entry
    bd:{mm}:lead           string  matchmaking  the matcher        ``node/incarnation/token`` of
                                                                    the process pairing the queue;
                                                                    TTL = its lease, renewed by it
    bd:a:{A}:info, bd:a:{A}:standings, bd:a:{A}:games
                           string, hash, set  arenas  every node  an arena's description, each
                                                                    player's standing, the games
                                                                    it scored; TTL = until
                                                                    ARENA_KEEP after it ends
    bd:arenas              zset    arenas        every node         the public arenas (score: when
                                                                    each ends); those ended
                                                                    ARENA_KEEP ago pruned at each
                                                                    creation; TTL likewise
    bd:p:{P}:follows, bd:p:{P}:blocks
                           hash    social        the player's node  whom the player follows, and
                                                                    whom they block (id: name);
                                                                    fixed: the player's lists
    bd:p:{P}:seen          string  social        the node of the    where the connected player is
                                                 player's           (online, playing, watching);
                                                 connection         TTL SEEN_TTL, renewed while
                                                                    connected, deleted at the close
    bd:ch:{C}              string  social        the challenger's   a challenge waiting for its
                                                 node               answer; TTL = its minute,
                                                                    deleted by the answer
    bd:{mm}:epoch          string  matchmaking  matcher leases     the matcher's tokens; TTL
                                                                    MATCH_KEY_TTL, renewed at each
                                                                    new lease

The fixed keys above (:data:`FIXED_KEYS`) are the only ones that may exist without a TTL,
besides a live table's epoch, log, record and snapshot (owned by its host, deleted or given a
TTL when it is retired; a table whose host died is adopted by another node, so its keys always
have an owner; one that died before logging anything is forgotten by the orphan scan, which
finds its id in the hosted index: the id goes there in the lease's own transaction).

Fields: ``record`` holds node, record, listed ("1" / "0"); ``snap`` holds position and data
(the room just after that log entry: :mod:`blackdrez.server.table.snapshots`); ``lease`` holds
``node/incarnation/token``; ``log`` entries have the field ``e`` and the ID ``<position>-0``,
position 1 being the create command; ``game`` is the table's compact game record
(``blackdrez.server.table.records.TableRecord``).

The bus's channels are names in Redis too, but not keys: they are in
:mod:`blackdrez.server.stores.base` (``bd:lobby``, ``bd:node:{N}``, ``bd:t:{T}:updates``) and
:mod:`blackdrez.server.bus` (``bd:handover``), as the in-memory bus uses them as well.
"""

from __future__ import annotations

PLAYER_TABLES_TTL = 7 * 24 * 3600
"""Seconds a player's table set lives after its last addition (its tables close long before),
and a player's latest connection order after their last hello."""

SECRET_KEY = "bd:secret"
LOBBY_KEY = "bd:lobby:tables"
REPORTS_KEY = "bd:reports"
MATCH_TICKETS_KEY = "bd:{mm}:tickets"
MATCH_EXPIRES_KEY = "bd:{mm}:expires"
MATCH_LEAD_KEY = "bd:{mm}:lead"
MATCH_EPOCH_KEY = "bd:{mm}:epoch"
ARENAS_KEY = "bd:arenas"
ARENA_KEEP = 30 * 24 * 3600
"""Seconds an arena's standings are kept after it ends."""


def arena_keys(arena: str) -> tuple[str, str, str]:
    """An arena's info, standings and scored games (one hash tag: one slot)."""
    return f"bd:a:{{{arena}}}:info", f"bd:a:{{{arena}}}:standings", f"bd:a:{{{arena}}}:games"


def follow_key(player: str) -> str:
    return f"bd:p:{{{player}}}:follows"


def block_key(player: str) -> str:
    return f"bd:p:{{{player}}}:blocks"


def seen_key(player: str) -> str:
    return f"bd:p:{{{player}}}:seen"


def challenge_key(challenge: str) -> str:
    return f"bd:ch:{{{challenge}}}"


MATCH_KEY_TTL = 24 * 3600
"""Seconds the queue's keys live after their last write (a queue nobody joins for a day is
empty; a matcher's tokens start again, each holder naming its process as well)."""
NODES_KEY = "bd:nodes"
ATTACHES_KEY = "bd:attaches"
INCARNATIONS_KEY = "{bd:nodes}:incarnations"
"""Per node, ``<expiry ms>/<incarnation>`` of its last heartbeat. Its hash tag is the whole name
of ``bd:nodes``, so both are in one slot and one script writes them on a cluster too. A separate
key, not new members of ``bd:nodes``, so that nodes of older versions (which read only
``bd:nodes``, and whose heartbeats write only there) work alongside newer ones."""
LEGACY_HOSTED_KEY = "bd:hosted"
"""The one set of hosted tables before the buckets: still read and emptied by scans, so that a
table a node of an older version hosted is found (a rolling upgrade); never added to."""

FIXED_KEYS: tuple[str, ...] = (
    "bd:secret", "bd:nodes", "{bd:nodes}:incarnations", "bd:hosted", "bd:{hosted}:*",
    "bd:lobby:tables", "bd:lb:*", "bd:rec:*", "bd:daily:{*}", "bd:attaches",
    "bd:p:{*}:follows", "bd:p:{*}:blocks",
)  # fmt: skip
"""Patterns (``fnmatch``) of the only keys that may live without a TTL (see the key table)."""


# ---------------------------------------------------------------------- a table's keys
def lease_key(table_id: str) -> str:
    """The key whose value names the node hosting a table."""
    return f"bd:t:{{{table_id}}}:lease"


def epoch_key(table_id: str) -> str:
    """The counter of a table's lease acquisitions: the fencing tokens."""
    return f"bd:t:{{{table_id}}}:epoch"


def log_key(table_id: str) -> str:
    """The stream of a table's commands."""
    return f"bd:t:{{{table_id}}}:log"


def table_key(table_id: str) -> str:
    """The hash holding a table's hosting node, lobby record and listed flag."""
    return f"bd:t:{{{table_id}}}:record"


def snapshot_key(table_id: str) -> str:
    """A table's latest snapshot (see :mod:`blackdrez.server.table.snapshots`)."""
    return f"bd:t:{{{table_id}}}:snap"


def state_key(table_id: str) -> str:
    """Set when a table is retired: it can never be leased again."""
    return f"bd:t:{{{table_id}}}:state"


def game_key(table_id: str) -> str:
    """A retired table's compact game record."""
    return f"bd:t:{{{table_id}}}:game"


def hosted_key(bucket: int) -> str:
    """The set of hosted tables of one bucket (``blackdrez.server.stores.base.bucket_of``).
    Every bucket is in one slot (the hash tag), so one ``SUNION`` reads a share's buckets, on a
    cluster too."""
    return f"bd:{{hosted}}:{bucket}"


# ---------------------------------------------------------------------- a player's keys
def player_tables_key(player: str) -> str:
    """The set of tables where a player holds a seat."""
    return f"bd:p:{{{player}}}:tables"


def latest_attach_key(player: str) -> str:
    """The order of the player's latest connection (``Players.next_attach``)."""
    return f"bd:p:{{{player}}}:attach"


# ---------------------------------------------------------------------- scores and deals
def leaderboard_keys(board: str) -> list[str]:
    """The board, members, entries and counter keys of one leaderboard."""
    key = f"bd:lb:{{{board}}}"
    return [key, f"{key}:entries", f"{key}:names", f"{key}:seq"]


def kept_record_key(game_id: str) -> str:
    """The key of a ranked game's kept record."""
    return f"bd:rec:{{{game_id}}}"


def daily_key(game: str, day: str) -> str:
    """The key of a daily deal's seed (and, with ``:players`` and ``:ranked``, of who started
    it: :func:`daily_claim_keys`)."""
    return f"bd:daily:{{{game}:{day}}}"


def daily_claim_keys(game: str, day: str) -> list[str]:
    """Who started a daily deal (a set) and the table of each one's ranked session (a hash)."""
    key = daily_key(game, day)
    return [f"{key}:players", f"{key}:ranked"]


# ---------------------------------------------------------------------- tokens
def revoked_key(token_id: str) -> str:
    """The key whose presence says a session token was revoked (it expires with the token)."""
    return f"bd:revoked:{{{token_id}}}"


def limit_key(kind: str, key: str) -> str:
    """A client address's (``key``) token bucket for ``kind`` of request, shared by every node
    (``Tokens.take``)."""
    return f"bd:limit:{kind}:{{{key}}}"
