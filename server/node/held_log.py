"""A hosted table's log as its host holds it: the entries from its last snapshot on.

The entries before the snapshot are not needed on the host (an undo starts from the snapshot)
and are let go; read, they are :data:`ELIDED`, and a caller that needs them (the table's record,
made when it closes) reads the log from the store. Only their number is kept: a list holding a
placeholder each grew by 8 bytes an entry, whatever the table's age.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

ELIDED = b""
"""In a hosted table's log held here: an entry before its snapshot, let go (or not read at
adoption)."""


class HeldLog(Sequence[bytes]):
    """A table's log: ``start`` entries let go, then the ones held (``held``), in order."""

    __slots__ = ("held", "size", "start")

    def __init__(self, held: Iterable[bytes] = (), start: int = 0) -> None:
        self.start = start
        """How many entries, from the first, are let go."""
        self.held = list(held)
        """The entries from entry ``start + 1`` on."""
        self.size = start + len(self.held)
        """How many entries the log holds (``len``, read by every append without a call)."""

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> list[bytes]: ...
    def __getitem__(self, index: int | slice) -> bytes | list[bytes]:
        start = self.start
        if isinstance(index, slice):
            first, stop, step = index.indices(len(self))
            if step == 1 and first >= start:
                return self.held[first - start : stop - start]
            return [self[at] for at in range(first, stop, step)]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("entry out of the log")
        return ELIDED if index < start else self.held[index - start]

    def __iter__(self) -> Iterator[bytes]:
        return itertools.chain(itertools.repeat(ELIDED, self.start), self.held)

    def append(self, entry: bytes) -> None:
        self.held.append(entry)
        self.size += 1

    def let_go(self, before: int) -> None:
        """Let the entries before index ``before`` go (those up to a snapshot's)."""
        if before > self.start:
            del self.held[: before - self.start]
            self.start = before
