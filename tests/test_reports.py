"""What a failed test's report shows: the last lines of every node process it made (a test that
runs nodes in processes otherwise fails with the client's side only: a swarm's bare
TimeoutError on CI said nothing of what the nodes did)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

A_TEST = """
import sys
from blackdrez.server.testing.nodes import NodeProcess

SAYS = (
    "import time; print('blackdrez test on http://x'); print('{said}', flush=True); "
    "time.sleep(60)"
)


def made(said):
    command = [sys.executable, "-c", SAYS.format(said=said)]
    node = NodeProcess("redis://unused", said, command=command)
    node.start()
    return node


OLD = made("made-before-the-tests")


def test_a_failing_one():
    node = made("the-failing-tests-node")
    try:
        assert False, "failed on purpose"
    finally:
        node.stop()


def test_a_passing_one():
    node = made("the-passing-tests-node")
    node.stop()
"""


def test_a_failed_test_shows_the_last_lines_of_the_nodes_it_made(tmp_path: Path) -> None:
    test_file = tmp_path / "test_with_nodes.py"
    test_file.write_text(A_TEST)
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-c", "pyproject.toml", "-p", "no:cacheprovider",
            "-p", "tests.conftest", "-q", str(test_file),
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 1 passed" in done.stdout, done.stdout
    report = done.stdout.split("= FAILURES =")[1]
    assert "the last lines of node the-failing-tests-node" in report, report
    assert "\nthe-failing-tests-node\n" in report, report
    assert "made-before-the-tests" not in report and "the-passing-tests-node" not in report
