"""The blackdrez command: run a server node, simulate bot games, record, replay and verify."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from typing import Any

GAME_NAMES = ("blackdrez", "blackjack_piles", "blue_jacket")
"""The games the tools know (``server.games.registry.GAMES``, imported lazily for ``serve``)."""


def _serve(args: argparse.Namespace) -> int:
    from server.app import Settings, run

    settings = Settings(
        host=args.host,
        port=args.port,
        redis_url=args.redis_url or None,
        max_frame_bytes=args.max_frame_bytes,
        messages_per_second=args.rate,
        burst=args.burst,
        allowed_origins=args.allowed_origin or None,
        compression=args.compression,
    )
    if args.node_id:
        settings.node_id = args.node_id
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    _run_async(run(settings))
    return 0


def _check_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str] | None:
    """Reject options that do not apply to ``args.game``; return the strategies chosen."""
    from server.games.registry import GAMES

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
    from server.games import blackdrez_bots, blackjack_piles_bots, blue_jacket_bots

    strategies = _check_options(args.parser, args)
    if args.games < 1:
        args.parser.error("--games must be at least 1")
    report: dict[str, Any]
    if args.game == "blackdrez":
        report = blackdrez_bots.simulate(
            args.games, args.seed, seats=args.seats or 4, strategies=strategies
        )
    elif args.game == "blackjack_piles":
        report = blackjack_piles_bots.simulate(
            args.games,
            args.seed,
            per_round=args.per_round,
            strategy=strategies[0] if strategies else "greedy",
            deals=args.deals,
        )
    else:
        report = blue_jacket_bots.simulate(
            args.games, args.seed, strategy=strategies[0] if strategies else "heuristic"
        )
    report = {"game": args.game, "seed": args.seed, **report}
    if args.json:
        import msgspec

        print(msgspec.json.format(msgspec.json.encode(report), indent=2).decode())
    else:
        print(_report_table(report))
    return 0


def _number(value: Any) -> str:
    """A figure as a table shows it: floats to four decimals without trailing zeros."""
    if isinstance(value, float):
        text = f"{value:.4f}".rstrip("0").rstrip(".")
        return text or "0"
    if isinstance(value, list):
        return " ".join(_number(item) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{key} {_number(item)}" for key, item in value.items())
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
    """A simulation report as a readable table: one figure a line, then any per-round table."""
    pairs = []
    tables = []
    for key, value in report.items():
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            header = list(value[0])
            rows = [[key.replace("_", " ") for key in header]]
            rows += [[_number(item.get(column)) for column in header] for item in value]
            tables.append(f"{key}:\n" + "\n".join("  " + line for line in _columns(rows)))
        else:
            pairs.append([key.replace("_", " "), _number(value)])
    return "\n\n".join(["\n".join(_columns(pairs)), *tables])


def _load(path: str) -> Any:
    """Read a record file; raises ``ValueError`` with a readable message."""
    import msgspec

    from server.games.records import read_record

    try:
        return read_record(path)
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror}") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise ValueError(f"{path} is not a game record: {error}") from None


def _replay(args: argparse.Namespace) -> int:
    import msgspec

    from server.games.registry import ReplayError, start, steps

    try:
        record = _load(args.file)
        engine = start(record)
        origin = f"seed {record.seed!r}" if record.seed is not None else "an explicit card order"
        if not args.json:
            print(
                f"{record.game} from {origin}, config {msgspec.json.encode(record.config).decode()}"
            )
            if record.commitment:
                print(f"commitment {record.commitment}")
        for step in steps(engine, record):
            action = msgspec.json.encode(step.action).decode()
            events = [msgspec.json.encode(event).decode() for event in step.events]
            if args.json:
                print(
                    f'{{"index":{step.index},"seat":{step.seat},"action":{action},'
                    f'"events":[{",".join(events)}]}}'
                )
            else:
                print(f"#{step.index} seat {step.seat}: {action}")
                for event in events:
                    print(f"    {event}")
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
    return 0


def _verify(args: argparse.Namespace) -> int:
    from server.games.registry import verify

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
    from server.games.records import encode_record, write_record
    from server.games.registry import GAMES, play_bots

    strategies = _check_options(args.parser, args)
    config = GAMES[args.game].config()
    if args.game == "blackdrez":
        from server.games.blackdrez import Config

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


def _bot(args: argparse.Namespace) -> int:
    from clients.bots import run_bot

    if not args.table and not args.quick:
        args.parser.error("give --table ID or --quick")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    result = _run_async(
        run_bot(
            args.url,
            table=args.table,
            quick=args.quick,
            strategy=args.strategy,
            name=args.name,
            invite=args.invite,
        )
    )
    ranking = (result.final or {}).get("result") or {}
    print(f"table {result.table}, seat {result.seat}: {result.actions} actions")
    for place in ranking.get("ranking", []):
        print(f"  place {place['place']}: seats {place['seats']} with {place['cards']} cards")
    print("fairness proof: " + ("verified" if result.fair else f"FAILED: {result.problem}"))
    return 0 if result.fair else 1


def _bots(args: argparse.Namespace) -> int:
    from clients.bots import STRATEGIES, run_swarm

    summary = _run_async(
        run_swarm(
            args.url,
            args.tables,
            args.per_table,
            tuple(args.strategy or STRATEGIES),
            round_pause=args.round_pause,
            think=args.think,
        )
    )
    print("\n".join(summary.lines()))
    return 0 if summary.unfair == 0 and not summary.inconsistent else 1


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


@contextlib.contextmanager
def _progress(total: int, shown: bool) -> Iterator[Callable[[], None]]:
    """A progress bar (rich, when installed and ``shown``) and the function that advances it."""
    if not shown:
        yield lambda: None
        return
    try:
        from rich.progress import Progress
    except ImportError:
        yield lambda: None
        return
    with Progress(transient=True) as progress:
        task = progress.add_task("solving", total=total)
        yield lambda: progress.advance(task)


def _action_text(action: Any) -> str:
    """A Blue Jacket action in short form: ``b3>aces``, ``r1.2<>r2.5``, ``deal``."""
    from server.games.blue_jacket import Interchange, Move

    if isinstance(action, Move):
        return f"{action.source}>{action.target}"
    if isinstance(action, Interchange):
        return f"{action.a}<>{action.b}"
    return "deal"


def _solve(args: argparse.Namespace) -> int:
    import msgspec

    from server.games import blue_jacket_solver as solver

    numbers = _deal_numbers(args.parser, args)
    if args.budget < 1:
        args.parser.error("--budget must be at least 1")
    results = []
    solution = None
    with _progress(len(numbers), sys.stdout.isatty() and not args.json) as advance:
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
        "per seat; default: alternating), blackjack_piles greedy (default) or expert, "
        "blue_jacket heuristic (default), expert, greedy, first or random",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``blackdrez`` command line (also what deployment files are checked against)."""
    parser = argparse.ArgumentParser(prog="blackdrez", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run a game server node")
    serve.add_argument("--host", default=os.environ.get("BLACKDREZ_HOST", "127.0.0.1"))
    serve.add_argument("--port", type=int, default=int(os.environ.get("BLACKDREZ_PORT", "8765")))
    serve.add_argument(
        "--redis-url",
        default=os.environ.get("BLACKDREZ_REDIS_URL"),
        help="share the lobby through Redis (default: in memory; env BLACKDREZ_REDIS_URL)",
    )
    serve.add_argument("--node-id", default=os.environ.get("BLACKDREZ_NODE_ID"))
    serve.add_argument("--max-frame-bytes", type=int, default=16 * 1024)
    serve.add_argument("--rate", type=float, default=30.0, help="messages per second per client")
    serve.add_argument("--burst", type=int, default=60)
    serve.add_argument(
        "--allowed-origin", action="append", help="accept browsers only from this Origin"
    )
    serve.add_argument(
        "--compression", action="store_true", help="enable permessage-deflate (off by default)"
    )
    serve.set_defaults(run=_serve)

    simulate = commands.add_parser(
        "simulate",
        help="play many games with the reference bots and print statistics",
        description="Play many games with the reference bots and print statistics. Game i is "
        "dealt from the seed 'SEED:i', so a run is reproducible.",
    )
    _add_game_options(simulate)
    simulate.add_argument("--games", type=int, default=100, help="games to play (default 100)")
    simulate.add_argument("--seed", default="simulate", help="seed prefix (default 'simulate')")
    simulate.add_argument("--json", action="store_true", help="print JSON instead of a table")
    simulate.add_argument(
        "--per-round",
        action="store_true",
        help="blackjack_piles only: also play each round alone and report its pass rate, mean "
        "hands and cards left",
    )
    simulate.add_argument(
        "--deals", type=int, help="with --per-round: deals per round (default: --games)"
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
    which.add_argument("--deal", type=int, metavar="N", help="one deal: print its moves")
    which.add_argument("--deals", metavar="A-B", help="deals A to B: print a summary")
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
    record.add_argument("--seed", required=True, help="the game's seed")
    record.add_argument("--out", metavar="FILE", help="write here (default: standard output)")
    record.set_defaults(run=_record, parser=record)

    replay = commands.add_parser(
        "replay",
        help="replay a game record and print its events",
        description="Replay a game record and print every action with its events.",
    )
    replay.add_argument("file", metavar="FILE", help="a record written by 'blackdrez record'")
    replay.add_argument(
        "--json", action="store_true", help="one JSON object per action (index, seat, events)"
    )
    replay.set_defaults(run=_replay)

    verify = commands.add_parser(
        "verify",
        help="check a finished game's record against its revealed seed",
        description="Check a finished game's record against its revealed seed: the seed matches "
        "the commitment, every action replays, the cards dealt are the shuffle's, the game is "
        "over. Prints OK (exit 0) or each problem (exit 1).",
    )
    verify.add_argument("file", metavar="FILE", help="a record written by 'blackdrez record'")
    verify.set_defaults(run=_verify)

    from clients.bots import STRATEGIES

    bot = commands.add_parser(
        "bot",
        help="play one game as a bot over the public protocol",
        description="Connect as a bot, take a seat (at a table, or by quick-join), get ready and "
        "play one game from what the seat sees; then check the game's fairness proof.",
    )
    bot.add_argument("--url", default="ws://127.0.0.1:8765/")
    where = bot.add_mutually_exclusive_group()
    where.add_argument("--table", help="the table to join")
    where.add_argument("--quick", action="store_true", help="quick-join an open table")
    bot.add_argument("--invite", help="invite code of a private table")
    bot.add_argument("--strategy", choices=STRATEGIES, default="threshold")
    bot.add_argument("--name", help="display name")
    bot.set_defaults(run=_bot, parser=bot)

    bots = commands.add_parser(
        "bots",
        help="a swarm of bots: N tables of K bots, played to the end, with a summary",
        description="Create N tables, seat K bots at each, play every game to the end, and "
        "print a summary: games, actions, fairness proofs and consistency checks.",
    )
    bots.add_argument("--url", default="ws://127.0.0.1:8765/")
    bots.add_argument("--tables", type=int, default=10)
    bots.add_argument("--per-table", type=int, default=4)
    bots.add_argument(
        "--strategy",
        action="append",
        choices=STRATEGIES,
        help="strategies, taken in turn by the bots of a table (default: all)",
    )
    bots.add_argument("--round-pause", type=float, default=0.0, help="seconds between rounds")
    bots.add_argument("--think", type=float, default=0.0, help="seconds before each action")
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


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``blackdrez`` console script."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["loadtest"]:  # its own parser reads every option, --help included
        from clients import loadtest

        return loadtest.main(argv[1:])
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
