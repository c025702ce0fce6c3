"""Bot clients: the engines' reference strategies playing over the public protocol.

A bot is an ordinary client: it says hello, takes a seat, and plays from what its seat's view
shows (never a hidden card). When a game ends it checks the fairness proof: the revealed seed must
hash to the commitment published at the start, and must deal exactly the cards the bot saw. A
mismatch is reported loudly (logged as an error and counted in the summary). A bot that plays
tables (:func:`run_bot`: ``blackdrez bot`` and the bots a host adds) is polite in the table's chat,
as people are: it says "Good game!" when a game it played ends, unless told not to
(``chat=False``); a line the server refuses never stops it. Instead of a table, a bot may ask the
matchmaking queue for one (``find=True``): it plays one game at each table the queue makes, then
leaves it and queues again for the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from blackdrez.clients.client import Client, ServerError, TableState
from blackdrez.games import shuffle
from blackdrez.games.blackdrez import bots as blackdrez_bots
from blackdrez.games.blackdrez import rules as blackdrez
from blackdrez.games.blackdrez.bots import BOT_NAMES, STRATEGY_LABELS
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.protocol.retry import RETRY

log = logging.getLogger("blackdrez.bot")

BOT_CLIENT = "blackdrez-bot/0.1"
STRATEGIES = tuple(blackdrez_bots.STRATEGIES)
RETRYABLE = frozenset(
    {"unavailable", "moving", "not_your_turn", "game_over", "illegal_action", "not_in_round"}
)
"""Refusals a bot meets while its table moves between nodes (or the store is down), or when it
acted on a view that was already stale: look at the table again (resync) and carry on, after a
short capped delay with jitter (:data:`blackdrez.protocol.retry.RETRY`: the table is back about a
lease
after its node died, and a bot that waited seconds more would hold its whole table up)."""
REFUSAL_PATIENCE = 90.0
"""Seconds of refusals in a row (or of actions no answer came for) after which a bot gives up:
its table is not coming back."""
STALL = 10.0
"""Seconds a bot waits for its turn (or for its action's update) before it resyncs anyway."""
START_RETRY = 1.0
"""Seconds a hosting bot waits after its ``start`` was refused before it looks again."""
CHAT_PATIENCE = 3.0
"""Seconds a bot gives its chat line (``say``) before it goes on without it: a line the server
refuses for the moment (``rate_limited``, retried by the client) must not hold the bot's play up."""
ARENA_MARGIN = 5.0
"""Seconds past an arena's end a bot still waits for a table there (one made just before)."""
MATCH_START_PATIENCE = 60.0
"""Seconds a bot the queue seated waits for its table's game to start (the server starts it at
once, or once its bots sat: 10 s at most) before it leaves that table and queues again."""
GOOD_GAME: v1.QuickMessage = "good_game"
"""The canned line a chatting bot says when a game it played ends (``"Good game!"``)."""


@dataclass
class BotResult:
    """What one bot saw of one game."""

    table: str
    seat: int
    player: str = ""
    actions: int = 0
    acked: list[int] = field(default_factory=list)
    """The event number the server acknowledged for each of this bot's actions."""
    final: Any = None
    fair: bool | None = None
    problem: str | None = None
    games: int = 0
    """Games this bot played to the end (the other fields describe the last one)."""
    removed: bool = False
    """The bot lost its seat (the host removed it) or the table closed before a game ended."""
    names: dict[int, str] = field(default_factory=dict)
    """The players' names by seat, as the table showed them during the game (the bot's own
    too): a player who left before the end is still named by the seat they played."""


def note_names(names: dict[int, str], info: v1.TableInfo | None) -> None:
    """Add to ``names`` (seat to name) who sits at the table as ``info`` shows it, and who
    holds a seat they left (a rated game's leaver): a seat keeps its last player's name."""
    if info is None:
        return
    for held in info.held:
        names[held.seat] = held.name
    for seat, sitting in enumerate(info.seats):
        if sitting is not None:
            names[seat] = sitting.name


def dealt_cards(events: list[v1.Numbered]) -> list[str]:
    """The cards that left the stock, in order, as a viewer of a BlackDrez table saw them."""
    cards: list[str] = []
    for numbered in events:
        event = numbered.event
        if event["type"] == "round_started":
            seats = sorted(
                event["seats"], key=lambda s: (s - event["dealer"] - 1) % len(event["hands"])
            )
            cards += [event["hands"][seat][i] for i in (0, 1) for seat in seats]
        elif event["type"] == "hit":
            cards.append(event["card"])
    return cards


def check_fairness(state: TableState, begun: int | None = None) -> str | None:
    """Check a finished BlackDrez game's proof; return the problem, or ``None`` when it holds.

    The game of the client's view, or, given ``begun`` (the number of the event that started
    it, or 0), the game that started there, once the next has begun: its seed is the one its
    ``game_over`` event revealed, and only its events count."""
    view = state.view
    events = state.events
    if begun is None:
        seed = view.get("seed") if view else None
    else:
        end = _game_over_after(events, begun)
        if end is None:
            return "the end of the game was never received: cannot check"
        seed = events[end].event.get("seed")
        events = events[: end + 1]
    if seed is None:
        return "the seed was not revealed at the end of the game"
    started = [e.event for e in events if e.event["type"] == "game_started"]
    if not started and begun is not None:
        return None  # joined mid-game, and the view is the next game's: nothing to check
    commitment = started[-1]["commitment"] if started else view.get("commitment")
    if commitment != shuffle.commitment(seed):
        return "the revealed seed does not match the commitment published at the start"
    if not started:
        return None  # joined mid-game: only the commitment can be checked
    first = events.index(next(e for e in events if e.event is started[-1]))
    held = events[first:]
    missing = [n for a, b in itertools.pairwise(held) for n in range(a.seq + 1, b.seq)]
    if missing:
        # Not a proof of anything either way: the client library failed to keep every event.
        return f"events {_ranges(missing)} of the game were never received: cannot check"
    seen = dealt_cards(held)
    config = blackdrez.Config(seats=len(view["seats"]), decks=view["decks"])
    order = blackdrez.BlackDrez.deal_order(config, seed)[0]
    if seen != order[: len(seen)]:
        at = next(i for i, (a, b) in enumerate(zip(seen, order, strict=False)) if a != b)
        return (
            f"the cards dealt are not the ones the revealed seed deals: card {at + 1} was "
            f"{seen[at]}, the seed deals {order[at]} (events {held[0].seq}-{held[-1].seq} held)"
        )
    return None


def _ranges(numbers: list[int]) -> str:
    """``[3, 4, 5, 9]`` as ``3-5, 9``."""
    groups: list[list[int]] = []
    for n in numbers:
        if groups and n == groups[-1][-1] + 1:
            groups[-1].append(n)
        else:
            groups.append([n])
    return ", ".join(f"{g[0]}-{g[-1]}" if len(g) > 1 else str(g[0]) for g in groups)


def _stalled(
    client: Client, state: TableState, what: str, waited: float, resyncs: list[str]
) -> str:
    """Why a bot gave up waiting: for what, and what it saw last of the table and of its
    connection (a failed run's report then says which table stopped, and at what)."""
    view = state.view or {}
    seen = (
        f"event {state.seq}, round {view.get('round')}, phase {view.get('phase')}, "
        f"seat {view.get('to_act')} to act, turn deadline {state.deadline}"
    )
    connection = "closed" if client.closed.done() else f"on {client.url}"
    return (
        f"{client.player} (seat {state.seat}) at table {state.id} waited {waited:.0f} s for "
        f"{what}: last saw {seen}; connection {connection}, {client.reconnects} reconnects; "
        f"resyncs: {', '.join(resyncs) or 'none'}"
    )


async def play_table(
    client: Client,
    table: str,
    strategy: str = "threshold",
    *,
    think: float = 0.0,
    timeout: float = 120.0,
    chat: bool = False,
) -> BotResult:
    """Play ``client``'s seat at ``table`` until the game ends; check the fairness proof.

    ``chat``: say "Good game!" (the quick line ``good_game``) in the table's chat once the game
    ends (give it only for a game the bot plays: :func:`run_bot` does not for a game that was
    over when it sat down); a line the server refuses, or that a dropped connection loses, is
    let go (:func:`say_quietly`). Off by default: the swarm and the ladder play quietly."""
    choose: Callable[..., Any] = blackdrez_bots.STRATEGIES[strategy]
    state = client.tables[table]
    assert state.seat is not None, "a bot needs a seat"
    result = BotResult(table=table, seat=state.seat, player=client.player)
    note_names(result.names, state.info)

    # The game this call plays began at this event (0: before the events the client holds).
    # A later start ends it too: the client may read a game's end and the next game's start in
    # one go (the bot's process was not scheduled between them), and never show it "over".
    begun = _last_start(state)

    def over() -> bool:
        return bool(state.view and state.view["phase"] == "over") or _last_start(state) > begun

    async def look_again() -> str:
        """Resync the table; how it went (for :func:`_stalled`)."""
        try:
            await client.resync(table)
        except (ServerError, ConnectionError, TimeoutError) as error:
            return repr(error)
        return f"at {state.seq}"

    async def wait_for(condition: Callable[[], Any], what: str) -> None:
        """Wait until ``condition``, resyncing every STALL s (an update may have been lost
        while the table moved), for at most ``timeout`` s; then a TimeoutError that says for
        ``what``, and what the bot saw last (:func:`_stalled`)."""
        deadline = time.monotonic() + timeout
        resyncs: list[str] = []

        def noting() -> Any:
            """``condition``, noting who sits where on the way (checked after every message)."""
            note_names(result.names, state.info)
            return condition()

        while True:
            try:
                await client.wait_until(noting, timeout=min(STALL, timeout))
                return
            except TimeoutError as error:
                if time.monotonic() >= deadline:
                    raise TimeoutError(_stalled(client, state, what, timeout, resyncs)) from error
            resyncs.append(await look_again())

    refused_since: float | None = None
    delays = RETRY.delays()
    while True:
        await wait_for(lambda: state.legal or over() or unseated(state, client.player), "a turn")
        if unseated(state, client.player):
            result.removed = True
            return result
        if over():
            break
        if think:
            await asyncio.sleep(think)
            if not state.legal or over() or unseated(state, client.player):
                continue  # the turn passed meanwhile (a timer, or the seat was taken away)
        view = msgspec.convert(state.view, blackdrez.View)
        legal = [msgspec.convert(action, blackdrez.Action) for action in state.legal]
        seq = state.seq
        try:
            ok = await client.act(table, choose(view, legal))
        except (ConnectionError, TimeoutError) as error:
            # The connection dropped (it comes back by itself), or the server did not answer:
            # tried again, as a refusal, for as long as the patience for refusals lasts.
            now = time.monotonic()
            refused_since = now if refused_since is None else refused_since
            if now - refused_since > REFUSAL_PATIENCE:
                waited = now - refused_since
                said = _stalled(client, state, f"an answer to its action ({error!r})", waited, [])
                raise TimeoutError(said) from error
            await asyncio.sleep(next(delays))
            continue
        except ServerError as error:
            now = time.monotonic()
            refused_since = now if refused_since is None else refused_since
            if error.code not in RETRYABLE or now - refused_since > REFUSAL_PATIENCE:
                raise
            await asyncio.sleep(next(delays))
            await look_again()
            continue
        refused_since = None
        delays = RETRY.delays()
        result.actions += 1
        result.acked.append(ok.seq)
        await wait_for(lambda s=seq: state.seq > s or over(), f"the table past event {seq}")
    end = _game_over_after(state.events, begun) if _last_start(state) > begun else None
    if end is None:
        result.final = state.view
    else:  # (the view is the next game's: this one's end as its game_over event told it)
        ended = state.events[end].event
        final = {"phase": "over", "result": ended.get("result"), "seed": ended.get("seed")}
        result.final = {**(state.view or {}), **final}
    result.games = 1
    result.problem = check_fairness(state, begun if end is not None else None)
    result.fair = result.problem is None
    if result.problem:
        log.error("UNFAIR GAME at table %s: %s", table, result.problem)
    if chat:
        await say_quietly(client, table, GOOD_GAME)
    return result


async def say_quietly(client: Client, table: str, quick: v1.QuickMessage) -> bool:
    """Say the canned ``quick`` line at ``table``; return whether the server took it. A bot's
    chat never stops its play: a refusal (``rate_limited`` past the client's retries,
    ``chat_closed``, ``not_seated``, ...), a dropped connection or a line the server takes longer
    than :data:`CHAT_PATIENCE` to answer is logged and let go."""
    try:
        await asyncio.wait_for(client.say(table, quick=quick), CHAT_PATIENCE)
    except ServerError as error:
        log.info("chat at %s refused (%s): not said", table, error.code)
    except (ConnectionError, TimeoutError) as error:
        log.info("chat at %s not said: %s", table, error or type(error).__name__)
    else:
        return True
    return False


def unseated(state: TableState, player: str) -> bool:
    """Whether ``player`` no longer sits at the table (removed by the host, or it closed)."""
    info = state.info
    if info is None:
        return False
    return info.status == "closed" or all(s is None or s.player != player for s in info.seats)


def startable(state: TableState, player: str) -> bool:
    """Whether ``player`` hosts the table, no game is on and two seated players are ready: a
    bot that made its table (a quick-join that found none open) is its host, and nobody else
    may start its game."""
    info = state.info
    if info is None or info.host != player or info.status not in ("open", "finished"):
        return False
    return sum(1 for seat in info.seats if seat is not None and seat.ready) >= 2


async def _start(client: Client, table: str) -> None:
    """Start the game as its host. A refusal (a player left or got unready meanwhile, the
    table is moving) is tried again after :data:`START_RETRY` if the table still looks
    startable then."""
    try:
        await client.request(v1.StartGame(table=table))
    except ServerError as error:
        log.info("start at %s refused (%s): trying again shortly", table, error.code)
        await asyncio.sleep(START_RETRY)


def _games_started(state: TableState) -> int:
    return sum(1 for e in state.events if e.event["type"] == "game_started")


def _game_over_after(events: list[v1.Numbered], begun: int) -> int | None:
    """Where in ``events`` the ``game_over`` of the game that started at event ``begun`` is
    (the first after it), if the client holds it."""
    return next(
        (i for i, e in enumerate(events) if e.seq > begun and e.event["type"] == "game_over"),
        None,
    )


def _last_start(state: TableState) -> int:
    """The number of the last ``game_started`` event the client holds for the table (0: none).
    Unlike a count of them it survives a snapshot that replaced the events held."""
    return max((e.seq for e in state.events if e.event["type"] == "game_started"), default=0)


async def run_bot(
    url: str,
    *,
    table: str | None = None,
    quick: bool = False,
    strategy: str = "threshold",
    name: str | None = None,
    binary: bool = True,
    invite: str | None = None,
    games: int | None = 1,
    think: float = 0.0,
    token: str | None = None,
    seated: Callable[[str, int, bool], None] | None = None,
    chat: bool = True,
    find: bool = False,
    seats: int | None = None,
    rated: bool = False,
    bots_after: float | None = None,
    arena: str | None = None,
) -> BotResult:
    """Connect, take a seat (at ``table`` or by quick-join), get ready and play ``games`` games
    (``None``: every game the table plays until the bot loses its seat or the table closes),
    waiting ``think`` seconds before each action. ``token``: connect as the player it names
    (a bot the server starts for a host's ``add_bots`` takes the seat held for it that way).
    ``seated(table, seat, host)`` is called once the bot sits (``host``: it made the table).
    ``chat``: say "Good game!" in the table's chat after each game it played (``False``: say
    nothing; a refused line never stops the bot, see :func:`play_table`).

    ``find``: no table nor quick-join, the matchmaking queue seats the bot instead (``seats``
    2 to 8 or ``None``: any size; ``rated``; ``bots_after``: seconds after which bots may take
    the seats nobody took, see :func:`play_found`).

    ``arena``: play in that arena (its invite in ``invite`` if private): the queue pairs the
    bot with the arena's players, game after game, until ``games`` are played or the arena ends.

    Returns the record of the last game played, with the number of games in ``games``.
    """
    if arena is not None and (find or table is not None or quick):
        raise ValueError("arena: the arena's queue finds the tables, give no other way in")
    if find and (table is not None or quick):
        raise ValueError("find=True: the queue finds the table, give no table nor quick=True")
    if not find and (seats is not None or rated or bots_after is not None):
        raise ValueError("seats, rated and bots_after are choices for the queue: give find=True")
    client = await Client.connect(
        url,
        name=name or random_bot_name(strategy),
        token=token,
        binary=binary,
        reconnect=True,
        client_name=BOT_CLIENT,
    )
    try:
        if find:
            choices = v1.FindGame(seats=seats, rated=rated, bots_after=bots_after)

            async def queue() -> float | None:
                await client.find_game(
                    choices.seats, rated=choices.rated, bots_after=choices.bots_after
                )
                return math.inf

            return await play_found(
                client, queue, strategy, games=games, think=think, seated=seated, chat=chat
            )
        if arena is not None:
            return await play_found(
                client,
                functools.partial(join_arena_until_over, client, arena, invite),
                strategy,
                games=games,
                think=think,
                seated=seated,
                chat=chat,
            )
        if table is not None:
            joined = await client.request(v1.JoinTable(table=table, invite=invite))
        elif quick:
            joined = await client.request(v1.QuickJoin())
        else:
            raise ValueError("give a table or quick=True")
        client_table = joined.table.id
        state = client.tables[client_table]
        await client.request(v1.SetReady(table=client_table))
        if seated is not None:
            seated(client_table, joined.seat or 0, joined.table.host == client.player)
        played = 0
        result = BotResult(table=client_table, seat=joined.seat or 0, player=client.player)
        note_names(result.names, state.info)

        def abandoned() -> bool:
            """Only bots sit here and the host has gone: nobody will start a game again (a
            table a bot client hosted, with bots the server added, would stay open for ever)."""
            info = state.info
            if info is None:
                return False
            seated = [s for s in info.seats if s is not None]
            return bool(seated) and all(s.bot and s.player != info.host for s in seated)

        # The number of the ``game_started`` event of the game the bot plays (or found when it
        # sat down): the next game is one that started after it, even while the bot was still
        # saying "Good game!" for this one (a count of starts taken after the line would miss it).
        started = _last_start(state)
        while games is None or played < games:
            waited = bool(played) or state.view is None
            if waited:  # wait for a game (bots stay ready)
                await client.wait_until(
                    lambda s=started: (
                        _last_start(state) > s
                        or unseated(state, client.player)
                        or (games is None and abandoned())
                        or startable(state, client.player)
                    ),
                    timeout=None,
                )
                if unseated(state, client.player):
                    result.removed = True
                    break
                if _last_start(state) <= started and startable(state, client.player):
                    await _start(client, client_table)
                    continue
                if _last_start(state) <= started:  # abandoned: leave, so that it closes
                    with contextlib.suppress(ServerError, ConnectionError, TimeoutError):
                        await client.request(v1.LeaveTable(table=client_table))
                    break
            started = _last_start(state)
            # The bot sat there when the game started, or joined it under way: its own game (a
            # game that was over when it sat down is not one to say "Good game!" for).
            own = waited or not (state.view and state.view["phase"] == "over")
            game = await play_table(
                client, client_table, strategy, think=think, timeout=3600, chat=chat and own
            )
            if game.removed:
                result.removed = True
                break
            played += 1
            result = game
        result.games = played
        return result
    finally:
        await client.close()


async def join_arena_until_over(client: Client, arena: str, invite: str | None) -> float | None:
    """Queue in ``arena`` for the next table: the seconds until it ends (no table is made
    after), or ``None`` once it has ended (``arena_over``)."""
    try:
        joined = await client.join_arena(arena, invite)
    except ServerError as error:
        if error.code == ErrorCode.ARENA_OVER:
            return None
        raise
    return max(0.0, joined.arena.ends - time.time()) + ARENA_MARGIN


async def play_found(
    client: Client,
    queue: Callable[[], Awaitable[float | None]],
    strategy: str = "threshold",
    *,
    games: int | None = 1,
    think: float = 0.0,
    seated: Callable[[str, int, bool], None] | None = None,
    chat: bool = True,
) -> BotResult:
    """Play ``games`` games (``None``: until stopped) at tables the matchmaking queue makes:
    for each, ``queue()`` (``find_game`` with the bot's choices, or ``join_arena``: how long
    a table may be waited for; ``None``: no more tables to be had, the arena ended), wait for
    ``match_found`` (as long as it takes), watch the table (``join``: the queue seated the bot
    already, and readied it), play its game (the server starts it), say "Good game!" unless
    ``chat`` is off, and leave, so that the next game is found by the queue again rather than
    at the same table. ``seated(table, seat, False)`` is called at each table.

    Returns the record of the last game played, with the number of games in ``games``; a bot
    removed from its seat (its table closed, or its seat freed) stops there, ``removed``."""
    result = BotResult(table="", seat=0, player=client.player)
    played = 0
    while games is None or played < games:
        patience = await queue()
        if patience is None:
            break
        try:
            found = await client.wait_for_match(None if math.isinf(patience) else patience)
        except TimeoutError:
            continue  # (the arena ended meanwhile: the next queue() says so)
        table = found.table
        await client.request(v1.JoinTable(table=table))
        if seated is not None:
            seated(table, found.seat, False)
        state = client.tables[table]
        if not await _game_begins(client, state):
            log.warning("the game at %s did not start: queueing again", table)
            await _leave_quietly(client, table)
            continue
        own = not (state.view and state.view["phase"] == "over")
        game = await play_table(
            client, table, strategy, think=think, timeout=3600, chat=chat and own
        )
        await _leave_quietly(client, table)
        if game.removed:
            result = game
            break
        played += 1
        result = game
    result.games = played
    return result


async def _game_begins(client: Client, state: TableState) -> bool:
    """Wait until the game at the table of ``state`` has begun (there is a view: before its
    first game a table has none) or the client lost its seat; ``False`` after
    :data:`MATCH_START_PATIENCE` s of neither."""
    try:
        await client.wait_until(
            lambda: state.view is not None or unseated(state, client.player),
            timeout=MATCH_START_PATIENCE,
        )
    except TimeoutError:
        return False
    return True


async def _leave_quietly(client: Client, table: str) -> None:
    """Leave ``table`` (it closes once its last player left); a refusal or a dropped
    connection changes nothing that matters (an abandoned seat is freed after the grace)."""
    with contextlib.suppress(ServerError, ConnectionError, TimeoutError):
        await client.request(v1.LeaveTable(table=table))


def random_bot_name(strategy: str) -> str:
    """A display name for a bot started on its own: a first name and its strategy."""
    label = STRATEGY_LABELS.get(strategy, strategy)
    return f"{random.choice(BOT_NAMES)} ({label})"


@dataclass
class SwarmSummary:
    """The outcome of ``run_swarm``."""

    tables: int
    bots: int
    games_finished: int
    actions: int
    seconds: float
    unfair: int
    inconsistent: list[str]

    def lines(self) -> list[str]:
        """The summary as printable lines."""
        return [
            f"tables: {self.tables}, bots: {self.bots}, finished games: {self.games_finished}",
            f"actions: {self.actions} in {self.seconds:.2f} s "
            f"({self.actions / max(self.seconds, 1e-9):.0f}/s)",
            f"fairness proofs checked: {self.bots}, mismatches: {self.unfair}",
            "consistency: "
            + (
                "every pot and ranking agrees"
                if not self.inconsistent
                else "; ".join(self.inconsistent)
            ),
        ]


async def run_swarm(
    url: str | list[str],
    tables: int,
    per_table: int,
    strategies: tuple[str, ...] = STRATEGIES,
    *,
    binary: bool = True,
    round_pause: float = 0.0,
    think: float = 0.0,
    results: list[list[BotResult]] | None = None,
    clients: list[Client] | None = None,
    chat: bool = False,
) -> SwarmSummary:
    """Fill ``tables`` new tables with ``per_table`` bots each and play them all to the end.

    With several ``url``s the tables' hosts and their bots are spread over the nodes, each bot
    reconnecting to the others if its node goes away. ``results``, if given, receives every
    bot's record (per table); ``clients``, if given, every bot's client as it connects (for
    measurements). ``chat``: each bot says "Good game!" at the end (off by default: a load
    test's figures count game traffic only).
    """
    urls = [url] if isinstance(url, str) else list(url)
    started = time.perf_counter()
    played = await asyncio.gather(
        *(
            _swarm_table(urls, t, per_table, strategies, binary, round_pause, think, clients, chat)
            for t in range(tables)
        )
    )
    if results is not None:
        results.extend(played)
    return _summary(played, time.perf_counter() - started)


async def run_swarm_found(
    url: str,
    tables: int,
    per_table: int,
    strategies: tuple[str, ...] = STRATEGIES,
    *,
    think: float = 0.0,
    rated: bool = False,
) -> SwarmSummary:
    """The swarm through the matchmaking queue: ``tables * per_table`` bots each queue for a
    table of ``per_table`` seats (``rated`` or casual; strategies in turn) and play the game
    at the table the queue makes, quietly (see :func:`run_swarm`). The summary counts the
    tables the queue made (bots queueing with others may share theirs)."""
    started = time.perf_counter()
    found = await asyncio.gather(
        *(
            run_bot(
                url,
                find=True,
                seats=per_table,
                rated=rated,
                strategy=strategies[n % len(strategies)],
                name=f"Bot {n}",
                think=think,
                chat=False,
            )
            for n in range(tables * per_table)
        )
    )
    by_table: dict[str, list[BotResult]] = {}
    for result in found:
        by_table.setdefault(result.table, []).append(result)
    return _summary(list(by_table.values()), time.perf_counter() - started)


async def run_arena(
    url: str,
    *,
    bots: int,
    arena: str | None = None,
    invite: str | None = None,
    name: str = "Bot arena",
    minutes: int = 60,
    seats: int = 4,
    rated: bool = False,
    strategies: tuple[str, ...] = STRATEGIES,
    think: float = 0.0,
    started: Callable[[v1.Arena], None] | None = None,
) -> v1.ArenaStandings:
    """Make an arena (or play in ``arena``: an id, or the name of a listed arena, running or
    else the next to start, as a scheduled arena's) and have ``bots`` bots play in it until it
    ends, saying "Good game!" after each game (strategies in turn, labelled as bots).
    ``started`` is called with the arena once it is made or found; ``think``: seconds before
    each action. Returns its final standings."""
    host = await Client.connect(url, name=f"{name} host", binary=True, reconnect=True)
    try:
        if arena is None:
            made = await host.create_arena(name, minutes=minutes, seats=seats, rated=rated)
            invite = made.invite
        else:
            made = await _find_arena(host, arena, invite)
        if started is not None:
            started(made)
        await asyncio.gather(
            *(
                run_bot(
                    url,
                    arena=made.arena.id,
                    invite=invite,
                    strategy=strategies[n % len(strategies)],
                    games=None,
                    think=think,
                )
                for n in range(bots)
            )
        )
        final: v1.Arena = await host.watch_arena(made.arena.id, invite)
        return v1.ArenaStandings(arena=final.arena, standings=final.standings)
    finally:
        await host.close()


async def _find_arena(host: Client, arena: str, invite: str | None) -> v1.Arena:
    """Arena ``arena`` by its id, or else by its name among the listed ones (the running one,
    or else the next to start); the id's ``not_found`` when neither is."""
    try:
        return await host.watch_arena(arena, invite)
    except ServerError as error:
        if error.code != ErrorCode.NOT_FOUND:
            raise
        listed: v1.Arenas = await host.request(v1.ListArenas())
        named = [a for a in listed.arenas if a.name == arena and a.status != "finished"]
        if not named:
            raise
        chosen = min(named, key=lambda a: (a.status != "running", a.starts))
        return await host.watch_arena(chosen.id, invite)


def _summary(played: list[list[BotResult]], seconds: float) -> SwarmSummary:
    """The summary of a swarm whose bots' records are ``played`` (per table)."""
    flat = [r for table in played for r in table]
    return SwarmSummary(
        tables=len(played),
        bots=len(flat),
        games_finished=sum(
            1 for table in played if table[0].final and table[0].final["phase"] == "over"
        ),
        actions=sum(r.actions for r in flat),
        seconds=seconds,
        unfair=sum(1 for r in flat if not r.fair),
        inconsistent=[problem for table in played if (problem := _inconsistency(table))],
    )


async def _swarm_table(
    urls: list[str],
    index: int,
    per_table: int,
    strategies: tuple[str, ...],
    binary: bool,
    round_pause: float,
    think: float,
    exposed: list[Client] | None,
    chat: bool = False,
) -> list[BotResult]:
    clients = [
        await Client.connect(
            urls[(index + i) % len(urls)],
            name=f"Bot {i}",
            binary=binary,
            reconnect=True,
            client_name=BOT_CLIENT,
            also=tuple(urls),
        )
        for i in range(per_table)
    ]
    if exposed is not None:
        exposed.extend(clients)
    try:
        host = clients[0]
        options = v1.TableOptions(seats=per_table, round_pause_seconds=round_pause)
        joined = await _setup_step(host, v1.CreateTable(options=options), dropped_ok=False)
        table = joined.table.id
        for client in clients[1:]:
            await _setup_step(client, v1.JoinTable(table=table))
        for client in clients:
            await _setup_step(client, v1.SetReady(table=table))
        await _setup_step(host, v1.StartGame(table=table), done=frozenset({"game_running"}))
        for client in clients:
            await client.wait_until(lambda c=client: c.tables[table].view is not None, 60)
        return list(
            await asyncio.gather(
                *(
                    play_table(
                        client, table, strategies[i % len(strategies)], think=think, chat=chat
                    )
                    for i, client in enumerate(clients)
                )
            )
        )
    finally:
        for client in clients:
            await client.close()


async def _setup_step(
    client: Client, request: Any, *, done: frozenset[str] = frozenset(), dropped_ok: bool = True
) -> Any:
    """A request that sets a table up, sent again while the table or the store is briefly away
    (a node dying or Redis restarting during the set-up). ``done``: refusals that mean an
    earlier try succeeded. A request whose connection dropped is sent again only if
    ``dropped_ok`` (sending it twice is harmless: joining or getting ready again)."""
    delays = RETRY.delays()
    deadline = time.monotonic() + REFUSAL_PATIENCE
    while time.monotonic() < deadline:
        try:
            return await client.request(request)
        except ServerError as error:
            if error.code in done:
                return None
            if error.code not in ("unavailable", "moving"):
                raise
        except (ConnectionError, TimeoutError):
            if not dropped_ok:
                raise
        await asyncio.sleep(next(delays))
    raise TimeoutError(f"{type(request).__name__} kept failing")


def _inconsistency(results: list[BotResult]) -> str | None:
    """Why the bots of one table disagree about the end of its game, or ``None``."""
    finals = [r.final for r in results]
    table = results[0].table
    if any(final is None for final in finals):
        return f"{table}: a bot lost its seat before the game ended"
    if any(final != finals[0] for final in finals):
        return f"{table}: the bots' final views differ"
    final = finals[0]
    cards = sum(len(s["pile"]) for s in final["seats"]) + len(final["set_aside"]) + final["stock"]
    if cards != 54 * final["decks"]:
        return f"{table}: {cards} cards accounted for, not {54 * final['decks']}"
    ranking = final["result"]["ranking"]
    piles = {s["seat"]: len(s["pile"]) for s in final["seats"]}
    for place in ranking:
        if any(piles[seat] != place["cards"] for seat in place["seats"]):
            return f"{table}: the ranking does not match the piles"
    if [p["cards"] for p in ranking] != sorted((p["cards"] for p in ranking), reverse=True):
        return f"{table}: the ranking is not in order"
    return None
