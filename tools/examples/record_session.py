"""Record a real protocol session: the source of every example in docs/protocol.md.

Starts an in-memory :class:`~blackdrez.server.app.GameServer` on a free port, drives two
:class:`~blackdrez.clients.client.Client` players (Ann and Bob) through a short BlackDrez game and a
few
solitaire requests, provokes each kind of error, and writes every frame sent and received, in
order, as JSON lines (``{"step", "who", "dir", "frame"}``) to the given file (default: stdout).
Games use the fixed seed :data:`SEED`, so the cards are the same on every run (ids, tokens and
times are not).

Run: ``python -m blackdrez.tools.examples.record_session /tmp/session.jsonl``; to rebuild the doc
from a
fresh recording, ``python -m blackdrez.tools.examples.protocol_doc``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from blackdrez.clients.bots import run_bot
from blackdrez.clients.client import Client, ServerError
from blackdrez.protocol import v1
from blackdrez.protocol.codec import encode
from blackdrez.protocol.handshake import Hello
from blackdrez.server.app import GameServer, Settings

SEED = "protocol-docs-example"


class Recorder:
    """Collects frames in order, each tagged with the step of the session and the speaker."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.step = ""
        self._seen: dict[str, int] = {}

    def sent(self, who: str, frame: str) -> None:
        """Record a frame ``who`` sent."""
        self.lines.append({"step": self.step, "who": who, "dir": "sent", "frame": frame})

    def received(self, clients: dict[str, Client]) -> None:
        """Record every frame the clients received since the last call."""
        for who, client in clients.items():
            assert client.frames is not None
            start = self._seen.get(who, 0)
            for frame in client.frames[start:]:
                self.lines.append({"step": self.step, "who": who, "dir": "recv", "frame": frame})
            self._seen[who] = len(client.frames)


async def request(rec: Recorder, who: str, client: Client, message: Any) -> Any:
    """Send a request as the client does (with a fresh id), recording the frame."""
    original = client.send

    async def send(msg: Any) -> None:
        rec.sent(who, encode(msg, False))
        await original(msg)

    client.send = send  # type: ignore[method-assign]
    try:
        return await client.request(message)
    except ServerError as error:
        return error.error
    finally:
        client.send = original  # type: ignore[method-assign]


async def hello(rec: Recorder, port: int, who: str, name: str) -> Client:
    """Connect and greet, recording the hello and the welcome."""
    rec.sent(who, encode(Hello(versions=[1], name=name, client="blackdrez-py/0.1"), False))
    client = await Client.connect(f"ws://127.0.0.1:{port}/", name=name, record=True)
    rec.lines.append(
        {"step": rec.step, "who": who, "dir": "recv", "frame": encode(client.welcome, False)}
    )
    return client


async def raw(rec: Recorder, port: int, who: str, frames: list[str]) -> None:
    """Send raw text frames on a fresh connection and record every answer until it closes."""
    async with connect(f"ws://127.0.0.1:{port}/", compression=None) as ws:
        with contextlib.suppress(ConnectionClosed):
            for frame in frames:
                rec.sent(who, frame)
                await ws.send(frame)
        with contextlib.suppress(ConnectionClosed, TimeoutError):
            async for answer in ws:
                rec.lines.append({"step": rec.step, "who": who, "dir": "recv", "frame": answer})
    rec.lines.append(
        {
            "step": rec.step,
            "who": who,
            "dir": "close",
            "frame": f"{ws.close_code} {ws.close_reason}",
        }
    )


async def settle(rec: Recorder, clients: dict[str, Client]) -> None:
    """Let pushed updates arrive, then record them."""
    await asyncio.sleep(0.1)
    rec.received(clients)


async def session(rec: Recorder) -> None:
    """The scripted session (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="bd-doc-") as folder:
        await _session(rec, f"sqlite:///{folder}/records.db")


async def _session(rec: Recorder, db_url: str) -> None:
    server = GameServer(Settings(port=0, ping_interval=None, db_url=db_url), bot_client=run_bot)
    await server.start()
    server.node.seed_source = lambda: SEED
    port = server.port
    try:
        rec.step = "handshake"
        ann = await hello(rec, port, "ann", "Ann")
        bob = await hello(rec, port, "bob", "Bob")
        clients = {"ann": ann, "bob": bob}
        rec.step = "create"
        options = v1.TableOptions(name="Friday", seats=2, max_rounds=1, round_pause_seconds=0.0)
        joined = await request(rec, "ann", ann, v1.CreateTable(options=options))
        table = joined.table.id
        await settle(rec, clients)
        rec.step = "lobby"
        await request(rec, "bob", bob, v1.ListTables())
        await request(rec, "bob", bob, v1.WatchLobby())
        await settle(rec, clients)
        rec.step = "join"
        await request(rec, "bob", bob, v1.JoinTable(table=table))
        await settle(rec, clients)
        rec.step = "ready"
        await request(rec, "ann", ann, v1.SetReady(table=table))
        await request(rec, "bob", bob, v1.SetReady(table=table))
        await settle(rec, clients)
        rec.step = "start"
        await request(rec, "ann", ann, v1.StartGame(table=table))
        await settle(rec, clients)
        rec.step = "spectate"
        cy = await hello(rec, port, "cy", "Cy")
        clients["cy"] = cy
        await request(rec, "cy", cy, v1.Spectate(table=table))
        await settle(rec, clients)
        rec.step = "play"
        players = {"ann": ann, "bob": bob}
        wrong_turn_shown = False
        for _ in range(40):
            state = {who: c.tables[table] for who, c in players.items()}
            if state["ann"].view and state["ann"].view["phase"] == "over":
                break
            mover = next((w for w, s in state.items() if s.legal), None)
            if mover is None:
                await settle(rec, clients)
                continue
            other = "bob" if mover == "ann" else "ann"
            if not wrong_turn_shown:
                rec.step = "not_your_turn"
                await request(
                    rec, other, players[other], v1.Act(table=table, action={"type": "hit"})
                )
                wrong_turn_shown = True
                rec.step = "play"
            kinds = [a["type"] for a in state[mover].legal]
            choice = "hit" if "hit" in kinds and state[mover].view["stock"] > 0 else kinds[0]
            view = state[mover].view
            if (
                view["seats"][state[mover].seat]["value"]
                and view["seats"][state[mover].seat]["value"] >= 9
            ):
                choice = "stand" if "stand" in kinds else "withdraw"
            await request(rec, mover, players[mover], v1.Act(table=table, action={"type": choice}))
            await settle(rec, clients)
        rec.step = "ping"
        await request(rec, "ann", ann, v1.Ping())
        await settle(rec, clients)
        rec.step = "resync"
        await request(
            rec, "bob", bob, v1.Resync(table=table, since=max(0, bob.tables[table].seq - 2))
        )
        await request(rec, "bob", bob, v1.Resync(table=table, since=0))
        await settle(rec, clients)
        rec.step = "errors"
        for frame in [
            "not json",
            '{"type": "fly", "id": 7}',
            '{"type": "join", "id": 8}',
            '{"type": "join", "id": 9, "table": "t0000000000"}',
            '{"type": "hello", "versions": [1]}',
        ]:
            rec.sent("ann", frame)
            await ann.ws.send(frame)
        await settle(rec, clients)
        rec.step = "leave"
        await request(rec, "bob", bob, v1.LeaveTable(table=table))
        await settle(rec, clients)
        rec.step = "solitaire"
        session_ = await request(rec, "ann", ann, v1.StartSolitaire(game="blackjack_piles", deal=7))
        solo = session_.table.id
        await settle(rec, clients)
        await request(rec, "ann", ann, v1.Resync(table=solo, since=0))
        for _ in range(80):
            legal = ann.tables[solo].legal
            cash = [a for a in legal if a["type"] == "cash"]
            await request(rec, "ann", ann, v1.Act(table=solo, action=(cash or legal)[0]))
            await settle(rec, clients)
            if cash:
                break
        await request(rec, "ann", ann, v1.Act(table=solo, action={"type": "resign"}))
        await settle(rec, clients)
        rec.step = "blue_jacket"
        started = await request(rec, "bob", bob, v1.StartSolitaire(game="blue_jacket", deal=1))
        jacket = bob.tables[started.table.id]
        await settle(rec, clients)
        for kind in ("move", "interchange", "deal", "resign"):
            chosen = [a for a in jacket.legal if a["type"] == kind]
            if chosen:
                act = v1.Act(table=started.table.id, action=chosen[0])
                await request(rec, "bob", bob, act)
                await settle(rec, clients)
        rec.step = "assist"
        helped = (await request(rec, "bob", bob, v1.StartSolitaire(game="blue_jacket"))).table.id
        await settle(rec, clients)
        hint = await request(rec, "bob", bob, v1.Hint(table=helped))
        moves = [a for a in bob.tables[helped].legal if a["type"] in ("move", "interchange")]
        await request(rec, "bob", bob, v1.Act(table=helped, action=moves[0]))
        await settle(rec, clients)
        await request(rec, "bob", bob, v1.Undo(table=helped))
        await settle(rec, clients)
        await request(rec, "bob", bob, v1.Undo(table=helped))  # nothing_to_undo
        await request(rec, "bob", bob, v1.Act(table=helped, action=hint.action))
        await request(rec, "bob", bob, v1.Act(table=helped, action={"type": "resign"}))
        await settle(rec, clients)
        rec.step = "leaderboard"
        random_deal = await request(rec, "bob", bob, v1.StartSolitaire(game="blackjack_piles"))
        await settle(rec, clients)
        await request(
            rec, "bob", bob, v1.Act(table=random_deal.table.id, action={"type": "resign"})
        )
        await settle(rec, clients)
        board = await request(
            rec, "bob", bob, v1.GetLeaderboard(game="blackjack_piles", deal="random", limit=5)
        )
        await request(rec, "bob", bob, v1.GetRecord(record=board.entries[0].record))
        await request(rec, "bob", bob, v1.GetDaily(game="blue_jacket"))
        await request(rec, "bob", bob, v1.StartSolitaire(game="blue_jacket", daily=True))
        await settle(rec, clients)
        rec.step = "timer"
        quick = v1.TableOptions(seats=2, turn_seconds=1.0, max_rounds=1, round_pause_seconds=0.0)
        timed = (await request(rec, "ann", ann, v1.CreateTable(options=quick))).table.id
        await request(rec, "bob", bob, v1.UnwatchLobby())
        await request(rec, "bob", bob, v1.QuickJoin())
        await request(rec, "ann", ann, v1.SetReady(table=timed))
        await request(rec, "bob", bob, v1.SetReady(table=timed))
        await request(rec, "ann", ann, v1.StartGame(table=timed))
        await asyncio.sleep(1.5)
        await settle(rec, clients)
        rec.step = "reconnect"
        token = bob.token
        held = bob.tables[timed].seq
        await bob.close()
        await settle(rec, {"ann": ann, "cy": cy})
        rec.sent("bob", encode(Hello(versions=[1], token=token, client="blackdrez-py/0.1"), False))
        bob = await Client.connect(f"ws://127.0.0.1:{port}/", token=token, record=True)
        rec.lines.append(
            {"step": rec.step, "who": "bob", "dir": "recv", "frame": encode(bob.welcome, False)}
        )
        clients = {"ann": ann, "bob": bob, "cy": cy}
        rec._seen["bob"] = 0
        await request(rec, "bob", bob, v1.Resync(table=timed, since=held))
        await settle(rec, clients)
        rec.step = "handshake_errors"
        await raw(rec, port, "eve", ['{"type": "hello", "versions": [2, 3]}'])
        await raw(rec, port, "eve", ['{"type": "ping", "id": 1}'])
        await raw(rec, port, "eve", ['{"type": "hello", "versions": [1], "token": "x.y"}'])
        rec.step = "bots"
        duo = v1.TableOptions(name="Practice", seats=2)
        practice = (await request(rec, "ann", ann, v1.CreateTable(options=duo))).table.id
        await request(rec, "ann", ann, v1.AddBots(table=practice, count=1))
        for _ in range(20):
            await settle(rec, clients)
            if ann.tables[practice].seq >= 3:
                break
        await request(rec, "ann", ann, v1.RemoveBot(table=practice, seat=1))
        await settle(rec, clients)
        await request(rec, "ann", ann, v1.LeaveTable(table=practice))
        await settle(rec, clients)
        rec.step = "accounts"
        dee = await hello(rec, port, "dee", "Dee")
        clients["dee"] = dee
        await request(rec, "dee", dee, v1.SignUp(name="Dee", password="correct horse battery"))
        await request(rec, "dee", dee, v1.SignUp(name="Ann", password="too short"))
        eli = await hello(rec, port, "eli", "Eli")
        clients["eli"] = eli
        await request(rec, "eli", eli, v1.SignIn(name="dee", password="wrong horse battery"))
        await request(rec, "eli", eli, v1.SignIn(name="dee", password="correct horse battery"))
        await request(rec, "dee", dee, v1.SignOutEverywhere())
        await settle(rec, clients)
        rec.step = "logout"
        await request(rec, "cy", cy, v1.Logout())
        await asyncio.wait_for(cy.closed, 5)
        await settle(rec, clients)
        comeback = Hello(versions=[1], token=cy.token, client="blackdrez-py/0.1")
        await raw(rec, port, "cy", [encode(comeback, False)])
        rec.step = "flood"
        hi = '{"type": "hello", "versions": [1], "name": "Flo"}'
        await raw(rec, port, "flo", [hi] + [f'{{"type": "ping", "id": {i}}}' for i in range(200)])
        rec.step = "too_big"
        await raw(rec, port, "flo", [hi, '{"type": "ping", "pad": "' + "x" * 20000 + '"}'])
        rec.step = "shutdown"
    finally:
        await server.stop()
    await asyncio.sleep(0.1)
    rec.received(clients)


def main() -> None:
    """Record the session and write it as JSON lines."""
    rec = Recorder()
    asyncio.run(session(rec))
    text = "".join(json.dumps(line) + "\n" for line in rec.lines)
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
