"""nginx in front of nodes, with the deployment's own configuration, for tests.

Theory of operation
-------------------
:class:`Nginx` runs Debian's ``nginx`` (``.ci/run`` installs it) with ``deploy/nginx.conf``,
the configuration the compose deployment ships, changed in two places only: its upstream servers
are the given addresses (each keeping the deployment's options: ``max_fails``, ``fail_timeout``)
and it listens on the given address and port. So a test through it exercises what an operator
runs: ``least_conn``, the WebSocket upgrade, the timeouts, ``proxy_next_upstream`` on a node that
answers 503. It runs in the foreground (``daemon off``) under ``wrap`` (in a network namespace:
``server.testing.netns.Host.wrap``), with its pid file and logs in a temporary folder of its own.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from blackdrez.server.testing.launcher import OneProcess, stop_process

CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "nginx.conf"
START_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0
UPSTREAM = re.compile(r"^(\s*)server\s+\S+:\d+(\s[^;]*)?;\s*$", re.MULTILINE)
LISTEN = re.compile(r"^(\s*)listen\s+80;\s*$", re.MULTILINE)


def find_nginx() -> str:
    """The ``nginx`` executable: PATH's, else Debian's ``/usr/sbin/nginx``."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    if not found:
        raise RuntimeError("no nginx: install Debian's package (apt-get install nginx)")
    return found


def configuration(upstreams: Sequence[str], listen: str, template: str | None = None) -> str:
    """``deploy/nginx.conf`` (or ``template``) with ``upstreams`` (``host:port`` each) as its
    servers, with the first server's options, and ``listen`` (``address:port``) as its one
    listening socket."""
    text = CONFIG.read_text() if template is None else template
    first = UPSTREAM.search(text)
    if first is None or LISTEN.search(text) is None:
        raise ValueError("the configuration has no upstream servers or no `listen 80;`")
    indent, options = first.group(1), first.group(2) or ""
    servers = "".join(f"{indent}server {address}{options};\n" for address in upstreams)
    rest = UPSTREAM.sub("", text[first.end() :]).lstrip("\n")
    text = text[: first.start()] + servers + rest
    return LISTEN.sub(lambda m: f"{m.group(1)}listen {listen};", text)


class Nginx(OneProcess):
    """One nginx process (see the module docstring)."""

    def __init__(
        self,
        upstreams: Sequence[str],
        *,
        address: str = "127.0.0.1",
        port: int = 80,
        wrap: Callable[[list[str]], list[str]] = list,
    ) -> None:
        self.upstreams = list(upstreams)
        self.address = address
        self.port = port
        self.wrap = wrap
        self._dir = tempfile.TemporaryDirectory(prefix="bd-nginx-")
        self.folder = Path(self._dir.name)

    @property
    def url(self) -> str:
        """The WebSocket URL players use."""
        return f"ws://{self.address}:{self.port}/"

    @property
    def http_url(self) -> str:
        """The same, for HTTP requests."""
        return f"http://{self.address}:{self.port}"

    def start(self) -> None:
        """Write the configuration, start nginx and wait until it accepts connections."""
        (self.folder / "logs").mkdir(exist_ok=True)
        config = self.folder / "nginx.conf"
        config.write_text(configuration(self.upstreams, f"{self.address}:{self.port}"))
        command = [
            find_nginx(), "-p", str(self.folder), "-c", str(config),
            "-e", str(self.folder / "logs" / "error.log"),
            "-g", f"daemon off; pid {self.folder / 'nginx.pid'};",
        ]  # fmt: skip
        self._process = subprocess.Popen(
            self.wrap(command), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                with socket.create_connection((self.address, self.port), timeout=1.0):
                    return
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    errors = self.errors()
                    self.close()
                    raise RuntimeError(f"nginx did not start:\n{errors}") from None
                time.sleep(0.05)

    def errors(self) -> str:
        """Its error log so far."""
        log = self.folder / "logs" / "error.log"
        return log.read_text(errors="replace") if log.exists() else ""

    def close(self) -> None:
        """Stop nginx (quick shutdown) and delete its folder."""
        stop_process(self._process, STOP_TIMEOUT)
        self._dir.cleanup()
