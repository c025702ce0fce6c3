"""The blackdrez command: run a server node, simulate bot games, record, replay and verify."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import difflib
import logging
import math
import os
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from blackdrez.games import GAMES
from blackdrez.server.settings import (
    CENTURY,
    DEFAULT_DATA_DIR,
    Settings,
    options,
    parser_default,
    positive,
    whole,
)

DEFAULT_URL = "ws://127.0.0.1:8765/"
GAME_NAMES = tuple(GAMES)
"""The games the tools know: one per folder of ``games/``."""
DISTRIBUTION = "blackdrez-server"
"""The distribution whose version ``blackdrez --version`` prints (pyproject's [project] name)."""


def version() -> str:
    """The installed distribution's version; from a source tree that is not installed, the
    version its ``pyproject.toml`` declares; else ``unknown``."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pass
    import tomllib

    try:
        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return "unknown"


class _Version(argparse.Action):
    """``--version``: print ``blackdrez VERSION`` and exit 0 (the version looked up only then)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(
            option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=help
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"{parser.prog} {version()}")
        parser.exit()


def _did_you_mean(word: str, choices: Sequence[str]) -> str | None:
    """The one of ``choices`` closest to the mistyped ``word``, if one is close."""
    matches = difflib.get_close_matches(word, choices, n=1)
    return matches[0] if matches else None


class _CommandParser(argparse.ArgumentParser):
    """A subcommand's parser: arguments it does not know are refused with its own usage (not
    the top level's), with the option meant when a mistyped one is close to one of its own."""

    def parse_known_args(  # type: ignore[override]  # (one signature for the overloads)
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(self.unrecognized(extras))
        return parsed, extras

    def unrecognized(self, extras: list[str]) -> str:
        """argparse's message for ``extras``, and a suggestion for each mistyped option."""
        known = [option for option in self._option_string_actions if option.startswith("--")]
        guesses = []
        for extra in extras:
            option = extra.partition("=")[0]
            if option.startswith("--") and (meant := _did_you_mean(option, known)):
                guesses.append((option, meant))
        message = f"unrecognized arguments: {' '.join(extras)}"
        if len(guesses) == 1:
            return f"{message}; did you mean {guesses[0][1]}?"
        if guesses:
            return f"{message}; " + " ".join(f"{o}: did you mean {m}?" for o, m in guesses)
        return message


def serve_settings(args: argparse.Namespace) -> Settings:
    """The :class:`~blackdrez.server.settings.Settings` that ``blackdrez serve`` options
    describe: each option's value (given, from its variable, or its default), then what the
    command line resolves itself (the data folder, the records file, the remembered node id)."""
    given = {field.name: getattr(args, option.dest) for field, option in options()}
    given["node_id"] = given["node_id"] or None  # (an empty BLACKDREZ_NODE_ID: none given)
    settings = Settings(**{name: value for name, value in given.items() if value is not None})
    settings.redis_url = settings.redis_url or None
    settings.admin_token = settings.admin_token or None
    settings.db_url = _db_url(args)
    if args.in_memory and args.redis_url:
        args.parser.error("--in-memory and --redis-url: choose one")
    if not args.in_memory and not args.redis_url:
        settings.data_dir = Path(args.data_dir or DEFAULT_DATA_DIR)
    else:
        settings.data_dir = None
    if not args.node_id and settings.data_dir is not None and settings.port:
        from blackdrez.server.stores.embedded import remembered_node_id

        settings.node_id = remembered_node_id(settings.data_dir, settings.port, settings.node_id)
    if args.log_format not in ("plain", "json"):  # (from BLACKDREZ_LOG_FORMAT: not checked)
        args.parser.error(f"--log-format (or BLACKDREZ_LOG_FORMAT): {args.log_format!r}")
    if args.ladder_tables and settings.db_url is None:
        args.parser.error("--ladder-tables needs records (a --db-url other than none)")
    _redis_options(args, settings)
    return settings


def _db_url(args: argparse.Namespace) -> str | None:
    """The records database ``--db-url`` names (``None``: none), by default a SQLite file in
    ``--data-dir``."""
    if args.db_url is None:
        return f"sqlite:///{Path(args.data_dir or DEFAULT_DATA_DIR) / 'records.db'}"
    return None if args.db_url.strip().lower() in ("", "none") else args.db_url


def _serve(args: argparse.Namespace) -> int:
    from blackdrez.clients.bots import run_bot
    from blackdrez.server.app import StartError, run
    from blackdrez.server.logs import configure
    from blackdrez.tools import compile as compiling
    from blackdrez.tools.ladder import run_ladder

    settings = serve_settings(args)
    late = compiling.stale()
    if late:  # (Python imports an extension before its source: the node would run old code)
        for line in compiling.stale_lines(late):
            print(f"blackdrez serve: {line}", file=sys.stderr)
        print("blackdrez serve: or 'blackdrez compile --clean' for plain Python", file=sys.stderr)
        return 2
    configure(args.log_format, settings.node_id)
    running = [module for module in compiling.ALL_MODULES if compiling.compiled(module)]
    if running:
        logging.getLogger("blackdrez.serve").info(
            "compiled: %d of %d modules (%s)",
            len(running),
            len(compiling.ALL_MODULES),
            ", ".join(module.removeprefix("blackdrez.") for module in running),
        )
    if args.workers is not None:
        from blackdrez.server.workers import WorkersRefused, supervise

        try:
            return supervise(settings, args.workers)
        except WorkersRefused as error:
            print(f"blackdrez serve: {error}", file=sys.stderr)
            return 2
    try:
        _run_async(run(settings, bot_client=run_bot, ladder=run_ladder))
    except StartError as error:
        print(f"blackdrez serve: {error}", file=sys.stderr)
        return 2
    return 0


def _drain(args: argparse.Namespace) -> int:
    from blackdrez.server.admin import DrainError, drain

    if not args.token:
        args.parser.error("give --token or set BLACKDREZ_ADMIN_TOKEN")
    try:
        drain(args.url, args.token, args.timeout)
    except DrainError as error:
        print(f"blackdrez drain: {error}", file=sys.stderr)
        return 1
    return 0


def _redis_options(args: argparse.Namespace, settings: Settings) -> None:
    """Check the Redis URL (one Redis, or a Redis Cluster) and the WAIT options."""
    from blackdrez.server.stores.redis_cluster import SCHEME, parse_cluster_url
    from blackdrez.server.stores.redis_link import COMMAND_TIMEOUT

    if settings.redis_url and settings.redis_url.startswith(f"{SCHEME}:"):
        try:
            parse_cluster_url(settings.redis_url)
        except ValueError as error:
            args.parser.error(f"--redis-url: {error}")
    elif settings.redis_url and not settings.redis_url.startswith(
        ("redis://", "rediss://", "unix://")
    ):
        args.parser.error(
            f"--redis-url: {settings.redis_url!r} is not a redis://, rediss://, unix:// or "
            f"{SCHEME}:// URL"
        )
    elif settings.redis_url and settings.redis_url.startswith(("redis://", "rediss://")):
        # Redis's client takes a database it cannot read as a number for database 0, silently.
        database = urlsplit(settings.redis_url).path.strip("/")
        if database and not (database.isascii() and database.isdigit()):
            args.parser.error(
                f"--redis-url: the database {database!r} is not a number (redis://HOST:PORT/DB)"
            )
    if settings.redis_wait_replicas < 0:
        args.parser.error("--redis-wait-replicas must be 0 or more")
    if settings.redis_wait_replicas and not settings.redis_url:
        args.parser.error("--redis-wait-replicas needs --redis-url")
    limit = int(COMMAND_TIMEOUT * 1000)
    if not 0 < settings.redis_wait_timeout_ms < limit:
        args.parser.error(f"--redis-wait-timeout-ms must be from 1 to {limit - 1}")


def _add_settings_options(serve: argparse.ArgumentParser) -> None:
    """``blackdrez serve``'s options for the :class:`~blackdrez.server.settings.Settings`
    fields, as the fields declare them (flag, help, environment variable, parser, default)."""
    for field, option in options():
        default = parser_default(field)
        if option.env is not None:
            default = os.environ.get(option.env, default)  # (a text default goes through type)
        if option.switch:
            serve.add_argument(
                option.flag, dest=option.dest, action="store_true", help=option.describe(False)
            )
            continue
        parsed: dict[str, Any] = {} if option.parse is None else {"type": option.parse}
        serve.add_argument(
            option.flag,
            dest=option.dest,
            action="append" if option.repeat else "store",
            default=default,
            metavar=option.metavar,
            help=option.describe(field.default),
            **parsed,
        )


def _http_url(text: str) -> str:
    """An argparse type: an ``http://`` or ``https://`` address with a host (the node's game
    port), not its WebSocket address nor a bare ``host:port``."""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{text!r} is not the node's http://HOST:PORT address")
    return text


def _check_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str] | None:
    """Reject options that do not apply to ``args.game``; return the strategies chosen."""
    from blackdrez.games import GAMES

    game = GAMES[args.game]
    if getattr(args, "per_round", False) and args.game != "blackjack_piles":
        parser.error("--per-round applies to blackjack_piles only")
    if getattr(args, "deals", None) is not None and not getattr(args, "per_round", False):
        parser.error("--deals needs --per-round")
    if args.seats is not None and args.game != "blackdrez":
        parser.error("--seats applies to blackdrez only")
    if args.seats is not None and not 2 <= args.seats <= 8:
        parser.error("--seats must be from 2 to 8")
    strategies = args.strategy
    if strategies is None:
        return None
    for name in strategies:
        if name not in game.strategies:
            parser.error(
                f"unknown {args.game} strategy {name!r}; choose from {', '.join(game.strategies)}"
            )
    seats = args.seats or 4
    if args.game == "blackdrez":
        if len(strategies) not in (1, seats):
            parser.error(f"give one --strategy for every seat, or one for all {seats} seats")
        return strategies * seats if len(strategies) == 1 else strategies
    if len(strategies) != 1:
        parser.error(f"{args.game} is a solitaire: give one --strategy")
    return strategies


def _simulate(args: argparse.Namespace) -> int:
    from blackdrez.games.blackdrez import bots as blackdrez_bots
    from blackdrez.games.blackjack_piles import bots as blackjack_piles_bots
    from blackdrez.games.blue_jacket import bots as blue_jacket_bots

    strategies = _check_options(args.parser, args)
    if args.games < 1:
        args.parser.error("--games must be at least 1")
    report: dict[str, Any]
    steps = args.games
    if args.per_round:
        steps += 7 * (args.deals if args.deals is not None else args.games)
    unit = "games and single rounds" if args.per_round else "games"
    with _progress(
        steps, f"simulating {args.game}", quiet=args.json, command="simulate", unit=unit
    ) as tick:
        if args.game == "blackdrez":
            report = blackdrez_bots.simulate(
                args.games, args.seed, seats=args.seats or 4, strategies=strategies, progress=tick
            )
        elif args.game == "blackjack_piles":
            report = blackjack_piles_bots.simulate(
                args.games,
                args.seed,
                per_round=args.per_round,
                strategy=strategies[0] if strategies else "greedy",
                deals=args.deals,
                progress=tick,
            )
        else:
            report = blue_jacket_bots.simulate(
                args.games,
                args.seed,
                strategy=strategies[0] if strategies else "heuristic",
                progress=tick,
            )
    report = {"game": args.game, "seed": args.seed, **report}
    if args.json:
        import msgspec

        print(msgspec.json.format(msgspec.json.encode(report), indent=2).decode())
    else:
        print(_report_table(report))
    return 0


PROGRESS_LINES = 10
"""When standard error is not a terminal, a long run prints a progress line every tenth of it..."""
PROGRESS_SECONDS = 10.0
"""... and whenever this many seconds have passed since the last line (a slow run)."""


@contextlib.contextmanager
def _progress(
    total: int, what: str, quiet: bool = False, *, command: str = "blackdrez", unit: str = "steps"
) -> Iterator[Callable[[], None]]:
    """Progress of a long run on standard error; yields the function to call per step.

    On a terminal, a progress bar (none with ``quiet``: ``--json``). When standard error is not
    a terminal (piped, redirected to a log), plain lines such as ``simulate: 100/1000 games,
    12.3 s``, so that a long run shows it is alive; standard output keeps only the report.
    """
    if not sys.stderr.isatty():
        yield _progress_lines(total, command, unit)
        return
    if quiet:
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    columns = (
        "{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(what, total=total)
        yield lambda: bar.advance(task)


def _progress_lines(total: int, command: str, unit: str) -> Callable[[], None]:
    """The per-step function of :func:`_progress` when standard error is not a terminal: a
    line at every tenth of ``total`` steps, at the last, and after a pause of
    :data:`PROGRESS_SECONDS` without one."""
    every = max(1, math.ceil(total / PROGRESS_LINES))
    started = last = time.monotonic()
    done = 0

    def step() -> None:
        nonlocal done, last
        done += 1
        now = time.monotonic()
        if done % every == 0 or done == total or now - last >= PROGRESS_SECONDS:
            last = now
            line = f"{command}: {done}/{total} {unit}, {now - started:.1f} s"
            print(line, file=sys.stderr, flush=True)

    return step


PROPORTIONS = ("rate", "share", "_se", "completed")
"""Report keys whose figures are fractions of 1: shown with three decimals."""
NOTES = {
    "wins_by_seat": "wins by seat: first places; a shared first place counts as a win for each "
    "seat sharing it, so the wins can add up to more than the games",
    "split_share": "split share: the fraction of rounds whose pot was split (several 11s on the "
    "deal, or everyone standing on level hands)",
    "pass_rate_se": "pass rate se: the standard error of the pass rate (one standard deviation "
    "of the estimate)",
    "completed": "completed: the fraction of games that passed all seven rounds",
}
"""What a report's less obvious figures mean, printed below the table when they appear."""
DEAL_LISTS = ("undecided", "not_winnable_deals")
"""Report keys whose figures are lists of deal numbers (``blackdrez solve --deals``)."""
LISTED_DEALS = 20
"""The deals such a list shows in the table (``--json`` has them all)."""


def _number(value: Any, key: str = "") -> str:
    """A figure as a table shows it: fractions of 1 to three decimals, figures per second as
    whole numbers, other decimals to two; the same key always the same way."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if key.endswith("per_second"):
            return f"{value:.0f}"
        decimals = 3 if any(mark in key for mark in PROPORTIONS) else 2
        return f"{value:.{decimals}f}"
    if isinstance(value, list) and key.endswith("by_seat"):  # seats counted from 1
        return ", ".join(f"seat {seat}: {_number(item, key)}" for seat, item in enumerate(value, 1))
    if isinstance(value, list) and key in DEAL_LISTS:
        if not value:
            return "none"
        shown = ", ".join(str(deal) for deal in value[:LISTED_DEALS])
        more = f" and {len(value) - LISTED_DEALS} more" if len(value) > LISTED_DEALS else ""
        return f"deal{'s' if len(value) > 1 else ''} {shown}{more}"
    if isinstance(value, list) and key.endswith("ci95") and len(value) == 2:
        return f"{_number(value[0], key)} to {_number(value[1], key)}"
    if isinstance(value, list):
        return " ".join(_number(item, key) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{name} {_number(item, name)}" for name, item in value.items())
    if value is None:
        return "-"
    return str(value)


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    """``rows`` as lines of left-aligned columns two spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _report_table(report: dict[str, Any]) -> str:
    """A simulation report as a readable table: one figure a line, then any per-round table,
    then what the less obvious figures mean."""
    pairs = []
    tables = []
    keys = set(report)
    for key, value in report.items():
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            header = list(value[0])
            keys.update(header)
            rows = [[key.replace("_", " ") for key in header]]
            rows += [[_number(item.get(column), column) for column in header] for item in value]
            tables.append(f"{key}:\n" + "\n".join("  " + line for line in _columns(rows)))
        else:
            figure = _number(value, key)
            if key == "wins_by_seat" and sum(value) > report.get("games", sum(value)):
                figure += f" ({sum(value)} wins in {report['games']} games: some shared)"
            pairs.append([key.replace("_", " "), figure])
    sections = ["\n".join(_columns(pairs)), *tables]
    notes = [
        textwrap.fill(text, 100, initial_indent="  ", subsequent_indent="    ")
        for key, text in NOTES.items()
        if key in keys
    ]
    if notes:
        sections.append("\n".join(["notes:", *notes]))
    return "\n\n".join(sections)


def _load(path: str) -> Any:
    """Read a record file; raises ``ValueError`` with a readable message."""
    return _load_named(path)[0]


def _load_named(path: str) -> tuple[Any, dict[int, str]]:
    """Read a record file and the players' names it has, by seat (see :func:`_seat_names`);
    raises ``ValueError`` with a readable message."""
    import msgspec

    from blackdrez.games.records import decode_record

    try:
        data = Path(path).read_bytes()
        return decode_record(data), _seat_names(msgspec.json.decode(data))
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror}") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise ValueError(f"{path} is not a game record: {error}") from None


def _seat_names(data: Any) -> dict[int, str]:
    """The players' names a record names, by seat: a record of the server's records API has
    ``players``, each with its ``seat`` and ``name`` (one written by ``blackdrez record``, none)."""
    players = data.get("players") if isinstance(data, dict) else None
    names: dict[int, str] = {}
    for player in players if isinstance(players, list) else []:
        seat = player.get("seat") if isinstance(player, dict) else None
        name = player.get("name") if isinstance(player, dict) else None
        if isinstance(seat, int) and seat >= 0 and isinstance(name, str) and name.strip():
            names[seat] = " ".join(name.split())
    return dict(sorted(names.items()))


def _apart(names: Mapping[int, str]) -> dict[int, str]:
    """``names`` as a transcript calls the players: a name two seats share gets its seat
    number ("Ada (seat 1)", "Ada (seat 3)"), so that they read apart."""
    taken = list(names.values())
    return {
        seat: f"{name} (seat {seat + 1})" if taken.count(name) > 1 else name
        for seat, name in names.items()
    }


def _players_line(names: Mapping[int, str], seats: Any) -> str:
    """The transcript's line saying who sat where: ``players: Ada in seat 1, seat 2 (no name),
    ...`` (for a solitaire, ``player: Ada``); ``seats``: the record's config's, if a number."""
    count = max(seats if isinstance(seats, int) else 0, max(names, default=-1) + 1)
    if count == 1:
        return f"player: {names[0]}"
    said = [
        f"{names[seat]} in seat {seat + 1}" if seat in names else f"seat {seat + 1} (no name)"
        for seat in range(count)
    ]
    return "players: " + ", ".join(said)


def _replay(args: argparse.Namespace) -> int:
    import msgspec

    from blackdrez.games.transcript import describe, opening
    from blackdrez.games.verify import ReplayError, start, steps

    try:
        record, names = _load_named(args.file)
        called = _apart(names)
        engine = start(record)
        if not args.json:
            origin = f"seed {record.seed!r}" if record.seed is not None else "a given card order"
            settings = ", ".join(
                f"{key.replace('_', ' ')} {value}"
                for key, value in record.config.items()
                if value is not None
            )
            print(f"{record.game} from {origin}" + (f" ({settings})" if settings else ""))
            if record.commitment:
                print(f"commitment {record.commitment}")
            if names:
                print(_players_line(names, record.config.get("seats")))
            for line in opening(record.game, engine.view(0)):
                print(line)
        for step in steps(engine, record):
            if args.json:
                action = msgspec.json.encode(step.action).decode()
                events = [msgspec.json.encode(event).decode() for event in step.events]
                print(
                    f'{{"index":{step.index},"seat":{step.seat},"action":{action},'
                    f'"events":[{",".join(events)}]}}'
                )
            else:
                for event in step.events:
                    for line in describe(record.game, event, called):
                        print(line)
    except (ValueError, ReplayError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader (say, ``head``) has seen enough; keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    if not args.json:
        state = "over" if engine.over else "not over"
        print(f"{len(record.actions)} actions; the game is {state}")
        if engine.over and record.seed is not None:
            print(f"seed revealed at the end: {record.seed}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from blackdrez.games.verify import verify

    try:
        record = _load(args.file)
        problems = verify(record)
    except ValueError as error:
        problems = [str(error)]
    if problems:
        print(f"FAILED: {args.file}")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    dealt = sum(len(cards) for cards in record.dealt or [])
    print(
        f"OK: {record.game} record verified: the seed matches commitment {record.commitment}, "
        f"all {len(record.actions)} actions replay, the {dealt} cards dealt are the shuffle's "
        "and the game is over"
    )
    return 0


def _record(args: argparse.Namespace) -> int:
    from blackdrez.games import GAMES
    from blackdrez.games.records import encode_record, write_record
    from blackdrez.games.verify import play_bots

    strategies = _check_options(args.parser, args)
    config = GAMES[args.game].config()
    if args.game == "blackdrez":
        from blackdrez.games.blackdrez.rules import Config

        config = Config(seats=args.seats or 4)
    record = play_bots(args.game, args.seed, config, strategies)
    if args.out:
        write_record(record, args.out)
        print(f"wrote {args.out}: {record.game}, {len(record.actions)} actions", file=sys.stderr)
    else:
        sys.stdout.write(encode_record(record).decode())
    return 0


def _run_async(coroutine: Any) -> Any:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


CONNECT_FAILURES: tuple[type[BaseException], ...] = (OSError, TimeoutError)
"""What connecting to a server that is not there (or not a BlackDrez server) raises."""


def _cannot_connect(command: str, url: str, error: BaseException) -> int:
    """Say in one line why ``url`` could not be reached; the exit code for it (2)."""
    errno = getattr(error, "errno", None)
    if errno:
        reason = f"{os.strerror(errno).lower()} (is the server running?)"
    elif isinstance(error, TimeoutError):
        reason = "no answer in time"
    elif isinstance(error, OSError):
        reason = "connection refused (is the server running?)"  # several addresses, all refused
    else:
        reason = str(error).split("\n")[0] or type(error).__name__
    print(f"blackdrez {command}: cannot connect to {url}: {reason}", file=sys.stderr)
    return 2


def _connect_failures() -> tuple[type[BaseException], ...]:
    from websockets.exceptions import InvalidHandshake, InvalidURI

    return (*CONNECT_FAILURES, InvalidHandshake, InvalidURI)


def _say_seated(table: str, seat: int, host: bool) -> None:
    """Tell whoever started ``blackdrez bot`` where it sits while it waits for a game (its
    seat counted from 1, as the browser shows it)."""
    made = ", a table it made: it starts the game once another player is ready" if host else ""
    print(
        f"blackdrez bot: seated at table {table}, seat {seat + 1}{made}",
        file=sys.stderr,
        flush=True,
    )


def _ordinal(number: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ... ``11th``, ``21st``."""
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10)
    return f"{number}{suffix or 'th'}"


def _and(words: Sequence[str]) -> str:
    """``A``, ``A and B``, ``A, B and C``."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _bot_lines(result: Any, names: Mapping[int, str]) -> list[str]:
    """What ``blackdrez bot`` prints of its :class:`~blackdrez.clients.bots.BotResult`: who it
    was and where it sat, the final ranking, the fairness proof. Players are called by their
    ``names`` (by seat) where known, else "seat N"; seats are counted from 1, as the browser
    shows them."""

    def who(seat: int) -> str:
        return names.get(seat) or f"seat {seat + 1}"

    at = f"at table {result.table}" + (f", seat {result.seat + 1}" if result.seat in names else "")
    if result.removed and not result.games:
        return [f"{who(result.seat)} {at}: removed before a game ended"]
    games = f"{result.games} games, the last with " if result.games > 1 else ""
    actions = f"{result.actions} action{'' if result.actions == 1 else 's'}"
    lines = [f"{who(result.seat)} {at}: {games}{actions}"]
    ranking = (result.final or {}).get("result") or {}
    for place in ranking.get("ranking", []):
        cards = f"{place['cards']} card{'' if place['cards'] == 1 else 's'}"
        each = " each" if len(place["seats"]) > 1 else ""
        players = _and([who(seat) for seat in sorted(place["seats"])])
        lines.append(f"  {_ordinal(place['place'])}: {players}, {cards}{each}")
    lines.append("fairness proof: " + ("verified" if result.fair else f"FAILED: {result.problem}"))
    return lines


def _bot(args: argparse.Namespace) -> int:
    from blackdrez.clients.bots import random_bot_name, run_bot
    from blackdrez.clients.client import ServerError

    if not args.table and not args.quick and not args.find:
        args.parser.error("give --table ID or --quick (or --find: queue for a table)")
    if args.games is not None and args.games < 1:
        args.parser.error("--games must be at least 1")
    _check_queue_options(args)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    name = args.name or random_bot_name(args.strategy)  # (chosen here: its result names it)
    try:
        result = _run_async(
            run_bot(
                args.url,
                table=args.table,
                quick=args.quick,
                strategy=args.strategy,
                name=name,
                invite=args.invite,
                games=args.games,
                seated=_say_seated,
                chat=args.chat,
                find=args.find,
                seats=args.seats,
                rated=args.rated,
                bots_after=args.bots_after,
            )
        )
    except ServerError as error:
        print(f"blackdrez bot: the server refused: {error.error.message}", file=sys.stderr)
        return 1
    except _connect_failures() as error:
        return _cannot_connect("bot", args.url, error)
    # Everyone by the name the table showed (the bot's own as chosen, should it show none).
    print("\n".join(_bot_lines(result, {result.seat: name, **result.names})))
    return 0 if result.fair or (result.removed and not result.games) else 1


def _arena(args: argparse.Namespace) -> int:
    from blackdrez.clients.bots import run_arena
    from blackdrez.clients.client import ServerError

    if args.check is not None:
        if args.join is not None:
            args.parser.error("--check and --join are two different things: give one")
        return _check_only(args)
    if args.bots < 1:
        args.parser.error("--bots must be at least 1")
    if not 2 <= args.seats <= 8:
        args.parser.error("--seats must be from 2 to 8")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")

    def started(made: Any) -> None:
        arena = made.arena
        page = args.url.replace("ws://", "http://").replace("wss://", "https://").rstrip("/")
        link = f"{page}/#/arena/{arena.id}"
        if made.invite:
            link += f"?invite={made.invite}"
        print(f"arena {arena.id}: {arena.name}, {args.bots} bots, until {_clock(arena.ends)}")
        print(f"watch it at {link}", flush=True)

    try:
        final = _run_async(
            run_arena(
                args.url,
                bots=args.bots,
                arena=args.join,
                invite=args.invite,
                name=args.name,
                minutes=args.minutes,
                seats=args.seats,
                rated=args.rated,
                think=args.think,
                started=started,
            )
        )
    except ServerError as error:
        print(f"blackdrez arena: the server refused: {error.error.message}", file=sys.stderr)
        return 1
    except _connect_failures() as error:
        return _cannot_connect("arena", args.url, error)
    _print_standings(final.standings)
    return _print_check(args, final.arena.id, args.invite, required=False)


def _print_standings(standings: list[Any]) -> None:
    for line in standings:
        flame = " (on fire)" if line.on_fire else ""
        print(f"{line.rank:>3}. {line.name}: {line.points} points, {line.games} games{flame}")


def _print_check(
    args: argparse.Namespace, arena: str, invite: str | None, *, required: bool = True
) -> int:
    """Check ``arena``'s standings against its stored games; 0 when they agree, 1 if not (or,
    if ``required``, when the records cannot be read)."""
    from blackdrez.clients.records import check_arena

    try:
        checked = _run_async(check_arena(args.url, arena, invite))
    except OSError as error:  # the records API did not answer (no records: --db-url none)
        print(f"the standings could not be checked against the records: {error}")
        return 1 if required else 0
    late = f" ({checked.late} more ended after it: stored, not scored)" if checked.late else ""
    if checked.problems:
        print(f"the standings disagree with the {checked.games} stored games{late}:")
        for problem in checked.problems:
            print(f"  {problem}")
        return 1
    print(f"checked: the standings agree with the {checked.games} stored games of the arena{late}")
    return 0


def _check_only(args: argparse.Namespace) -> int:
    """``blackdrez arena --check ID``: the standings, checked against the stored games."""
    from blackdrez.clients.client import ServerError
    from blackdrez.clients.records import check_arena

    try:
        checked = _run_async(check_arena(args.url, args.check, args.invite))
    except ServerError as error:
        print(f"blackdrez arena: the server refused: {error.error.message}", file=sys.stderr)
        return 1
    except _connect_failures() as error:
        return _cannot_connect("arena", args.url, error)
    info = checked.arena
    print(f"arena {info.id}: {info.name}, {info.status}, until {_clock(info.ends)}")
    _print_standings(checked.standings)
    return _print_check(args, info.id, args.invite, required=True)


def _clock(when: float) -> str:
    """A Unix time as the UTC time of day people read."""
    return time.strftime("%H:%M UTC", time.gmtime(when))


def _check_queue_options(args: argparse.Namespace) -> None:
    """Refuse ``--seats``, ``--rated`` and ``--bots-after`` without ``--find`` (they are the
    matchmaking queue's choices), and a table size there is none of (the server checks
    ``--bots-after`` itself: its refusal is printed)."""
    given = [
        flag
        for flag, value in (
            ("--seats", args.seats is not None),
            ("--rated", args.rated),
            ("--bots-after", args.bots_after is not None),
        )
        if value
    ]
    if given and not args.find:
        args.parser.error(f"{_and(given)} go{'es' if len(given) == 1 else ''} with --find")
    if args.seats is not None and not 2 <= args.seats <= 8:
        args.parser.error("--seats must be from 2 to 8")


def _bots(args: argparse.Namespace) -> int:
    from blackdrez.clients.bots import STRATEGIES, run_swarm, run_swarm_found
    from blackdrez.clients.client import ServerError

    if not 2 <= args.per_table <= 8:
        args.parser.error("--per-table must be 2 to 8")
    if args.find and args.ladder:
        args.parser.error("--find and --ladder: choose one")
    if args.find and args.round_pause is not None:
        args.parser.error("--round-pause does not go with --find (the queue makes the tables)")
    if args.ladder:
        return _ladder(args)
    if args.games is not None or args.identities is not None:
        args.parser.error("--games and --identities go with --ladder")

    strategies = tuple(args.strategy or STRATEGIES)
    try:
        if args.find:
            swarm = run_swarm_found(
                args.url, args.tables, args.per_table, strategies, think=args.think or 0.0
            )
        else:
            swarm = run_swarm(
                args.url,
                args.tables,
                args.per_table,
                strategies,
                round_pause=args.round_pause or 0.0,
                think=args.think or 0.0,
            )
        summary = _run_async(swarm)
    except ServerError as error:
        print(f"blackdrez bots: the server refused: {error.error.message}", file=sys.stderr)
        return 1
    except _connect_failures() as error:
        return _cannot_connect("bots", args.url, error)
    print("\n".join(summary.lines()))
    return 0 if summary.unfair == 0 and not summary.inconsistent else 1


def _ladder(args: argparse.Namespace) -> int:
    """``blackdrez bots --ladder``: rated tables of bots kept playing, as accounts."""
    from pathlib import Path

    from blackdrez.clients.bots import STRATEGIES
    from blackdrez.tools.ladder import ROUND_PAUSE, THINK, LadderError, run_account_ladder

    if args.tables < 1 or (args.games is not None and args.games < 1):
        args.parser.error("--tables and --games must be at least 1")
    identities = Path(args.identities or LADDER_IDENTITIES)
    try:
        summary = _run_async(
            run_account_ladder(
                args.url,
                args.tables,
                args.per_table,
                list(args.strategy or STRATEGIES),
                identities,
                games=args.games,
                think=THINK if args.think is None else args.think,
                round_pause=ROUND_PAUSE if args.round_pause is None else args.round_pause,
            )
        )
    except LadderError as error:
        print(f"blackdrez bots --ladder: {error}", file=sys.stderr)
        return 1
    except _connect_failures() as error:
        return _cannot_connect("bots", args.url, error)
    print("\n".join(summary.lines()))
    return 0


LADDER_IDENTITIES = "blackdrez-ladder.json"
"""Where ``blackdrez bots --ladder`` keeps its bots' accounts unless told otherwise."""


def _deal_numbers(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[int]:
    """The numbered deals of ``--deal N`` or ``--deals A-B`` (inclusive)."""
    if (args.deal is None) == (args.deals is None):
        parser.error("give --deal N or --deals A-B")
    if args.deal is not None:
        if args.deal < 0:
            parser.error("--deal must not be negative")
        return [args.deal]
    first, _, last = args.deals.partition("-")
    try:
        low, high = int(first), int(last or first)
    except ValueError:
        parser.error(f"--deals takes A-B, two deal numbers, not {args.deals!r}")
    if not 0 <= low <= high:
        parser.error("--deals A-B needs 0 <= A <= B")
    return list(range(low, high + 1))


def _action_text(action: Any) -> str:
    """A Blue Jacket action in short form: ``b3>aces``, ``r1.2<>r2.5``, ``deal``."""
    from blackdrez.games.blue_jacket.rules import Interchange, Move

    if isinstance(action, Move):
        return f"{action.source}>{action.target}"
    if isinstance(action, Interchange):
        return f"{action.a}<>{action.b}"
    return "deal"


def _solve(args: argparse.Namespace) -> int:
    import msgspec

    from blackdrez.games.blue_jacket import solver

    numbers = _deal_numbers(args.parser, args)
    if args.budget < 1:
        args.parser.error("--budget must be at least 1")
    results = []
    solution = None
    with _progress(
        len(numbers), f"solving {args.game}", quiet=args.json, command="solve", unit="deals"
    ) as advance:
        for number in numbers:
            result, solution = solver.solve_numbered(number, args.budget)
            results.append(result)
            advance()
    report: dict[str, Any] = {"game": args.game, "budget": args.budget}
    if args.deal is not None and solution is not None:
        result = results[0]
        report |= {"deal": result.deal, "seed": solver.deal_seed(result.deal)}
        report |= msgspec.to_builtins(result) | {"moves": msgspec.to_builtins(solution.moves)}
        if args.json:
            print(msgspec.json.format(msgspec.json.encode(report), indent=2).decode())
            return 0
        found = f" in {result.actions} actions" if result.outcome == "winnable" else ""
        print(f"{args.game} deal {result.deal} (seed {report['seed']!r}): {result.outcome}{found}")
        print(f"{result.nodes} nodes, {result.seconds:.3f} s CPU (budget {args.budget} nodes)")
        if solution.moves:
            print(textwrap.fill(" ".join(map(_action_text, solution.moves)), width=100))
        return 0
    report |= {"range": f"{numbers[0]}-{numbers[-1]}"} | solver.summarize(results)
    if args.json:
        report["results"] = msgspec.to_builtins(results)
        print(msgspec.json.format(msgspec.json.encode(report), indent=2).decode())
    else:
        print(_report_table(report))
    return 0


def _add_game_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("game", choices=GAME_NAMES, help="the game to play")
    command.add_argument(
        "--seats", type=int, help="blackdrez only: players at the table, 2 to 8 (default 4)"
    )
    command.add_argument(
        "--strategy",
        action="append",
        metavar="NAME",
        help="the bot: blackdrez threshold or bust_probability (once for every seat, or once "
        "per seat; default: the two alternating), blackjack_piles greedy (default) or "
        "expert, blue_jacket heuristic (default), expert, greedy, first or random",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``blackdrez`` command line (also what deployment files are checked against)."""
    parser = argparse.ArgumentParser(prog="blackdrez", description=__doc__)
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_CommandParser)

    serve = commands.add_parser(
        "serve",
        help="run a game server node",
        description="Run a game server node: WebSocket and HTTP on one port. Every option is "
        "described in docs/operations.md.",
    )
    _add_settings_options(serve)
    serve.add_argument(
        "--in-memory",
        action="store_true",
        help="keep the lobby, tables and sessions in this process's memory, with no Redis: "
        "all of it is lost when the node stops (for tests and benchmarks; default off)",
    )
    serve.add_argument(
        "--workers",
        type=whole(1),
        metavar="N",
        help="run N node processes on the one port (SO_REUSEPORT), sharing --redis-url, which "
        "they need; named NODE_ID-1 to NODE_ID-N (default: one process, no supervisor)",
    )
    serve.add_argument(
        "--log-format",
        choices=("plain", "json"),
        default=os.environ.get("BLACKDREZ_LOG_FORMAT", "plain"),
        help="plain lines, or one JSON object per line with the node, table and player ids "
        "(default plain; env BLACKDREZ_LOG_FORMAT)",
    )
    serve.set_defaults(run=_serve, parser=serve)

    drain = commands.add_parser(
        "drain",
        help="drain a node for an upgrade: hand its tables over, then it exits",
        description="Ask a node to stop taking tables, move its players and hand its tables over "
        "to the other nodes, then exit; wait until it is gone. See docs/operations.md.",
    )
    drain.add_argument(
        "--url", required=True, type=_http_url, help="the node's HTTP address, http://host:port"
    )
    drain.add_argument(
        "--token",
        default=os.environ.get("BLACKDREZ_ADMIN_TOKEN"),
        help="the node's admin token (default: env BLACKDREZ_ADMIN_TOKEN)",
    )
    drain.add_argument(
        "--timeout",
        type=positive(CENTURY),
        default=60.0,
        help="seconds to wait for it (default 60)",
    )
    drain.set_defaults(run=_drain, parser=drain)

    simulate = commands.add_parser(
        "simulate",
        help="play many games with the reference bots and print statistics",
        description="Play many games with the reference bots and print statistics. Game i is "
        "dealt from the seed 'SEED:i', so a run is reproducible.",
    )
    _add_game_options(simulate)
    simulate.add_argument("--games", type=int, default=100, help="games to play (default 100)")
    simulate.add_argument("--seed", default="simulate", help="seed prefix (default 'simulate')")
    simulate.add_argument(
        "--json",
        action="store_true",
        help="print JSON instead of a table (and no progress bar; when standard error is not a "
        "terminal, its progress lines still go there)",
    )
    simulate.add_argument(
        "--per-round",
        action="store_true",
        help="blackjack_piles only: also play each round alone and report its pass rate, mean "
        "hands and cards left",
    )
    simulate.add_argument(
        "--deals", type=int, help="with --per-round: deals per round (default: as --games)"
    )
    simulate.set_defaults(run=_simulate, parser=simulate)

    solve = commands.add_parser(
        "solve",
        help="solve numbered deals with the stock known (perfect information)",
        description="Solve numbered deals (seed 'GAME:deal:N', as the server deals them) with "
        "the solver, which sees the stock: each deal is winnable (with the winning moves), not "
        "winnable (search exhausted) or unknown (node budget spent). With --deals, a summary: "
        "decided and winnable fractions with 95% confidence intervals, CPU time per deal.",
    )
    solve.add_argument("game", choices=("blue_jacket",), help="the game (only blue_jacket)")
    which = solve.add_mutually_exclusive_group()
    which.add_argument(
        "--deal", type=int, metavar="N", help="one deal: print its moves (default: none)"
    )
    which.add_argument(
        "--deals", metavar="A-B", help="deals A to B: print a summary (default: none)"
    )
    solve.add_argument(
        "--budget", type=int, default=200_000, help="search nodes per deal (default 200000)"
    )
    solve.add_argument("--json", action="store_true", help="print JSON (with every deal)")
    solve.set_defaults(run=_solve, parser=solve)

    record = commands.add_parser(
        "record",
        help="play one game with the reference bots and write its record",
        description="Play one game with the reference bots and write its record (JSON).",
    )
    _add_game_options(record)
    record.add_argument("--seed", required=True, help="the game's seed (required)")
    record.add_argument("--out", metavar="FILE", help="write here (default: standard output)")
    record.set_defaults(run=_record, parser=record)

    replay = commands.add_parser(
        "replay",
        help="replay a game record and print what happened, move by move",
        description="Replay a game record and print a readable transcript of the game (every "
        "deal, move and result, cards named in words), or its events as JSON.",
    )
    replay.add_argument("file", metavar="FILE", help="a record written by 'blackdrez record'")
    replay.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per action (index, seat, action, events) instead of the transcript",
    )
    replay.set_defaults(run=_replay, parser=replay)

    verify = commands.add_parser(
        "verify",
        help="check a finished game's record against its revealed seed",
        description="Check a finished game's record against its revealed seed: the seed matches "
        "the commitment, every action replays, the cards dealt are the shuffle's, the game is "
        "over. Prints OK (exit 0) or each problem (exit 1).",
    )
    verify.add_argument("file", metavar="FILE", help="a record written by 'blackdrez record'")
    verify.set_defaults(run=_verify, parser=verify)

    from blackdrez.tools import compile as compiling

    compile_ = commands.add_parser(
        "compile",
        help="compile the rules and Blue Jacket's solver with mypyc (--core: the table core with "
        "Cython), in place (optional)",
        description=compiling.DESCRIPTION,
    )
    compiling.add_arguments(compile_)
    compile_.set_defaults(run=compiling.run, parser=compile_)

    from blackdrez.clients.bots import STRATEGIES

    bot = commands.add_parser(
        "bot",
        help="play one game as a bot over the public protocol",
        description="Connect as a bot, take a seat (at a table, by quick-join, or through the "
        "matchmaking queue with --find), get ready and play from what the seat sees; then check "
        "the game's fairness proof. Exit code 2 when the server cannot be reached.",
    )
    bot.add_argument(
        "--url", default=DEFAULT_URL, help=f"the server's WebSocket address (default {DEFAULT_URL})"
    )
    where = bot.add_mutually_exclusive_group()
    where.add_argument("--table", help="the table to join (default: none, give this or --quick)")
    where.add_argument(
        "--quick",
        action="store_true",
        help="quick-join an open table; with none open, make one and start its game once "
        "another player is ready there",
    )
    where.add_argument(
        "--find",
        action="store_true",
        help="queue for a table (matchmaking) instead: play one game at each table the queue "
        "makes, then queue again for the next (--games)",
    )
    bot.add_argument("--invite", help="invite code of a private table (default: none)")
    bot.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="threshold",
        help="how the bot plays: %(choices)s (default %(default)s)",
    )
    bot.add_argument(
        "--name",
        help="display name (default: a first name and the strategy, e.g. 'Ada (threshold)')",
    )
    bot.add_argument(
        "--games",
        type=int,
        default=1,
        help="games to play before leaving (default 1)",
    )
    bot.add_argument(
        "--no-chat",
        dest="chat",
        action="store_false",
        help="say nothing in the table's chat (default: 'Good game!' after each game played)",
    )
    bot.add_argument(
        "--seats",
        type=int,
        metavar="N",
        help="with --find: the table size to queue for, 2 to 8 (default: any)",
    )
    bot.add_argument(
        "--rated",
        action="store_true",
        help="with --find: queue for a rated table (default: casual)",
    )
    bot.add_argument(
        "--bots-after",
        type=float,
        metavar="SECONDS",
        help="with --find: after this many seconds of waiting, bots may take the seats nobody "
        "took, 0 to 600 (default: never)",
    )
    bot.set_defaults(run=_bot, parser=bot)

    arena = commands.add_parser(
        "arena",
        help="run a bot arena: make an arena and have bots play in it until it ends",
        description="Make an arena (a tournament of a fixed length; or play in one, --join) and "
        "have bots play in it, game after game, until it ends; anyone may watch it in the "
        "browser at the address printed. Prints the final standings. Exit code 2 when the "
        "server cannot be reached.",
    )
    arena.add_argument(
        "--url", default=DEFAULT_URL, help=f"the server's WebSocket address (default {DEFAULT_URL})"
    )
    arena.add_argument("--name", default="Bot arena", help="its name (default: %(default)s)")
    arena.add_argument(
        "--minutes", type=int, default=60, help="how long it runs (default %(default)s)"
    )
    arena.add_argument("--seats", type=int, default=4, help="its tables' size (default 4)")
    arena.add_argument("--rated", action="store_true", help="rated games (default: casual)")
    arena.add_argument("--bots", type=int, default=8, help="bots playing in it (default 8)")
    arena.add_argument(
        "--think", type=float, default=0.0, help="seconds before each bot action (default 0)"
    )
    arena.add_argument(
        "--join",
        metavar="ID",
        help="play in this arena instead of making one: its id, or the name of a listed arena "
        "(the running one, or else the next to start: a scheduled arena's name; default: make "
        "one)",
    )
    arena.add_argument(
        "--invite",
        help="with --join or --check: a private arena's invite code (default: none)",
    )
    arena.add_argument(
        "--check",
        metavar="ID",
        help="play nothing: print this arena's standings and check them against its games "
        "stored in the records (exit 1 when they disagree; default: run an arena, checked "
        "the same way at its end)",
    )
    arena.set_defaults(run=_arena, parser=arena)

    bots = commands.add_parser(
        "bots",
        help="a swarm of bots: N tables of K bots, played to the end, with a summary",
        description="Create N tables, seat K bots at each, play every game to the end, and "
        "print a summary: games, actions, fairness proofs and consistency checks. With --ladder, "
        "the bot ladder instead: N rated tables of K bots that keep playing (until stopped, or "
        "--games each), the bots as accounts whose ratings carry over from run to run; it "
        "prints the games played and the bots' leaderboard.",
    )
    bots.add_argument(
        "--url", default=DEFAULT_URL, help=f"the server's WebSocket address (default {DEFAULT_URL})"
    )
    bots.add_argument("--tables", type=int, default=10, help="tables to create (default 10)")
    bots.add_argument(
        "--find",
        action="store_true",
        help="through the matchmaking queue: tables x per-table bots each queue for a casual "
        "table of per-table seats and play the game at the table the queue makes",
    )
    bots.add_argument(
        "--per-table", type=int, default=4, help="bots at each table, 2 to 8 (default 4)"
    )
    bots.add_argument(
        "--strategy",
        action="append",
        choices=STRATEGIES,
        help="strategies, taken in turn by the bots of a table: %(choices)s (default: all, "
        "alternating)",
    )
    bots.add_argument(
        "--round-pause",
        type=float,
        help="seconds between rounds (default 0; with --ladder 1, so that people can follow)",
    )
    bots.add_argument(
        "--think",
        type=float,
        help="seconds before each action (default 0; with --ladder 0.3)",
    )
    bots.add_argument(
        "--ladder",
        action="store_true",
        help="the bot ladder: keep the tables rated and playing game after game (until stopped, "
        "or --games each), the bots signing in as accounts so their ratings carry over; the "
        "server must keep records",
    )
    bots.add_argument(
        "--games",
        type=int,
        help="with --ladder: games each table plays before the run ends (default: until "
        "Ctrl-C or SIGTERM)",
    )
    bots.add_argument(
        "--identities",
        help="with --ladder: the file keeping the bots' names, passwords and tokens, per server "
        f"(default ./{LADDER_IDENTITIES}; written readable by you only)",
    )
    bots.set_defaults(run=_bots, parser=bots)

    load = commands.add_parser(
        "loadtest",
        help="load a server with many connections and report throughput, latency and memory",
        description="Load a server on 127.0.0.x with C connections (idle, lobby-watching or "
        "playing bots) from several processes; report connections held, RSS per connection, "
        "actions/s, frames/s and latency percentiles. 'blackdrez loadtest --help' lists the "
        "options (pip install 'blackdrez-server[loadtest]' for the chart and live display).",
        add_help=False,
    )
    load.add_argument("options", nargs=argparse.REMAINDER)
    return parser


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    """The subcommands of ``parser``."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(action.choices)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``blackdrez`` console script."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["loadtest"]:  # its own parser reads every option, --help included
        from blackdrez.tools.loadtest import cli as loadtest

        return loadtest.main(argv[1:])
    parser = build_parser()
    commands = _commands(parser)
    if argv and not argv[0].startswith("-") and argv[0] not in commands:
        meant = _did_you_mean(argv[0], commands)
        if meant is not None:  # (with none close, argparse's own message lists them)
            parser.error(
                f"argument command: invalid choice: {argv[0]!r}; did you mean {meant}? (choose "
                f"from {', '.join(commands)})"
            )
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
