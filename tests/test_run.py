"""``tests/run.py``, CI's command: every test that shares the machine well on two workers, then
the browser tests on two workers of their own, then the tests marked ``alone`` (the fault and
deployment folders, and the browser tests marked so) one at a time; a failure in any part fails
the run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


NO_WORKERS = ("-n", "0")
"""Given after a part's own ``-n 2``: the parts run in this process's worker-less way (what is
checked is which part runs what, and the statuses; each part's workers took 10 s to start)."""


def run(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        # (-c: the project's settings, whichever files are named)
        [
            sys.executable,
            "tests/run.py",
            "-c",
            "pyproject.toml",
            "-p",
            "no:cacheprovider",
            *arguments,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_the_folders_run_alone_come_after_the_others_one_at_a_time() -> None:
    done = run(
        "--collect-only",
        "-q",
        "tests/test_retry.py",
        "tests/faults/test_history.py",
        "tests/browser/test_helpers.py",
        "tests/browser/test_restart.py",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (first_command, first), (browser_command, browser), (last_command, last) = (
        part.split("\n", 1) for part in done.stdout.split("$ ")[1:]
    )
    assert "-n 2 -m not alone and not browser" in first_command
    assert "-n 2 -m browser" in browser_command
    assert "-m alone" in last_command and "-n" not in last_command.split()
    assert "tests/test_retry.py::" in first and "tests/faults/" not in first
    assert "tests/browser/" not in first
    assert "tests/browser/test_helpers.py::" in browser
    assert "tests/browser/test_restart" not in browser
    assert "tests/faults/" not in browser and "tests/test_retry.py" not in browser
    assert "tests/faults/test_history.py::" in last and "tests/test_retry.py" not in last
    assert "tests/browser/test_restart.py::" in last, "a browser test marked alone runs alone"
    assert "tests/browser/test_helpers.py" not in last


def test_a_failure_in_the_first_part_fails_the_run_and_the_second_part_still_runs(
    tmp_path: Path,
) -> None:
    failing = tmp_path / "test_failing.py"
    failing.write_text("def test_that_fails():\n    assert 1 == 2\n")
    done = run(
        *NO_WORKERS,
        "-q",
        str(failing),
        "tests/faults/test_harness.py",
        "-k",
        "gate_was_closed or that_fails",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    first_part, _browser_part, last_part = done.stdout.split("$ ")[1:]
    assert "1 failed" in first_part and "1 passed" in last_part, done.stdout


def test_a_run_that_selects_nothing_says_so() -> None:
    done = run(*NO_WORKERS, "-q", "tests/test_retry.py", "-k", "nothing_is_named_so")
    assert done.returncode == 5, done.stdout + done.stderr


def test_a_marker_expression_of_ones_own_is_refused_rather_than_run_twice() -> None:
    done = run("-q", "-m", "faults", "tests/faults/test_history.py")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "python3 -m pytest" in done.stdout and "$ " not in done.stdout
