"""Where an action's Python calls go: the node's calls per action, by function, counted.

    python3 benchmarks/calls.py [--top 40] [--json FILE]

Runs the scenario of ``tests/node/test_action_budget.py`` (60 actions of 4 players and a
spectator on one node of the in-process harness, on its virtual clock) with the calls counted by
function: the calls of the server's, the games' and the protocol's Python functions that the node
makes (a coroutine's resumption counts as one; what the fake clients and the test's bot do is not
the node's work). Prints the total per action (what the test's budget holds), then the functions
with the most calls per action. Counted, not timed: the same figures on every run and machine,
so a cut shows exactly. Compare two trees by running it in each (``git worktree add``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=40, help="functions to list (default 40)")
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))  # the test's scenario and helpers
    from tests.node import test_action_budget as budget

    budget.COUNT_BY_FUNCTION = True
    budget.test_one_action_costs_no_more_frames_writes_encodes_or_store_calls()
    (counts,) = budget.LAST
    assert counts.by_function is not None
    actions = budget.ACTIONS
    prefix = str(ROOT) + "/"
    per_action = {
        name.replace(prefix, ""): count / actions for name, count in counts.by_function.items()
    }
    figures = {
        "calls": counts.calls / actions,
        "frames": counts.frames / actions,
        "writes": counts.writes / actions,
        "encodes": counts.encodes / actions,
        "store_calls": counts.store_calls / actions,
    }
    print(", ".join(f"{name} {value:.2f}" for name, value in figures.items()), "an action")
    for name, value in sorted(per_action.items(), key=lambda item: -item[1])[: args.top]:
        print(f"{value:7.2f}  {name}")
    if args.json:
        Path(args.json).write_text(json.dumps({**figures, "by_function": per_action}, indent=1))


if __name__ == "__main__":
    main()
