"""Arenas the operator schedules (``blackdrez serve --arena-schedule``): pure, no I/O.

Theory of operation
-------------------
A schedule is one line: how often, when (UTC), how long, then optionally the tables' size and
``rated``, then the arena's name::

    daily 18:00 60 Daily bot arena              every day at 18:00 UTC, for 60 minutes
    hourly :30 20 seats=2 rated Quick duel      every hour at half past, 20 minutes, rated duels

Each occurrence is an ordinary public arena (players and bots join it from the list, its page
and its standings are those of any arena) whose id follows from the schedule and its start
(:meth:`ArenaSchedule.arena_id`), so every node may make it, at any time, any number of times:
the same id, the same description. Nodes make each occurrence :data:`AHEAD` seconds before it
starts (listed as upcoming), checking every :data:`CHECK_EVERY` seconds
(``blackdrez.server.node.arenas``).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Literal

AHEAD = 3600.0
"""Seconds before its start that an occurrence is made (and listed as upcoming)."""
CHECK_EVERY = 60.0
"""Seconds between two checks of a node that the coming occurrences exist."""
MAKER = ""
"""The ``maker`` of a scheduled arena: the operators (the protocol's ``ArenaInfo.maker``)."""

_PERIOD = {"daily": 86400, "hourly": 3600}
_LINE = re.compile(
    r"(?P<every>daily|hourly)\s+(?P<at>\d{1,2}:\d\d|:\d\d)\s+(?P<minutes>\d+)"
    r"(?P<options>(?:\s+(?:seats=\d+|rated))*)\s+(?P<name>\S.*)"
)


@dataclass(frozen=True)
class ArenaSchedule:
    """One scheduled arena (see the module docstring)."""

    every: Literal["daily", "hourly"]
    offset: int
    """Seconds from the start of the day (daily) or the hour (hourly), UTC."""
    minutes: int
    name: str
    seats: int = 4
    rated: bool = False

    @property
    def period(self) -> int:
        return _PERIOD[self.every]

    def starts_between(self, now: float, ahead: float = AHEAD) -> list[float]:
        """The starts of the occurrences still running at ``now`` or starting by ``now +
        ahead``, earliest first."""
        first = math.floor((now - self.minutes * 60 - self.offset) / self.period) + 1
        starts: list[float] = []
        n = first
        while (start := float(n * self.period + self.offset)) <= now + ahead:
            if start + self.minutes * 60 > now:
                starts.append(start)
            n += 1
        return starts

    def arena_id(self, starts: float) -> str:
        """The id of the occurrence starting at ``starts``: the same on every node."""
        key = f"{self.every}|{self.offset}|{self.minutes}|{self.seats}|{self.rated}|{self.name}"
        digest = hashlib.sha256(f"{key}|{starts:.0f}".encode()).hexdigest()
        return f"s{digest[:10]}"


def parse_schedule(text: str) -> ArenaSchedule:
    """One schedule line (see the module docstring); raises ``ValueError`` saying what is wrong."""
    found = _LINE.fullmatch(text.strip())
    if found is None:
        raise ValueError(
            f"{text!r} is not a schedule: 'daily HH:MM MINUTES [seats=N] [rated] NAME' or "
            "'hourly :MM MINUTES [seats=N] [rated] NAME' (times in UTC)"
        )
    every: Literal["daily", "hourly"] = "daily" if found["every"] == "daily" else "hourly"
    hours_text, _, minutes_text = found["at"].partition(":")
    if every == "hourly" and hours_text:
        raise ValueError(f"{text!r}: an hourly arena starts at :MM, the minute of each hour")
    if every == "daily" and not hours_text:
        raise ValueError(f"{text!r}: a daily arena starts at HH:MM (UTC)")
    hours, minute = int(hours_text or 0), int(minutes_text)
    if hours > 23 or minute > 59:
        raise ValueError(f"{text!r}: {found['at']} is not a time of day")
    minutes = int(found["minutes"])
    if not 1 <= minutes <= _PERIOD[every] // 60:
        raise ValueError(
            f"{text!r}: a {every} arena lasts 1 to {_PERIOD[every] // 60} minutes, "
            f"not {minutes} (the next would start before it ends)"
        )
    seats, rated = 4, False
    for word in found["options"].split():
        if word == "rated":
            rated = True
        else:
            seats = int(word.removeprefix("seats="))
            if not 2 <= seats <= 8:
                raise ValueError(f"{text!r}: seats are 2 to 8, not {seats}")
    name = found["name"].strip()
    if len(name) > 64:
        raise ValueError(f"{text!r}: a name is at most 64 characters")
    return ArenaSchedule(every, hours * 3600 + minute * 60, minutes, name, seats, rated)
