"""The blackdrez command as a person meets it: --version, a mistyped option or command, the
bot's result, the replay's names, progress of long runs when piped, figures in words."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import msgspec
import pytest

from blackdrez.clients.bots import BotResult
from blackdrez.games.blackdrez.rules import Config
from blackdrez.games.records import encode_record
from blackdrez.games.verify import play_bots
from blackdrez.server.records.model import GameRecord, PlayerResult
from blackdrez.tools import cli
from tests.games.test_cli import run

CLI = [sys.executable, "-m", "blackdrez.tools.cli"]


# --------------------------------------------------------------------------- --version


def test_version_prints_the_installed_version(capsys) -> None:
    code, out, err = run(capsys, "--version")
    assert (code, err) == (0, "")
    assert out == f"blackdrez {metadata.version('blackdrez-server')}\n"


def test_version_without_an_installed_distribution_reads_pyproject(capsys, monkeypatch) -> None:
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert re.fullmatch(r"blackdrez \d+\.\d+\S*\n", out), out


def test_version_is_listed_in_the_help(capsys) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "--version" in out


# --------------------------------------------------------------------------- unknown options


@pytest.mark.parametrize(
    ("argv", "command", "unknown", "meant"),
    [
        (["serve", "--prot", "1"], "serve", "--prot 1", "--port"),
        (["simulate", "blackdrez", "--gmaes", "3"], "simulate", "--gmaes 3", "--games"),
        (["replay", "game.json", "--jsno"], "replay", "--jsno", "--json"),
        (["verify", "game.json", "--quiet"], "verify", "--quiet", None),
        (["drain", "--url", "http://h:1", "--tiemout=3"], "drain", "--tiemout=3", "--timeout"),
        (["bot", "--quik"], "bot", "--quik", "--quick"),
        (["bots", "--per-tabel", "3"], "bots", "--per-tabel 3", "--per-table"),
        (["record", "blackdrez", "--seed", "s", "--ot", "x"], "record", "--ot x", "--out"),
        (["solve", "blue_jacket", "--budgte", "3"], "solve", "--budgte 3", "--budget"),
    ],
)
def test_an_unknown_option_gets_its_commands_usage_and_a_suggestion(
    capsys, argv: list[str], command: str, unknown: str, meant: str | None
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith(f"usage: blackdrez {command} "), err
    (message,) = [line for line in err.splitlines() if ": error: " in line]
    assert message.startswith(f"blackdrez {command}: error: unrecognized arguments: {unknown}")
    if meant is None:
        assert "did you mean" not in message
    else:
        assert message.endswith(f"did you mean {meant}?"), message


def test_several_unknown_options_each_get_their_suggestion(capsys) -> None:
    code, _, err = run(capsys, "serve", "--prot", "1", "--hots", "h")
    assert code == 2
    assert err.strip().splitlines()[-1] == (
        "blackdrez serve: error: unrecognized arguments: --prot 1 --hots h; "
        "--prot: did you mean --port? --hots: did you mean --host?"
    )


def test_a_mistyped_command_gets_a_suggestion(capsys) -> None:
    code, out, err = run(capsys, "simulat", "blackdrez")
    assert code == 2 and out == ""
    assert err.startswith("usage: blackdrez ")
    assert "invalid choice: 'simulat'" in err and "did you mean simulate?" in err


# --------------------------------------------------------------------------- blackdrez bot


def _ranking(*places: tuple[int, list[int], int]) -> dict[str, object]:
    ranking = [{"place": p, "seats": seats, "cards": cards} for p, seats, cards in places]
    return {"phase": "over", "result": {"ranking": ranking, "rounds": 4, "reason": "stock"}}


def test_the_bots_result_names_the_players_and_counts_seats_from_1() -> None:
    result = BotResult(
        table="t1",
        seat=1,
        actions=37,
        final=_ranking((1, [1], 11), (2, [0, 2], 4), (4, [3], 1)),
        fair=True,
        games=1,
    )
    assert cli._bot_lines(result, {1: "Ada (threshold)"}) == [
        "Ada (threshold) at table t1, seat 2: 37 actions",
        "  1st: Ada (threshold), 11 cards",
        "  2nd: seat 1 and seat 3, 4 cards each",
        "  4th: seat 4, 1 card",
        "fairness proof: verified",
    ]


def test_the_bots_result_with_every_name_several_games_and_a_failed_proof() -> None:
    names = {0: "Host", 1: "Ada (bust odds)", 2: "Ben (threshold)"}
    result = BotResult(
        table="t2",
        seat=0,
        actions=5,
        final=_ranking((1, [1, 2, 0], 6)),
        fair=False,
        problem="the seed was not revealed at the end of the game",
        games=3,
    )
    assert cli._bot_lines(result, names) == [
        "Host at table t2, seat 1: 3 games, the last with 5 actions",
        "  1st: Host, Ada (bust odds) and Ben (threshold), 6 cards each",
        "fairness proof: FAILED: the seed was not revealed at the end of the game",
    ]


def test_a_removed_bot_says_so_with_its_seat_from_1() -> None:
    result = BotResult(table="t3", seat=0, removed=True)
    assert cli._bot_lines(result, {}) == ["seat 1 at table t3: removed before a game ended"]


def test_a_seated_bot_counts_its_seat_from_1(capsys) -> None:
    cli._say_seated("t4", 0, True)
    err = capsys.readouterr().err
    assert err.startswith("blackdrez bot: seated at table t4, seat 1, a table it made")


# --------------------------------------------------------------------------- blackdrez replay


def _api_record(tmp_path: Path, names: list[str | None]) -> Path:
    """A BlackDrez record as the server's records API serves it (``GameRecord``: the record's
    fields, then the metadata, ``players`` with each seat's name; ``None``: that seat's entry
    left out)."""
    record = play_bots("blackdrez", "names", Config(seats=len(names)))
    players = [
        PlayerResult(
            seat=seat, player=f"p{seat}", name=name, bot=False, place=None, score=None, won=False
        )
        for seat, name in enumerate(names)
        if name is not None
    ]
    fields = {name: getattr(record, name) for name in record.__struct_fields__}
    stored = GameRecord(
        **fields,
        id="g1",
        table="t1",
        rated=False,
        started_at=1.0,
        ended_at=2.0,
        players=players,
        result={},
    )
    path = tmp_path / "game.json"
    path.write_bytes(msgspec.json.encode(stored))
    return path


def test_replay_names_the_players_a_record_names(tmp_path: Path, capsys) -> None:
    path = _api_record(tmp_path, ["Ada", "Bob", "Cleo"])
    code, out, _ = run(capsys, "replay", str(path))
    assert code == 0
    lines = out.splitlines()
    assert "players: Ada in seat 1, Bob in seat 2, Cleo in seat 3" in lines
    assert not [line for line in lines if re.search(r"\bseat \d", line) and "players:" not in line]
    assert re.search(r"^Round 1: (Ada|Bob|Cleo) deals", out, re.M)
    assert re.search(r"^  Ada gets ", out, re.M) and re.search(r"^  Cleo gets ", out, re.M)
    assert re.search(r"^  1st.*: (Ada|Bob|Cleo)", out, re.M)


def test_replay_falls_back_to_seat_numbers_where_a_name_is_missing(tmp_path: Path, capsys) -> None:
    path = _api_record(tmp_path, ["Ada", None, "Ada"])
    code, out, _ = run(capsys, "replay", str(path))
    assert code == 0
    assert "players: Ada in seat 1, seat 2 (no name), Ada in seat 3" in out.splitlines()
    assert re.search(r"^  Ada \(seat 1\) gets ", out, re.M)
    assert re.search(r"^  seat 2 gets ", out, re.M)
    assert re.search(r"^  Ada \(seat 3\) gets ", out, re.M)


def test_replay_without_names_keeps_seat_numbers(tmp_path: Path, capsys) -> None:
    path = tmp_path / "plain.json"
    path.write_bytes(encode_record(play_bots("blackdrez", "names", Config(seats=3))))
    code, out, _ = run(capsys, "replay", str(path))
    assert code == 0
    assert "players:" not in out and re.search(r"^  seat 1 gets ", out, re.M)


# --------------------------------------------------------------------------- progress


def test_simulate_piped_shows_plain_progress_on_stderr_and_pure_json_on_stdout() -> None:
    argv = ["simulate", "blackjack_piles", "--games", "20", "--seed", "p", "--json"]
    piped = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0, piped.stderr
    report = json.loads(piped.stdout)
    assert report["games"] == 20
    lines = piped.stderr.splitlines()
    assert lines, "a long run shows progress even when piped"
    for line in lines:
        assert re.fullmatch(r"simulate: \d+/20 games, \d+\.\d s", line), line
    counts = [int(re.search(r"(\d+)/20", line)[1]) for line in lines]
    assert counts == sorted(counts) and counts[-1] == 20 and len(counts) <= 12
    assert 2 in counts and 10 in counts, "a line every tenth of the games"


def test_simulate_piped_table_keeps_stdout_for_the_report() -> None:
    argv = ["simulate", "blackdrez", "--games", "10", "--seed", "p"]
    piped = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith("game ") and "simulate:" not in piped.stdout
    assert piped.stderr.splitlines()[-1].startswith("simulate: 10/10 games, ")


def test_progress_lines_come_at_least_every_few_seconds(capsys, monkeypatch) -> None:
    clock = iter([0.0, 1.0, 2.0, 20.0, 21.0, 45.0])
    monkeypatch.setattr(cli.time, "monotonic", lambda: next(clock))
    with cli._progress(1000, "simulating x", command="simulate", unit="games") as tick:
        for _ in range(5):
            tick()
    assert capsys.readouterr().err.splitlines() == [
        "simulate: 3/1000 games, 20.0 s",
        "simulate: 5/1000 games, 45.0 s",
    ]


# --------------------------------------------------------------------------- figures


def test_wins_by_seat_are_shown_per_seat_counted_from_1() -> None:
    table = cli._report_table({"game": "blackdrez", "games": 3, "wins_by_seat": [2, 0, 1]})
    line = next(line for line in table.splitlines() if line.startswith("wins by seat"))
    assert re.fullmatch(r"wins by seat\s+seat 1: 2, seat 2: 0, seat 3: 1", line), line


def test_a_confidence_interval_reads_from_to() -> None:
    table = cli._report_table({"game": "blue_jacket", "win_rate_ci95": [0.2076, 0.9385]})
    line = next(line for line in table.splitlines() if line.startswith("win rate ci95"))
    assert re.fullmatch(r"win rate ci95\s+0\.208 to 0\.939", line), line


def test_lists_of_deals_say_deal_and_none() -> None:
    table = cli._report_table(
        {"deals": 3, "unknown": 1, "undecided": [0], "not_winnable_deals": []}
    )
    lines = table.splitlines()
    assert re.fullmatch(r"undecided\s+deal 0", lines[2]), lines[2]
    assert re.fullmatch(r"not winnable deals\s+none", lines[3]), lines[3]
    many = cli._number(list(range(3, 30)), "undecided")
    assert many == "deals " + ", ".join(map(str, range(3, 23))) + " and 7 more"
    assert cli._number([4, 9], "not_winnable_deals") == "deals 4, 9"


def test_replay_of_a_named_solitaire_says_who_played(tmp_path: Path, capsys) -> None:
    data = msgspec.json.decode(encode_record(play_bots("blue_jacket", "names")))
    data["players"] = [{"seat": 0, "player": "p0", "name": "  Ada   Lovelace "}]
    path = tmp_path / "solitaire.json"
    path.write_bytes(msgspec.json.encode(data))
    code, out, _ = run(capsys, "replay", str(path))
    assert code == 0
    assert out.splitlines()[2] == "player: Ada Lovelace"


def test_the_bots_result_counts_one_action_in_the_singular() -> None:
    result = BotResult(table="t5", seat=1, actions=1, final=_ranking((1, [0], 6)), fair=True)
    assert cli._bot_lines(result, {})[0] == "seat 2 at table t5: 1 action"
