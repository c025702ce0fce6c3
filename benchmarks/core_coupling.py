"""How much a busy neighbour CPU slows a process pinned to another (the benchmarks pin so).

    python3 benchmarks/core_coupling.py [--cpu 0] [--neighbour 1] [--repeat 7]

Theory of operation
-------------------
The load benchmarks pin the server to one CPU and the bots (and Redis) to the other, as if the
two were independent. On a virtual machine they may be two hyperthreads of one physical core,
or share it with other guests: then whatever runs on the neighbour CPU slows the server, and a
benchmark variant that puts more work beside the server (Redis, a database) slows the server
itself without any change in its code. This script measures it: a fixed pure-Python workload
pinned to ``--cpu``, timed in CPU seconds (``time.process_time``) with the ``--neighbour`` CPU
idle and with a process spinning there, taking turns ``--repeat`` times. It prints the medians
and their ratio: 1.0 means independent CPUs.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time

WORK = 2_000_000
"""Iterations of the workload: about a quarter of a second on the benchmark machine."""


def workload() -> float:
    """CPU seconds for a fixed amount of interpreter work on this process's CPU."""
    start = time.process_time()
    total = 0
    for i in range(WORK):
        total += i * i % 7
    return time.process_time() - start


def spin(cpu: int, stop: multiprocessing.synchronize.Event) -> None:
    """Keep ``cpu`` busy until ``stop`` is set."""
    os.sched_setaffinity(0, {cpu})
    while not stop.is_set():
        for _ in range(10_000):
            pass


def main(argv: list[str] | None = None) -> int:
    """Time the workload with the neighbour idle and busy, in turns; print the medians."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu", type=int, default=0, help="the CPU the workload runs on")
    p.add_argument("--neighbour", type=int, default=1, help="the CPU kept idle or busy")
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args(argv)
    os.sched_setaffinity(0, {args.cpu})
    workload()  # warm up
    idle: list[float] = []
    busy: list[float] = []
    context = multiprocessing.get_context("spawn")
    for _ in range(args.repeat):
        idle.append(workload())
        stop = context.Event()
        spinner = context.Process(target=spin, args=(args.neighbour, stop))
        spinner.start()
        time.sleep(0.3)  # the spinner is running
        busy.append(workload())
        stop.set()
        spinner.join()
        time.sleep(0.1)
    quiet, loaded = statistics.median(idle), statistics.median(busy)
    print(f"CPU {args.cpu}, neighbour CPU {args.neighbour} idle: {1000 * quiet:.0f} ms "
          f"{[round(1000 * s) for s in idle]}")  # fmt: skip
    print(f"CPU {args.cpu}, neighbour CPU {args.neighbour} busy: {1000 * loaded:.0f} ms "
          f"{[round(1000 * s) for s in busy]}")  # fmt: skip
    print(f"slowdown with a busy neighbour: x{loaded / quiet:.2f} (medians of {args.repeat})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
