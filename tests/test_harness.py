"""The harness the suite starts real processes with (``blackdrez.server.testing``): ports and
start-up.

A scenario starts several processes at once on ports it picked beforehand; two that got the
same port would make one of them fail to listen, and a test then talks to the wrong process (a
fault scenario once connected to its paused node through the other node's address). So ports
handed out by one process never repeat, and a node that failed to start is never taken for one
that serves.
"""

from __future__ import annotations

import socket

import pytest

from blackdrez.server.testing.nodes import NodeProcess
from blackdrez.server.testing.redis_server import free_port


def test_free_ports_are_never_handed_out_twice() -> None:
    ports = [free_port() for _ in range(2000)]
    assert len(set(ports)) == len(ports)


def test_a_node_that_cannot_listen_did_not_start() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        node = NodeProcess("redis://127.0.0.1:1/0", "clash", port=port)
        with pytest.raises(RuntimeError, match="address already in use"):
            node.start()
        assert not node.running
