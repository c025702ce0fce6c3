"""A/B of the hot path against any commit, in one sitting: max actions/s and p99, as ratios.

    python3 benchmarks/compare.py --against REV [--runs 3] [--tables 300] [--duration 8]
        [--stores memory,redis] [--rate ACTIONS_PER_S] [--json FILE]

Theory of operation
-------------------
``REV`` is exported (``git archive``) into a scratch folder, once per commit, and its server is
started from there (``blackdrez loadtest --server-dir``: a tree from before the ``blackdrez``
namespace runs its top-level modules, a later one its own folders under the installed names,
:mod:`blackdrez.tools.trees`); "after" is this checkout. Both are loaded by this checkout's load
tool with the same arguments: ``--tables`` tables of 4 bots, ``--mode play``, the server pinned
to CPU 0, the bots (and Redis) on CPU 1, each run with a server (and a Redis) of its own. Each
round runs every store's before then after, ``--runs`` rounds, so a machine whose load drifts
hurts both sides and both stores alike (the stores one after the other, the Redis/in-memory ratio
compared runs minutes apart: this machine's maxima move by a third within ten minutes). Printed
per store: each side's runs and median of max actions/s, and p99 act -> update; then the ratio
after/before of the medians (above 1: after does more). With two stores, each side's Redis/in
memory: the ratio of the medians and the median of each round's own ratio. With ``--rate`` a
second series, in rounds as well, paces both to that many actions/s and compares their p99 there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from blackdrez.tools.loadtest import cli as loadtest

ROOT = Path(__file__).resolve().parent.parent
PINNED = ["--server-cpus", "0", "--worker-cpus", "1"]


def export(rev: str) -> Path:
    """``rev``'s files in a scratch folder of their own (kept for the next comparison)."""
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    tree = Path(tempfile.gettempdir()) / f"bd-compare-{sha[:12]}"
    if not (tree / "pyproject.toml").is_file():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.Popen(["git", "archive", sha], cwd=ROOT, stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(tree)], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            raise SystemExit(f"git archive {rev} failed")
    return tree


def turns(
    common: list[str], sides: dict[str, list[str]], runs: int
) -> dict[str, list[dict[str, Any]]]:
    """``runs`` runs of each of ``sides`` (its name and its own load tool arguments), taking
    turns in their order; each run's figures printed as it ends."""
    reports: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for round_ in range(runs):
        for side, extra in sides.items():
            report = loadtest.report_of([*common, *extra])
            reports[side].append(report)
            print(
                f"  {round_ + 1}. {side}: {report['actions_per_s']:,.0f} actions/s, "
                f"p99 {report['latency_ms']['p99']} ms, errors {report['errors']}, "
                f"server CPU {report['server_cpu_share'] or 0:.2f} "
                f"(user {report.get('server_cpu_user_share') or 0:.2f}), "
                f"bots' CPU {report['clients_cpu_share'] or 0:.2f}, "
                f"beside: {report.get('neighbours_cpu_share') or {}}",
                file=sys.stderr,
                flush=True,
            )
    return reports


SIDES = ("before", "after")


def series(
    common: list[str], before: Path, stores: list[str], pace: list[str], runs: int
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """``runs`` rounds, each a run of every store's before then after: the reports by store,
    then by side."""
    sides = {
        f"{store} {side}": [
            *(["--redis"] if store == "redis" else []),
            *pace,
            *(["--server-dir", str(before)] if side == "before" else []),
        ]
        for store in stores
        for side in SIDES
    }
    reports = turns(common, sides, runs)
    return {store: {side: reports[f"{store} {side}"] for side in SIDES} for store in stores}


def store_ratios(memory: list[dict[str, Any]], redis: list[dict[str, Any]]) -> dict[str, Any]:
    """One side's Redis/in-memory max actions/s: of the medians, and each round's (the runs
    of a round minutes apart at most), with their median."""
    rounds = [
        r["actions_per_s"] / max(m["actions_per_s"], 1e-9)
        for m, r in zip(memory, redis, strict=True)
    ]
    return {
        "of_medians": loadtest.median_of(redis, "actions_per_s")
        / max(loadtest.median_of(memory, "actions_per_s"), 1e-9),
        "each_round": [round(x, 3) for x in rounds],
        "median_of_rounds": statistics.median(rounds),
    }


def side_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One side's runs and medians: max actions/s, p99, the server's CPU an action."""
    us = [(r["server_cpu_share"] or 0.0) * 1e6 / max(r["actions_per_s"], 1e-9) for r in runs]
    user = [(r.get("server_cpu_user_share") or 0.0) * 1e6 / max(r["actions_per_s"], 1e-9)
            for r in runs]  # fmt: skip
    return {
        "actions_per_s_each": [round(r["actions_per_s"]) for r in runs],
        "actions_per_s": loadtest.median_of(runs, "actions_per_s"),
        "p99_ms_each": [r["latency_ms"]["p99"] for r in runs],
        "p99_ms": loadtest.median_of(runs, "latency_ms.p99"),
        "errors": sum(r["errors"] for r in runs),
        "server_cpu_us_per_action_each": [round(u, 1) for u in us],
        "server_cpu_us_per_action": statistics.median(us),
        # its own code's share, apart from the kernel's work for it (system calls, sockets)
        "server_user_us_per_action": statistics.median(user),
        "server_system_us_per_action": statistics.median(
            u - v for u, v in zip(us, user, strict=True)
        ),
        "bots_cpu_share": loadtest.median_of(runs, "clients_cpu_share"),
        "beside_cpu_share_each": [r.get("neighbours_cpu_share") for r in runs],
    }


def summary(reports: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Each side's runs and medians, and the ratios after/before."""
    rows: dict[str, Any] = {side: side_row(runs) for side, runs in reports.items()}
    before, after = rows["before"], rows["after"]
    rows["actions_ratio"] = after["actions_per_s"] / max(before["actions_per_s"], 1e-9)
    rows["p99_ratio"] = after["p99_ms"] / max(before["p99_ms"], 1e-9)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Compare this checkout with ``--against`` (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--against", required=True, metavar="REV", help="the commit to compare with")
    p.add_argument("--runs", type=int, default=3, help="runs of each side per series")
    p.add_argument("--tables", type=int, default=300, help="tables of 4 bots")
    p.add_argument("--duration", type=float, default=8.0, help="seconds measured per run")
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--stores", default="memory,redis", help="comma-separated: memory,redis")
    p.add_argument("--rate", type=float, help="also compare p99 paced to this many actions/s")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    before = export(args.against)
    common = [
        "--spawn-server", *PINNED, "-c", str(4 * args.tables), "--mode", "play",
        "--duration", str(args.duration), "--warmup", str(args.warmup),
    ]  # fmt: skip
    results: dict[str, Any] = {"against": args.against, "tree": str(before)}
    stores = args.stores.split(",")
    paces: list[tuple[str, list[str]]] = [("max", [])]
    if args.rate:
        paces.append((f"at {args.rate:g}/s", ["--action-rate", str(args.rate)]))
    for pace, pace_args in paces:
        print(f"{pace}:", file=sys.stderr, flush=True)
        by_store = series(common, before, stores, pace_args, args.runs)
        for store, reports in by_store.items():
            name = f"{store} {pace}"
            row = summary(reports)
            results[name] = row
            print(
                f"{name:<18} before {row['before']['actions_per_s']:>7,.0f} actions/s "
                f"{row['before']['actions_per_s_each']}, p99 {row['before']['p99_ms']:.1f} ms | "
                f"after {row['after']['actions_per_s']:>7,.0f} actions/s "
                f"{row['after']['actions_per_s_each']}, p99 {row['after']['p99_ms']:.1f} ms | "
                f"after/before: actions {row['actions_ratio']:.2f}, p99 {row['p99_ratio']:.2f}",
                flush=True,
            )
        if pace == "max" and {"memory", "redis"} <= by_store.keys():
            ratios = {
                side: store_ratios(by_store["memory"][side], by_store["redis"][side])
                for side in SIDES
            }
            results["redis / memory max"] = ratios
            print(
                "redis / memory max "
                + " | ".join(
                    f"{side} {r['of_medians']:.0%} of the medians, rounds {r['each_round']} "
                    f"(median {r['median_of_rounds']:.0%})"
                    for side, r in ratios.items()
                ),
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
