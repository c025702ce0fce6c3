"""The benchmark scripts are not run by the suite (they measure, and take minutes), but each must
still start: an import that a refactoring broke would otherwise be found only by the next person
who needs the figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parent.parent / "benchmarks").glob("*.py"))


def test_there_are_benchmarks_to_check() -> None:
    assert len(BENCHMARKS) >= 10, [path.name for path in BENCHMARKS]


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda path: path.name)
def test_every_benchmark_script_starts_and_explains_itself(script: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(script), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=script.parent.parent,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "usage:" in run.stdout


def test_the_budget_puts_each_sampled_stack_in_the_stage_of_its_innermost_named_frame(
    tmp_path: Path,
) -> None:
    sys.path.insert(0, str(BENCHMARKS[0].parent))
    import budget

    root = "Runner.run (asyncio/runners.py:118);Sessions._serve (server/session.py:1)"
    rules = "games/blackdrez/rules.py"
    raw = tmp_path / "profile.raw"
    raw.write_text(
        "\n".join(
            [
                f"{root};Connection.flush (server/connection.py:9) 7",
                f"{root};Fanout.fan_out (server/node/fanout.py:1);encode (protocol/codec.py:2) 3",
                f"{root};Room.act (server/table/room.py:1);BlackDrez.apply ({rules}:5) 4",
                f"{root};Room.flush (server/table/room.py:2);BlackDrez.view ({rules}:9) 2",
                f"{root} 5",
                "Thread._bootstrap (threading.py:1);finished (server/records/writer.py:3) 6",
                "Thread._bootstrap (threading.py:1);_worker (concurrent/futures/thread.py:3) 1",
            ]
        )
    )
    counts = budget.stage_samples(raw)
    assert counts["send"] == 7 and counts["encode"] == 3 and counts["engine"] == 4
    assert counts["views"] == 2 and counts["decode"] == 5 and counts["records"] == 6
    assert counts["other"] == 1 and sum(counts.values()) == 28
