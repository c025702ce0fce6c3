"""The monitoring profile: Prometheus (Debian's, run for real) scrapes real nodes with the
profile's configuration and alert rules, and every query of the Grafana dashboard and of the
alerts evaluates against the metrics the nodes export; every metric is documented."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from blackdrez.clients.bots import play_table, run_bot
from blackdrez.clients.client import Client, ServerError
from blackdrez.protocol import v1
from blackdrez.server.admin import drain
from blackdrez.server.app import GameServer, Settings
from blackdrez.server.testing.redis_server import free_port

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
DASHBOARD = json.loads((DEPLOY / "grafana" / "dashboards" / "blackdrez.json").read_text())
ALERTS = yaml.safe_load((DEPLOY / "prometheus-alerts.yml").read_text())
OPERATIONS = (ROOT / "docs" / "operations.md").read_text()
METRIC = re.compile(r"\bblackdrez_[a-z_]+")
TOKEN = "monitoring-test"


def dashboard_queries() -> list[str]:
    return [target["expr"] for panel in DASHBOARD["panels"] for target in panel["targets"]]


def alert_queries() -> list[str]:
    return [rule["expr"] for group in ALERTS["groups"] for rule in group["rules"]]


def base_name(series: str) -> str:
    """The metric a series belongs to (a histogram's ``_bucket``, a counter's ``_total``...)."""
    return re.sub(r"_(bucket|count|sum|total|created)$", "", series)


def test_the_dashboard_uses_the_provisioned_data_source_and_charts_what_was_asked() -> None:
    source = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )["datasources"][0]
    for panel in DASHBOARD["panels"]:
        assert panel["datasource"]["uid"] == source["uid"], panel["title"]
    charted = " ".join(dashboard_queries())
    for needed in (
        "blackdrez_connections",
        "blackdrez_tables",
        "rate(blackdrez_action_seconds_count",
        "histogram_quantile(0.99, sum by (le) (rate(blackdrez_action_seconds_bucket",
        "blackdrez_errors_total",
        "blackdrez_store_rtt_seconds_bucket",
        "blackdrez_tables_adopted_total",
    ):
        assert needed in charted, needed


def test_every_metric_is_documented() -> None:
    metrics = GameServer(Settings(port=0)).metrics.render().decode()
    names = {base_name(n) for n in re.findall(r"^# TYPE (\S+)", metrics, re.M)}
    assert len(names) >= 12
    for name in names:
        assert f"`{name}" in OPERATIONS, f"{name} is not in docs/operations.md"


@pytest.fixture
def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        pytest.fail("no prometheus on PATH: apt-get install prometheus (see .ci/run)")
    return found


class Prometheus:
    """A Prometheus process with the profile's configuration, aimed at the given targets."""

    def __init__(self, binary: str, targets: list[str], tmp: Path) -> None:
        config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
        config["global"]["scrape_interval"] = "1s"
        config["global"]["evaluation_interval"] = "1s"
        config["rule_files"] = [str(DEPLOY / "prometheus-alerts.yml")]
        config["scrape_configs"][0]["static_configs"][0]["targets"] = targets
        path = tmp / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        promtool = Path(binary).with_name("promtool")
        if promtool.exists():
            checked = subprocess.run([str(promtool), "check", "config", str(path)], text=True,
                                     capture_output=True)  # fmt: skip
            assert checked.returncode == 0, checked.stdout + checked.stderr
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={path}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}" + (f"?{query}" if query else "")
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())

    def query(self, expr: str) -> list[Any]:
        answer = self.api("query", query=expr)
        assert answer["status"] == "success", (expr, answer)
        return answer["data"]["result"]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def prometheus_factory(prometheus_binary: str, tmp_path: Path) -> Iterator[Any]:
    started: list[Prometheus] = []

    def start(targets: list[str]) -> Prometheus:
        started.append(Prometheus(prometheus_binary, targets, tmp_path))
        return started[-1]

    yield start
    for prometheus in started:
        prometheus.stop()


async def eventually(check: Any, timeout: float = 60.0) -> Any:
    """Poll ``check()`` (in a thread) until it returns something true; return its last value."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = await asyncio.to_thread(check)
        except OSError:  # Prometheus is not listening yet
            value = None
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.5)


async def test_prometheus_scrapes_real_nodes_and_every_query_has_data(
    prometheus_factory: Any, redis_url_clean: str
) -> None:
    servers = []
    for node in ("m1", "m2"):
        server = GameServer(
            Settings(port=0, redis_url=redis_url_clean, node_id=node, admin_token=TOKEN),
            bot_client=run_bot,
        )
        server.bot_think = 0.05
        await server.start()
        servers.append(server)
    prometheus = prometheus_factory([f"127.0.0.1:{s.port}" for s in servers])
    host: Client | None = None
    playing: asyncio.Task[Any] | None = None
    try:
        up = await eventually(lambda: len(prometheus.query('up{job="blackdrez"} == 1')) == 2)
        assert up, "Prometheus scrapes both nodes"
        urls = [f"ws://127.0.0.1:{s.port}/" for s in servers]
        host = await Client.connect(urls[0], name="Host", reconnect=True, also=tuple(urls))
        options = v1.TableOptions(seats=3, decks=2, round_pause_seconds=0)
        table = (await host.request(v1.CreateTable(options=options))).table.id
        with pytest.raises(ServerError):
            await host.request(v1.JoinTable(table="tnonexistent"))  # an error, by its code
        await host.request(v1.AddBots(table=table, count=2))
        await host.wait_until(lambda: all(host.tables[table].info.seats), 30)
        await host.request(v1.StartGame(table=table))
        playing = asyncio.create_task(play_table(host, table, think=0.05))
        with pytest.raises(ConnectionClosed):  # a close by the server, by its code (4001)
            async with ws_connect(urls[0]) as refused:
                await refused.send('{"type": "hello", "versions": [99]}')
                await refused.recv()
                await refused.recv()

        def without_data() -> list[str]:
            return [e for e in dashboard_queries() if not prometheus.query(e)]

        complete = await eventually(lambda: not without_data(), 60)
        assert complete, f"dashboard queries without data: {without_data()}"
        # a failover for its panel: the table's node drains and the other one adopts the table
        await asyncio.to_thread(drain, f"http://127.0.0.1:{servers[0].port}", TOKEN, 30, str)
        adopted = await eventually(
            lambda: prometheus.query("sum(increase(blackdrez_tables_adopted_total[5m])) > 0")
        )
        assert adopted, "the adoption shows on the failover panel"
        for expr in alert_queries():
            prometheus.query(expr)  # each one evaluates (success), firing or not
        rules = prometheus.api("rules")["data"]["groups"][0]["rules"]
        assert len(rules) == len(alert_queries())
        assert all(rule["health"] != "err" for rule in rules), rules
    finally:
        if playing is not None:
            playing.cancel()
        if host is not None:
            await host.close()
        for server in servers:
            await server.stop()
