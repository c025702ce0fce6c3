"""A real local Redis Cluster for tests and benchmarks: masters, their replicas, failovers.

Theory of operation
-------------------
:class:`LocalCluster` starts ``masters * (1 + replicas)`` plain ``redis-server --cluster-enabled
yes`` processes on free loopback ports, each with its own data directory (its ``nodes.conf``),
then joins them with ``redis-cli --cluster create ... --cluster-replicas R --cluster-yes`` and
waits until every node reports ``cluster_state:ok`` and every replica's link is up. Redis 6.2
puts each node's cluster bus on its port + 10000, so a port is taken only when both are free.

A test can :meth:`LocalCluster.kill` a node (SIGKILL, nothing flushed), wait for a replica to be
promoted in its place (:meth:`LocalCluster.wait_promoted`), and :meth:`LocalCluster.restart` the
dead node, which comes back as a replica of its successor (its ``nodes.conf`` remembers the
cluster). The node timeout is short (``node_timeout_ms``) so that a failover takes seconds, and
``cluster-require-full-coverage no`` keeps the other shards serving while one fails over.
"""

from __future__ import annotations

import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis

from blackdrez.server.testing.launcher import Launcher, stop_process
from blackdrez.server.testing.redis_server import answers_ping, find_redis_server, handed_out

START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0
BUS_OFFSET = 10000
"""Redis 6.2 and 7 (by default) listen for the cluster bus on the client port plus this."""


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_cluster_port(taken: set[int]) -> int:
    """A loopback port free a moment ago whose cluster bus port (+10000) was free too, neither
    of them handed out before in this process (here or by :func:`free_port`)."""
    while True:
        port = random.randrange(20000, 65535 - BUS_OFFSET)
        pair = {port, port + BUS_OFFSET}
        if pair & (taken | handed_out):
            continue
        if _port_free(port) and _port_free(port + BUS_OFFSET):
            handed_out.update(pair)
            return port


def find_redis_cli(server: str) -> str:
    """``redis-cli`` beside the ``redis-server`` binary in use, else the one on PATH."""
    beside = Path(server).with_name("redis-cli")
    if beside.is_file():
        return str(beside)
    on_path = shutil.which("redis-cli")
    if not on_path:
        raise RuntimeError("no redis-cli found beside redis-server nor on PATH")
    return on_path


def redis_command(port: int, *args: str, timeout: float = 2.0, host: str = "127.0.0.1") -> str:
    """Send one command in RESP to ``host:port`` and return the reply's text (bulk strings
    decoded)."""
    packed = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
    with socket.create_connection((host, port), timeout=timeout) as conn:
        conn.sendall(packed.encode())
        reply = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            reply += chunk
            if _complete(reply):
                break
    text = reply.decode(errors="replace")
    if text.startswith("$"):
        return text.split("\r\n", 1)[1].rsplit("\r\n", 1)[0]
    return text.strip()


def direct_client(url: str) -> redis.Redis | redis.RedisCluster:
    """A synchronous client to look into a store's Redis (``redis://``) or Redis Cluster
    (``redis+cluster://``, whose seed nodes lead to the others)."""
    from blackdrez.server.stores.redis_cluster import SCHEME, parse_cluster_url

    if not url.startswith(f"{SCHEME}:"):
        return redis.Redis.from_url(url)
    seeds, options = parse_cluster_url(url)
    nodes = [redis.cluster.ClusterNode(host, port) for host, port in seeds]
    return redis.RedisCluster(startup_nodes=nodes, require_full_coverage=False, **options)


def _complete(reply: bytes) -> bool:
    if reply[:1] in (b"+", b"-", b":"):
        return reply.endswith(b"\r\n")
    if reply[:1] == b"$":
        head, _, rest = reply.partition(b"\r\n")
        return len(rest) >= int(head[1:]) + 2
    return False


def unlinked(nodes: str, ports: set[int]) -> set[int]:
    """Of ``ports``, those that one node's ``CLUSTER NODES`` reply (``nodes``) does not show as
    nodes it knows and is linked to: listed, not in a handshake, not failing, bus link
    ``connected``. ``cluster_state:ok`` comes before that: a node that has not met another yet
    does not pass it what is published there (pub/sub travels over the cluster bus), so a
    table's first update could be lost to a player on a node just linked."""
    linked = set()
    for line in nodes.splitlines():
        fields = line.split()
        if len(fields) < 8:
            continue
        flags = set(fields[2].split(","))
        if flags & {"myself", "handshake", "noaddr", "fail", "fail?"} or fields[7] != "connected":
            continue
        address = fields[1].split("@", 1)[0]
        linked.add(int(address.rsplit(":", 1)[1]))
    return ports - linked


@dataclass
class ClusterProcess:
    """One node of the cluster: a port, a data directory and (while running) a process;
    ``host`` is the address it binds and announces, ``wrap`` runs its command (in a network
    namespace: ``server.testing.netns.Host.wrap``)."""

    port: int
    data_dir: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    host: str = "127.0.0.1"
    wrap: Callable[[list[str]], list[str]] = field(default=list, repr=False)

    @property
    def running(self) -> bool:
        """True while the process is alive."""
        return self.process is not None and self.process.poll() is None

    def info(self, section: str) -> dict[str, str]:
        """``INFO section`` (or ``CLUSTER INFO`` for ``"cluster"``) as a dict."""
        command = ("CLUSTER", "INFO") if section == "cluster" else ("INFO", section)
        text = redis_command(self.port, *command, host=self.host)
        pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
        return {key.strip(): value.strip() for key, value in pairs}


class LocalCluster(Launcher):
    """A Redis Cluster of local processes (see the module docstring)."""

    def __init__(
        self,
        *,
        masters: int = 3,
        replicas: int = 1,
        node_timeout_ms: int = 2000,
        appendonly: bool = False,
        executable: str = "",
        hosts: Sequence[tuple[str, Callable[[list[str]], list[str]]]] = (),
    ) -> None:
        """``hosts``: per node, the address it binds and how its command is run (default:
        every node on loopback, run as it is)."""
        self.executable = executable or find_redis_server()
        self.cli = find_redis_cli(self.executable)
        self.masters = masters
        self.replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        self.appendonly = appendonly
        self._root = tempfile.TemporaryDirectory(prefix="bd-cluster-")
        taken: set[int] = set()
        self.nodes: list[ClusterProcess] = []
        for index in range(masters * (1 + replicas)):
            port = free_cluster_port(taken)
            taken |= {port, port + BUS_OFFSET}
            data_dir = Path(self._root.name) / f"node-{index}"
            data_dir.mkdir()
            host, wrap = hosts[index] if hosts else ("127.0.0.1", list)
            self.nodes.append(ClusterProcess(port, data_dir, host=host, wrap=wrap))

    @property
    def url(self) -> str:
        """The store URL for this cluster: ``redis+cluster://`` and every node as a seed (so
        that a client started while one is dead still finds the cluster)."""
        return "redis+cluster://" + ",".join(f"{node.host}:{node.port}" for node in self.nodes)

    @property
    def ports(self) -> list[int]:
        """Every node's port."""
        return [node.port for node in self.nodes]

    def start(self) -> None:
        """Start every node, create the cluster and wait until it serves every slot."""
        for node in self.nodes:
            self._launch(node)
        for node in self.nodes:
            self._wait_ping(node)
        created = subprocess.run(
            [
                self.cli, "--cluster", "create",
                *(f"{node.host}:{node.port}" for node in self.nodes),
                "--cluster-replicas", str(self.replicas), "--cluster-yes",
            ],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if created.returncode != 0:
            self.close()
            raise RuntimeError(f"redis-cli --cluster create failed:\n{created.stdout}")
        self.wait_healthy()

    def _launch(self, node: ClusterProcess) -> None:
        command = [
            self.executable,
            "--port", str(node.port),
            "--bind", node.host,
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(self.node_timeout_ms),
            "--cluster-require-full-coverage", "no",
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--dir", str(node.data_dir),
            "--logfile", str(node.data_dir / "redis.log"),
            "--daemonize", "no",
        ]  # fmt: skip
        node.process = subprocess.Popen(
            node.wrap(command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )

    def _wait_ping(self, node: ClusterProcess) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not answers_ping(node.port, node.host):
            assert node.process is not None
            if node.process.poll() is not None or time.monotonic() > deadline:
                log = node.data_dir / "redis.log"
                text = log.read_text(errors="replace") if log.exists() else ""
                self.close()
                raise RuntimeError(f"redis-server did not start on port {node.port}:\n{text}")
            time.sleep(0.02)

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Wait until every running node says ``cluster_state:ok``, ``masters`` masters serve
        every slot, every running replica's link to its master is up, and every running node
        has its cluster bus link up to every other running node (:func:`unlinked`)."""
        deadline = time.monotonic() + timeout
        while True:
            problem = self._problem()
            if problem is None:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster is not healthy: {problem}")
            time.sleep(0.1)

    def _problem(self) -> str | None:
        masters = 0
        running = {node.port for node in self.nodes if node.running}
        for node in self.nodes:
            if not node.running:
                continue
            try:
                cluster = node.info("cluster")
                replication = node.info("replication")
                links = redis_command(node.port, "CLUSTER", "NODES", host=node.host)
            except OSError as error:
                return f"{node.port}: {error}"
            missing = unlinked(links, running - {node.port})
            if missing:
                return f"{node.port}: no cluster bus link to {sorted(missing)}"
            if cluster.get("cluster_state") != "ok":
                return f"{node.port}: cluster_state {cluster.get('cluster_state')}"
            if cluster.get("cluster_slots_ok") != "16384":
                return f"{node.port}: slots ok {cluster.get('cluster_slots_ok')}"
            if replication.get("role") == "master":
                masters += 1
            elif replication.get("master_link_status") != "up":
                return f"{node.port}: replica link {replication.get('master_link_status')}"
        if masters != self.masters:
            return f"{masters} masters running, not {self.masters}"
        return None

    def role(self, index: int) -> str:
        """``master`` or ``slave``, as node ``index`` says."""
        return self.nodes[index].info("replication")["role"]

    def master_indexes(self) -> list[int]:
        """The running nodes that are masters now."""
        return [i for i, node in enumerate(self.nodes) if node.running and self.role(i) == "master"]

    def index_serving(self, key: str) -> int:
        """The node that is master of ``key``'s slot now."""
        first = self.nodes[0]
        reply = redis_command(first.port, "CLUSTER", "KEYSLOT", key, host=first.host)
        slot = int(reply.lstrip(":"))
        for index in self.master_indexes():
            if self._serves(index, slot):
                return index
        raise RuntimeError(f"no master serves slot {slot}")

    def _serves(self, index: int, slot: int) -> bool:
        node = self.nodes[index]
        for line in redis_command(node.port, "CLUSTER", "NODES", host=node.host).splitlines():
            fields = line.split()
            if "myself" not in fields[2]:
                continue
            for part in fields[8:]:
                first, _, last = part.partition("-")
                if first.isdigit() and int(first) <= slot <= int(last or first):
                    return True
        return False

    def replica_of(self, index: int) -> int:
        """The node replicating master ``index`` (its first replica)."""
        port = int(self.nodes[index].info("replication")["slave0"].split("port=")[1].split(",")[0])
        return self.ports.index(port)

    def pause(self, index: int) -> None:
        """Freeze node ``index`` (SIGSTOP): its sockets stay open, it reads nothing."""
        process = self.nodes[index].process
        if process is not None:
            process.send_signal(signal.SIGSTOP)

    def resume(self, index: int) -> None:
        """Let a paused node run again (SIGCONT)."""
        process = self.nodes[index].process
        if process is not None:
            process.send_signal(signal.SIGCONT)

    def kill(self, index: int) -> None:
        """SIGKILL node ``index``: no shutdown, nothing flushed, its connections reset."""
        process = self.nodes[index].process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def wait_promoted(self, timeout: float = 60.0) -> None:
        """After a master was killed: wait until ``masters`` running masters serve every slot."""
        self.wait_healthy(timeout)

    def restart(self, index: int) -> None:
        """Start a stopped node again on its port with its data directory (it rejoins)."""
        node = self.nodes[index]
        if node.running:
            return
        self._launch(node)
        self._wait_ping(node)

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL if one lingers)."""
        for node in self.nodes:
            process, node.process = node.process, None
            stop_process(process, STOP_TIMEOUT)

    def close(self) -> None:
        """Stop every node and delete the data directories."""
        self.stop()
        self._root.cleanup()
