"""A minimal BlackDrez bot on the Python client library (walk-through: docs/bots.md).

    python3 -m blackdrez.tools.examples.bot ws://127.0.0.1:8765/        # host, against a bot
    python3 -m blackdrez.tools.examples.bot ws://127.0.0.1:8765/ TABLE  # take a seat at TABLE

Hosting, it creates a two-seat table of one round, asks for a server bot and starts; at a given
table it sits (a bot is ready at once) and waits for the host. It plays one game and prints the
ranking; the client library keeps the table's state in step, across a dropped connection too.
"""

import asyncio
import sys

from blackdrez.clients.client import Client, ConnectionLost
from blackdrez.protocol import v1


def choose(view: dict, legal: list[dict], seat: int) -> dict:
    """The whole strategy: hit below 8; else stand if allowed, else withdraw."""
    kinds = {action["type"] for action in legal}
    if (view["seats"][seat]["value"] or 0) < 8 and "hit" in kinds:
        return {"type": "hit"}
    return {"type": "stand" if "stand" in kinds else "withdraw"}


async def main(url: str, table: str | None) -> None:
    client = await Client.connect(
        url, name="MiniPy", client_name="blackdrez-bot/py", reconnect=True
    )
    if table is None:
        options = v1.TableOptions(seats=2, max_rounds=1, round_pause_seconds=0)
        table = (await client.request(v1.CreateTable(options=options))).table.id
        await client.request(v1.AddBots(table=table, count=1))
    else:
        await client.request(v1.JoinTable(table=table))
    state = client.tables[table]
    if state.info is not None and state.info.host == client.player:
        await client.wait_until(lambda: all(state.info.seats), None)
        await client.request(v1.StartGame(table=table))

    def over() -> bool:  # no view before the game starts
        return state.view is not None and state.view["phase"] == "over"

    while True:
        await client.wait_until(lambda: state.legal or over(), None)
        if over():
            break
        try:
            done = (await client.act(table, choose(state.view, state.legal, state.seat))).seq
        except ConnectionLost:  # dropped with the move in flight: the resync says if it counted
            continue  # (a reconnected client's legal actions come back with the resync)
        await client.wait_until(lambda s=done: state.seq >= s, None)  # our move is in the view
    print("game over:", state.view["result"]["ranking"], flush=True)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
