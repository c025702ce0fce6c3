"""A token bucket: the per-connection message rate limit."""

from __future__ import annotations

import math


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
