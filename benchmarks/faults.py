"""Reliability figures: run the fault suite and print what each scenario measured.

    python3 benchmarks/faults.py [-k EXPRESSION] [--json]

Runs ``pytest tests/faults`` (real node processes and a real Redis, started and stopped by the
tests) with ``BD_FAULT_FIGURES`` pointing at a scratch file, where every test appends its figures
whatever its outcome; then prints one Markdown table of the figures every scenario shares (the
ones ``docs/reliability.md`` publishes) and, per scenario, the figures only it has. ``-k`` picks
scenarios as pytest's ``-k`` does. The exit code is pytest's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

COLUMNS = (
    "acked",
    "lost",
    "duplicated",
    "stale writes",
    "games finished",
    "resume s max",
    "keys without TTL",
    "forbidden errors",
    "tracebacks",
)
"""The figures of the summary table, in order (a scenario without one shows a dash)."""


def run_suite(select: str | None) -> tuple[int, list[dict[str, Any]]]:
    """Run the fault suite; return pytest's exit code and every test's figures."""
    with tempfile.TemporaryDirectory(prefix="bd-faults-") as scratch:
        figures_file = Path(scratch) / "figures.jsonl"
        command = [sys.executable, "-m", "pytest", "tests/faults", "-q", "-p", "no:cacheprovider"]
        if select:
            command += ["-k", select]
        env = {**os.environ, "BD_FAULT_FIGURES": str(figures_file)}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        code = subprocess.run(command, cwd=ROOT, env=env, stdout=sys.stderr).returncode
        rows = []
        if figures_file.exists():
            rows = [json.loads(line) for line in figures_file.read_text().splitlines()]
    return code, rows


def cell(value: Any) -> str:
    """A figure as a table cell."""
    if value is None:
        return "-"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "0"
    return str(value)


def markdown(rows: list[dict[str, Any]]) -> str:
    """The summary table, then each scenario's own figures."""
    lines = [
        "| scenario | outcome | " + " | ".join(COLUMNS) + " |",
        "|---|---|" + "---|" * len(COLUMNS),
    ]
    for row in rows:
        figures = row["figures"]
        cells = [cell(figures.get(name)) for name in COLUMNS]
        lines.append(f"| {row['test']} | {row['outcome']} | " + " | ".join(cells) + " |")
    for row in rows:
        own = {k: v for k, v in row["figures"].items() if k not in COLUMNS}
        lines += ["", f"{row['test']}:"]
        lines += [f"- {name}: {cell(value)}" for name, value in own.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the suite and print its figures (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="select", help="pytest -k expression: which scenarios")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    code, rows = run_suite(args.select)
    print(json.dumps(rows, indent=2) if args.json else markdown(rows))
    return code


if __name__ == "__main__":
    raise SystemExit(main())
