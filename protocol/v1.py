"""Protocol version 1: every message after the handshake.

Theory of operation
-------------------
Messages are msgspec Structs in tagged unions; the tag field is ``type``. A client sends requests
(:data:`ClientMessage`); each may carry an ``id`` that the server's reply (``ok``, ``error`` or a
typed reply) echoes. The server also pushes messages nobody asked for: ``update`` for a table the
client sits at or watches, ``lobby`` for the live table list, ``shutdown``.

Every table (a BlackDrez table, or a solitaire session: a private table with one seat) numbers its
events 1, 2, 3...; ``update`` carries the new events with their numbers and the viewer's
complete view after them, so a client never has to re-derive state.
After a reconnect the client sends
``resync`` with the last number it has and gets exactly the missing events, or a ``snapshot`` when
too many were missed. Game payloads (``action``, ``event``, ``view``) are the engines' own Structs;
their schemas are exported beside this module's (``docs/schema/``).
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec

from blackdrez.games import GAMES, SOLITAIRES
from blackdrez.protocol.handshake import Hello

VERSION = 1

RequestId = Annotated[int, msgspec.Meta(ge=0, le=2**53 - 1)]
"""A request id: any whole number a JavaScript client can hold exactly."""
Count = Annotated[int, msgspec.Meta(ge=0, le=2**53 - 1)]
TableId = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
Day = Annotated[str, msgspec.Meta(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")]
"""A UTC day, ``YYYY-MM-DD``: the daily deals and the daily leaderboards are per UTC day."""


def _check_day(day: str | None) -> None:
    """Refuse (as a validation error, on decoding) a ``Day`` that is no calendar day."""
    if day is not None:
        try:
            datetime.date.fromisoformat(day)
        except ValueError:
            raise ValueError(f"{day} is not a day of the calendar") from None


if TYPE_CHECKING:  # the names are the registry's, known when it is imported, not to a checker
    GameName = str
    SolitaireName = str
else:
    GameName = Literal[tuple(GAMES)]
    """A game's wire name: one per folder of ``games/`` (the registry)."""
    SolitaireName = Literal[SOLITAIRES]
    """A one-seat game's wire name."""
TABLE_GAME = "blackdrez"
"""The game of the tables ``create_table`` and ``quick_join`` make (their options are its)."""


class Message(msgspec.Struct, tag_field="type", kw_only=True, omit_defaults=False):
    """Base of every v1 message."""


# --------------------------------------------------------------------------- shared data


class TableOptions(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """What a host chooses when creating a BlackDrez table."""

    name: str = ""
    seats: int = 4
    """2 to 8."""
    decks: int | None = None
    """1 or 2; ``None`` picks the default (one deck up to 4 seats, two decks for 5-8)."""
    turn_seconds: float = 30.0
    """A player who has not acted by then gets the default action (BlackDrez: withdraw)."""
    grace_seconds: float = 60.0
    """How long a disconnected player keeps the seat before it is freed (between games)."""
    max_rounds: int | None = None
    round_pause_seconds: float = 3.0
    """Pause between a round's result and the next deal, so people can read the result."""
    private: bool = False
    """A private table is not listed; joining it needs the invite code."""
    rated: bool = False
    """A rated table: each game's final ranking moves its players' ratings (BlackDrez only;
    casual by default)."""

    def problems(self) -> list[str]:
        """Return what is wrong with these options (empty when they are valid)."""
        found = []
        if not 2 <= self.seats <= 8:
            found.append("seats must be 2 to 8")
        if self.decks not in (None, 1, 2):
            found.append("decks must be 1 or 2")
        if not 1.0 <= self.turn_seconds <= 3600.0:
            found.append("turn_seconds must be 1 to 3600")
        if not 0.0 <= self.grace_seconds <= 3600.0:
            found.append("grace_seconds must be 0 to 3600")
        if not 0.0 <= self.round_pause_seconds <= 60.0:
            found.append("round_pause_seconds must be 0 to 60")
        if self.max_rounds is not None and not 1 <= self.max_rounds <= 1000:
            found.append("max_rounds must be 1 to 1000")
        if len(self.name) > 64:
            found.append("name must be at most 64 characters")
        return found


class SeatRating(msgspec.Struct, kw_only=True, frozen=True):
    """A seated player's rating at a rated table (Weng-Lin, as on the leaderboards of the
    records API: ``docs/api.md``)."""

    ordinal: float
    """The rating shown and ranked: ``mu - 3 sigma``, a conservative estimate (0 at first)."""
    mu: float
    sigma: float
    games: int
    """Rated games played."""
    provisional: bool
    """Too few rated games for the rating to mean much yet: show it marked as such."""


class SeatInfo(msgspec.Struct, kw_only=True):
    """Who sits in a seat."""

    player: str
    name: str
    ready: bool = False
    connected: bool = True
    bot: bool = False
    """Always shown: a bot is labelled a bot wherever its name appears."""
    rating: SeatRating | None = None
    """At a rated table, on a server that keeps records: the player's rating in this game, as
    it stood when they sat down and after each game played here (``None`` until it has been
    read, at a casual table, or without records)."""


class HeldSeat(msgspec.Struct, kw_only=True):
    """A free seat nobody else may take until the game ends: at a rated table it holds the
    result of the player who played its rounds and left (they may sit there again)."""

    seat: int
    player: str
    name: str


class TableInfo(msgspec.Struct, kw_only=True):
    """A table as the lobby and its players see it."""

    id: str
    game: GameName
    name: str
    status: Literal["open", "playing", "finished", "closed"]
    """``open``: seats being filled; ``playing``: a game is on (between rounds too);
    ``finished``: the game ended (the host may start another); ``closed``: gone."""
    seats: list[SeatInfo | None]
    host: str
    """The player id of the table's host."""
    spectators: int = 0
    private: bool = False
    round: int = 0
    options: TableOptions | None = None
    commitment: str | None = None
    """SHA-256 of the running game's seed, published when the game starts."""
    ranked: bool = False
    """A solitaire session whose result goes on the leaderboards: its seed is hidden (a random
    deal, or the player's first daily deal of the day), never a numbered deal."""
    daily: Day | None = None
    """The day of the daily deal this session plays, if it does."""
    hints: int = 0
    """Hints asked in this session's game: a session with hints or undos is ranked apart."""
    undos: int = 0
    """Moves taken back in this session's game."""
    undoable: int = 0
    """How many moves ``undo`` can take back now (those since the last card was revealed)."""
    held: list[HeldSeat] = msgspec.field(default_factory=list)
    """The free seats (``None`` in ``seats``) that only a given player may take until the game
    ends: a rated game's leaver's seat (a ``join`` of anyone else there is ``seat_taken``)."""
    spectator_chat: bool = True
    """Spectators may write in the table's chat (``create_table.spectator_chat``)."""
    arena: str | None = None
    """The arena this table was made for: its games score there."""


class Numbered(msgspec.Struct, kw_only=True):
    """One table event with its sequence number."""

    seq: int
    event: Any


class Limits(msgspec.Struct, kw_only=True):
    """The server's limits, sent in ``welcome``."""

    max_frame_bytes: int
    messages_per_second: float
    burst: int
    idle_timeout_seconds: float
    replay_events: int
    """How many missed events ``resync`` can replay before it sends a snapshot instead."""


class LeaderboardEntry(msgspec.Struct, kw_only=True):
    """One ranked game: the player's best on this board."""

    rank: int
    player: str
    name: str
    score: int
    won: bool | None = None
    day: Day | None = None
    """The UTC day of the deal (daily) or of the game's end (random deals)."""
    deal: Literal["daily", "random"] | None = None
    hints: int = 0
    undos: int = 0
    record: str | None = None
    """The game's verifiable record: ask for it with ``get_record`` (the file ``blackdrez
    verify`` checks). A daily deal's record is sealed until its day has ended."""
    finished: float | None = None
    """When the game ended (Unix time, seconds)."""


# --------------------------------------------------------------------------- client -> server


class WatchLobby(Message, tag="watch_lobby", kw_only=True):
    """Subscribe to the live table list: a ``tables`` reply now, then ``lobby`` pushes."""

    id: RequestId | None = None


class UnwatchLobby(Message, tag="unwatch_lobby", kw_only=True):
    id: RequestId | None = None


class ListTables(Message, tag="list_tables", kw_only=True):
    """The public tables, once."""

    id: RequestId | None = None


class CreateTable(Message, tag="create_table", kw_only=True):
    """Create a BlackDrez table and take its first seat as its host."""

    id: RequestId | None = None
    options: TableOptions = msgspec.field(default_factory=TableOptions)
    spectator_chat: bool = True
    """Spectators may write in the table's chat (players always may). Beside ``options``, not
    in it: a reader of an older version refuses an option it does not know."""


class JoinTable(Message, tag="join", kw_only=True):
    """Take a seat (a given one, or the first free one)."""

    id: RequestId | None = None
    table: TableId
    seat: Annotated[int, msgspec.Meta(ge=0, le=7)] | None = None
    invite: Annotated[str, msgspec.Meta(max_length=64)] | None = None


class QuickJoin(Message, tag="quick_join", kw_only=True):
    """Join an open public table with a free seat, or create one."""

    id: RequestId | None = None


class Spectate(Message, tag="spectate", kw_only=True):
    id: RequestId | None = None
    table: TableId
    invite: Annotated[str, msgspec.Meta(max_length=64)] | None = None


class LeaveTable(Message, tag="leave", kw_only=True):
    """Give up the seat (or stop spectating). During a round the player withdraws first."""

    id: RequestId | None = None
    table: TableId


class SetReady(Message, tag="ready", kw_only=True):
    id: RequestId | None = None
    table: TableId
    ready: bool = True


class StartGame(Message, tag="start", kw_only=True):
    """Host only: start a game with the ready players (at least two)."""

    id: RequestId | None = None
    table: TableId


BotStrategy = Literal["threshold", "bust_probability"]


class AddBots(Message, tag="add_bots", kw_only=True):
    """Host only: fill empty seats with bots the server starts; they connect like anyone else
    (over the public protocol, seeing only their own seat) and are ready at once."""

    id: RequestId | None = None
    table: TableId
    count: Annotated[int, msgspec.Meta(ge=1, le=7)] = 1
    strategy: BotStrategy = "threshold"


class RemoveBot(Message, tag="remove_bot", kw_only=True):
    """Host only: the bot in ``seat`` leaves the table (after the round it is playing, like any
    player who leaves) and disconnects."""

    id: RequestId | None = None
    table: TableId
    seat: Annotated[int, msgspec.Meta(ge=0, le=7)]


class Act(Message, tag="act", kw_only=True):
    """Play an action: one of the table's game's actions, e.g. ``{"type": "hit"}``."""

    id: RequestId | None = None
    table: TableId
    action: dict[str, Any]


class Resync(Message, tag="resync", kw_only=True):
    """I have every event up to ``since``: send the rest, or a snapshot."""

    id: RequestId | None = None
    table: TableId
    since: Count = 0


class StartSolitaire(Message, tag="start_solitaire", kw_only=True):
    """Start a solitaire session: a random deal, a numbered one anyone can replay (never
    ranked: its seed is public), or today's daily deal (``daily``; not with ``deal``)."""

    id: RequestId | None = None
    game: SolitaireName
    deal: Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)] | None = None
    daily: bool = False


class Hint(Message, tag="hint", kw_only=True):
    """Ask for a good move in your solitaire session (reply ``hint``). The session's game is
    marked as helped from then on: it is ranked apart."""

    id: RequestId | None = None
    table: TableId


class Undo(Message, tag="undo", kw_only=True):
    """Take back your last move in your solitaire session (reply ``ok``, event ``undone``).
    Only moves since the last card was revealed can be taken back (a deal in Blue Jacket, a
    new stock card or round in Blackjack Piles), so an undo never shows anything new; nor can
    a game that ended. The game is marked as helped: it is ranked apart."""

    id: RequestId | None = None
    table: TableId


class GetDaily(Message, tag="daily", kw_only=True):
    """The daily deal of a solitaire for a UTC day (default: today): its commitment, and its
    seed once the day has ended (reply ``daily``)."""

    id: RequestId | None = None
    game: SolitaireName
    day: Day | None = None

    def __post_init__(self) -> None:
        _check_day(self.day)


class GetLeaderboard(Message, tag="leaderboard", kw_only=True):
    """A leaderboard: one game, daily deals or random deals, one UTC day (``day``) or all
    time, games played without help or (``assisted``) with hints or undos."""

    id: RequestId | None = None
    game: SolitaireName
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10
    deal: Literal["daily", "random"] = "daily"
    day: Day | None = None
    assisted: bool = False

    def __post_init__(self) -> None:
        _check_day(self.day)


class GetRecord(Message, tag="get_record", kw_only=True):
    """A leaderboard entry's game record (reply ``record``)."""

    id: RequestId | None = None
    record: Annotated[str, msgspec.Meta(min_length=1, max_length=128)]


class Ping(Message, tag="ping", kw_only=True):
    """Application-level ping; the reply ``pong`` echoes ``id`` and gives the server's time."""

    id: RequestId | None = None


class Logout(Message, tag="logout", kw_only=True):
    """End this connection's session token on every node (reply ``ok``, then the server closes
    the connection with 1000); ``hello`` with it is refused from then on."""

    id: RequestId | None = None


class SignUp(Message, tag="sign_up", kw_only=True):
    """Claim this connection's guest identity (its player id, so its games and rating) under
    ``name`` with ``password``. The reply ``session`` carries the token to use from now on (the
    guest token is refused once the identity is claimed)."""

    id: RequestId | None = None
    name: Annotated[str, msgspec.Meta(max_length=64)]
    password: Annotated[str, msgspec.Meta(max_length=1024)]


class SignIn(Message, tag="sign_in", kw_only=True):
    """Log in to the account claimed under ``name``: the reply ``session`` carries its token;
    greet again with it (a new connection, or after a reload) to play as that identity.
    Attempts are rate-limited per account name and per client address."""

    id: RequestId | None = None
    name: Annotated[str, msgspec.Meta(max_length=64)]
    password: Annotated[str, msgspec.Meta(max_length=1024)]


class SignOutEverywhere(Message, tag="sign_out_everywhere", kw_only=True):
    """Refuse every token of this connection's account from now on (other browsers too); the
    reply ``session`` carries a fresh token for this browser."""

    id: RequestId | None = None


CHAT_CHARACTERS = 300
"""The longest chat line, in characters (a longer ``say`` is a ``bad_message``)."""
QUICK_MESSAGES: dict[str, str] = {
    "hello": "Hello!",
    "good_luck": "Good luck!",
    "good_game": "Good game!",
    "well_played": "Well played!",
    "thanks": "Thanks!",
    "oops": "Oops!",
}
"""The canned chat lines (``say.quick``) and their English text; a client may show its own
words for them."""
QuickMessage = Literal["hello", "good_luck", "good_game", "well_played", "thanks", "oops"]
ChatText = Annotated[str, msgspec.Meta(min_length=1, max_length=CHAT_CHARACTERS)]


class Say(Message, tag="say", kw_only=True):
    """Write a line in a table's chat (reply ``ok``, event ``said`` to everyone there): ``text``
    (plain text, at most :data:`CHAT_CHARACTERS` characters, never markup) or a canned ``quick``
    line, not both. Players may always write; spectators if the table's ``spectator_chat``
    allows (``create_table``). Too many lines too fast: ``rate_limited`` (the connection
    stays). The chat is not part of any game's record."""

    id: RequestId | None = None
    table: TableId
    text: ChatText | None = None
    quick: QuickMessage | None = None


class RemoveSpectator(Message, tag="remove_spectator", kw_only=True):
    """The host sends a spectator away (event ``spectator_removed``): they stop watching, and
    may neither watch nor write at this table again."""

    id: RequestId | None = None
    table: TableId
    player: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]


class Report(Message, tag="report", kw_only=True):
    """Report a line of a table's chat (its event number ``seq``) to the operators, with an
    optional ``reason``: they see it, and the lines before it, in the admin view. Anyone at the
    table may report a line still among its last 50; the reply is ``ok`` and nobody else is
    told."""

    id: RequestId | None = None
    table: TableId
    seq: Count
    reason: Annotated[str, msgspec.Meta(max_length=200)] = ""


MatchSeats = Annotated[int, msgspec.Meta(ge=2, le=8)]


class FindGame(Message, tag="find_game", kw_only=True):
    """Queue for a BlackDrez table with players of close ratings (reply ``queued``; once a
    table is made, ``match_found``): ``seats`` the table size wanted (``None``: any), rated or
    casual, and after how many seconds of waiting bots may take the seats nobody took
    (``None``: never). The server groups players whose ratings are close, widening the band
    the longer they wait, so that nobody waits for ever. One place per player, whichever of
    their connections asks: a second ``find_game`` changes the choices and keeps the place (the
    wait goes on from the first), also after a reconnect to another node within
    ``queued.keep_seconds``."""

    id: RequestId | None = None
    seats: MatchSeats | None = None
    rated: bool = False
    bots_after: Annotated[float, msgspec.Meta(ge=0.0, le=600.0)] | None = None


class CancelFind(Message, tag="cancel_find", kw_only=True):
    """Leave the matchmaking queue (reply ``ok``; also when not queueing)."""

    id: RequestId | None = None


ArenaId = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]


class ArenaOptions(msgspec.Struct, kw_only=True):
    """What the maker of an arena chooses."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    minutes: Annotated[int, msgspec.Meta(ge=1, le=240)] = 30
    """How long it runs: games that end after it are not scored."""
    seats: MatchSeats = 4
    """The size of its tables."""
    rated: bool = False
    private: bool = False
    """Not listed: joining or watching it needs its invite code."""
    starts_in: Annotated[float, msgspec.Meta(ge=0.0, le=7 * 86400.0)] = 0.0
    """Seconds from now until it starts (players may join before)."""


class CreateArena(Message, tag="create_arena", kw_only=True):
    """Make an arena (reply ``arena``, with its invite code when private): a tournament of a
    fixed length whose players are paired into new tables as soon as they are free."""

    id: RequestId | None = None
    options: ArenaOptions


class JoinArena(Message, tag="join_arena", kw_only=True):
    """Play in an arena (reply ``arena``; its standings pushed from then on, as with
    ``watch_arena``): you are queued for your next table there, made with players of the arena
    only (``match_found``). Send it again after each game to be paired again (the clients do);
    joining again keeps your points."""

    id: RequestId | None = None
    arena: ArenaId
    invite: Annotated[str, msgspec.Meta(max_length=64)] | None = None


class LeaveArena(Message, tag="leave_arena", kw_only=True):
    """Stop being paired in an arena (reply ``ok``); your points stay in its standings."""

    id: RequestId | None = None
    arena: ArenaId


class WatchArena(Message, tag="watch_arena", kw_only=True):
    """Follow an arena's standings without playing (reply ``arena``, then
    ``arena_standings`` pushes)."""

    id: RequestId | None = None
    arena: ArenaId
    invite: Annotated[str, msgspec.Meta(max_length=64)] | None = None


class UnwatchArena(Message, tag="unwatch_arena", kw_only=True):
    id: RequestId | None = None
    arena: ArenaId


class ListArenas(Message, tag="list_arenas", kw_only=True):
    """The public arenas upcoming, running, or finished within the last day (reply
    ``arenas``)."""

    id: RequestId | None = None


PlayerId = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]


class Follow(Message, tag="follow", kw_only=True):
    """Follow a player (reply ``ok``): they are listed in your ``friends``, with whether they
    are online, playing or watching. Following is one-way and nobody is told."""

    id: RequestId | None = None
    player: PlayerId


class Unfollow(Message, tag="unfollow", kw_only=True):
    id: RequestId | None = None
    player: PlayerId


class Block(Message, tag="block", kw_only=True):
    """Block a player (reply ``ok``): their challenges are refused, and clients hide their chat
    lines from you (your ``friends`` lists whom you block). Blocking also stops following."""

    id: RequestId | None = None
    player: PlayerId


class Unblock(Message, tag="unblock", kw_only=True):
    id: RequestId | None = None
    player: PlayerId


class GetFriends(Message, tag="friends", kw_only=True):
    """Who you follow, each with where they are now, and whom you block (reply ``friends``)."""

    id: RequestId | None = None


class Challenge(Message, tag="challenge", kw_only=True):
    """Invite a player you name to a BlackDrez table of two (reply ``challenge_sent`` with the
    challenge's id): they are told ``challenged`` wherever they are connected, and may accept
    or decline within :data:`CHALLENGE_SECONDS` (``answer_challenge``). Refused with
    ``not_found`` when they are not connected, ``challenge_refused`` when they block you."""

    id: RequestId | None = None
    player: PlayerId
    rated: bool = False


class AnswerChallenge(Message, tag="answer_challenge", kw_only=True):
    """Accept or decline a challenge you were sent (reply ``ok``; on accept, both of you get
    ``match_found`` for the new table, the game started)."""

    id: RequestId | None = None
    challenge: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    accept: bool


CHALLENGE_SECONDS = 60.0
"""How long a challenge may be answered."""


ClientMessage = (
    Hello
    | WatchLobby
    | UnwatchLobby
    | ListTables
    | CreateTable
    | JoinTable
    | QuickJoin
    | Spectate
    | LeaveTable
    | SetReady
    | StartGame
    | AddBots
    | RemoveBot
    | Act
    | Resync
    | StartSolitaire
    | Hint
    | Undo
    | Say
    | RemoveSpectator
    | Report
    | FindGame
    | CancelFind
    | CreateArena
    | JoinArena
    | LeaveArena
    | WatchArena
    | UnwatchArena
    | ListArenas
    | Follow
    | Unfollow
    | Block
    | Unblock
    | GetFriends
    | Challenge
    | AnswerChallenge
    | GetDaily
    | GetLeaderboard
    | GetRecord
    | Ping
    | Logout
    | SignUp
    | SignIn
    | SignOutEverywhere
)


# --------------------------------------------------------------------------- server -> client


class Welcome(Message, tag="welcome", kw_only=True):
    """The handshake's answer: the version spoken from now on, and who you are."""

    version: int
    token: str
    """Keep it: ``hello`` with it brings back the same player, seats and sessions."""
    token_expires: float
    """Unix time after which ``token`` is refused: its first issue plus the token lifetime."""
    player: str
    name: str
    limits: Limits
    server: str
    tables: list[str] = []
    """Tables and sessions where this player holds a seat: resync them after a reconnect."""


class Error(Message, tag="error", kw_only=True):
    id: RequestId | None = None
    code: str
    """One of :class:`blackdrez.protocol.errors.ErrorCode`."""
    message: str
    supported: list[int] | None = None
    """With ``unsupported_version``: the versions this server speaks."""
    retry_after: float | None = None
    """With ``rate_limited``: seconds to wait before sending the request again (nothing was
    executed); ``None`` otherwise."""


class Ok(Message, tag="ok", kw_only=True):
    """A request succeeded; ``seq`` is the table's last event number after it, where relevant."""

    id: RequestId | None = None
    seq: int | None = None


class Joined(Message, tag="joined", kw_only=True):
    """You sit at (or watch) a table; a ``snapshot`` of it follows."""

    id: RequestId | None = None
    table: TableInfo
    seat: int | None
    invite: str | None = None
    """A private table's invite code, for everyone it let in (its host, or who gave the code)."""


class Snapshot(Message, tag="snapshot", kw_only=True):
    """A table's complete state for this viewer, up to and including event ``seq``."""

    id: RequestId | None = None
    table: TableId
    seq: int
    info: TableInfo
    seat: int | None
    view: Any | None
    """The game's view for this viewer (``None`` before the first game starts)."""
    legal: list[Any] = []
    """This viewer's legal actions now."""
    deadline: float | None = None
    """When the player on turn gets the default action (Unix time, seconds)."""
    recent: list[Numbered] = []
    """The table's last events up to ``seq`` (at most 64, none before the current or last game
    started), as this viewer saw them: history for a table log. ``view`` already includes them;
    they are not to be applied again."""
    chat: list[Numbered] = []
    """The table's last chat lines (``said`` events, at most 50, oldest first) up to ``seq``:
    history for the chat, whatever the game did since."""


class Update(Message, tag="update", kw_only=True):
    """New events at a table, and this viewer's view after them."""

    id: RequestId | None = None
    table: TableId
    seq: int
    """The number of the last event in ``events``."""
    events: list[Numbered]
    view: Any | None
    legal: list[Any] = []
    deadline: float | None = None
    info: TableInfo | None = None
    """Present when the table's seats, status or options changed."""


class Tables(Message, tag="tables", kw_only=True):
    id: RequestId | None = None
    tables: list[TableInfo]


class LobbyUpdate(Message, tag="lobby", kw_only=True):
    """Pushed to lobby watchers: tables added or changed, and tables gone."""

    tables: list[TableInfo] = []
    removed: list[str] = []


class Leaderboard(Message, tag="leaderboard", kw_only=True):
    id: RequestId | None = None
    game: str
    entries: list[LeaderboardEntry]
    deal: Literal["daily", "random"] = "daily"
    day: Day | None = None
    """The board's UTC day, or ``None`` for all time."""
    assisted: bool = False


class HintReply(Message, tag="hint", kw_only=True):
    """The answer to ``hint``: the move the expert bot would play now, one of your legal
    actions (its source and destination are the ones to highlight). When the expert is busy
    or does not answer within its time budget, a quicker bot's move is given: ``by`` names
    the bot that chose it."""

    id: RequestId | None = None
    table: TableId
    action: Any
    by: str = "expert"
    """``expert``, or the quick bot's name (``heuristic``, ``greedy``)."""
    hints: int
    """Hints asked in this game so far."""


class Daily(Message, tag="daily", kw_only=True):
    """A daily deal. Its seed is drawn at random the first time the day's deal is asked for
    and committed to at once (``commitment``, SHA-256 of the seed); ``seed`` is revealed once
    the day has ended, so nobody can compute the stock in advance."""

    id: RequestId | None = None
    game: str
    day: Day
    commitment: str
    starts: float
    """The day's first second (Unix time)."""
    ends: float
    """When the day ends and the seed is revealed (Unix time)."""
    seed: str | None = None


class GameRecord(Message, tag="record", kw_only=True):
    """A ranked game's record: ``text`` is the JSON file ``blackdrez verify`` checks."""

    id: RequestId | None = None
    record: str
    text: str


class Pong(Message, tag="pong", kw_only=True):
    id: RequestId | None = None
    time: float


class Shutdown(Message, tag="shutdown", kw_only=True):
    """The server is going away; reconnect after ``reconnect_after`` seconds with your token."""

    reason: str
    reconnect_after: float = 1.0


class Session(Message, tag="session", kw_only=True):
    """The answer to ``sign_up``, ``sign_in`` and ``sign_out_everywhere``: an account's identity
    and the session token to greet with from now on."""

    id: RequestId | None = None
    player: str
    name: str
    token: str


class Queued(Message, tag="queued", kw_only=True):
    """The answer to ``find_game``: you wait for a table, since ``since`` (Unix time), with the
    rating the queue matches you by (the one people see; 1500 when you have none, and at a
    casual table). Opponents are first looked for within ``band`` points of it, the band
    growing by ``widen`` points each second, and any rating is accepted after ``anyone_after``
    seconds. ``waiting``: the players queueing now, you included. The place is kept
    ``keep_seconds`` after the connection is lost: a ``find_game`` within them keeps it."""

    id: RequestId | None = None
    since: float
    rating: int
    seats: int | None
    rated: bool
    bots_after: float | None
    waiting: int
    band: float
    widen: float
    anyone_after: float
    keep_seconds: float


class MatchFound(Message, tag="match_found", kw_only=True):
    """Pushed when the queue made your table: you sit at ``table`` in ``seat`` (send ``join``
    or ``resync`` to watch it; until you do, you count as away there, and the seat is freed
    after the table's grace), with ``players`` (their names, yours included, seat order) and
    ``bots`` seats taken by bots. The game starts at once; you left the queue."""

    table: TableId
    seat: int
    players: list[str]
    bots: int
    rated: bool
    waited: float
    """Seconds you waited."""
    arena: str | None = None
    """The arena this table was made for (``join_arena``), if it was."""


class ArenaInfo(msgspec.Struct, kw_only=True):
    """An arena as its players see it."""

    id: ArenaId
    name: str
    maker: str
    """The player id of who made it (``""``: the operators)."""
    starts: float
    ends: float
    """Unix times."""
    seats: int
    rated: bool
    private: bool
    status: Literal["upcoming", "running", "finished"]
    players: int = 0


class StandingInfo(msgspec.Struct, kw_only=True):
    """One player's line in an arena's standings."""

    rank: int
    player: str
    name: str
    bot: bool
    points: int
    games: int
    wins: int
    streak: int
    on_fire: bool
    """Two wins in a row or more: their next win scores double."""
    results: list[int]
    """The points of each game, oldest first."""
    active: bool
    """Still being paired (``false``: left the arena)."""


class Arena(Message, tag="arena", kw_only=True):
    """The answer to ``create_arena``, ``join_arena`` and ``watch_arena``: the arena and its
    standings (best first); ``invite``: a private arena's code, for who may pass it on."""

    id: RequestId | None = None
    arena: ArenaInfo
    standings: list[StandingInfo]
    invite: str | None = None


class ArenaStandings(Message, tag="arena_standings", kw_only=True):
    """Pushed to an arena's players and watchers when its standings change (a game scored, a
    player joined or left). Its start and end are its info's times: no push marks them."""

    arena: ArenaInfo
    standings: list[StandingInfo]


class Arenas(Message, tag="arenas", kw_only=True):
    id: RequestId | None = None
    arenas: list[ArenaInfo]


class Friend(msgspec.Struct, kw_only=True):
    """A player you follow (or block), and where they are now."""

    player: str
    name: str
    status: Literal["offline", "online", "playing", "watching"] = "offline"
    """``playing``: seated at a table; ``watching``: only watching one; ``online``: connected
    elsewhere in the site."""
    table: str | None = None
    """The table they play at or watch (``null`` at a private one)."""


class Friends(Message, tag="friends", kw_only=True):
    id: RequestId | None = None
    following: list[Friend]
    blocked: list[Friend]


class ChallengeSent(Message, tag="challenge_sent", kw_only=True):
    id: RequestId | None = None
    challenge: str
    expires: float
    """Unix time after which it can no longer be accepted."""


class Challenged(Message, tag="challenged", kw_only=True):
    """Pushed to a player someone challenged (``answer_challenge`` to answer)."""

    challenge: str
    player: str
    name: str
    rated: bool
    expires: float


class ChallengeAnswered(Message, tag="challenge_answered", kw_only=True):
    """Pushed to the challenger: the challenged player declined (an accepted challenge brings
    ``match_found`` instead), or it expired unanswered."""

    challenge: str
    accepted: bool


ServerMessage = (
    Welcome
    | Error
    | Ok
    | Joined
    | Snapshot
    | Update
    | Tables
    | LobbyUpdate
    | Leaderboard
    | HintReply
    | Daily
    | GameRecord
    | Pong
    | Shutdown
    | Session
    | Queued
    | MatchFound
    | Arena
    | ArenaStandings
    | Arenas
    | Friends
    | ChallengeSent
    | Challenged
    | ChallengeAnswered
)


# --------------------------------------------------------------------------- table events
# Events about the table itself; the game's own events (hit, round_won...) come from its engine.


class SeatTaken(Message, tag="seat_taken", kw_only=True):
    seat: int
    player: str
    name: str
    bot: bool = False


class SeatFreed(Message, tag="seat_freed", kw_only=True):
    seat: int
    reason: Literal["left", "timeout", "kicked"] = "left"


class ReadyChanged(Message, tag="ready_changed", kw_only=True):
    seat: int
    ready: bool


class PresenceChanged(Message, tag="presence", kw_only=True):
    seat: int
    connected: bool


class GameStarted(Message, tag="game_started", kw_only=True):
    """A game began; ``commitment`` is SHA-256 of its seed, revealed when it ends."""

    game: GameName
    commitment: str | None
    deal: int | None = None


class TimedOut(Message, tag="timed_out", kw_only=True):
    """The player on turn ran out of time; ``action`` was played for them."""

    seat: int
    action: Any


class TableClosed(Message, tag="table_closed", kw_only=True):
    reason: str


class Said(Message, tag="said", kw_only=True):
    """A line of the table's chat: ``text`` as written (plain text: show it as text, never as
    markup), or the canned ``quick`` line (its English ``text`` given too). ``seat`` is the
    writer's seat, ``None`` for a spectator."""

    player: str
    name: str
    seat: int | None = None
    text: str
    quick: QuickMessage | None = None
    bot: bool = False


class SpectatorRemoved(Message, tag="spectator_removed", kw_only=True):
    """The host sent ``player`` (a spectator) away from this table."""

    player: str
    name: str


class RoundPar(msgspec.Struct, kw_only=True):
    """One round of a solitaire next to its par (Blackjack Piles)."""

    round: int
    score: int
    """The player's score in the round."""
    par: int
    exact: bool


class Par(Message, tag="par", kw_only=True):
    """After a solitaire ends: what perfect play, seeing the cards to come, would have scored on
    the same deal, beside the player's ``score`` (docs/solitaire.md). ``par`` is never below
    ``score``; ``exact`` is false when the bounded search ran out first (``par`` is then the best
    line it found, a lower bound). Blackjack Piles gives each round the player played in
    ``rounds``, and ``par`` is their sum."""

    score: int
    par: int
    exact: bool
    rounds: list[RoundPar] = []


class Undone(Message, tag="undone", kw_only=True):
    """The player took ``action`` back (the view is as it was before it); ``undoable`` more
    moves can still be taken back."""

    action: Any
    undoable: int


TableEvent = (
    SeatTaken
    | SeatFreed
    | ReadyChanged
    | PresenceChanged
    | GameStarted
    | TimedOut
    | TableClosed
    | Par
    | Undone
    | Said
    | SpectatorRemoved
)
