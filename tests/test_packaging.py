"""What the wheels install: one ``blackdrez`` namespace, and a client that needs nothing else.

The server's wheel (the repository's top level) installs ``blackdrez.server``,
``blackdrez.protocol``, ``blackdrez.games``, ``blackdrez.clients`` and ``blackdrez.tools`` with the
browser client's files, and no other top-level name; installed outside the checkout it serves the
browser client. The client's wheel (``clients/python``) installs the protocol, the engines and the
client over websockets and msgspec only: a bot runs in a fresh virtual environment holding nothing
else, from a folder with a ``protocol.py`` of its own. Wheels are built with pip, environments made
with venv; the client's dependencies come from the package index (pip's cache after once).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
import venv
import zipfile
from pathlib import Path

import pytest

from blackdrez.server.testing.redis_server import free_port
from blackdrez.tools import trees

ROOT = Path(__file__).resolve().parent.parent
ALONE = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
"""The environment of a virtual environment's processes: nothing of the checkout on their path."""
pytestmark = pytest.mark.timeout(600)


def build(project: Path, into: Path) -> Path:
    """The wheel of ``project`` built into ``into``."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(into), str(project)],
        check=True,
        capture_output=True,
    )
    (wheel,) = into.glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def server_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(ROOT, tmp_path_factory.mktemp("server-wheel"))


@pytest.fixture(scope="module")
def client_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(ROOT / "clients" / "python", tmp_path_factory.mktemp("client-wheel"))


def installed_names(wheel: Path) -> set[str]:
    """The top-level names a wheel installs (its metadata folder aside)."""
    with zipfile.ZipFile(wheel) as archive:
        return {name.split("/")[0] for name in archive.namelist() if ".dist-info/" not in name}


def requirements(wheel: Path) -> list[str]:
    """The wheel's ``Requires-Dist`` lines, extras' aside."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    return [
        line.split(":", 1)[1].strip()
        for line in lines
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]


def wait_listening(port: int, process: subprocess.Popen[bytes], patience: float = 60) -> None:
    """Until the server on ``port`` answers ``/healthz`` (it must not exit first)."""
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        assert process.poll() is None, "the server exited at start"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"nothing answered on port {port} in {patience} s")


def environment(where: Path, *, system: bool = False) -> Path:
    """A new virtual environment's Python (with the system's packages seen when ``system``)."""
    venv.EnvBuilder(with_pip=True, system_site_packages=system).create(where)
    return where / "bin" / "python"


def test_the_server_wheel_installs_one_namespace(server_wheel: Path) -> None:
    assert installed_names(server_wheel) == {"blackdrez"}
    with zipfile.ZipFile(server_wheel) as archive:
        names = set(archive.namelist())
    packages = {name.split("/")[1] for name in names if name.startswith("blackdrez/")}
    assert packages == {"server", "protocol", "games", "clients", "tools"}
    assert "blackdrez/__init__.py" not in names  # a namespace the client's wheel shares
    assert {"blackdrez/clients/browser/index.html", "blackdrez/clients/browser/app.js"} <= names
    assert not any(name.startswith("blackdrez/clients/python") for name in names)


def test_the_client_wheel_needs_websockets_and_msgspec_only(client_wheel: Path) -> None:
    assert installed_names(client_wheel) == {"blackdrez"}
    with zipfile.ZipFile(client_wheel) as archive:
        names = set(archive.namelist())
    packages = {name.split("/")[1] for name in names if name.startswith("blackdrez/")}
    assert packages == {"protocol", "games", "clients"}
    assert sorted(r.split(">")[0] for r in requirements(client_wheel)) == ["msgspec", "websockets"]


def test_a_bot_plays_on_the_client_alone(client_wheel: Path, tmp_path: Path) -> None:
    python = environment(tmp_path / "env")
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(client_wheel)],
        env=ALONE,
        check=True,
        capture_output=True,
    )
    listed = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "list",
            "--format",
            "freeze",
            "--exclude",
            "pip",
            "--exclude",
            "setuptools",
        ],
        env=ALONE,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert sorted(line.split("==")[0].lower() for line in listed.split()) == [
        "blackdrez-client",
        "msgspec",
        "websockets",
    ]
    bot_folder = tmp_path / "my-bot"
    bot_folder.mkdir()
    (bot_folder / "protocol.py").write_text("raise ImportError('a bot author's own module')\n")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "blackdrez.tools.cli", "serve", "--in-memory", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(port, server)
        played = subprocess.run(
            [str(python), str(ROOT / "tools" / "examples" / "bot.py"), f"ws://127.0.0.1:{port}/"],
            cwd=bot_folder,
            env=ALONE,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        server.terminate()
        server.wait(30)
    assert played.returncode == 0, played.stderr
    assert played.stdout.startswith("game over:")


def test_the_server_wheel_serves_outside_the_checkout(server_wheel: Path, tmp_path: Path) -> None:
    python = environment(tmp_path / "env", system=True)
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--ignore-installed",
            str(server_wheel),
        ],
        env=ALONE,
        check=True,
        capture_output=True,
    )
    where = subprocess.run(
        [str(python), "-c", "import blackdrez.server.app as a; print(a.__file__)"],
        cwd=tmp_path,
        env=ALONE,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert where.startswith(str(tmp_path / "env")), where
    port = free_port()
    server = subprocess.Popen(
        [str(tmp_path / "env" / "bin" / "blackdrez"), "serve", "--in-memory", "--port", str(port)],
        cwd=tmp_path,
        env=ALONE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(port, server)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as page:
            assert b"BlackDrez" in page.read()
    finally:
        server.terminate()
        server.wait(30)


def test_another_trees_code_runs_under_the_installed_names(tmp_path: Path) -> None:
    """An A/B starts the "before" server from its own checkout (``--server-dir``), not from the
    editable install's; a tree from before the namespace runs its top-level modules."""
    tree = tmp_path / "before"
    for folder in trees.FOLDERS:
        (tree / folder).mkdir(parents=True)
        (tree / folder / "__init__.py").write_text(f"WHERE = {str(tree / folder)!r}\n")
    (tree / "setup.py").write_text("")
    module, env = trees.module_in(str(tree), "server")
    assert module == "blackdrez.server"
    where = subprocess.run(
        [sys.executable, "-c", f"import {module} as m; print(m.WHERE)"],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert where == str(tree / "server")
    (tree / "setup.py").unlink()
    assert trees.module_in(str(tree), "tools.cli") == ("tools.cli", None)
    assert trees.module_in(None, "tools.cli") == ("blackdrez.tools.cli", None)


def test_an_older_trees_server_is_started_with_only_the_options_it_knows(tmp_path: Path) -> None:
    """The load tool runs the first version's server (``server/cli.py``, ten options) with the
    same command as today's: what it would refuse is left out, with its value."""
    old = tmp_path / "first"
    (old / "server").mkdir(parents=True)
    assert trees.cli_module(str(old)) == "server.cli"
    assert trees.cli_module(None) == "tools.cli"
    command = [
        "serve", "--host", "127.0.0.1", "--rate", "1000", "--max-connections-per-ip", "0",
        "--in-memory", "--db-url", "sqlite:///x.db", "--burst=5",
    ]  # fmt: skip
    known = {"--host", "--rate", "--burst"}
    assert trees.keep_known(command, known) == [
        "serve", "--host", "127.0.0.1", "--rate", "1000", "--burst=5",
    ]  # fmt: skip
    assert trees.keep_known(command, None) == command
    flags = trees.serve_flags(str(ROOT))  # this checkout's own serve, as another tree's
    assert flags is not None and {"--db-url", "--in-memory", "--records-in-process"} <= flags
