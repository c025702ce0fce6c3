"""Waiting for a lease to lapse without betting on how fast the machine is."""

from __future__ import annotations

import asyncio
import time

from blackdrez.server.stores.base import Stores, Whereabouts

# A lease in these tests lasts long enough that the calls made while it should still be held
# finish inside it on a loaded CI machine; the tests then wait for it to lapse, not a fixed time.
SHORT_LEASE = 1.0


async def until_lapsed(stores: Stores, table_id: str, within: float = 10.0) -> None:
    """Return once ``table_id``'s lease has lapsed as ``stores`` see it (fail after ``within``)."""
    deadline = time.monotonic() + within
    while (await stores.leases.locate(table_id)).where is Whereabouts.HOSTED:
        assert time.monotonic() < deadline, f"{table_id}'s lease did not lapse in {within} s"
        await asyncio.sleep(0.05)
