"""Real processes for tests, benchmarks and the load tool: a Redis server and server nodes.

Theory of operation
-------------------
Fault tests and benchmarks need the parts a deployment runs, not stand-ins: a ``redis-server``
process that can be paused (SIGSTOP), killed (SIGKILL) and restarted from its append-only file,
and node processes that run the same ``serve`` command as the compose file and can be killed,
paused and restarted with the same node id. Each launcher picks a free loopback port, keeps what
its process prints, and stops its process for good when closed (also as a context manager), so a
caller that fails half-way leaves nothing running.
:class:`~blackdrez.server.testing.nodes.CpuSampler`
reads ``/proc`` to tell how much CPU each process used while something was going on.
:class:`~blackdrez.server.testing.postgres_server.PostgresServer` runs a throwaway PostgreSQL
cluster for
the records store's tests and benchmark.
:class:`~blackdrez.server.testing.redis_cluster.LocalCluster` runs a
Redis Cluster (masters, replicas) whose nodes can be killed, paused and restarted.
The one module without processes, :mod:`~blackdrez.server.testing.node_harness`, runs several
nodes in one process on the memory store, under a clock the test turns: the fast tier's
routing, failover and fan-out tests, without sockets.

Nothing in the server imports this package; it lives here (not under ``tests/``) so that the
installed package's tools can use it.
"""
