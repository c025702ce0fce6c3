"""Run the whole test suite as CI does, in three parts, and exit with the first failure's status.

1. Every test that shares the machine well, on two workers (pytest-xdist):
   ``-m "not alone and not browser"``.
2. The browser tests (``browser``, ``tests/conftest.py``), two at a time, apart from the
   others: each drives a Chromium, and two keep both cores busy.
3. Then the tests marked ``alone``, one at a time: the fault suite (its timings and CPU
   figures), the deployment tests (Docker), and the few browser tests that bound a time another
   Chromium beside them would stretch.

``python3 -m pytest`` still runs everything, one test at a time (some 10 minutes longer). The
arguments given here go to every part (``-x``, ``-k NAME``, ``-p no:cacheprovider``; not ``-m``,
which chooses the parts: refused, status 4); a part
that selects no test (pytest's status 5) does not count as a failure unless every part does.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NO_TESTS = 5
USAGE_ERROR = 4
PARTS = (
    ["-n", "2", "-m", "not alone and not browser"],
    ["-n", "2", "-m", "browser"],
    ["-m", "alone"],
)


def main(arguments: list[str]) -> int:
    if any(argument.startswith("-m") for argument in arguments):
        # (a marker expression given here would replace each part's, and run its tests twice)
        print(
            "tests/run.py: the parts are chosen by -m; for a -m of your own use python3 -m pytest"
        )
        return USAGE_ERROR
    statuses = []
    for part in PARTS:
        command = [sys.executable, "-m", "pytest", *part, *arguments]
        print("$", " ".join(command), flush=True)
        statuses.append(subprocess.run(command, cwd=ROOT, check=False).returncode)
    failed = [status for status in statuses if status not in (0, NO_TESTS)]
    if failed:
        return failed[0]
    return NO_TESTS if all(status == NO_TESTS for status in statuses) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
