"""A table's chat (:class:`TableChat`): the last lines, and who the host sent away.

Theory of operation
-------------------
A line is a ``say`` command run like any other: logged, so a table rebuilt on another node has
its chat back; emitted as a ``said`` event into the room's event log, so viewers get it in
order with the game's events and a ``resync`` fills any gap. The chat keeps the last
:data:`CHAT_KEPT` lines apart from the event log, for the ``snapshot`` (a client that joins, or
fell too far behind, sees the conversation whatever the game did since). Lines are never part
of a game's record (records are built from the engine's actions); they live as long as the
table's log in the store, which is deleted some time after the table closes
(``docs/operations.md``).

Text is plain: control characters are dropped, runs of blanks (line breaks included) become one
space, and a line left empty is refused. How often one player may write is the host node's
business (a token bucket per player and table, ``blackdrez.server.node.hosting``), like the
connection's own limit.
"""

from __future__ import annotations

import collections
import re
import unicodedata

import msgspec

from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.table.history import EventLog
from blackdrez.server.table.lifecycle import RoomError
from blackdrez.server.table.seating import Seating

CHAT_KEPT = 50
"""Chat lines a snapshot carries."""

_BLANKS = re.compile(r"\s+")


def clean(text: str) -> str:
    """``text`` as a chat line: NFC, no control or format characters (bidirectional overrides
    included; the zero-width joiner of emoji sequences kept), blanks folded to single spaces,
    trimmed."""
    kept = "".join(
        " " if c.isspace() else c
        for c in unicodedata.normalize("NFC", text)
        if c.isspace() or c == "\u200d" or unicodedata.category(c) not in ("Cc", "Cf")
    )
    return _BLANKS.sub(" ", kept).strip()


class ChatReport(msgspec.Struct, kw_only=True, frozen=True):
    """A reported chat line, as the operators see it: who wrote it and who reported it, why,
    and the lines before it (its context), all as the table showed them."""

    id: str
    table: str
    at: float
    """When it was reported (Unix time)."""
    reporter: str
    reporter_name: str
    reason: str
    line: v1.Said
    seq: int
    context: list[v1.Said]
    """Up to :data:`REPORT_CONTEXT` lines before the reported one, oldest first."""


REPORT_CONTEXT = 10
"""Lines before a reported one that its report keeps."""


class TableChat:
    """The chat of one table: its last lines and the spectators the host removed."""

    def __init__(self, log: EventLog, spectators_write: bool = True) -> None:
        self.lines: collections.deque[v1.Numbered] | tuple[()] = ()
        """The last lines (``said`` events with their numbers), oldest first: a deque from the
        first line on (an empty one is 760 bytes, and most tables of a busy node never chat)."""
        self.removed: set[str] = set()
        """Players the host sent away: they may not watch or write here again."""
        self.spectators_write = spectators_write
        """Spectators may write here (the host's choice at creation); players always may."""
        self._log = log

    def say(
        self,
        seating: Seating,
        player: str,
        name: str,
        command: v1.Say,
        *,
        bot: bool,
    ) -> None:
        """Emit ``player``'s line (``said``) into the room's event log: a seated player
        always may write, a spectator if :attr:`spectators_write`; a seated player is named as the
        table shows them."""
        seat = seating.seat_of(player)
        sitting = None if seat is None else seating.seats[seat]
        if sitting is not None:
            name = sitting.name
        elif player not in seating.spectators:
            raise RoomError(ErrorCode.NOT_SEATED, "you are not at this table")
        elif not self.spectators_write:
            raise RoomError(ErrorCode.CHAT_CLOSED, "spectators may not write at this table")
        said = self.line(player, name, seat, command.text, command.quick, bot)
        self._log.emit(said)
        lines = self.lines
        if not isinstance(lines, collections.deque):
            lines = self.lines = collections.deque(maxlen=CHAT_KEPT)
        lines.append(self._log.pending[-1])

    def remove(self, seating: Seating, host: str, spectator: str) -> None:
        """``host`` (who must be the table's) sends ``spectator`` away: they stop watching,
        and may not watch or write here again (``spectator_removed``, named as they last wrote)."""
        if not seating.is_host(host):
            raise RoomError(ErrorCode.NOT_HOST, "only the host may send a spectator away")
        if spectator not in seating.spectators or seating.seat_of(spectator) is not None:
            raise RoomError(ErrorCode.NOT_FOUND, "no such spectator at this table")
        name = next(
            (n.event.name for n in reversed(self.lines) if n.event.player == spectator),
            "a spectator",
        )
        seating.spectators.discard(spectator)
        self.removed.add(spectator)
        self._log.info_dirty = True
        self._log.emit(v1.SpectatorRemoved(player=spectator, name=name))

    def line(
        self,
        player: str,
        name: str,
        seat: int | None,
        text: str | None,
        quick: v1.QuickMessage | None,
        bot: bool,
    ) -> v1.Said:
        """The ``said`` event of ``player``'s line: ``text`` cleaned, or the ``quick`` line's
        text; :class:`RoomError` for neither, both, or a line with nothing left to show."""
        if (text is None) == (quick is None):
            raise RoomError(ErrorCode.BAD_MESSAGE, "say needs text or quick, not both")
        if quick is not None:
            return v1.Said(
                player=player,
                name=name,
                seat=seat,
                text=v1.QUICK_MESSAGES[quick],
                quick=quick,
                bot=bot,
            )
        assert text is not None
        cleaned = clean(text)
        if not cleaned:
            raise RoomError(ErrorCode.BAD_MESSAGE, "the line is empty")
        return v1.Said(player=player, name=name, seat=seat, text=cleaned, bot=bot)

    def report(
        self,
        seating: Seating,
        table: str,
        player: str,
        name: str,
        message: v1.Report,
        *,
        at: float,
        id: str,
    ) -> ChatReport:
        """``player``'s report of a line (``message.seq``: anyone at the table may report one
        of the kept lines), filed at ``at`` as ``id``; nothing here changes."""
        seq = message.seq
        if seating.seat_of(player) is None and player not in seating.spectators:
            raise RoomError(ErrorCode.NOT_SEATED, "you are not at this table")
        kept = list(self.lines)
        found = next((i for i, n in enumerate(kept) if n.seq == seq), None)
        if found is None:
            raise RoomError(ErrorCode.NOT_FOUND, f"no chat line {seq} among the last ones")
        return ChatReport(
            id=id,
            table=table,
            at=at,
            reporter=player,
            reporter_name=name,
            reason=clean(message.reason),
            line=kept[found].event,
            seq=seq,
            context=[n.event for n in kept[max(0, found - REPORT_CONTEXT) : found]],
        )

    def check_watcher(self, player: str) -> None:
        """Refuse (``removed``) a player the host sent away."""
        if player in self.removed:
            raise RoomError(ErrorCode.REMOVED, "the host sent you away from this table")
