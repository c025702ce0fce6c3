"""The records HTTP API, version 1: requests in, status and JSON out, no server of its own.

Theory of operation
-------------------
:meth:`RecordsApi.handle` takes what any HTTP server has for a request (method, request target
with its query string, body, client address) and returns a :class:`Response` (status, headers,
JSON body). It does no socket I/O, so it plugs into the WebSocket server's ``process_request``
or any other HTTP front end, and the tests call it directly. Routes (``docs/api.md``)::

    GET  /api/v1/games?player=&game=&arena=&before=&limit=   GamesPage, newest first
    GET  /api/v1/games/{id}                             GameRecord (verifies as it is)
    GET  /api/v1/games/{id}/replay                      GameReplay: every step, as seen
    GET  /api/v1/players/{id}                           PlayerProfile
    GET  /api/v1/players/{id}/ratings?game=&before=&limit=   RatingHistory
    GET  /api/v1/leaderboards/{game}?kind=&after=&limit=     Leaderboard
    POST /api/v1/accounts/claim   {"token", "name", "password"}  Session
    POST /api/v1/accounts/login   {"name", "password"}           Session
    POST /api/v1/accounts/revoke  {"token"}                      Session

Every list is one page of at most ``limit`` items (default 20, at most 100) and the cursor of the
next page (``next``; ``null`` on the last), passed back as ``before`` (or ``after``). Bad input
is answered with a 4xx status and ``{"error": {"code", "message"}}``, never a 500; an unknown
query parameter is an error too, so a typo is not silently ignored. Stored game records never
change, so their responses may be cached for good; everything else is ``no-cache``, and account
responses (which carry tokens) ``no-store``.

A private table's games are listed and served to their players only: ``handle`` takes the player
the front end knows the request comes from (``viewer``: it checked their token), and what is
answered to a viewer is ``private, no-cache``. Replays kept in memory are public games' only.
"""

from __future__ import annotations

import asyncio
import enum
import http
import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlsplit

import msgspec

from blackdrez.games import GAMES
from blackdrez.server.records.accounts import AccountError, AccountErrorCode, Accounts, Session
from blackdrez.server.records.ingest import GAME_ID, MAX_PLAYER_ID
from blackdrez.server.records.model import (
    GameStats,
    GameSummary,
    Kind,
    LeaderboardEntry,
    Player,
    RatingPoint,
)
from blackdrez.server.records.ratings import PROFILE_GAME, RATED_GAMES
from blackdrez.server.records.replay import GameReplay, game_replay
from blackdrez.server.records.store import InvalidCursor, RecordsStore

PREFIX = "/api/v1"
DEFAULT_LIMIT = 20
PROFILE_GAMES = 10
"""Recent games in a profile (the rest: ``/api/v1/games?player=``)."""
PROFILE_RATINGS = 20
"""Rating history points in a profile (the rest: ``/api/v1/players/{id}/ratings``)."""
MAX_BODY = 4096
REPLAYS_KEPT = 32
"""Replays kept in memory (a stored game never changes; a shared link is opened many times)."""


class ErrorCode(enum.StrEnum):
    """Why a request failed, besides the account errors. Stable: clients may act on them."""

    BAD_REQUEST = "bad_request"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    TOO_LARGE = "too_large"


class ApiError(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What went wrong: ``code`` is one of ``ErrorCode`` or ``AccountErrorCode``; a rate-limited
    request also says after how many seconds to try again."""

    code: str
    message: str
    retry_after: float | None = None


class ErrorReply(msgspec.Struct, frozen=True, kw_only=True):
    """The body of every 4xx response."""

    error: ApiError


_KINDS: dict[str, Literal["humans", "bots", "all"]] = {
    "humans": "humans",
    "bots": "bots",
    "all": "all",
}
"""A leaderboard's ``kind`` query parameter, as the store takes it."""


class GamesPage(msgspec.Struct, frozen=True, kw_only=True):
    """Finished games, newest first; ``next`` is the ``before`` of the next page."""

    games: list[GameSummary]
    next: str | None


class PlayerProfile(msgspec.Struct, frozen=True, kw_only=True):
    """A player: who, their record per game, their latest BlackDrez ratings and games."""

    player: Player
    stats: list[GameStats]
    ratings: list[RatingPoint]
    """The latest BlackDrez rating points, newest first."""
    ratings_next: str | None
    """``before`` for ``/api/v1/players/{id}/ratings?game=blackdrez`` to read further back."""
    games: list[GameSummary]
    """The latest games, newest first."""
    games_next: str | None
    """``before`` for ``/api/v1/games?player={id}`` to read further back."""


class RatingHistory(msgspec.Struct, frozen=True, kw_only=True):
    """A player's rating after each rated game, newest first."""

    player: str
    game: str
    ratings: list[RatingPoint]
    next: str | None


class Leaderboard(msgspec.Struct, frozen=True, kw_only=True):
    """One game's leaderboard: by rating ordinal (BlackDrez) or best score (solitaires)."""

    game: str
    kind: Kind
    by: Literal["rating", "best_score"]
    entries: list[LeaderboardEntry]
    next: str | None
    """``after`` for the next page."""


class ClaimRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Claim the guest identity of ``token`` under ``name`` with ``password``."""

    token: str
    name: str
    password: str


class LoginRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Log in to the account claimed under ``name``."""

    name: str
    password: str


class RevokeRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Revoke every token of the account that ``token`` belongs to (``token`` included)."""

    token: str


@dataclass(frozen=True)
class Response:
    """What to send back: status, headers (content type included) and body."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = field(default=())


class _Refused(Exception):
    """A request answered with an error reply."""

    def __init__(
        self,
        status: http.HTTPStatus,
        code: str,
        message: str,
        retry_after: float | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reply = ErrorReply(error=ApiError(code=code, message=message, retry_after=retry_after))
        self.headers = headers


_ENCODER = msgspec.json.Encoder()
_JSON = ("content-type", "application/json")
_NO_CACHE = ("cache-control", "no-cache")
_NO_STORE = ("cache-control", "no-store")
_FOREVER = ("cache-control", "public, max-age=31536000, immutable")
_PRIVATE = ("cache-control", "private, no-cache")

_ACCOUNT_STATUS = {
    AccountErrorCode.INVALID_TOKEN: http.HTTPStatus.UNAUTHORIZED,
    AccountErrorCode.BAD_LOGIN: http.HTTPStatus.UNAUTHORIZED,
    AccountErrorCode.BAD_NAME: http.HTTPStatus.BAD_REQUEST,
    AccountErrorCode.WEAK_PASSWORD: http.HTTPStatus.BAD_REQUEST,
    AccountErrorCode.NAME_TAKEN: http.HTTPStatus.CONFLICT,
    AccountErrorCode.ALREADY_CLAIMED: http.HTTPStatus.CONFLICT,
    AccountErrorCode.RATE_LIMITED: http.HTTPStatus.TOO_MANY_REQUESTS,
}


def _bad(message: str) -> _Refused:
    return _Refused(http.HTTPStatus.BAD_REQUEST, ErrorCode.BAD_REQUEST, message)


def _not_found(message: str) -> _Refused:
    return _Refused(http.HTTPStatus.NOT_FOUND, ErrorCode.NOT_FOUND, message)


class _Query:
    """A request's query parameters, each allowed once; unknown ones are refused."""

    def __init__(self, text: str, allowed: frozenset[str]) -> None:
        try:
            values = parse_qs(text, keep_blank_values=True, strict_parsing=bool(text))
        except ValueError:
            raise _bad(f"malformed query string {text!r}") from None
        unknown = sorted(set(values) - allowed)
        if unknown:
            raise _bad(f"unknown query parameter {unknown[0]!r}; allowed: {sorted(allowed)}")
        for name, found in values.items():
            if len(found) > 1:
                raise _bad(f"query parameter {name!r} is given {len(found)} times")
        self._values = {name: found[0] for name, found in values.items()}

    def text(self, name: str) -> str | None:
        value = self._values.get(name)
        if value == "":
            raise _bad(f"query parameter {name!r} is empty")
        if value is not None and "\x00" in value:  # no id or cursor has one (nor can the
            raise _bad(f"query parameter {name!r} holds a NUL character")  # database's text)
        return value

    def limit(self) -> int:
        text = self.text("limit")
        if text is None:
            return DEFAULT_LIMIT
        if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 100:
            raise _bad(f"limit must be an integer from 1 to 100, not {text!r}")
        return int(text)

    def game(self) -> str | None:
        game = self.text("game")
        if game is not None and game not in GAMES:
            raise _bad(f"unknown game {game!r}; known: {', '.join(GAMES)}")
        return game


def _player_id(text: str) -> str:
    if not 0 < len(text) <= MAX_PLAYER_ID or "\x00" in text:
        raise _not_found("no such player")
    return text


class RecordsApi:
    """The records API over a store (and, for the account routes, an :class:`Accounts`)."""

    def __init__(self, store: RecordsStore, accounts: Accounts | None = None) -> None:
        self.store = store
        self.accounts = accounts
        self._replays: OrderedDict[str, GameReplay] = OrderedDict()

    async def handle(
        self,
        method: str,
        target: str,
        body: bytes = b"",
        client: str = "",
        viewer: str | None = None,
    ) -> Response:
        """Answer one request: ``target`` is the path with its query string (``/api/v1/...``);
        ``viewer`` the player the request comes from, if the front end knows (it checked their
        token): their own private games are listed and served to them."""
        try:
            data, cache = await self._route(method, target, body, client, viewer)
        except _Refused as refused:
            headers = (_JSON, _NO_STORE, *refused.headers)
            return Response(refused.status.value, _ENCODER.encode(refused.reply), headers)
        return Response(http.HTTPStatus.OK.value, _ENCODER.encode(data), (_JSON, cache))

    async def _route(
        self, method: str, target: str, body: bytes, client: str, viewer: str | None
    ) -> tuple[Any, tuple[str, str]]:
        parts = urlsplit(target)
        if not parts.path.startswith(PREFIX + "/"):
            raise _not_found(f"no such API path {parts.path!r} (this API is under {PREFIX}/)")
        segments = [unquote(s) for s in parts.path.removeprefix(PREFIX + "/").split("/")]
        route = _match(segments)
        if route is None:
            raise _not_found(f"no such API path {parts.path!r}")
        allowed, name, arguments = route
        if method != allowed:
            raise _Refused(
                http.HTTPStatus.METHOD_NOT_ALLOWED,
                ErrorCode.METHOD_NOT_ALLOWED,
                f"{parts.path} takes {allowed}, not {method}",
                headers=(("allow", allowed),),
            )
        if method == "POST":
            if parts.query:
                raise _bad("account requests take no query parameters")
            return await self._account(name, body, client), _NO_STORE
        data, cache = await getattr(self, name)(parts.query, viewer, *arguments)
        # what a viewer reads may be theirs alone: never from a shared cache
        return data, cache if viewer is None else _PRIVATE

    # ------------------------------------------------------------------ GET routes
    async def _games(
        self, query_text: str, viewer: str | None
    ) -> tuple[GamesPage, tuple[str, str]]:
        query = _Query(query_text, frozenset({"player", "game", "arena", "before", "limit"}))
        try:
            games, cursor = await self.store.games(
                player=query.text("player"),
                game=query.game(),
                arena=query.text("arena"),
                before=query.text("before"),
                limit=query.limit(),
                viewer=viewer,
            )
        except InvalidCursor as error:
            raise _bad(str(error)) from None
        return GamesPage(games=games, next=cursor), _NO_CACHE

    async def _game(
        self, query_text: str, viewer: str | None, game_id: str
    ) -> tuple[Any, tuple[str, str]]:
        _Query(query_text, frozenset())
        record = await self.store.game(game_id, viewer) if GAME_ID.fullmatch(game_id) else None
        if record is None:
            raise _not_found(f"no stored game {game_id!r}")
        return record, _FOREVER

    async def _replay(
        self, query_text: str, viewer: str | None, game_id: str
    ) -> tuple[Any, tuple[str, str]]:
        _Query(query_text, frozenset())
        replay = self._replays.get(game_id)  # public games only: anyone may read them
        if replay is not None:
            self._replays.move_to_end(game_id)
            return replay, _FOREVER
        record = await self.store.game(game_id, viewer) if GAME_ID.fullmatch(game_id) else None
        if record is None:
            raise _not_found(f"no stored game {game_id!r}")
        # One replay and a view per step: milliseconds of CPU, off the event loop
        replay = await asyncio.to_thread(game_replay, record)
        if not replay.private:
            self._replays[game_id] = replay
            while len(self._replays) > REPLAYS_KEPT:
                self._replays.popitem(last=False)
        return replay, _FOREVER

    async def _player(
        self, query_text: str, viewer: str | None, player_id: str
    ) -> tuple[Any, tuple[str, str]]:
        _Query(query_text, frozenset())
        player = await self.store.player(_player_id(player_id))
        if player is None:
            raise _not_found(f"no player {player_id!r} has finished a game")
        # Three independent reads: at once, on as many connections as the database has
        (ratings, ratings_next), (games, games_next), stats = await asyncio.gather(
            self.store.rating_history(
                player.id, PROFILE_GAME, limit=PROFILE_RATINGS, viewer=viewer
            ),
            self.store.games(player=player.id, limit=PROFILE_GAMES, viewer=viewer),
            self.store.stats(player.id),
        )
        profile = PlayerProfile(
            player=player,
            stats=stats,
            ratings=ratings,
            ratings_next=ratings_next,
            games=games,
            games_next=games_next,
        )
        return profile, _NO_CACHE

    async def _ratings(
        self, query_text: str, viewer: str | None, player_id: str
    ) -> tuple[Any, tuple[str, str]]:
        query = _Query(query_text, frozenset({"game", "before", "limit"}))
        game = query.game() or PROFILE_GAME
        if game not in RATED_GAMES:
            raise _bad(f"{game} has no ratings; rated: {', '.join(sorted(RATED_GAMES))}")
        try:
            points, cursor = await self.store.rating_history(
                _player_id(player_id),
                game,
                before=query.text("before"),
                limit=query.limit(),
                viewer=viewer,
            )
        except InvalidCursor as error:
            raise _bad(str(error)) from None
        history = RatingHistory(player=player_id, game=game, ratings=points, next=cursor)
        return history, _NO_CACHE

    async def _leaderboard(
        self, query_text: str, viewer: str | None, game: str
    ) -> tuple[Any, tuple[str, str]]:
        query = _Query(query_text, frozenset({"kind", "after", "limit"}))
        if game not in GAMES:
            raise _not_found(f"no leaderboard for {game!r}; games: {', '.join(GAMES)}")
        asked = query.text("kind") or "all"
        kind = _KINDS.get(asked)
        if kind is None:
            raise _bad(f"kind must be humans, bots or all, not {asked!r}")
        try:
            entries, cursor = await self.store.leaderboard(
                game, kind, after=query.text("after"), limit=query.limit()
            )
        except InvalidCursor as error:
            raise _bad(str(error)) from None
        board = Leaderboard(
            game=game,
            kind=kind,
            by="rating" if game in RATED_GAMES else "best_score",
            entries=entries,
            next=cursor,
        )
        return board, _NO_CACHE

    # ------------------------------------------------------------------ POST routes
    async def _account(self, name: str, body: bytes, client: str) -> Session:
        if self.accounts is None:
            raise _not_found("accounts are not enabled on this server")
        if len(body) > MAX_BODY:
            raise _Refused(
                http.HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                ErrorCode.TOO_LARGE,
                f"an account request is at most {MAX_BODY} bytes",
            )
        try:
            if name == "claim":
                claim = msgspec.json.decode(body, type=ClaimRequest)
                return await self.accounts.claim(claim.token, claim.name, claim.password)
            if name == "login":
                login = msgspec.json.decode(body, type=LoginRequest)
                return await self.accounts.login(login.name, login.password, client)
            revoke = msgspec.json.decode(body, type=RevokeRequest)
            return await self.accounts.revoke(revoke.token)
        except msgspec.DecodeError as error:
            raise _bad(f"not a valid {name} request: {error}") from None
        except AccountError as error:
            retry = (
                (("retry-after", str(math.ceil(error.retry_after))),)
                if error.retry_after is not None
                else ()
            )
            raise _Refused(
                _ACCOUNT_STATUS[error.code], error.code, error.message, error.retry_after, retry
            ) from None


_ROUTES: Mapping[tuple[str, ...], tuple[str, str]] = {
    ("games",): ("GET", "_games"),
    ("games", "*"): ("GET", "_game"),
    ("games", "*", "replay"): ("GET", "_replay"),
    ("players", "*"): ("GET", "_player"),
    ("players", "*", "ratings"): ("GET", "_ratings"),
    ("leaderboards", "*"): ("GET", "_leaderboard"),
    ("accounts", "claim"): ("POST", "claim"),
    ("accounts", "login"): ("POST", "login"),
    ("accounts", "revoke"): ("POST", "revoke"),
}
"""Path segments after ``/api/v1/`` (``*``: any non-empty segment, passed on) -> method, handler."""


def _match(segments: list[str]) -> tuple[str, str, list[str]] | None:
    for pattern, (method, name) in _ROUTES.items():
        if len(pattern) == len(segments) and all(
            p == s or (p == "*" and s) for p, s in zip(pattern, segments, strict=True)
        ):
            arguments = [s for p, s in zip(pattern, segments, strict=True) if p == "*"]
            return method, name, arguments
    return None
