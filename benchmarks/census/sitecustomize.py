"""What a running node holds in memory, on a signal: a census for the RSS per connection.

Put this folder on the server's ``PYTHONPATH`` and set ``BD_CENSUS`` to a folder; the load tool's
server (``blackdrez loadtest --spawn-server``) inherits both. Then, at any moment of the run:

    BD_CENSUS=/tmp/census PYTHONPATH=benchmarks/census blackdrez loadtest --spawn-server \\
        [--redis] --server-cpus 0 --worker-cpus 1 -c 1200 --mode play --duration 16 --warmup 2 &
    kill -WINCH $(pgrep -f "cli serve --host")   # ~12 s in: writes census.PID.txt

The census (``census.PID.txt``) has the live objects the collector tracks, by type (count and
``sys.getsizeof``), the bytes and strings they hold, by holder, the coroutines and generators by
name (a held connection's task chain), the event loop's tasks, the outbox's length, pymalloc's
and glibc's totals and the RSS. It walks the heap (a second or two with 1,200 connections) and
is not for production. ``BD_CENSUS_TRACE=1`` also starts tracemalloc (slow: a few times fewer
actions per second) and ``kill -USR1`` then writes what grew since the previous ``USR1``, by line.
Issue 35's memory work (docs/benchmarks.md) was found with it.
"""

from __future__ import annotations

import collections
import ctypes
import gc
import os
import signal
import sys

_FOLDER = os.environ.get("BD_CENSUS")
_SERVER = "cli serve" in " ".join(sys.orig_argv) if hasattr(sys, "orig_argv") else False


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _census(*_: object) -> None:
    assert _FOLDER is not None
    out = open(os.path.join(_FOLDER, f"census.{os.getpid()}.txt"), "w")  # noqa: SIM115
    counts: collections.Counter[str] = collections.Counter()
    sizes: collections.Counter[str] = collections.Counter()
    held: collections.Counter[str] = collections.Counter()
    held_size: collections.Counter[str] = collections.Counter()
    names: collections.Counter[str] = collections.Counter()
    for obj in gc.get_objects():
        kind = type(obj)
        key = f"{kind.__module__}.{kind.__qualname__}"
        counts[key] += 1
        sizes[key] += sys.getsizeof(obj)
        if kind.__name__ in ("coroutine", "generator"):
            code = obj.cr_code if kind.__name__ == "coroutine" else obj.gi_code
            names[f"{kind.__name__} {code.co_qualname}"] += 1
        for inner in gc.get_referents(obj):
            if type(inner) in (bytes, str):
                label = f"{type(inner).__name__} in {key}"
                held[label] += 1
                held_size[label] += sys.getsizeof(inner)
    out.write("== tracked objects by type (KiB, count)\n")
    for key, size in sizes.most_common(40):
        out.write(f"{size / 1024:10.1f} {counts[key]:8d} {key}\n")
    out.write("== bytes and strings by holder (KiB, count; a shared one counts once per holder)\n")
    for key, size in held_size.most_common(20):
        out.write(f"{size / 1024:10.1f} {held[key]:8d} {key}\n")
    out.write("== coroutines and generators by name\n")
    for key, count in names.most_common(25):
        out.write(f"{count:8d} {key}\n")
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _Mallinfo2
    info = libc.mallinfo2()
    out.write(
        f"== glibc: in use {info.uordblks / 2**20:.1f} MiB, free {info.fordblks / 2**20:.1f} "
        f"MiB, mmapped {info.hblkhd / 2**20:.1f} MiB\n"
    )
    with open(f"/proc/{os.getpid()}/status") as status:
        out.write("".join(line for line in status if line.startswith(("VmRSS", "RssAnon"))))
    out.write("== pymalloc\n")
    out.flush()
    saved = os.dup(2)
    os.dup2(out.fileno(), 2)
    try:
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        out.close()


_previous: list[object] = []


def _grown(*_: object) -> None:
    import tracemalloc

    assert _FOLDER is not None
    snapshot = tracemalloc.take_snapshot()
    if _previous:
        stats = snapshot.compare_to(_previous[-1], "lineno")  # type: ignore[arg-type]
        with open(os.path.join(_FOLDER, f"grown.{os.getpid()}.txt"), "w") as out:
            total = sum(stat.size_diff for stat in stats)
            out.write(f"grown by {total / 2**20:.2f} MiB\n")
            for stat in stats[:60]:
                where = stat.traceback[0]
                out.write(f"{stat.size_diff / 1024:10.1f} KiB {stat.count_diff:8d} {where}\n")
    _previous[:] = [snapshot]


if _FOLDER and _SERVER:
    signal.signal(signal.SIGWINCH, _census)
    if os.environ.get("BD_CENSUS_TRACE"):
        import tracemalloc

        tracemalloc.start(1)
        signal.signal(signal.SIGUSR1, _grown)
