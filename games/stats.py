"""Small statistics for the simulations and benchmarks: rates with confidence intervals.

Theory of operation
-------------------
A rate measured over ``n`` independent trials (games won, deals solved) is reported with its
Wilson score interval, which stays inside [0, 1] and behaves at rates near 0 or 1, where the
normal approximation ``p ± z·sqrt(p(1-p)/n)`` does not. Percentiles are nearest-rank.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054
"""The two-sided 95% quantile of the standard normal distribution."""


def wilson(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` out of ``trials`` (95% by default)."""
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError("need 0 <= successes <= trials and at least one trial")
    rate = successes / trials
    spread = z * z / trials
    centre = (rate + spread / 2) / (1 + spread)
    half = z * math.sqrt(rate * (1 - rate) / trials + spread / (4 * trials)) / (1 + spread)
    return max(0.0, centre - half), min(1.0, centre + half)


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of ``values`` (``fraction`` 0.5 is the median)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]
