"""Fencing with real node processes: a paused node never serves or writes a table it lost.

The scenario of issue 9, section 1: node A hosts a table; A is paused (SIGSTOP) past its lease;
node B adopts the table and two actions are acknowledged there; B is paused past its lease and A
resumes. A must not answer from its stale copy nor write on top of B's entries: the table's log
must replay from its creation to its end with every acknowledged action in it exactly once.
"""

from __future__ import annotations

import signal

from clients.client import Client
from protocol import v1
from server.hosting import decode_entry, replay
from tests.redis_server import RedisServer
from tests.server.helpers import act_once, retrying, wait_for
from tests.server.test_failover import Nodes, lease_holders, table_log


async def test_a_resumed_node_never_serves_or_writes_a_table_it_lost(tmp_path) -> None:
    with RedisServer(appendonly=True, data_dir=tmp_path) as store:
        nodes = Nodes(store.url, 2)
        a_url, b_url = nodes.urls
        node_a, node_b = nodes.processes
        clients: list[Client] = []
        acked: list[tuple[str, int]] = []
        try:
            host = await Client.connect(a_url, name="Host")
            guest = await Client.connect(b_url, name="Guest")
            clients += [host, guest]
            options = v1.TableOptions(seats=2, turn_seconds=600, round_pause_seconds=0)
            table = (await host.request(v1.CreateTable(options=options))).table.id
            await guest.request(v1.JoinTable(table=table))
            for player in (host, guest):
                await player.request(v1.SetReady(table=table))
            await host.request(v1.StartGame(table=table))
            await wait_for(lambda: host.tables[table].legal or guest.tables[table].legal, "a turn")
            mover, seq = await act_once([host, guest], table)
            acked.append((mover.player, seq))
            assert lease_holders(store.url)[table] == "node0"

            # Both players move to B, so that pausing A freezes only the table's host.
            await host.close()
            moved = await Client.connect(b_url, token=host.token)
            clients.append(moved)
            moved.tables[table] = host.tables[table]
            await retrying(lambda: moved.resync(table))
            players = [moved, guest]

            node_a.send_signal(signal.SIGSTOP)
            try:
                await wait_for(
                    lambda: lease_holders(store.url).get(table) == "node1", "B adopts the table"
                )
                for _ in range(2):
                    mover, seq = await act_once(players, table)
                    acked.append((mover.player, seq))
                b_seq = max(seq for _, seq in acked)

                node_b.send_signal(signal.SIGSTOP)
                try:
                    await wait_for(
                        lambda: table not in lease_holders(store.url), "B's lease lapses"
                    )
                finally:
                    node_a.send_signal(signal.SIGCONT)
                # A is back with its stale copy: it must not answer from it.
                probe = await Client.connect(a_url, token=host.token)
                clients.append(probe)
                reply = await retrying(lambda: probe.resync(table))
                assert reply.seq >= b_seq, f"A answered from its stale copy at {reply.seq}"
                assert probe.tables[table].seq >= b_seq
            finally:
                node_b.send_signal(signal.SIGCONT)
                node_a.send_signal(signal.SIGCONT)

            # Play on through both nodes: A's and B's players together.
            players = [probe, guest]
            await retrying(lambda: guest.resync(table))
            for _ in range(2):
                mover, seq = await act_once(players, table)
                acked.append((mover.player, seq))
        finally:
            for client in clients:
                await client.close()
            nodes.stop()

        entries = table_log(store.url, table)
        replay(entries)  # raises if any entry was written on top of another node's
        logged = [
            (entry.player, entry.seq)
            for entry in map(decode_entry, entries)
            if isinstance(entry.command, v1.Act)
        ]
        for ack in acked:
            assert logged.count(ack) == 1, f"acknowledged action {ack} logged {logged.count(ack)}x"
        output = "".join(line for lines in nodes.output for line in lines)
        assert "Task exception was never retrieved" not in output
