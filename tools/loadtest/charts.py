"""A load run as a picture: connections held and frames per second over time (PNG).

Theory of operation
-------------------
The parent samples progress while the load runs; :func:`timeline_chart` draws that timeline with
matplotlib (the ``loadtest`` extra) on its non-interactive backend, so it works without a display.
"""

from __future__ import annotations

import itertools
from typing import Any


def timeline_chart(report: dict[str, Any], path: str) -> None:
    """A PNG of one run: connections held and frames/s over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["timeline"]
    times = [r[0] for r in rows]
    rates = [0.0] + [(b[2] - a[2]) / max(b[0] - a[0], 1e-9) for a, b in itertools.pairwise(rows)]
    figure, left = plt.subplots(figsize=(8, 4.5))
    left.plot(times, [r[1] for r in rows], color="tab:blue", label="connections")
    left.set_xlabel("seconds")
    left.set_ylabel("connections held", color="tab:blue")
    right = left.twinx()
    right.plot(times, rates, color="tab:orange", label="frames/s")
    right.set_ylabel("frames/s received by clients", color="tab:orange")
    left.set_title(f"blackdrez loadtest ({report['mode']})")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
