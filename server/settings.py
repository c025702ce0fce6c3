"""What a node can be told: :class:`Settings`, each field with its ``blackdrez serve`` option.

Theory of operation
-------------------
A node is configured by one :class:`Settings`, a dataclass that tests and embedders build
directly. A field an operator sets carries its :class:`Option` in its metadata
(``field(default=..., metadata=option(...))``): the flag, the help, the environment variable it
is also read from, and how the text given is parsed into the field's value.
``blackdrez.tools.cli`` builds ``blackdrez serve``'s parser from them (:func:`options`), so each
flag, its help, its variable and its default are written once, here: a help's "default ..." is
the field's default, shown by :meth:`Option.describe`. A field with no option is set by code,
not by an operator (the worker supervisor, the tests): :func:`internal` says by whom.

Three fields keep ``None`` where the command line resolves more (``blackdrez.tools.cli``): with
neither ``--redis-url`` nor ``--in-memory`` the state goes to :data:`DEFAULT_DATA_DIR`, the
records to a SQLite file in it, and the node id is the one remembered there.

The parsers (:func:`whole`, :func:`positive`, :func:`network`) refuse in argparse's one line
naming the option: a ``ValueError`` is reported with the parser's ``__name__``, an
``ArgumentTypeError`` with its message.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import math
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blackdrez.server import hints, identity
from blackdrez.server.matchmaking.schedule import ArenaSchedule, parse_schedule
from blackdrez.server.node import LEASE_TTL, RECORD_RETENTION, SOLE_LEASE_TTL
from blackdrez.server.node.hosting import HINT_BURST, HINT_RATE

DEFAULT_DATA_DIR = "blackdrez-data"
"""The folder ``blackdrez serve`` keeps its state in, in the working directory."""
DEFAULT_DB_URL = f"sqlite:///{DEFAULT_DATA_DIR}/records.db"
"""Where ``blackdrez serve`` keeps its records unless told otherwise (relative: to the working
directory)."""
STATIC_DIR = Path(__file__).resolve().parent.parent / "clients" / "browser"
"""The browser client, served at ``/``."""
LISTEN_BACKLOG = 2048
"""The game port's listen backlog: room for a reconnect storm (a failed node's players all
arriving at once) while the loop is busy; asyncio's default of 100 dropped the rest's SYNs."""
HANDSHAKE_RATE = 20.0
HANDSHAKE_BURST = 400
"""New WebSocket connections per client address: a burst above ``max_connections_per_ip`` (a
bots swarm or a NAT's players reconnecting after a node restart open that many at once; the test
suite's servers take 300 from 127.0.0.1 in about two seconds), then 20 a second. Each ``hello``
with a token costs every node of a deployment work (``Node.claim``): a client looping connect,
``hello``, disconnect is held to that pace."""
API_RATE = 10.0
API_BURST = 100
"""Records API requests per client address: a records page asks a few, someone browsing pages
of games far fewer than 100 at once; each is database reads."""
DAY = 86400.0
CENTURY = 100 * 365 * 86400
"""The longest duration an option takes, in seconds: past it a TTL overflows what the store
keeps (Redis counts them in milliseconds in 64 bits), and nobody means one that long."""

OPTION = "blackdrez.option"
"""The metadata key of a field's :class:`Option`."""
SET_BY = "blackdrez.set_by"
"""The metadata key of a field that is no option: who sets it."""


def whole(low: int, high: int | None = None) -> Callable[[str], int]:
    """A parser: a whole number from ``low`` (to ``high``)."""

    def parse(text: str) -> int:
        value = int(text)
        if value < low or (high is not None and value > high):
            raise ValueError(text)
        return value

    parse.__name__ = f"whole number from {low}" + (f" to {high}" if high is not None else "")
    return parse


def positive(most: float | None = None, unit: float = 1.0) -> Callable[[str], float]:
    """A parser: a finite number above zero (and at most ``most``), times ``unit`` (``DAY``
    for an option counted in days); NaN, infinity, zero, less and more are refused."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not 0 < value < math.inf or (most is not None and value > most):
            ceiling = "" if most is None else f" and at most {most:.15g}"
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number above 0{ceiling}")
        return value * unit

    return parse


def network(text: str) -> str:
    """A parser: an IP address or network in CIDR notation."""
    ipaddress.ip_network(text, strict=False)
    return text


network.__name__ = "address or network"


def arena_schedule(text: str) -> ArenaSchedule:
    """A parser: one scheduled arena (``blackdrez.server.matchmaking.schedule``)."""
    try:
        return parse_schedule(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


@dataclass(frozen=True)
class Option:
    """How ``blackdrez serve`` sets one :class:`Settings` field.

    ``help`` may say where its default goes with ``{default}`` (``"(0: no cap; {default})"``);
    without it, ``(default ...)`` ends the help. ``default_words`` states a default its value
    cannot (``None`` meaning "a Redis of the node's own"); ``shown`` turns the default into the
    help's figure (seconds into days). ``parse`` turns the text given, or the environment
    variable's, into the field's value.
    """

    flag: str
    help: str
    env: str | None = None
    metavar: str | None = None
    parse: Callable[[str], Any] | None = None
    repeat: bool = False
    """The flag may be given several times; the field is the list of what was given."""
    switch: bool = False
    """The flag takes no value: given, the field is ``True``."""
    default_words: str | None = None
    shown: Callable[[Any], str] | None = None

    @property
    def dest(self) -> str:
        """The name argparse keeps the option's value under: ``rate`` for ``--rate``."""
        return self.flag.removeprefix("--").replace("-", "_")

    def describe(self, default: Any) -> str:
        """The help, ``default`` stated where it says (at its end unless it places it)."""
        if self.default_words is not None:
            stated = f"default: {self.default_words}"
        elif self.shown is not None:
            stated = f"default {self.shown(default)}"
        else:
            stated = f"default {_figure(default)}"
        if self.env is not None:
            stated += f"; env {self.env}"
        if "{default}" in self.help:
            return self.help.replace("{default}", stated)
        return f"{self.help} ({stated})"


def _figure(value: Any) -> str:
    """A default as a help states it: ``30`` for ``30.0``, ``off`` for ``False``."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def option(
    *,
    flag: str,
    help: str,
    env: str | None = None,
    metavar: str | None = None,
    parse: Callable[[str], Any] | None = None,
    repeat: bool = False,
    switch: bool = False,
    default_words: str | None = None,
    shown: Callable[[Any], str] | None = None,
) -> dict[str, Option]:
    """The metadata of a :class:`Settings` field set by a ``blackdrez serve`` option (see
    :class:`Option`)."""
    return {OPTION: Option(flag, help, env, metavar, parse, repeat, switch, default_words, shown)}


def internal(*, set_by: str) -> dict[str, str]:
    """The metadata of a :class:`Settings` field no option sets: ``set_by`` says what does."""
    return {SET_BY: set_by}


@dataclass
class Settings:
    """Everything a node can be told (``blackdrez serve --help`` lists the options)."""

    host: str = field(
        default="127.0.0.1",
        metadata=option(flag="--host", help="the address to listen on", env="BLACKDREZ_HOST"),
    )
    port: int = field(
        default=8765,
        metadata=option(
            flag="--port",
            help="the port for WebSocket and HTTP",
            env="BLACKDREZ_PORT",
            parse=whole(0, 65535),
        ),
    )
    redis_url: str | None = field(
        default=None,
        metadata=option(
            flag="--redis-url",
            help="share the lobby through Redis: redis://HOST:PORT/DB for one Redis, "
            "redis+cluster://HOST:PORT[,HOST:PORT...] for a Redis Cluster",
            env="BLACKDREZ_REDIS_URL",
            default_words="a Redis of the node's own, kept in --data-dir",
        ),
    )
    data_dir: Path | None = field(
        default=None,
        metadata=option(
            flag="--data-dir",
            help="the folder the node keeps its state in: without --redis-url, its own Redis's "
            "append-only file (DIR/redis: identities, tables, sessions survive a restart), and the "
            "records unless --db-url says otherwise",
            env="BLACKDREZ_DATA_DIR",
            metavar="DIR",
            default_words=DEFAULT_DATA_DIR,
        ),
    )
    """Without ``redis_url``: the folder whose Redis (``blackdrez.server.stores.embedded``:
    started by the node unless already running, its append-only file in ``DATA/redis``) keeps
    the node's state across restarts. ``None`` with no ``redis_url``: the in-memory store, for
    tests and benchmarks, lost when the process ends."""
    redis_wait_replicas: int = field(
        default=0,
        metadata=option(
            flag="--redis-wait-replicas",
            help="acknowledge a command only once N Redis replicas hold its log entry (WAIT), so "
            "that a failover loses no acknowledged command ({default}: do not wait)",
            metavar="N",
            parse=int,
        ),
    )
    redis_wait_timeout_ms: int = field(
        default=100,
        metadata=option(
            flag="--redis-wait-timeout-ms",
            help="how long a command waits for those replicas before it is answered 'unavailable'",
            metavar="MS",
            parse=int,
        ),
    )
    node_id: str = field(
        default_factory=lambda: "n" + secrets.token_hex(4),
        metadata=option(
            flag="--node-id",
            help="this node's name among the nodes sharing a Redis; each needs its own",
            env="BLACKDREZ_NODE_ID",
            default_words="random",
        ),
    )
    max_frame_bytes: int = field(
        default=16 * 1024,
        metadata=option(
            flag="--max-frame-bytes",
            help="the largest frame a client may send; a larger one closes with 1009",
            metavar="BYTES",
            parse=whole(64),
        ),
    )
    messages_per_second: float = field(
        default=30.0,
        metadata=option(
            flag="--rate",
            help="messages per second per connection, on average",
            metavar="RATE",
            parse=positive(),
        ),
    )
    burst: int = field(
        default=60,
        metadata=option(
            flag="--burst",
            help="messages a connection may send at once; also how many refused messages within "
            "10 s close it with 1008",
            metavar="BURST",
            parse=whole(1),
        ),
    )
    hello_timeout: float = field(
        default=10.0, metadata=internal(set_by="tests (a client's first frame's deadline)")
    )
    idle_timeout: float = field(
        default=900.0, metadata=internal(set_by="tests (silence before a close with 4005)")
    )
    ping_interval: float | None = field(
        default=20.0, metadata=internal(set_by="tests (None: no keepalive pings)")
    )
    ping_timeout: float | None = field(default=20.0, metadata=internal(set_by="tests"))
    send_buffer: int = field(
        default=1024 * 1024,
        metadata=option(
            flag="--send-buffer",
            help="bytes sent to a client and not yet read by it past which the client is closed "
            "with 4003",
            metavar="BYTES",
            parse=whole(1024),
        ),
    )
    close_timeout: float = field(
        default=10.0,
        metadata=option(
            flag="--close-timeout",
            help="how long a connection the server closes has to take its close frame before the "
            "TCP connection is cut",
            metavar="SECONDS",
            parse=positive(CENTURY),
        ),
    )
    token_lifetime: float = field(
        default=identity.TOKEN_LIFETIME,
        metadata=option(
            flag="--token-days",
            help="how long a session token is accepted, counted from its first issue; it is never "
            "renewed",
            metavar="DAYS",
            parse=positive(CENTURY / DAY, unit=DAY),
            shown=lambda seconds: f"{seconds / DAY:g}",
        ),
    )
    """Seconds (the option counts days)."""
    max_connections_per_ip: int = field(
        default=256,
        metadata=option(
            flag="--max-connections-per-ip",
            help="WebSocket connections one client address may hold at once; more are closed with "
            "4006 (0: no cap; {default})",
            metavar="N",
            parse=whole(0),
        ),
    )
    handshake_rate: float = field(
        default=HANDSHAKE_RATE,
        metadata=option(
            flag="--handshake-rate",
            help="new WebSocket connections per second one client address may make, on average; "
            "past it the handshake gets HTTP 429",
            env="BLACKDREZ_HANDSHAKE_RATE",
            metavar="PER_SECOND",
            parse=positive(),
        ),
    )
    handshake_burst: int = field(
        default=HANDSHAKE_BURST,
        metadata=option(
            flag="--handshake-burst",
            help="new WebSocket connections one client address may make at once (0: no limit; "
            "{default})",
            env="BLACKDREZ_HANDSHAKE_BURST",
            metavar="N",
            parse=whole(0),
        ),
    )
    api_rate: float = field(
        default=API_RATE,
        metadata=option(
            flag="--api-rate",
            help="records API requests per second one client address may make, on average; past it "
            "a request gets 429 rate_limited",
            env="BLACKDREZ_API_RATE",
            metavar="PER_SECOND",
            parse=positive(),
        ),
    )
    api_burst: int = field(
        default=API_BURST,
        metadata=option(
            flag="--api-burst",
            help="records API requests one client address may make at once "
            "(0: no limit; {default})",
            env="BLACKDREZ_API_BURST",
            metavar="N",
            parse=whole(0),
        ),
    )
    trusted_proxies: list[str] = field(
        default_factory=list,
        metadata=option(
            flag="--trusted-proxy",
            help="an address or network (CIDR) of a reverse proxy whose X-Forwarded-For header "
            "names the client; repeat for several",
            metavar="ADDRESS",
            parse=network,
            repeat=True,
            default_words="none, the header is ignored",
        ),
    )
    max_solitaire_sessions: int = field(
        default=10,
        metadata=option(
            flag="--max-solitaire-sessions",
            help="open solitaire sessions one player may hold; one more gets too_many_sessions "
            "(0: no cap; {default})",
            metavar="N",
            parse=whole(0),
        ),
    )
    metrics_host: str = field(
        default="127.0.0.1",
        metadata=option(
            flag="--metrics-host",
            help="the address the --metrics-port listener binds",
            metavar="HOST",
        ),
    )
    metrics_port: int | None = field(
        default=None,
        metadata=option(
            flag="--metrics-port",
            help="serve /metrics (and /healthz) on this port, and no longer on the game port",
            metavar="PORT",
            parse=whole(0, 65535),
            default_words="none, /metrics is on the game port",
        ),
    )
    """0: any free port."""
    allowed_origins: list[str] | None = field(
        default=None,
        metadata=option(
            flag="--allowed-origin",
            help="also accept browser pages from this Origin (scheme://host[:port]); repeat for "
            "several",
            metavar="ORIGIN",
            repeat=True,
            default_words="only pages whose Origin has the Host header's host and port",
        ),
    )
    compression: bool = field(
        default=False,
        metadata=option(flag="--compression", help="enable permessage-deflate", switch=True),
    )
    lease_ttl: float | None = field(
        default=None,
        metadata=option(
            flag="--lease-ttl",
            help="how long a table's lease lasts unless renewed (4 times per lease): how soon a "
            "dead node's tables move to another node, and how long a stalled node keeps them",
            metavar="SECONDS",
            parse=positive(CENTURY),
            default_words=f"{LEASE_TTL:g} with Redis, {SOLE_LEASE_TTL:g} with the in-memory lobby, "
            "where no other node can take them",
        ),
    )
    record_retention: float = field(
        default=RECORD_RETENTION,
        metadata=option(
            flag="--record-retention",
            help="how long a closed table's game record is kept in the store",
            metavar="SECONDS",
            parse=positive(CENTURY),
        ),
    )
    listen_backlog: int = field(
        default=LISTEN_BACKLOG,
        metadata=option(
            flag="--listen-backlog",
            help="connections the kernel queues for the node while it is busy (a reconnect storm); "
            "past it a client's SYN is dropped and retried a second later; capped by "
            "net.core.somaxconn",
            metavar="N",
            parse=whole(1),
        ),
    )
    reuse_port: bool = field(
        default=False, metadata=internal(set_by="the worker supervisor (serve --workers)")
    )
    """Bind with ``SO_REUSEPORT``, so that several workers share the port."""
    static_dir: Path = field(default=STATIC_DIR, metadata=internal(set_by="tests and embedders"))
    admin_token: str | None = field(
        default=None,
        metadata=option(
            flag="--admin-token",
            help="enable the /admin/ calls (drain, the admin view) for this bearer token; prefer "
            "the environment variable, which other users cannot read",
            env="BLACKDREZ_ADMIN_TOKEN",
            metavar="TOKEN",
            default_words="none, no admin calls",
        ),
    )
    db_url: str | None = field(
        default=None,
        metadata=option(
            flag="--db-url",
            help="the records database (finished games, accounts, ratings, the /api/ routes): "
            "sqlite:///PATH or postgresql://USER@HOST/DB; 'none' keeps no records",
            env="BLACKDREZ_DB_URL",
            metavar="URL",
            default_words=f"{DEFAULT_DB_URL}, in --data-dir",
        ),
    )
    """``None`` keeps no records (the command line's default is :data:`DEFAULT_DB_URL`)."""
    records_in_process: bool = field(
        default=False,
        metadata=option(
            flag="--records-in-process",
            help="verify and store finished games in a thread of the node's process instead of a "
            "process of their own (which spares the node's event loop the GIL it takes)",
            switch=True,
        ),
    )
    """Run the records writer in the node's process (``blackdrez.server.records.writer``);
    otherwise a child process runs it (``records.process``), unless the database is an
    in-memory SQLite, which no other process would see."""
    ladder_tables: int = field(
        default=0,
        metadata=option(
            flag="--ladder-tables",
            help="keep N rated tables of bots playing on this node: the bot ladder (needs records; "
            "run it on one node only)",
            metavar="N",
            parse=whole(0, 100),
        ),
    )
    arena_schedule: list[ArenaSchedule] = field(
        default_factory=list,
        metadata=option(
            flag="--arena-schedule",
            help="make this arena on schedule, e.g. 'daily 18:00 60 Daily bot arena' or "
            "'hourly :30 20 seats=2 rated Quick duel' (UTC; listed an hour ahead); repeat for "
            "several",
            metavar="PLAN",
            parse=arena_schedule,
            repeat=True,
            default_words="none",
        ),
    )
    hint_workers: int = field(
        default=hints.WORKERS, metadata=internal(set_by="tests and benchmarks")
    )
    """Processes computing the experts' hints and the pars (``blackdrez.server.hints``)."""
    hint_budget: float = field(
        default=hints.HINT_BUDGET, metadata=internal(set_by="tests and benchmarks")
    )
    """Seconds a hint waits for the expert before a quick bot answers."""
    hints_per_second: float = field(default=HINT_RATE, metadata=internal(set_by="tests"))
    hint_burst: int = field(default=HINT_BURST, metadata=internal(set_by="tests"))
    """A solitaire session may ask ``hint_burst`` hints at once, ``hints_per_second`` after."""


def options() -> Iterator[tuple[dataclasses.Field[Any], Option]]:
    """Each :class:`Settings` field an option sets, with its option, in the fields' order."""
    for declared in dataclasses.fields(Settings):
        if OPTION in declared.metadata:
            yield declared, declared.metadata[OPTION]


def parser_default(declared: dataclasses.Field[Any]) -> Any:
    """What ``blackdrez serve`` has for a field when neither its flag nor its environment
    variable is given: the field's default, or ``None`` for a field with a default factory
    (:class:`Settings` makes it: a fresh list, a random node id the command line may replace by
    the one its data folder remembers)."""
    return None if declared.default_factory is not dataclasses.MISSING else declared.default
