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
