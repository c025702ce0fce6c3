"""Token buckets: the per-connection message rate limit, and limits per key (an address, an
account name) that keep a bounded number of keys."""

from __future__ import annotations

import math
from collections import OrderedDict


class TokenBucket:
    """Allows ``rate`` messages per second on average and bursts of up to ``burst``."""

    __slots__ = ("_stamp", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._stamp = now

    def take(self, now: float) -> bool:
        """Spend one token if there is one; return whether the message is allowed."""
        tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        if tokens < 1.0:
            self._tokens = tokens
            return False
        self._tokens = tokens - 1.0
        return True

    def retry_after(self) -> float:
        """Seconds from the last ``take`` until a token is there again (0 if one is), rounded up
        to the millisecond: a client that waits that long is not refused again."""
        missing = 1.0 - self._tokens
        return math.ceil(missing / self.rate * 1000) / 1000 if missing > 0 else 0.0


class KeyedBuckets:
    """A token bucket per key (a client address, an account name), in bounded memory: a key is
    forgotten once its bucket would be full again (a new one is the same), and past ``max_keys``
    the least recently used go first (a key forgotten early only gets a full bucket back)."""

    def __init__(self, rate: float, burst: int, max_keys: int) -> None:
        self.rate = rate
        self.burst = burst
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, tuple[TokenBucket, float]] = OrderedDict()

    def take(self, key: str, now: float) -> bool:
        """Spend one token of ``key``'s bucket if there is one; return whether it was there."""
        entry = self._buckets.pop(key, None)
        bucket = entry[0] if entry is not None else TokenBucket(self.rate, self.burst, now)
        allowed = bucket.take(now)
        self._buckets[key] = (bucket, now)  # most recently used last
        refilled = now - self.burst / self.rate
        while self._buckets:
            _, (_, last_used) = next(iter(self._buckets.items()))
            if last_used > refilled and len(self._buckets) <= self.max_keys:
                break
            self._buckets.popitem(last=False)  # full again (same as new), or over the cap
        return allowed

    def retry_after(self, key: str) -> float:
        """Seconds from ``key``'s last ``take`` until its bucket holds a token again (0 if it
        does, or if the key is not remembered)."""
        entry = self._buckets.get(key)
        return entry[0].retry_after() if entry is not None else 0.0

    def __len__(self) -> int:
        return len(self._buckets)
