#!/usr/bin/env python3
"""Lighthouse audits of the browser client's pages: the lobby, a BlackDrez table, a solitaire.

Usage (from the repository's root, after ``npm ci --prefix tools/lighthouse``)::

    python3 tools/lighthouse/audit.py [--runs 3] [--pages lobby,table,solitaire]
                                      [--form-factors mobile,desktop] [--out DIR]

It starts a node (``blackdrez serve --in-memory`` on a free port, with a data folder of its
own), and over the WebSocket protocol, as a guest of its own, makes what the pages show:

* ``table``: a BlackDrez table of three seats (the guest and two bots), its game started with a
  turn timer of an hour, so that it stays put at the guest's turn. Lighthouse's fresh profile is a
  new guest who opens its address (``/#/table/<id>``) and so watches it. The lobby lists it.
* ``solitaire`` (Blackjack Piles; ``bluejacket``: Blue Jacket): a session, private to its player,
  which a stranger cannot watch: Lighthouse loads its address as that player (the guest's token in
  localStorage first, see run.mjs), as when the player reloads the page.

Then it runs Lighthouse (``run.mjs``: Chromium of its own per run, CHROME_PATH, default
/usr/bin/chromium, ``--headless=new --no-sandbox``) ``--runs`` times per page and form factor
(mobile: Lighthouse's default, a throttled phone; desktop: its desktop preset), in turns so that
the machine's noise spreads over all of them, and prints the medians of the four category scores
and of LCP, CLS and TBT, with the audits that cost points. ``--out`` (default
``/tmp/blackdrez-lighthouse``) receives every run's Lighthouse report and ``summary.json``.
``--url`` audits a node already running instead (the pages it makes there are real tables).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import websockets

HERE = Path(__file__).resolve().parent
PAGES = ("lobby", "table", "solitaire", "bluejacket")
SOLITAIRE_GAMES = {"solitaire": "blackjack_piles", "bluejacket": "blue_jacket"}
CATEGORIES = ("performance", "accessibility", "best-practices", "seo")
METRICS = ("lcp", "cls", "tbt", "fcp", "si")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(data_dir: str) -> tuple[subprocess.Popen[bytes], str]:
    """A node on a free port: its process and its address, once it answers /healthz."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "blackdrez.tools.cli",
            "serve",
            "--in-memory",
            "--port",
            str(port),
            "--data-dir",
            data_dir,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "healthz", timeout=2) as reply:
                if reply.status == 200:
                    return process, url
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise SystemExit(f"the server did not start on {url}")
        time.sleep(0.2)


class Guest:
    """A guest on the WebSocket protocol, kept connected (in a thread of its own) while the
    pages are audited, so that its table keeps its host."""

    def __init__(self, url: str, name: str) -> None:
        self.ws_url = "ws" + url.removeprefix("http")
        self.name = name
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.ws: Any = None
        self.token: str | None = None
        self.next_id = 0

    def call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    async def _connect(self) -> None:
        self.ws = await websockets.connect(self.ws_url, ping_interval=None)
        await self.ws.send(json.dumps({"type": "hello", "versions": [1], "name": self.name}))
        welcome = json.loads(await self.ws.recv())
        if welcome.get("type") != "welcome":
            raise RuntimeError(f"no welcome: {welcome}")
        self.token = welcome["token"]

    async def _drain(self) -> None:
        """Read (and drop) what the server pushes, so that its send buffer never fills."""
        try:
            while True:
                await self.ws.recv()
        except websockets.ConnectionClosed:
            return

    async def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        message = {**message, "id": self.next_id}
        await self.ws.send(json.dumps(message))
        while True:
            reply = json.loads(await self.ws.recv())
            if reply.get("id") == self.next_id:
                if reply["type"] == "error":
                    raise RuntimeError(f"{message['type']}: {reply}")
                return reply

    def connect(self) -> None:
        self.call(self._connect())

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        return self.call(self._request(message))

    def done(self) -> None:
        """No more requests: from now on whatever arrives is read and dropped."""
        self.loop.call_soon_threadsafe(lambda: self.loop.create_task(self._drain()))

    def close(self) -> None:
        if self.ws is not None:
            self.call(self.ws.close())
            self.ws = None
        self.loop.call_soon_threadsafe(self.loop.stop)


def make_pages(url: str, pages: list[str]) -> tuple[dict[str, dict[str, Any]], list[Guest]]:
    """Each page's address (and the token to load it with, if any), and the guests keeping
    them."""
    targets: dict[str, dict[str, Any]] = {}
    guests: list[Guest] = []
    if "table" in pages:
        host = Guest(url, "Audit host")
        host.connect()
        options = {"name": "Lighthouse", "seats": 3, "turn_seconds": 3600, "round_pause_seconds": 0}
        table = host.request({"type": "create_table", "options": options})["table"]["id"]
        host.request({"type": "add_bots", "table": table, "count": 2})
        deadline = time.monotonic() + 20
        while True:  # the bots sit down a moment after the ok
            try:
                host.request({"type": "start", "table": table})
                break
            except RuntimeError as error:
                if "not_enough_players" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        host.done()
        guests.append(host)
        targets["table"] = {"url": f"{url}#/table/{table}", "token": None}
    for page in pages:
        if page in SOLITAIRE_GAMES:
            player = Guest(url, "Audit player")
            player.connect()
            session = player.request({"type": "start_solitaire", "game": SOLITAIRE_GAMES[page]})
            # The page greets with this guest's token: the server closes this connection then
            # (4004, "playing elsewhere"); the session lasts an hour without one.
            player.done()
            guests.append(player)
            targets[page] = {"url": f"{url}#/table/{session['table']['id']}", "token": player.token}
    if "lobby" in pages:
        targets["lobby"] = {"url": url, "token": None}
    return {page: targets[page] for page in pages}, guests


TRIES = 3
"""Runs of one audit before giving up: now and then Chromium's trace misses the navigation's
start (Lighthouse's NO_NAVSTART), which says nothing of the page."""


def run_lighthouse(target: dict[str, Any], form_factor: str, output: Path) -> dict[str, Any]:
    """One Lighthouse run (run.mjs), run again if Lighthouse failed to measure."""
    job = {
        "url": target["url"],
        "token": target["token"],
        "formFactor": form_factor,
        "output": str(output),
    }
    env = {**os.environ, "CHROME_PATH": os.environ.get("CHROME_PATH", "/usr/bin/chromium")}
    for attempt in range(1, TRIES + 1):
        done = subprocess.run(
            ["node", str(HERE / "run.mjs"), json.dumps(job)],
            cwd=HERE,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            problem = f"exit {done.returncode}: {done.stderr[-2000:]}"
        else:
            result: dict[str, Any] = json.loads(lines[-1])
            if not result["runtimeError"] and None not in result["scores"].values():
                return result
            problem = result["runtimeError"] or "a category without a score"
        print(f"  (attempt {attempt}: {problem.strip()[:200]})", flush=True)
    raise RuntimeError(f"Lighthouse failed {TRIES} times on {target['url']} ({form_factor})")


def median(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The medians of one page and form factor's runs, and the audits that failed in any."""
    failing: dict[str, dict[str, Any]] = {}
    for run in runs:
        for audit in run["failing"]:
            entry = failing.setdefault(audit["id"], {**audit, "runs": 0})
            entry["runs"] += 1
    return {
        "runs": len(runs),
        "scores": {c: median([run["scores"][c] for run in runs]) for c in CATEGORIES},
        "metrics": {m: median([run["metrics"][m] for run in runs]) for m in METRICS},
        "each": [{"scores": run["scores"], "metrics": run["metrics"]} for run in runs],
        "failing": sorted(failing.values(), key=lambda a: (a["category"], a["id"])),
        "wrong_page": sorted({run["finalUrl"] for run in runs if run["finalUrl"] != run["url"]}),
    }


def table_text(summary: dict[str, dict[str, dict[str, Any]]]) -> str:
    head = (
        "| page | form factor | perf | a11y | best pr. | SEO | LCP (s) | CLS | TBT (ms) | FCP (s) |"
    )
    lines = [head, "|" + "---|" * 10]
    for page, factors in summary.items():
        for factor, result in factors.items():
            s, m = result["scores"], result["metrics"]

            def fmt(value: float | None, scale: float = 1, digits: int = 0) -> str:
                return "—" if value is None else f"{value / scale:.{digits}f}"

            lines.append(
                f"| {page} | {factor} | {fmt(s['performance'])} | {fmt(s['accessibility'])} | "
                f"{fmt(s['best-practices'])} | {fmt(s['seo'])} | {fmt(m['lcp'], 1000, 2)} | "
                f"{fmt(m['cls'], 1, 3)} | {fmt(m['tbt'])} | {fmt(m['fcp'], 1000, 2)} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--runs", type=int, default=3, help="runs per page and form factor (default 3)"
    )
    parser.add_argument(
        "--pages",
        default="lobby,table,solitaire",
        help=f"comma-separated, of {', '.join(PAGES)} (default lobby,table,solitaire)",
    )
    parser.add_argument("--form-factors", default="mobile,desktop", help="mobile, desktop or both")
    parser.add_argument("--out", default="/tmp/blackdrez-lighthouse", help="folder for the reports")
    parser.add_argument("--url", help="audit the node at this address instead of starting one")
    args = parser.parse_args()
    pages = [page for page in args.pages.split(",") if page]
    factors = [factor for factor in args.form_factors.split(",") if factor]
    if unknown := set(pages) - set(PAGES):
        parser.error(f"unknown pages: {', '.join(sorted(unknown))}")
    if unknown := set(factors) - {"mobile", "desktop"}:
        parser.error(f"unknown form factors: {', '.join(sorted(unknown))}")
    if not (HERE / "node_modules" / "lighthouse").is_dir():
        raise SystemExit(f"Lighthouse is not installed: npm ci --prefix {HERE}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    data_dir = tempfile.TemporaryDirectory(prefix="blackdrez-lighthouse-")
    server = None
    guests: list[Guest] = []
    try:
        if args.url:
            url = args.url.rstrip("/") + "/"
        else:
            server, url = start_server(data_dir.name)
        targets, guests = make_pages(url, pages)
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {
            p: {f: [] for f in factors} for p in pages
        }
        for number in range(1, args.runs + 1):
            for page, target in targets.items():
                for factor in factors:
                    report = out / f"{page}-{factor}-{number}.json"
                    started = time.monotonic()
                    result = run_lighthouse(target, factor, report)
                    runs[page][factor].append(result)
                    s, m = result["scores"], result["metrics"]
                    print(
                        f"run {number} {page:<10} {factor:<7} perf {s['performance']} a11y "
                        f"{s['accessibility']} bp {s['best-practices']} seo {s['seo']} "
                        f"LCP {m['lcp'] / 1000:.2f} s CLS {m['cls']:.3f} "
                        f"({time.monotonic() - started:.0f} s)",
                        flush=True,
                    )
        summary = {p: {f: summarize(runs[p][f]) for f in factors} for p in pages}
    finally:
        for guest in guests:
            # (a player's connection is closed already: "playing elsewhere")
            with contextlib.suppress(Exception):
                guest.close()
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        data_dir.cleanup()

    print()
    print(f"Medians of {args.runs} runs ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC):")
    print(table_text(summary))
    for page, factors_ in summary.items():
        for factor, result in factors_.items():
            if result["wrong_page"]:
                print(
                    f"! {page} {factor}: the page ended at {result['wrong_page']}, not its address"
                )
            for audit in result["failing"]:
                print(
                    f"  {page} {factor}: {audit['category']} {audit['id']} score {audit['score']}"
                    f" {audit['value'] or ''} (in {audit['runs']} of {result['runs']} runs)"
                )
    (out / "summary.json").write_text(
        json.dumps(
            {
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "runs": args.runs,
                "pages": {p: targets[p]["url"] for p in pages},
                "summary": summary,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nReports and summary.json in {out}")


if __name__ == "__main__":
    main()
