"""Three minutes of the chaos soak (:mod:`tests.faults.chaos`): the deployment's processes
(Redis, PostgreSQL, three nodes, a load balancer) fail at random under live games, and the
history checker and the records find nothing lost. ``python -m tests.faults.chaos --minutes 30``
is the long run whose figures are in docs/reliability.md."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.faults.chaos import run

MINUTES = float(os.environ.get("BD_CHAOS_MINUTES", "2"))
"""How long the soak runs here (``BD_CHAOS_MINUTES`` to change it; the test command's 2 minutes
keep CI's whole run under its budget: longer soaks, `python3 -m tests.faults.chaos --minutes
30`, are in docs/reliability.md)."""

pytestmark = pytest.mark.timeout(int(MINUTES * 60) + 900)


async def test_a_chaos_soak_of_the_deployment_loses_nothing(figures: dict[str, Any]) -> None:
    problems = await run(MINUTES, seed=int(os.environ.get("BD_CHAOS_SEED", "1")), figures=figures)
    assert figures["faults injected"] >= MINUTES * 60 / 10, "too few faults struck"
    assert figures["games finished"] > 0
    assert not problems, "\n".join(problems)
