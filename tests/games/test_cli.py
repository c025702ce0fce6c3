"""The blackdrez command's game tools: simulate, record, replay, verify, and their exit codes."""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from blackdrez.games import shuffle
from blackdrez.games.records import read_record, write_record
from blackdrez.tools import cli


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``blackdrez argv...``; return the exit code, standard output and standard error."""
    try:
        code = cli.main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def test_help_lists_every_command(capsys) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for command in ("serve", "simulate", "record", "replay", "verify"):
        assert command in out


def test_serve_keeps_its_options(capsys) -> None:
    code, out, _ = run(capsys, "serve", "--help")
    assert code == 0
    for option in ("--host", "--port", "--redis-url", "--rate", "--burst", "--compression"):
        assert option in out
    for option in ("--lease-ttl", "--record-retention"):
        assert option in out


@pytest.mark.parametrize("option", ["--lease-ttl", "--record-retention"])
@pytest.mark.parametrize("value", ["0", "-3", "inf", "nan"])
def test_serve_refuses_a_lifetime_that_is_not_positive(capsys, option: str, value: str) -> None:
    code, _, err = run(capsys, "serve", option, value)
    assert code == 2
    assert f"argument {option}: {value!r} is not a finite number above 0" in err


def test_simulate_blackdrez_json(capsys) -> None:
    code, out, _ = run(capsys, "simulate", "blackdrez", "--games", "4", "--seed", "t", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["game"] == "blackdrez" and report["seed"] == "t" and report["games"] == 4
    assert report["seats"] == 4
    assert len(report["wins_by_seat"]) == 4 and sum(report["wins_by_seat"]) >= 4
    assert set(report["wins_by_strategy"]) == {"threshold", "bust_probability"}
    assert report["rounds_per_game"] >= 1 and report["actions_per_game"] > 0
    assert 0 <= report["split_share"] <= 1


def test_simulate_blackdrez_seats_and_strategies(capsys) -> None:
    code, out, _ = run(
        capsys,
        "simulate",
        "blackdrez",
        "--games",
        "2",
        "--seats",
        "3",
        "--strategy",
        "threshold",
        "--json",
    )
    assert code == 0
    report = json.loads(out)
    assert report["seats"] == 3
    assert report["strategies"] == ["threshold"] * 3
    assert report["wins_by_strategy"]["bust_probability"] == 0


def test_simulate_is_reproducible_from_its_seed(capsys) -> None:
    argv = ("simulate", "blackjack_piles", "--games", "3", "--seed", "same", "--json")
    assert run(capsys, *argv)[1] == run(capsys, *argv)[1]


def test_simulate_blackjack_piles_per_round_json(capsys) -> None:
    code, out, _ = run(
        capsys,
        "simulate",
        "blackjack_piles",
        "--games",
        "2",
        "--per-round",
        "--deals",
        "3",
        "--json",
    )
    assert code == 0
    report = json.loads(out)
    assert report["game"] == "blackjack_piles" and report["strategy"] == "greedy"
    assert set(report["score"]) == {"mean", "stdev", "min", "max"}
    assert [r["round"] for r in report["rounds"]] == list(range(1, 8))
    for figures in report["rounds"]:
        assert 0 <= figures["pass_rate"] <= 1
        for key in ("pass_rate_se", "mean_hands", "mean_left", "piles", "cap", "stock_in_hand"):
            assert key in figures


def test_simulate_blackjack_piles_per_round_table(capsys) -> None:
    code, out, _ = run(
        capsys, "simulate", "blackjack_piles", "--games", "1", "--per-round", "--deals", "2"
    )
    assert code == 0
    header = next(line for line in out.splitlines() if "pass rate" in line)
    assert "round" in header and "mean hands" in header and "mean left" in header
    assert sum(1 for line in out.splitlines() if line.strip()[:1].isdigit()) == 7


def test_simulate_blue_jacket_json(capsys) -> None:
    code, out, _ = run(
        capsys, "simulate", "blue_jacket", "--games", "2", "--strategy", "first", "--json"
    )
    assert code == 0
    report = json.loads(out)
    assert report["game"] == "blue_jacket" and report["strategy"] == "first"
    for key in ("wins", "win_rate", "mean_score", "best_score", "mean_moves"):
        assert key in report
    assert 0 <= report["mean_score"] <= 104


def test_simulate_prints_a_readable_table_by_default(capsys) -> None:
    code, out, _ = run(capsys, "simulate", "blackdrez", "--games", "2")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["game", "blackdrez"]
    assert any(line.startswith("rounds per game") for line in lines)
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["blackdrez", "--per-round"], "--per-round applies to blackjack_piles only"),
        (["blue_jacket", "--seats", "3"], "--seats applies to blackdrez only"),
        (["blackdrez", "--seats", "9"], "--seats must be from 2 to 8"),
        (["blackdrez", "--strategy", "psychic"], "unknown blackdrez strategy 'psychic'"),
        (
            ["blackdrez", "--strategy", "threshold", "--strategy", "threshold"],
            "one --strategy for every seat",
        ),
        (["blackjack_piles", "--deals", "5"], "--deals needs --per-round"),
        (["blackdrez", "--games", "0"], "--games must be at least 1"),
        (["poker"], "invalid choice"),
    ],
)
def test_simulate_rejects_options_that_do_not_apply(capsys, argv, message) -> None:
    code, _, err = run(capsys, "simulate", *argv)
    assert code == 2
    assert message in err


@pytest.fixture(params=["blackdrez", "blackjack_piles", "blue_jacket"])
def recorded(request, tmp_path: Path, capsys) -> Path:
    """A record file written by ``blackdrez record`` for each game."""
    path = tmp_path / f"{request.param}.json"
    code, _, err = run(capsys, "record", request.param, "--seed", "cli-test", "--out", str(path))
    assert code == 0 and str(path) in err
    return path


def test_record_writes_a_finished_game(recorded: Path) -> None:
    record = read_record(recorded)
    assert record.game == recorded.stem
    assert record.seed == "cli-test"
    assert record.commitment == shuffle.commitment("cli-test")
    assert record.actions and record.dealt


def test_record_to_standard_output(capsys) -> None:
    code, out, _ = run(capsys, "record", "blackdrez", "--seed", "s", "--seats", "2")
    assert code == 0
    record = msgspec.json.decode(out)
    assert record["game"] == "blackdrez" and record["config"]["seats"] == 2


def test_verify_accepts_a_true_record(recorded: Path, capsys) -> None:
    code, out, _ = run(capsys, "verify", str(recorded))
    assert code == 0
    assert out.startswith("OK: ")


def test_verify_rejects_a_tampered_seed_and_names_the_problem(recorded: Path, capsys) -> None:
    record = read_record(recorded)
    write_record(msgspec.structs.replace(record, seed="cli-test2"), recorded)
    code, out, _ = run(capsys, "verify", str(recorded))
    assert code == 1
    assert out.startswith("FAILED")
    assert "the seed does not match the commitment" in out


def test_verify_rejects_a_tampered_dealt_card(recorded: Path, capsys) -> None:
    record = read_record(recorded)
    dealt = [list(cards) for cards in record.dealt]
    dealt[0][0], dealt[0][1] = dealt[0][1], dealt[0][0]
    write_record(msgspec.structs.replace(record, dealt=dealt), recorded)
    code, out, _ = run(capsys, "verify", str(recorded))
    assert code == 1
    assert f"card 1 dealt was {dealt[0][0]!r}" in out


def test_verify_a_missing_or_broken_file_fails(tmp_path: Path, capsys) -> None:
    code, out, _ = run(capsys, "verify", str(tmp_path / "nothing.json"))
    assert code == 1 and "cannot read" in out
    (tmp_path / "bad.json").write_text('{"game": 3}')
    code, out, _ = run(capsys, "verify", str(tmp_path / "bad.json"))
    assert code == 1 and "is not a game record" in out


def test_replay_prints_a_readable_transcript(recorded: Path, capsys) -> None:
    record = read_record(recorded)
    code, out, _ = run(capsys, "replay", str(recorded))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"{record.game} from seed 'cli-test'")
    assert '{"' not in out and "type" not in out, "no raw JSON in the transcript"
    assert any(line.startswith("Game over") for line in lines)
    assert lines[-2] == f"{len(record.actions)} actions; the game is over"
    assert lines[-1] == "seed revealed at the end: cli-test"
    if record.game == "blackdrez":
        assert "Round 1: seat" in out and " deals " in out
        assert any(name in out for name in ("Queen", "Rook", "Bishop", "Knight", "Pawn", "Joker"))
        assert not re.search(r"\b[QRBNPJ][1-9]\b", out), "BlackDrez cards are named in words"
    elif record.game == "blackjack_piles":
        assert "Round 1: 5 piles" in out and "  place " in out and "  cash " in out
        assert re.search(r"= 21 \(hand 1\)", out)
        assert not re.search(r"\b[2-9TJQKA][CDHS]\b", out), "cards get suit symbols"
    else:
        assert "The deal:" in out and "bottom row:" in out and "  move " in out
        assert re.search(r"from (bottom|row \d) pile \d", out)


def test_replay_json_lines(recorded: Path, capsys) -> None:
    record = read_record(recorded)
    code, out, _ = run(capsys, "replay", "--json", str(recorded))
    assert code == 0
    steps = [json.loads(line) for line in out.splitlines()]
    assert [step["index"] for step in steps] == list(range(len(record.actions)))
    assert [[step["seat"], step["action"]] for step in steps] == [
        list(pair) for pair in record.actions
    ]
    assert steps[-1]["events"][-1]["type"] == "game_over"


def test_replay_of_a_broken_record_names_the_action_and_fails(recorded: Path, capsys) -> None:
    record = read_record(recorded)
    actions = [*record.actions[:2], (7, record.actions[2][1]), *record.actions[2:]]
    write_record(msgspec.structs.replace(record, actions=actions), recorded)
    code, _, err = run(capsys, "replay", str(recorded))
    assert code == 1
    assert "action 2 (seat 8: " in err and "was rejected" in err  # seats counted from 1
    assert "{'type'" not in err, "the action in words, not a dict"


def test_solve_one_deal_prints_a_line_that_wins(capsys) -> None:
    from blackdrez.games.blue_jacket.rules import Action, BlueJacket, Config
    from blackdrez.games.blue_jacket.solver import deal_seed

    code, out, _ = run(capsys, "solve", "blue_jacket", "--deal", "0", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["outcome"] == "winnable" and report["seed"] == deal_seed(0)
    engine = BlueJacket.new(Config(progress_budget=0), deal_seed(0))
    for move in report["moves"]:
        engine.apply(0, msgspec.convert(move, Action))
    assert engine.score == 104


def test_solve_a_range_summarises_with_intervals(capsys) -> None:
    code, out, _ = run(capsys, "solve", "blue_jacket", "--deals", "0-2")
    assert code == 0
    assert "winnable" in out and "decided" in out and "seconds" in out
    code, out, _ = run(capsys, "solve", "blue_jacket", "--deals", "0-1", "--json")
    report = json.loads(out)
    assert report["deals"] == 2 and len(report["results"]) == 2
    assert report["decided_ci95"][1] == 1.0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--deals", "5-3"), "0 <= A <= B"),
        (("--deals", "x"), "A-B"),
        (("--deal", "1", "--budget", "0"), "budget"),
        ((), "--deal N or --deals A-B"),
    ],
)
def test_solve_refuses_bad_ranges_and_budgets(capsys, argv, message) -> None:
    code, _, err = run(capsys, "solve", "blue_jacket", *argv)
    assert code == 2 and message in err


def test_every_option_of_every_tool_says_its_default(capsys) -> None:
    """Except ``serve`` (its options are documented with the security settings) and loadtest
    (its own parser): each option has help that names its default, unless it is a flag or
    required."""
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    checked = 0
    for name, command in commands.choices.items():
        if name in ("serve", "loadtest"):
            continue
        for action in command._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"{name} {action.option_strings[0]} has no help"
            flag = isinstance(action, argparse._StoreTrueAction)
            if not flag and not action.required:
                assert "default" in action.help, f"{name} {action.option_strings[0]}"
            checked += 1
        code, out, _ = run(capsys, name, "--help")
        assert code == 0 and out.startswith(f"usage: blackdrez {name}")
    assert checked >= 20


def test_report_figures_have_a_consistent_precision() -> None:
    assert cli._number(0.12345, "split_share") == "0.123"
    assert cli._number(0.5, "pass_rate") == "0.500"
    assert cli._number(0.0147, "pass_rate_se") == "0.015"
    assert cli._number(685.0721, "moves_per_second") == "685"
    assert cli._number(4.6, "rounds_per_game") == "4.60"
    assert cli._number({"mean": 124.7, "stdev": 63.0612, "min": 34}, "score") == (
        "mean 124.70, stdev 63.06, min 34"
    )
    assert cli._number(True, "stock_in_hand") == "yes"


def test_simulate_explains_shared_wins_and_the_split_share(capsys) -> None:
    code, out, _ = run(capsys, "simulate", "blackdrez", "--games", "40", "--seed", "t")
    assert code == 0
    report = json.loads(run(capsys, "simulate", "blackdrez", "--games", "40", "--seed", "t",
                            "--json")[1])  # fmt: skip
    wins = sum(report["wins_by_seat"])
    assert wins > 40, "this seed has shared wins"
    line = next(line for line in out.splitlines() if line.startswith("wins by seat"))
    assert f"({wins} wins in 40 games: some shared)" in line
    assert "a shared first place counts as a win for each seat" in out
    assert "split share: the fraction of rounds whose pot was split" in out
    split = next(line for line in out.splitlines() if line.startswith("split share"))
    assert re.fullmatch(r"split share\s+0\.\d{3}", split)


def _in_a_terminal(*argv: str) -> tuple[int, str]:
    """Run ``blackdrez argv...`` with standard output and error on a pseudo-terminal."""
    import pty

    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    process = subprocess.Popen(
        [sys.executable, "-m", "blackdrez.tools.cli", *argv],
        stdout=follower,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return process.wait(timeout=120), b"".join(chunks).decode(errors="replace")


def test_long_runs_show_progress_on_a_terminal_only() -> None:
    argv = ("simulate", "blue_jacket", "--games", "30", "--strategy", "first")
    code, shown = _in_a_terminal(*argv)
    assert code == 0
    assert "simulating blue_jacket" in shown and "/30" in shown
    code, shown = _in_a_terminal(*argv, "--json")
    assert code == 0 and "simulating" not in shown
    piped = subprocess.run(
        [sys.executable, "-m", "blackdrez.tools.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 0
    assert "simulating" not in piped.stdout + piped.stderr
    assert piped.stdout.startswith("game")


def test_serve_on_a_port_in_use_says_so_in_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "blackdrez.tools.cli", "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"blackdrez serve: cannot listen on 127.0.0.1:{port}: address already in use"
    ]


def test_serve_names_what_it_could_not_start_in_one_line(tmp_path) -> None:
    """A taken metrics port and a records database that cannot be opened were both reported as
    "cannot listen" on the game port (which was free)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        metrics = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "blackdrez.tools.cli", "serve", "--port", "0",
             "--metrics-port", str(metrics), "--db-url", "none"],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"blackdrez serve: cannot listen on 127.0.0.1:{metrics} (metrics): address already in use"
    ]
    done = subprocess.run(  # (a folder that cannot be made)
        [sys.executable, "-m", "blackdrez.tools.cli", "serve", "--port", "0", "--db-url",
         "sqlite:////proc/no-such-folder/records.db"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("blackdrez serve: cannot open the records database: "), line


def test_serve_with_a_redis_database_the_server_lacks_says_so_in_one_line(
    tmp_path, redis_server
) -> None:
    """A Redis URL naming a database the Redis does not have (it has 16 unless configured) is a
    setting to fix, not an outage to wait out: it ended in a traceback and status 1."""
    url = f"redis://127.0.0.1:{redis_server.port}/99"
    done = subprocess.run(
        [sys.executable, "-m", "blackdrez.tools.cli", "serve", "--port", "0", "--db-url", "none",
         "--redis-url", url],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"blackdrez serve: cannot use the Redis at {url}: DB index is out of range"
    ]


@pytest.mark.parametrize("url", ["127.0.0.1:8765", "ws://127.0.0.1:8765/", "localhost"])
def test_drain_refuses_a_url_that_is_not_http_in_one_line(capsys, url) -> None:
    """A game address without its scheme, or the WebSocket one, was tried and reported as
    "cannot reach URL: <urlopen error unknown url type: ...>"."""
    code, _, err = run(capsys, "drain", "--url", url, "--token", "t")
    assert code == 2
    assert err.strip().splitlines()[-1] == (
        f"blackdrez drain: error: argument --url: {url!r} is not the node's http://HOST:PORT"
        " address"
    )


def test_drain_says_in_words_that_nothing_answers(capsys) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
        code, _, err = run(capsys, "drain", "--url", url, "--token", "t")
    assert code == 1
    assert err.strip().splitlines() == [
        f"blackdrez drain: cannot reach {url}: connection refused (is the node running?)"
    ]
