"""A private network of Linux network namespaces for partition tests: hosts, cuts, slow links.

Theory of operation
-------------------
A :class:`Lab` is one test's network. It makes a *switch* namespace holding a bridge, and one
namespace per host (a node, Redis, a Redis Cluster member), each joined to the bridge by a veth
pair and given an address in a private /24, ``10.231.X.0/24``; X is the lowest not already on an
interface of the root namespace, chosen under a lock file so that two test runs at once never
share one. A last veth pair joins the root namespace to the bridge (``10.231.X.1``), so the
test process, which stays in the root namespace, reaches every host as a real client would.
Processes run in a host with :meth:`Host.wrap` (``ip netns exec NS ...``: ``ip`` execs the
command, so the pid is the program's own and can be signalled).

Faults are made *inside the hosts' namespaces*, never in the root namespace, so that deleting a
namespace deletes them too: :meth:`Lab.cut` adds iptables ``DROP`` rules (one direction or
both, between two addresses, optionally only one TCP port's packets: one connection) and
:meth:`Lab.heal` removes them; :meth:`Lab.shape` puts a ``tc`` token bucket (``tbf``) on the
traffic between a host and one peer, both ways (the host's egress, and the switch port's egress
towards it). No other address than the lab's own is ever a target. :meth:`Lab.client_address`
gives the root namespace one more address in the lab, for a client to bind, so that a cut can
tell that client from the test's others (a client machine whose link dies).

Names carry the creating process's id (``bdlab-<pid>-<tag>-<role>`` for namespaces,
``bdl<pid in base 36>x<tag>`` for the root end of the lab's link): :func:`sweep` deletes what a
crashed run left behind (its process is gone) and never touches a live run's lab. :meth:`Lab.close`
kills whatever still runs in the lab's namespaces and deletes the lab, whatever happened before.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from blackdrez.server.testing.launcher import Launcher
from blackdrez.server.testing.nodes import NodeProcess, node_command

PREFIX = "bdlab"
"""The prefix of every namespace a lab makes."""
LINK_PREFIX = "bdl"
"""The prefix of the root end of a lab's link (interface names are at most 15 characters)."""
NETWORK = "10.231"
"""The labs' private /16: each lab takes one /24 of it."""
LOCK_FILE = Path("/run/lock/blackdrez-netns.lock")
"""Held while a lab picks its /24 and takes it (two test runs at once never share one)."""
TOOLS = ("ip", "iptables", "tc")
COMMAND_TIMEOUT = 10.0
FAST = "10gbit"
"""The rate of a shaped link's traffic that is not shaped (as good as unlimited)."""
NODE_PORT = 8765
"""The port of a node in a lab (each has an address of its own)."""


def missing() -> str | None:
    """Why this machine cannot run a lab (not root, a tool missing, namespaces refused), or
    ``None`` when it can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    absent = [tool for tool in TOOLS if shutil.which(tool) is None]
    if absent:
        return f"{', '.join(absent)} not found (iproute2, iptables)"
    probe = f"{PREFIX}-{os.getpid()}-probe{secrets.token_hex(2)}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    try:
        rules = subprocess.run(
            ["ip", "netns", "exec", probe, "iptables", "-w", "-S"], capture_output=True, text=True
        )
        if rules.returncode != 0:
            return f"iptables in a namespace failed: {rules.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def run(command: Sequence[str]) -> str:
    """Run a command; return its output; raise with its error output if it fails."""
    done = subprocess.run(
        list(command), capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip() or done.stdout}")
    return done.stdout


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, digit = divmod(number, 36)
        text = digits[digit] + text
        if not number:
            return text


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _creator_of_namespace(name: str) -> int | None:
    parts = name.split("-")
    if len(parts) < 3 or parts[0] != PREFIX or not parts[1].isdigit():
        return None
    return int(parts[1])


def _creator_of_link(name: str) -> int | None:
    if not name.startswith(LINK_PREFIX) or "x" not in name[len(LINK_PREFIX) :]:
        return None
    try:
        return int(name[len(LINK_PREFIX) :].split("x", 1)[0], 36)
    except ValueError:
        return None


def namespaces() -> list[str]:
    """The names of every network namespace ``ip netns`` knows."""
    return [line.split()[0] for line in run(["ip", "netns", "list"]).splitlines() if line.strip()]


def _root_links() -> list[str]:
    return [
        line.split()[1].split("@")[0].rstrip(":")
        for line in run(["ip", "-o", "link", "show"]).splitlines()
    ]


def _delete_namespace(name: str) -> None:
    """Kill every process in the namespace, then delete it."""
    pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
    for pid in pids.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    subprocess.run(["ip", "netns", "del", name], capture_output=True)


def sweep() -> list[str]:
    """Delete the namespaces and root links of labs whose process is gone (a crashed run);
    return their names. A live run's lab is left alone."""
    swept = []
    for name in namespaces():
        pid = _creator_of_namespace(name)
        if pid is not None and not _alive(pid):
            _delete_namespace(name)
            swept.append(name)
    for name in _root_links():
        pid = _creator_of_link(name)
        if pid is not None and not _alive(pid):
            subprocess.run(["ip", "link", "del", name], capture_output=True)
            swept.append(name)
    return swept


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with LOCK_FILE.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _free_subnet() -> int:
    """The lowest X such that no root interface has an address in ``10.231.X.0/24``."""
    taken = set()
    for line in run(["ip", "-4", "-o", "addr", "show"]).splitlines():
        address = line.split()[3]
        if address.startswith(NETWORK + "."):
            taken.add(int(address.split(".")[2]))
    free = [x for x in range(256) if x not in taken]
    if not free:
        raise RuntimeError(f"every /24 of {NETWORK}.0.0/16 is in use")
    return free[0]


@dataclass(frozen=True)
class Host:
    """One namespace of a lab: its name, its address, its link."""

    namespace: str
    address: str
    port: str
    """The switch's port towards this host (shaped for the traffic it receives)."""

    def wrap(self, command: Sequence[str]) -> list[str]:
        """``command`` run in this host's namespace."""
        return ["ip", "netns", "exec", self.namespace, *command]

    def run(self, command: Sequence[str]) -> str:
        """Run ``command`` in this host's namespace; return its output."""
        return run(self.wrap(command))


@dataclass(frozen=True)
class Cut:
    """The DROP rules of one cut, each as (host, iptables rule spec)."""

    rules: tuple[tuple[Host, tuple[str, ...]], ...]


@dataclass
class Lab(Launcher):
    """One test's network of namespaces (see the module docstring)."""

    tag: str = field(default_factory=lambda: secrets.token_hex(2))
    subnet: int = -1
    hosts: dict[str, Host] = field(default_factory=dict)
    cuts: list[Cut] = field(default_factory=list)
    _made: list[str] = field(default_factory=list)
    _clients: int = 0

    @property
    def stem(self) -> str:
        """The start of every namespace name of this lab: the prefix, this process, the tag."""
        return f"{PREFIX}-{os.getpid()}-{self.tag}"

    @property
    def switch(self) -> str:
        """The namespace holding the lab's bridge."""
        return f"{self.stem}-switch"

    @property
    def root_link(self) -> str:
        """The root namespace's end of its link to the bridge."""
        return f"{LINK_PREFIX}{_base36(os.getpid())}x{self.tag}"

    @property
    def gateway(self) -> str:
        """The root namespace's address in the lab (where the test's own clients come from)."""
        return f"{NETWORK}.{self.subnet}.1"

    def start(self) -> None:
        """Make the switch and join the root namespace to it."""
        try:
            self._namespace(self.switch)
            run(["ip", "-n", self.switch, "link", "add", "br0", "type", "bridge"])
            run(["ip", "-n", self.switch, "link", "set", "br0", "up"])
            with _locked():
                self.subnet = _free_subnet()
                run(["ip", "link", "add", self.root_link, "type", "veth",
                     "peer", "name", "root", "netns", self.switch])  # fmt: skip
                self._made.append(self.root_link)
                run(["ip", "addr", "add", f"{self.gateway}/24", "dev", self.root_link])
            run(["ip", "link", "set", self.root_link, "up"])
            run(["ip", "-n", self.switch, "link", "set", "root", "master", "br0", "up"])
        except BaseException:
            self.close()
            raise

    def _namespace(self, name: str) -> None:
        run(["ip", "netns", "add", name])
        self._made.append(name)
        run(["ip", "-n", name, "link", "set", "lo", "up"])

    def host(self, role: str) -> Host:
        """A new host named ``role`` on the switch, with the next address of the lab."""
        if role in self.hosts:
            raise ValueError(f"the lab already has a host {role}")
        number = len(self.hosts) + 2
        namespace = f"{self.stem}-{role}"
        port = f"p{number}"
        self._namespace(namespace)
        run(["ip", "link", "add", "eth0", "netns", namespace, "type", "veth",
             "peer", "name", port, "netns", self.switch])  # fmt: skip
        address = f"{NETWORK}.{self.subnet}.{number}"
        run(["ip", "-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0"])
        run(["ip", "-n", namespace, "link", "set", "eth0", "up"])
        run(["ip", "-n", self.switch, "link", "set", port, "master", "br0", "up"])
        host = self.hosts[role] = Host(namespace, address, port)
        return host

    # ------------------------------------------------------------------ faults
    def cut(
        self,
        host: Host,
        peer: str,
        *,
        direction: str = "both",
        local_port: int | None = None,
        peer_port: int | None = None,
    ) -> Cut:
        """Drop, in ``host``'s namespace, the packets between it and the address ``peer``
        (one of the lab's): ``out`` those it sends, ``in`` those it receives, or ``both``.
        With ``local_port`` or ``peer_port`` only TCP packets of those ports (one connection).
        No FIN, no RST: each side's socket stays open and hears nothing."""
        if direction not in ("in", "out", "both"):
            raise ValueError(f"direction is in, out or both, not {direction}")
        if not peer.startswith(f"{NETWORK}.{self.subnet}."):
            raise ValueError(f"{peer} is not an address of this lab")
        ports_out: list[str] = []
        ports_in: list[str] = []
        if local_port is not None or peer_port is not None:
            ports_out = ports_in = ["-p", "tcp"]
            if local_port is not None:
                ports_out = [*ports_out, "--sport", str(local_port)]
                ports_in = [*ports_in, "--dport", str(local_port)]
            if peer_port is not None:
                ports_out = [*ports_out, "--dport", str(peer_port)]
                ports_in = [*ports_in, "--sport", str(peer_port)]
        rules: list[tuple[Host, tuple[str, ...]]] = []
        if direction in ("out", "both"):
            rules.append((host, ("OUTPUT", "-d", peer, *ports_out, "-j", "DROP")))
        if direction in ("in", "both"):
            rules.append((host, ("INPUT", "-s", peer, *ports_in, "-j", "DROP")))
        made = Cut(tuple(rules))
        for where, rule in made.rules:
            where.run(["iptables", "-w", "-I", *rule])
        self.cuts.append(made)
        return made

    def heal(self, cut: Cut | None = None) -> None:
        """Remove a cut's rules (``None``: every cut's)."""
        for made in [cut] if cut is not None else list(self.cuts):
            for where, rule in made.rules:
                where.run(["iptables", "-w", "-D", *rule])
            self.cuts.remove(made)

    def shape(
        self, host: Host, peer: str, rate: str, *, burst: str = "8kb", latency: str = "100ms"
    ) -> None:
        """Slow the traffic between ``host`` and the address ``peer`` both ways with a token
        bucket (``tc ... tbf``): what ``host`` sends to ``peer`` (its own link's egress) and
        what ``peer`` sends it (the switch port's egress towards it) wait their turn at ``rate``
        (``256kbit``), queued for at most ``latency`` (then dropped, as by a full router queue).
        Its other traffic is not slowed: an ``htb`` root sends only ``peer``'s packets (a
        ``u32`` filter) through the bucket."""
        bucket = ["tbf", "rate", rate, "burst", burst, "latency", latency]
        for namespace, device, side in (
            (host.namespace, "eth0", "dst"),
            (self.switch, host.port, "src"),
        ):
            tc = ["ip", "netns", "exec", namespace, "tc"]
            run([*tc, "qdisc", "add", "dev", device, "root", "handle", "1:", "htb",
                 "default", "20"])  # fmt: skip
            for kind in ("10", "20"):
                run([*tc, "class", "add", "dev", device, "parent", "1:", "classid", f"1:{kind}",
                     "htb", "rate", FAST, "quantum", "60000"])  # fmt: skip
            run([*tc, "qdisc", "add", "dev", device, "parent", "1:10", "handle", "10:", *bucket])
            run([*tc, "filter", "add", "dev", device, "parent", "1:", "protocol", "ip", "prio",
                 "1", "u32", "match", "ip", side, f"{peer}/32", "flowid", "1:10"])  # fmt: skip

    def unshape(self, host: Host) -> None:
        """Take the token buckets off ``host``'s link."""
        host.run(["tc", "qdisc", "del", "dev", "eth0", "root"])
        run(["ip", "netns", "exec", self.switch, "tc", "qdisc", "del", "dev", host.port, "root"])

    def client_address(self) -> str:
        """One more address of the root namespace in the lab, for clients that must be told
        apart from the others by address (a client machine whose link is cut): bind a client's
        socket to it (``local_addr=(address, 0)``)."""
        self._clients += 1
        address = f"{NETWORK}.{self.subnet}.{200 + self._clients}"
        run(["ip", "addr", "add", f"{address}/32", "dev", self.root_link])
        return address

    # ------------------------------------------------------------------ teardown
    def close(self) -> None:
        """Kill what runs in the lab, delete its links and namespaces (whatever state it is
        in: each step is tried on its own)."""
        for name in reversed(self._made):
            if name.startswith(PREFIX):
                _delete_namespace(name)
            else:
                subprocess.run(["ip", "link", "del", name], capture_output=True)
        self._made.clear()
        self.hosts.clear()
        self.cuts.clear()


class NamespacedNode(NodeProcess):
    """A server node process running in a lab's host, listening on the host's address."""

    def __init__(
        self, host: Host, redis_url: str, node_id: str, *, extra: Sequence[str] = ()
    ) -> None:
        command = node_command(
            port=NODE_PORT, redis_url=redis_url, node_id=node_id, host=host.address, extra=extra
        )
        super().__init__(redis_url, node_id, port=NODE_PORT, command=host.wrap(command))
        self.host = host

    @property
    def url(self) -> str:
        """The node's WebSocket URL, from the root namespace."""
        return f"ws://{self.host.address}:{self.port}/"
