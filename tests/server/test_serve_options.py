"""``blackdrez serve``: every option says its default, reaches the settings, and is documented."""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections import Counter
from pathlib import Path

import pytest

from blackdrez.server.app import Settings
from blackdrez.server.settings import OPTION, SET_BY, options, parser_default
from blackdrez.tools.cli import build_parser, serve_settings

OPERATIONS = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()


def serve_options() -> list:
    commands = next(a for a in build_parser()._actions if a.dest == "command")
    serve = commands.choices["serve"]
    return [a for a in serve._actions if a.option_strings and a.dest != "help"]


@pytest.mark.parametrize("option", serve_options(), ids=lambda a: a.option_strings[0])
def test_every_option_has_help_that_gives_its_default(option) -> None:
    assert option.help and re.search(r"default", option.help), option.option_strings


@pytest.mark.parametrize("option", serve_options(), ids=lambda a: a.option_strings[0])
def test_every_option_is_in_the_operations_doc(option) -> None:
    assert f"`{option.option_strings[0]}" in OPERATIONS, option.option_strings


def test_each_settings_field_has_exactly_one_flag_or_says_what_sets_it() -> None:
    fields = dataclasses.fields(Settings)
    assert [f.name for f in fields if (OPTION in f.metadata) == (SET_BY in f.metadata)] == []
    flags = Counter(option.flag for _, option in options())
    assert [flag for flag, count in flags.items() if count > 1] == []
    by_dest = {a.dest: a for a in serve_options()}
    for field, option in options():
        assert by_dest[option.dest].option_strings == [option.flag], field.name
    settable = {option.dest for _, option in options()}
    command_line_only = {a.option_strings[0] for d, a in by_dest.items() if d not in settable}
    assert command_line_only == {"--in-memory", "--workers", "--log-format"}


def test_the_parsers_defaults_are_the_settings_defaults(monkeypatch) -> None:
    """Each default is written once, on its field: the parser has it (``None`` where the
    field's factory makes it), its help states it, and an empty command line gives
    ``Settings()`` (but for what the command line resolves: data folder, records, node id)."""
    for _, option in options():
        if option.env is not None:
            monkeypatch.delenv(option.env, raising=False)
    by_dest = {a.dest: a for a in serve_options()}
    for field, option in options():
        default = parser_default(field)
        action = by_dest[option.dest]
        assert action.default == default, field.name
        assert default is None or default == field.default, field.name
        if option.default_words is None:
            stated = option.shown(default) if option.shown else str(default).removesuffix(".0")
            if isinstance(default, bool):
                stated = "off"
            assert f"default {stated}" in action.help, field.name
    args = ["serve", "--in-memory", "--db-url", "none", "--node-id", "n1"]
    assert serve_settings(build_parser().parse_args(args)) == Settings(node_id="n1")


def test_the_defaults_are_the_settings_defaults() -> None:
    parsed = serve_settings(build_parser().parse_args(["serve"]))
    defaults = Settings()
    for name in (
        "host",
        "port",
        "max_frame_bytes",
        "messages_per_second",
        "burst",
        "allowed_origins",
        "compression",
        "max_connections_per_ip",
        "handshake_rate",
        "handshake_burst",
        "api_rate",
        "api_burst",
        "trusted_proxies",
        "max_solitaire_sessions",
        "token_lifetime",
        "send_buffer",
        "close_timeout",
        "listen_backlog",
        "metrics_host",
        "metrics_port",
    ):
        assert getattr(parsed, name) == getattr(defaults, name), name


def test_the_options_reach_the_settings() -> None:
    args = build_parser().parse_args(
        [
            "serve",
            "--max-connections-per-ip", "7",
            "--handshake-rate", "2.5",
            "--handshake-burst", "0",
            "--api-rate", "0.5",
            "--api-burst", "9",
            "--trusted-proxy", "10.0.0.0/8",
            "--trusted-proxy", "192.0.2.1",
            "--allowed-origin", "https://play.example",
            "--max-solitaire-sessions", "3",
            "--token-days", "2",
            "--send-buffer", "65536",
            "--close-timeout", "4",
            "--listen-backlog", "512",
            "--metrics-host", "0.0.0.0",
            "--metrics-port", "9100",
        ]
    )  # fmt: skip
    settings = serve_settings(args)
    assert settings.max_connections_per_ip == 7
    assert (settings.handshake_rate, settings.handshake_burst) == (2.5, 0)
    assert (settings.api_rate, settings.api_burst) == (0.5, 9)
    assert settings.trusted_proxies == ["10.0.0.0/8", "192.0.2.1"]
    assert settings.allowed_origins == ["https://play.example"]
    assert settings.max_solitaire_sessions == 3
    assert settings.token_lifetime == 2 * 86400
    assert (settings.send_buffer, settings.close_timeout) == (65536, 4.0)
    assert settings.listen_backlog == 512
    assert (settings.metrics_host, settings.metrics_port) == ("0.0.0.0", 9100)


@pytest.mark.parametrize(
    "bad",
    [
        ["--trusted-proxy", "proxy.example"],
        ["--max-connections-per-ip", "-1"],
        ["--handshake-burst", "-1"],
        ["--api-burst", "many"],
        ["--max-solitaire-sessions", "lots"],
        ["--token-days", "0"],
        ["--close-timeout", "-1"],
        ["--listen-backlog", "0"],
        ["--metrics-port", "70000"],
    ],
)
def test_bad_values_are_refused_by_the_parser(bad, capsys) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", *bad])
    assert "error: argument" in capsys.readouterr().err


CENTURY = 100 * 365 * 86400
FRACTIONAL = {
    "--rate": "",
    "--handshake-rate": "",
    "--api-rate": "",
    "--token-days": " and at most 36500",
    "--close-timeout": f" and at most {CENTURY}",
    "--lease-ttl": f" and at most {CENTURY}",
    "--record-retention": f" and at most {CENTURY}",
}
"""The options of ``serve`` that take a number with decimals (a rate or a duration), and what
their refusal adds to "is not a finite number above 0": a duration's ceiling."""


@pytest.mark.parametrize("option", serve_options(), ids=lambda a: a.option_strings[0])
def test_no_numeric_option_takes_infinity_or_nan(option, capsys) -> None:
    """``--lease-ttl inf`` and ``--record-retention inf`` were taken (a node on Redis then failed
    at its first lease, ``int(inf)``), and so were ``--rate``, ``--token-days`` and
    ``--close-timeout`` ``inf``."""
    if option.type is None:
        return  # text, a flag or a choice: nothing numeric to check
    for text in ("inf", "-inf", "nan", "Infinity"):
        with pytest.raises(SystemExit) as refused:
            build_parser().parse_args(["serve", option.option_strings[0], text])
        assert refused.value.code == 2
        assert f"error: argument {option.option_strings[0]}: " in capsys.readouterr().err, text


@pytest.mark.parametrize("option", FRACTIONAL)
@pytest.mark.parametrize("text", ["inf", "nan", "0", "-0", "-3", "soon", "1e300"])
def test_a_rate_or_duration_that_makes_no_sense_is_refused_in_one_line(
    option, text, capsys
) -> None:
    """A duration past a century overflows what the store keeps (Redis TTLs are milliseconds in
    64 bits; ``1e300`` days of token are infinite seconds); a rate has no ceiling."""
    if option in ("--rate", "--handshake-rate", "--api-rate") and text == "1e300":
        text = "1e400"  # (a float past the largest: infinity)
    with pytest.raises(SystemExit) as refused:
        build_parser().parse_args(["serve", option, text])
    assert refused.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert errors == [
        f"blackdrez serve: error: argument {option}: {text!r} is not a finite number above 0"
        + FRACTIONAL[option]
    ]


def test_the_longest_durations_are_accepted() -> None:
    args = build_parser().parse_args(
        ["serve", "--lease-ttl", str(CENTURY), "--record-retention", "0.5", "--token-days",
         "36500", "--close-timeout", "1e-3", "--rate", "1e9"]
    )  # fmt: skip
    settings = serve_settings(args)
    assert (settings.lease_ttl, settings.record_retention) == (CENTURY, 0.5)
    assert settings.token_lifetime == 36500 * 86400.0
    assert (settings.close_timeout, settings.messages_per_second) == (1e-3, 1e9)


def test_every_fractional_option_is_listed() -> None:
    fractional = {
        a.option_strings[0] for a in serve_options() if a.type is not None and _takes_decimals(a)
    }
    assert fractional == set(FRACTIONAL)


def _takes_decimals(option) -> bool:
    try:
        option.type("1.5")
    except (ValueError, TypeError, argparse.ArgumentTypeError):
        return False
    return True


def test_the_records_database_is_a_file_by_default_and_can_be_turned_off(monkeypatch) -> None:
    monkeypatch.delenv("BLACKDREZ_DB_URL", raising=False)
    parsed = serve_settings(build_parser().parse_args(["serve"]))
    assert parsed.db_url == "sqlite:///blackdrez-data/records.db"
    assert serve_settings(build_parser().parse_args(["serve", "--db-url", "none"])).db_url is None
    monkeypatch.setenv("BLACKDREZ_DB_URL", "postgresql://u@db/records")
    assert serve_settings(build_parser().parse_args(["serve"])).db_url == (
        "postgresql://u@db/records"
    )
    ladder = build_parser().parse_args(["serve", "--ladder-tables", "3"])
    assert serve_settings(ladder).ladder_tables == 3


def test_arena_schedules_reach_the_settings_or_are_refused_with_the_form(capsys) -> None:
    args = build_parser().parse_args([
        "serve", "--arena-schedule", "daily 18:00 60 Daily bot arena",
        "--arena-schedule", "hourly :30 20 seats=2 rated Quick duel",
    ])  # fmt: skip
    plans = serve_settings(args).arena_schedule
    assert [(p.every, p.offset, p.minutes, p.seats, p.rated, p.name) for p in plans] == [
        ("daily", 18 * 3600, 60, 4, False, "Daily bot arena"),
        ("hourly", 30 * 60, 20, 2, True, "Quick duel"),
    ]
    assert serve_settings(build_parser().parse_args(["serve"])).arena_schedule == []
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--arena-schedule", "weekly sunday"])
    assert "'daily HH:MM MINUTES [seats=N] [rated] NAME'" in capsys.readouterr().err


def test_ladder_tables_without_records_are_refused(capsys) -> None:
    """Rated ladder tables with no records to rate them started anyway, silently unrated."""
    args = build_parser().parse_args(["serve", "--ladder-tables", "2", "--db-url", "none"])
    with pytest.raises(SystemExit):
        serve_settings(args)
    assert "--ladder-tables needs records" in capsys.readouterr().err


def test_a_redis_url_without_a_scheme_and_a_bad_log_format_are_refused(monkeypatch, capsys) -> None:
    """Both crashed with a traceback (the URL when the store opened, the format silently
    plain); and a bad BLACKDREZ_PORT broke every subcommand, ``verify --help`` included."""
    args = build_parser().parse_args(["serve", "--redis-url", "127.0.0.1:6379"])
    with pytest.raises(SystemExit):
        serve_settings(args)
    assert "is not a redis://" in capsys.readouterr().err
    monkeypatch.setenv("BLACKDREZ_LOG_FORMAT", "yaml")
    args = build_parser().parse_args(["serve"])
    with pytest.raises(SystemExit):
        serve_settings(args)
    assert "BLACKDREZ_LOG_FORMAT" in capsys.readouterr().err
    monkeypatch.setenv("BLACKDREZ_PORT", "abc")
    build_parser().parse_args(["verify", "record.json"])  # other commands are not concerned
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve"])
    assert "argument --port" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/O", "rediss://127.0.0.1/db1"])
def test_a_redis_database_that_is_not_a_number_is_refused(url, capsys) -> None:
    """Redis's client took such a database for database 0 without a word: a node meant for a
    deployment of its own joined the one on database 0."""
    args = build_parser().parse_args(["serve", "--redis-url", url])
    with pytest.raises(SystemExit):
        serve_settings(args)
    database = url.rsplit("/", 1)[1]
    assert f"--redis-url: the database {database!r} is not a number" in capsys.readouterr().err


def test_a_redis_url_with_or_without_a_database_number_is_taken() -> None:
    for url in ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379/", "redis://h:6379/15"):
        args = build_parser().parse_args(["serve", "--redis-url", url])
        assert serve_settings(args).redis_url == url


def test_the_flood_limits_are_taken_from_the_environment(monkeypatch, capsys) -> None:
    monkeypatch.setenv("BLACKDREZ_HANDSHAKE_RATE", "3")
    monkeypatch.setenv("BLACKDREZ_HANDSHAKE_BURST", "0")
    monkeypatch.setenv("BLACKDREZ_API_RATE", "0.25")
    monkeypatch.setenv("BLACKDREZ_API_BURST", "7")
    settings = serve_settings(build_parser().parse_args(["serve"]))
    assert (settings.handshake_rate, settings.handshake_burst) == (3.0, 0)
    assert (settings.api_rate, settings.api_burst) == (0.25, 7)
    given = serve_settings(build_parser().parse_args(["serve", "--api-burst", "50"]))
    assert given.api_burst == 50  # an option given wins
    monkeypatch.setenv("BLACKDREZ_API_RATE", "inf")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve"])
    assert "argument --api-rate" in capsys.readouterr().err
