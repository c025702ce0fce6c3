"""A Docker engine and the compose deployment, driven as an operator would drive them.

Theory of operation
-------------------
:func:`docker_engine` uses the engine that answers, or starts ``dockerd`` (root, Debian's
``docker.io``; with fallbacks for a machine without iptables or overlay2, see
:data:`ENGINE_CONFIGURATIONS`) and stops that one alone afterwards. When no engine can run it raises
:class:`NoDocker` with the reason: the fixtures turn it into a failure under CI and a skip
elsewhere. :func:`exclusive` serialises deployments on one machine: they would share the engine,
and one run must not stop the ``dockerd`` another still uses.

:class:`Deployment` runs ``docker-compose.yml`` (with ``tests/deploy/compose.test.yml``) under a
project name of its own, with every profile the file declares, the load balancers published on
free ports of 127.0.0.1. Containers are found by their compose labels, so the same code drives the
``docker compose`` plugin and Debian's ``docker-compose``. Every command has a time bound.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
TEST_FILE = Path(__file__).resolve().parent / "compose.test.yml"
PROJECT = "blackdreztest"
LOCK_FILE = Path(tempfile.gettempdir()) / "blackdrez-compose-test.lock"
LOCK_WAIT = 1200.0
"""How long a run waits for another run's deployment on the same machine to finish."""
ENGINE_START = 60.0
PREPARE_TIMEOUT = 900.0
"""Stand-ins, base image and wheelhouse from nothing (measured: about 3 to 5 minutes)."""
UP_TIMEOUT = 600.0
HEALTHY_TIMEOUT = 240.0
COMMAND_TIMEOUT = 120.0


class NoDocker(Exception):
    """No Docker engine can run here; the message says why."""


def _answers() -> bool:
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return info.returncode == 0


def compose_command() -> list[str]:
    """``docker compose`` where the plugin is installed, else Debian's ``docker-compose``."""
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True)
    if plugin.returncode == 0:
        return ["docker", "compose"]
    legacy = shutil.which("docker-compose")
    if legacy is None:
        raise NoDocker(
            "neither `docker compose` nor docker-compose: apt-get install docker-compose"
        )
    return [legacy]


ENGINE_CONFIGURATIONS: tuple[tuple[str, ...], ...] = (
    (),
    ("--iptables=false",),
    ("--iptables=false", "--storage-driver=vfs"),
)
"""How ``dockerd`` is started, in order, until one answers. First its own choices (overlay2 where
the kernel has it, else vfs; its bridge network with iptables rules). Without a working iptables
(a kernel with neither nf_tables nor legacy tables) it cannot set up its bridge's NAT: then
without iptables rules, which the deployment does not need: containers reach each other on the
compose network's bridge and published ports go through docker-proxy; only builds reach out, on
the host's network (``deploy/offline.py``). Last, vfs storage, for a data directory on a file
system overlay2 cannot stack on: every layer and container copies its image, which took longer
than this test's time bounds on a loaded 2-core machine (21 minutes, not yet up), so there it
fails slowly rather than not at all."""


@contextlib.contextmanager
def docker_engine(log_dir: Path, subnets: list[str]) -> Iterator[str]:
    """Yield with an engine answering: the running one, or a ``dockerd`` started (and stopped)
    here, under which containers in ``subnets`` reach each other. The value says which engine,
    for the report."""
    if shutil.which("docker") is None:
        raise NoDocker("no docker command: apt-get install docker.io (as root)")
    if _answers():
        yield "the running Docker engine"
        return
    if shutil.which("dockerd") is None:
        raise NoDocker(
            "no Docker engine runs and dockerd is not installed: apt-get install docker.io"
        )
    if os.geteuid() != 0:
        raise NoDocker("no Docker engine runs and starting dockerd needs root")
    failures = []
    for attempt, options in enumerate(ENGINE_CONFIGURATIONS):
        log_path = log_dir / f"dockerd-{attempt}.log"
        dockerd = _start_dockerd(options, log_path)
        if dockerd is not None:
            break
        tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
        failures.append(f"dockerd {' '.join(options)}:\n  " + "\n  ".join(tail))
    else:
        raise NoDocker("dockerd did not start:\n" + "\n".join(failures))
    try:
        configured = " ".join(options) or "its default configuration"
        with contextlib.ExitStack() as forwarding:
            if "--iptables=false" in options:
                configured += forwarding.enter_context(_bridged_traffic_accepted(subnets))
            yield f"a dockerd started for this test ({configured}; pid {dockerd.pid}, {log_path})"
    finally:
        _stop(dockerd)


@contextlib.contextmanager
def _bridged_traffic_accepted(subnets: list[str]) -> Iterator[str]:
    """Accept forwarded traffic within ``subnets`` while in the context, if it would be dropped.

    A ``dockerd --iptables=false`` adds no rule for its bridges, yet where ``br_netfilter`` is
    loaded, traffic between two containers on one bridge still crosses the FORWARD chain, whose
    policy may be DROP (an earlier ``dockerd`` leaves it so): then nodes never reach Redis. The
    rules added are removed afterwards. Yields what it did, for the report."""
    bridged = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
    if not bridged.exists() or bridged.read_text().strip() != "1" or not shutil.which("iptables"):
        yield ""
        return
    chain = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True)
    if chain.returncode != 0 or "-P FORWARD DROP" not in chain.stdout.splitlines():
        yield ""
        return
    rules = [["FORWARD", "-s", subnet, "-d", subnet, "-j", "ACCEPT"] for subnet in subnets]
    added = []
    try:
        for rule in rules:
            run(["iptables", "-I", *rule])
            added.append(rule)
        yield f"; bridged traffic within {', '.join(subnets)} accepted by iptables FORWARD rules"
    finally:
        for rule in added:
            subprocess.run(["iptables", "-D", *rule], capture_output=True)


def _start_dockerd(options: tuple[str, ...], log_path: Path) -> subprocess.Popen | None:
    """``dockerd options``, once it answers; None (and stopped) if it does not in time."""
    with log_path.open("wb") as log:
        dockerd = subprocess.Popen(
            ["dockerd", *options], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + ENGINE_START
    while not _answers():
        if dockerd.poll() is not None or time.monotonic() > deadline:
            _stop(dockerd)
            return None
        time.sleep(0.5)
    return dockerd


def _stop(dockerd: subprocess.Popen) -> None:
    """Stop a ``dockerd`` started here, and what it started (its containerd)."""
    dockerd.terminate()  # it stops its containerd, and containers still running
    try:
        dockerd.wait(60)
    except subprocess.TimeoutExpired:
        dockerd.kill()
        dockerd.wait()
    with contextlib.suppress(ProcessLookupError):  # a containerd left behind by a failed start
        os.killpg(dockerd.pid, signal.SIGKILL)


@contextlib.contextmanager
def exclusive() -> Iterator[None]:
    """Hold the machine-wide lock of compose deployments (waiting for another run to end)."""
    with LOCK_FILE.open("w") as lock:
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, f"another compose test holds {LOCK_FILE}"
                time.sleep(2)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def compose_subnets(compose: dict[str, Any]) -> list[str]:
    """The subnets the compose file gives its networks."""
    return [
        pool["subnet"]
        for network in (compose.get("networks") or {}).values()
        for pool in ((network or {}).get("ipam") or {}).get("config", [])
        if "subnet" in pool
    ]


def compose_profiles(compose: dict[str, Any]) -> list[str]:
    """Every profile that some service of the compose file belongs to."""
    return sorted(
        {p for service in compose["services"].values() for p in service.get("profiles", [])}
    )


def run(command: list[str], timeout: float = COMMAND_TIMEOUT, **options: Any) -> str:
    """Run a command; its output, or an assertion error with the output when it fails."""
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=ROOT, **options
    )
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def output(container: str) -> str:
    """Everything a container wrote, standard output and error interleaved."""
    done = subprocess.run(
        ["docker", "logs", container],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=COMMAND_TIMEOUT,
    )  # fmt: skip
    return done.stdout


class Deployment:
    """The compose file brought up under :data:`PROJECT`, every profile included."""

    def __init__(self) -> None:
        self.compose = yaml.safe_load(COMPOSE_FILE.read_text())
        self.profiles = compose_profiles(self.compose)
        self.lb_port = free_port()
        self.redis_port = free_port()
        self.env = {
            **os.environ,
            "BLACKDREZ_OFFLINE": "1",
            "BLACKDREZ_PUBLISH": f"127.0.0.1:{self.lb_port}",
            "BLACKDREZ_CLUSTER_PUBLISH": f"127.0.0.1:{free_port()}",
            "BLACKDREZ_TEST_REDIS_PORT": str(self.redis_port),
        }
        self.base = [
            *compose_command(),
            "-p", PROJECT,
            "-f", str(COMPOSE_FILE),
            "-f", str(TEST_FILE),
        ]  # fmt: skip
        self.command = [*self.base, *_enabling(self.profiles)]
        self.timings: list[str] = []
        """How long each profile took to come up (``docker compose up``) and be ready."""
        self.unavailable = {
            name: definition["image"]
            for name, definition in self.compose["services"].items()
            if "image" in definition and "build" not in definition
            and not _image_present(definition["image"])
        }  # fmt: skip
        """Services whose image this machine has not got (no registry, no stand-in: Grafana):
        they are left out, and the tests say so."""

    @property
    def services(self) -> list[str]:
        """Every service of the compose file that can run here (all profiles are enabled)."""
        return sorted(set(self.compose["services"]) - set(self.unavailable))

    def run(self, *args: str, timeout: float = COMMAND_TIMEOUT) -> str:
        """A compose subcommand on this deployment."""
        return run([*self.command, *args], timeout=timeout, env=self.env)

    def up(self) -> None:
        """Build and start everything, after removing what a crashed earlier run left.

        The image is built once (every service built from the Dockerfile shares it:
        :meth:`built`); ``up --build`` at each profile rebuilt it for every service, 20 builds
        and 6 of the setup's 7 minutes. One profile at a time, each once the services before it
        are ready, the bots (a load) last: on a small machine, 80 bots playing while six Redis
        form a cluster starved the nodes' Redis calls until tables failed to be created."""
        self.run("down", "-v", "--remove-orphans", timeout=COMMAND_TIMEOUT)
        started = time.monotonic()
        self.run("build", self.built()[0], timeout=UP_TIMEOUT)
        self.timings.append(f"build {time.monotonic() - started:.0f} s")
        enabled: list[str] = []
        for profile in [None, *sorted(self.profiles, key=lambda p: p == "bots")]:
            enabled += [profile] if profile else []
            command = [*self.base, *_enabling(enabled), "up", "-d", "--no-build"]
            started = time.monotonic()
            run([*command, *self.services_of(enabled)], timeout=UP_TIMEOUT, env=self.env)
            up = time.monotonic()
            self.wait_ready(services=self.services_of(enabled))
            self.timings.append(
                f"{profile or 'default'}: up {up - started:.0f} s, "
                f"ready {time.monotonic() - up:.0f} s"
            )

    def built(self) -> list[str]:
        """The services built from the Dockerfile; they share one image (asserted)."""
        services = self.compose["services"]
        built = sorted(name for name, definition in services.items() if "build" in definition)
        images = {services[name].get("image") for name in built}
        assert len(images) == 1 and None not in images, f"one image for all of {built}: {images}"
        return built

    def services_of(self, profiles: list[str]) -> list[str]:
        """The services started with ``profiles`` enabled (and those in no profile)."""
        return sorted(
            name
            for name, definition in self.compose["services"].items()
            if not definition.get("profiles") or set(definition["profiles"]) & set(profiles)
            if name not in self.unavailable
        )

    def down(self) -> None:
        """Remove the containers, the network and the volumes."""
        self.run("down", "-v", "--remove-orphans", timeout=COMMAND_TIMEOUT)

    def containers(self) -> dict[str, dict[str, Any]]:
        """``docker inspect`` of this project's containers, by service name."""
        ids = run(
            ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}"]
        ).split()
        if not ids:
            return {}
        inspected = json.loads(run(["docker", "inspect", *ids]))
        return {c["Config"]["Labels"]["com.docker.compose.service"]: c for c in inspected}

    def container(self, service: str) -> str:
        """The id of ``service``'s container."""
        return self.containers()[service]["Id"]

    def wait_ready(
        self, timeout: float = HEALTHY_TIMEOUT, services: list[str] | None = None
    ) -> dict[str, str]:
        """Wait until every service (or ``services``) runs (healthy, if it has a health check)
        or ended with 0."""
        deadline = time.monotonic() + timeout
        while True:
            states = {service: _state(c) for service, c in self.containers().items()}
            failed = {s: state for s, state in states.items() if state.startswith("exited")}
            failed = {s: state for s, state in failed.items() if state != "exited 0"}
            assert not failed, f"services ended badly: {failed}\n{self.logs()}"
            if set(states) == set(services or self.services) and all(
                state in ("running", "healthy", "exited 0") for state in states.values()
            ):
                return states
            assert time.monotonic() < deadline, f"not ready in {timeout:.0f} s: {states}"
            time.sleep(1.0)

    def wait_exit(self, service: str, timeout: float) -> int:
        """Wait for ``service``'s container to end; its exit code."""
        container = self.container(service)
        waited = run(["docker", "wait", container], timeout=timeout)
        return int(waited.strip())

    def published(self, service: str, port: int) -> tuple[str, int]:
        """The host address where ``service``'s container ``port`` is published."""
        address = run(["docker", "port", self.container(service), f"{port}/tcp"]).splitlines()[0]
        host, _, number = address.rpartition(":")
        return host, int(number)

    def logs(self, tail: int = 40) -> str:
        """The last lines of every service's output (for failure messages)."""
        done = subprocess.run(
            [*self.command, "logs", "--no-color", "--tail", str(tail)],
            capture_output=True, text=True, timeout=COMMAND_TIMEOUT, cwd=ROOT, env=self.env,
        )  # fmt: skip
        return done.stdout + done.stderr


def _image_present(image: str) -> bool:
    """Whether the engine has ``image``."""
    return (
        subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode == 0
    )


def _enabling(profiles: list[str]) -> list[str]:
    """The compose options that enable ``profiles``."""
    return [option for profile in profiles for option in ("--profile", profile)]


def _state(container: dict[str, Any]) -> str:
    """``running``, ``healthy``, ``starting``, ``unhealthy`` or ``exited N``."""
    state = container["State"]
    if state["Status"] != "running":
        return f"{state['Status']} {state['ExitCode']}"
    health = state.get("Health")
    return health["Status"] if health else "running"
