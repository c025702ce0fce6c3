"""The deployment fixture: an engine, offline images, ``compose up`` with every profile, ``down``.

Without a Docker engine (not root, no ``docker.io``) the deployment tests fail under CI (the
``CI`` environment variable, which ``.ci/run`` sets) and are skipped elsewhere, with the reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.deploy.harness import (
    COMPOSE_FILE,
    PREPARE_TIMEOUT,
    ROOT,
    Deployment,
    NoDocker,
    compose_subnets,
    docker_engine,
    exclusive,
)

LOG_DIR = Path(tempfile.gettempdir()) / "blackdrez-compose-test"
"""The last run's logs: dockerd, deploy/offline.py, every container."""


@dataclasses.dataclass(frozen=True)
class Prepared:
    """What ``deploy/offline.py`` printed, and how long it took."""

    output: str
    seconds: float


def engine_with_images(
    cleanup: contextlib.ExitStack, logs: Path, what: str
) -> tuple[str, Prepared]:
    """A Docker engine (the running one, or a ``dockerd`` started here and stopped by
    ``cleanup``) with every image the deployments need (``deploy/offline.py``): which engine, and
    the preparation. Without an engine, a failure under CI and a skip elsewhere, naming
    ``what`` cannot run."""
    try:
        subnets = compose_subnets(yaml.safe_load(COMPOSE_FILE.read_text()))
        engine = cleanup.enter_context(docker_engine(logs, subnets))
    except NoDocker as error:
        message = f"{what} cannot run here: {error}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    started = time.monotonic()
    prepared = subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "offline.py"), "--allow-missing"],
        capture_output=True, text=True, timeout=PREPARE_TIMEOUT, cwd=ROOT,
    )  # fmt: skip
    (logs / "offline.log").write_text(prepared.stdout + prepared.stderr)
    assert prepared.returncode == 0, prepared.stdout[-3000:] + prepared.stderr
    return engine, Prepared(prepared.stdout, time.monotonic() - started)


@pytest.fixture(scope="module")
def deployment() -> Iterator[Deployment]:
    """docker-compose.yml up and ready, prepared for a machine that cannot pull images."""
    logs = LOG_DIR  # outside pytest's temporary folders, which later runs rotate away
    with exclusive(), contextlib.ExitStack() as cleanup:
        shutil.rmtree(logs, ignore_errors=True)
        logs.mkdir(parents=True)
        engine, prepared = engine_with_images(cleanup, logs, "the compose deployment")
        prepare_seconds = prepared.seconds
        deployment = Deployment()
        cleanup.callback(deployment.down)
        cleanup.callback(lambda: (logs / "compose.log").write_text(deployment.logs(100_000)))
        started = time.monotonic()
        deployment.up()
        deployment.wait_ready()
        summary = prepared.output.strip().splitlines()[-8:]
        print(
            f"\n{engine}; deploy/offline.py {prepare_seconds:.0f} s, up and ready "
            f"{time.monotonic() - started:.0f} s; profiles: {', '.join(deployment.profiles)}; "
            f"logs in {logs}\n" + "; ".join(deployment.timings) + "\n" + "\n".join(summary)
        )
        yield deployment
