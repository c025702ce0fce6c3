"""The reports contract (``Reports``): the chat lines players reported, newest first, each kept
for the retention from when it was filed, the newest ``REPORTS_KEPT`` at most."""

from __future__ import annotations

from blackdrez.server.stores import memory, redis
from blackdrez.server.stores.base import REPORTS_KEPT, Stores

DAY = 86_400.0


async def test_reports_come_back_newest_first(stores: Stores) -> None:
    assert await stores.reports.recent(10) == []
    for n in range(5):
        await stores.reports.add(f"report {n}".encode(), at=1_000.0 + n, keep=DAY)
    assert await stores.reports.recent(3) == [b"report 4", b"report 3", b"report 2"]
    assert len(await stores.reports.recent(10)) == 5


async def test_a_report_older_than_the_retention_is_forgotten(stores: Stores) -> None:
    await stores.reports.add(b"old", at=1_000.0, keep=DAY)
    await stores.reports.add(b"recent", at=1_000.0 + DAY - 1, keep=DAY)
    assert await stores.reports.recent(10) == [b"recent", b"old"]
    await stores.reports.add(b"new", at=1_000.0 + DAY + 1, keep=DAY)
    assert await stores.reports.recent(10) == [b"new", b"recent"]


async def test_at_most_the_newest_reports_are_kept(stores: Stores, monkeypatch) -> None:
    assert REPORTS_KEPT >= 1000
    kept_at_most = 20  # (the same bound, smaller: 10,000 writes take a while)
    for module in (memory, redis):
        monkeypatch.setattr(module, "REPORTS_KEPT", kept_at_most)
    for n in range(kept_at_most + 3):
        await stores.reports.add(b"%d" % n, at=float(n), keep=DAY)
    kept = await stores.reports.recent(100)
    assert len(kept) == kept_at_most
    assert kept[0] == b"%d" % (kept_at_most + 2) and kept[-1] == b"3"
