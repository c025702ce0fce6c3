"""The JavaScript client package, clients/js (issue 38): its protocol types are what the schema
makes and compile under ``tsc --strict`` as a TypeScript bot uses them; Node's own test runner
runs its tests against a live node (handshake, pacing, errors, MessagePack, a game kept in step,
a dropped connection resynced); and ``npm pack`` makes a tarball that installs into an empty
folder, where the example bot (about 30 lines, tools/examples/bot.mjs) plays a game on it."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

from blackdrez.protocol import typescript
from tests.server.helpers import run_to_end

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "js"
BOT = ROOT / "tools" / "examples" / "bot.mjs"


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"no {name}: the JavaScript client is tested on Node.js 20+ (the machine's)")
    return found


@pytest.fixture(scope="module")
def installed() -> Path:
    """The package's folder with its dependencies installed (``npm install`` once)."""
    if not (PACKAGE / "node_modules" / "typescript").is_dir():
        done = subprocess.run(
            [tool("npm"), "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=PACKAGE, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    return PACKAGE


def test_the_protocol_types_are_what_the_schema_makes() -> None:
    assert typescript.check(), f"{typescript.PATH} is stale: run `{typescript.REGENERATE}`"


def test_the_types_compile_strictly_as_a_typescript_bot_uses_them(installed: Path) -> None:
    compiled = subprocess.run(
        [tool("npx"), "tsc", "-p", "tsconfig.json"],
        cwd=installed, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr


async def test_nodes_test_runner_passes_the_packages_tests(installed: Path, make_server) -> None:
    server = await make_server()
    env = {**os.environ, "BLACKDREZ_URL": f"ws://127.0.0.1:{server.port}/"}
    output = await run_to_end(
        tool("node"), "--experimental-websocket", "--test", "test/", cwd=installed, env=env
    )
    assert "# pass 4" in output and "# fail 0" in output, output


async def test_the_packed_tarball_installs_and_a_30_line_bot_plays_on_it(
    installed: Path, make_server, tmp_path: Path
) -> None:
    packed = await run_to_end(
        tool("npm"), "pack", "--pack-destination", str(tmp_path), cwd=installed
    )
    tarball = tmp_path / packed.strip().splitlines()[-1]
    assert tarball.is_file(), packed
    folder = tmp_path / "bot"
    folder.mkdir()
    (folder / "package.json").write_text('{"name": "my-bot", "private": true, "type": "module"}')
    await run_to_end(tool("npm"), "install", "--no-audit", "--no-fund", str(tarball), cwd=folder)
    assert (folder / "node_modules" / "@blackdrez" / "client" / "index.d.ts").is_file()
    source = BOT.read_text().replace("../../clients/js/index.js", "@blackdrez/client")
    assert len(source.splitlines()) <= 30 and "@blackdrez/client" in source
    (folder / "bot.mjs").write_text(source)
    server = await make_server()
    output = await run_to_end(
        tool("node"), "--experimental-websocket", "bot.mjs", f"ws://127.0.0.1:{server.port}/",
        cwd=folder,
    )  # fmt: skip
    assert "game over:" in output and "place" in output, output


async def test_the_node_serves_the_package_to_browsers_as_client_js(make_server) -> None:
    """The browser client's connection (clients/browser/net.js) is built on the package: the node
    serves its module as /client.js, the bytes of clients/js/index.js."""
    server = await make_server()

    def fetch() -> tuple[str, bytes]:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/client.js", timeout=10) as r:
            return r.headers["Content-Type"], r.read()

    kind, body = await asyncio.to_thread(fetch)
    assert kind.startswith("text/javascript") and body == (PACKAGE / "index.js").read_bytes()
    net = (ROOT / "clients" / "browser" / "net.js").read_text()
    assert 'import { Client } from "./client.js";' in net
    assert "class Connection extends Client" in net
