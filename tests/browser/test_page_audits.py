"""What the Lighthouse audits (tools/lighthouse/audit.py, too slow for the suite) found, checked
in real headless Chromium: loading the lobby does not move its panels when the table list
arrives (cumulative layout shift under 0.02, where Lighthouse calls 0.1 good)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
import websockets
from playwright.async_api import Browser

from blackdrez.server.app import GameServer
from tests.browser.helpers import wait_until

# Every layout shift of the page from its first paint, as the Layout Instability API reports it
# (a shift within 500 ms of an input does not count, as in CLS).
OBSERVE_SHIFTS = """
window.__shifts = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    window.__shifts.push({
      value: entry.value,
      input: entry.hadRecentInput,
      moved: (entry.sources || [])
        .map((s) => (s.node ? `${s.node.nodeName}.${s.node.className || ""}` : "?")),
    });
  }
}).observe({ type: "layout-shift", buffered: true });
"""
MAX_SHIFT = 0.02


@pytest.fixture
async def hosts(server: GameServer) -> AsyncIterator[list[websockets.ClientConnection]]:
    """Guests on the WebSocket protocol who host tables (connected while the test runs)."""
    connections: list[websockets.ClientConnection] = []
    yield connections
    for connection in connections:
        await connection.close()


async def host_table(server: GameServer, name: str) -> websockets.ClientConnection:
    """A guest on the protocol who creates a public table named ``name`` and stays seated."""
    connection = await websockets.connect(f"ws://127.0.0.1:{server.port}/", ping_interval=None)
    await connection.send(json.dumps({"type": "hello", "versions": [1], "name": name}))
    assert json.loads(await connection.recv())["type"] == "welcome"
    options = {"name": f"{name}'s table", "seats": 4}
    await connection.send(json.dumps({"type": "create_table", "id": 1, "options": options}))
    assert json.loads(await connection.recv())["type"] == "joined"
    return connection


@pytest.mark.parametrize("tables", [0, 2])
@pytest.mark.parametrize(("width", "height"), [(390, 844), (1280, 800)])
async def test_lobby_loads_without_layout_shift(
    browser: Browser,
    server: GameServer,
    base_url: str,
    hosts: list[websockets.ClientConnection],
    tables: int,
    width: int,
    height: int,
) -> None:
    for number in range(tables):
        hosts.append(await host_table(server, f"Host {number + 1}"))
    # The page's own Content-Security-Policy applies: what it blocks would be on the console.
    context = await browser.new_context(viewport={"width": width, "height": height})
    errors: list[str] = []
    try:
        await context.add_init_script(OBSERVE_SHIFTS)
        page = await context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        await page.goto(base_url)
        if tables:
            await page.locator(".table-row").nth(tables - 1).wait_for()
        else:
            await page.get_by_text("No public tables yet").wait_for()
        # The rest arrives too (the daily deals' lines, the leaderboards), then a last look.
        await wait_until(
            page, "[...document.querySelectorAll('.daily-line')].every((p) => p.textContent)"
        )
        await page.wait_for_timeout(500)
        shifts = await page.evaluate("window.__shifts")
    finally:
        await context.close()
    assert not errors, errors
    total = sum(shift["value"] for shift in shifts if not shift["input"])
    assert total < MAX_SHIFT, f"layout shift {total:.4f} at {width}x{height}: {shifts}"
