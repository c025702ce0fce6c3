"""The deployment files agree with the code: compose services run real CLI commands, the load
balancer reaches every node with WebSocket upgrades, Redis persists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from blackdrez.tools.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
SERVES = {name: s for name, s in SERVICES.items() if s.get("command", [])[1:2] == ["serve"]}
NODES = {name: s for name, s in SERVES.items() if "profiles" not in s}
"""The nodes of the default stack (on one Redis)."""
CLUSTER_NODES = {name: s for name, s in SERVES.items() if s.get("profiles") == ["cluster"]}
CLUSTER_REDIS = {
    name: s
    for name, s in SERVICES.items()
    if s.get("profiles") == ["cluster"] and "--cluster-enabled" in s.get("command", [])
}


def nginx(name: str) -> str:
    """An nginx configuration of deploy/, without its comments."""
    text = (ROOT / "deploy" / name).read_text()
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


NGINX = nginx("nginx.conf")


def parse(command: list[str]):
    assert command[0] == "blackdrez", command
    return build_parser().parse_args(command[1:])


def test_at_least_two_server_nodes_with_distinct_ids_on_the_shared_redis() -> None:
    assert len(NODES) >= 2
    ids = set()
    for name, service in NODES.items():
        args = parse(service["command"])
        assert args.host == "0.0.0.0", "reachable from the load balancer"
        assert args.redis_url == "redis://redis:6379/0"
        assert args.node_id == name
        ids.add(args.node_id)
        assert service["build"]["context"] == "."
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"
    assert len(ids) == len(NODES)


def test_redis_persists_with_append_only_files() -> None:
    redis = SERVICES["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert any(volume.endswith(":/data") for volume in redis["volumes"])


def test_redis_protected_mode_is_set_in_the_compose_file_not_left_to_the_image() -> None:
    """The official image compiles it off, Debian's redis-server leaves it on: say which."""
    command = SERVICES["redis"]["command"]
    assert command[command.index("--protected-mode") + 1] == "no"
    assert "ports" not in SERVICES["redis"], "Redis is reached on the compose network only"


def test_every_built_service_can_build_offline() -> None:
    """One build definition: the Dockerfile's OFFLINE argument from BLACKDREZ_OFFLINE."""
    built = {name: s["build"] for name, s in SERVICES.items() if "build" in s}
    assert built.keys() >= {*NODES, "bots"}
    for name, build in built.items():
        assert build == {"context": ".", "args": {"OFFLINE": "${BLACKDREZ_OFFLINE:-}"}}, name
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "ARG OFFLINE=" in dockerfile
    assert "${OFFLINE:+--no-index} --find-links /tmp/wheelhouse" in dockerfile
    assert "COPY deploy/wheelhouse /tmp/wheelhouse" in dockerfile


def test_the_load_balancer_reaches_every_node_and_upgrades_websockets() -> None:
    upstreams = re.findall(r"^\s*server\s+([\w.-]+):(\d+)", NGINX, re.MULTILINE)
    ports = {name: parse(s["command"]).port for name, s in NODES.items()}
    assert sorted(upstreams) == sorted((name, str(port)) for name, port in ports.items())
    assert "proxy_set_header Upgrade $http_upgrade;" in NGINX
    assert "proxy_set_header Connection $connection_upgrade;" in NGINX
    assert "proxy_http_version 1.1;" in NGINX
    assert "ip_hash" not in NGINX and "sticky" not in NGINX, "no sticky sessions"
    lb = SERVICES["lb"]
    assert "./deploy/nginx.conf:/etc/nginx/nginx.conf:ro" in lb["volumes"]
    assert lb["ports"] == ["${BLACKDREZ_PUBLISH:-127.0.0.1:8765}:80"], (
        "the README's address, http://localhost:8765/, on loopback unless told otherwise"
    )


def test_the_bots_profile_runs_a_swarm_through_the_load_balancer() -> None:
    bots = SERVICES["bots"]
    assert bots["profiles"] == ["bots"]
    args = parse(bots["command"])
    assert args.command == "bots"
    assert args.url == "ws://lb:80/"
    assert args.tables > 0 and args.per_table >= 2


def test_the_image_runs_the_server_by_default() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    cmd = re.search(r"^CMD (\[.*\])$", dockerfile, re.MULTILINE)
    assert cmd is not None
    args = parse(yaml.safe_load(cmd.group(1)))
    assert (args.command, args.host, args.port) == ("serve", "0.0.0.0", 8765)
    assert "EXPOSE 8765" in dockerfile
    for folder in ("games", "protocol", "server", "clients", "tools"):
        assert f"COPY {folder} ./{folder}" in dockerfile


@pytest.mark.parametrize("name", sorted(NODES))
def test_the_node_launcher_runs_the_compose_command(name: str) -> None:
    from blackdrez.server.testing.nodes import node_command

    command = node_command(port=9999, redis_url="redis://127.0.0.1:1/0", node_id="x")
    assert command[:3] == [command[0], "-m", "blackdrez.tools.cli"]
    compose = parse(NODES[name]["command"])
    local = build_parser().parse_args(command[3:])
    for option in ("command", "max_frame_bytes", "rate", "burst", "compression"):
        assert getattr(local, option) == getattr(compose, option), option
    assert shlex.join(command)


def test_docker_compose_accepts_the_file_and_rejects_a_broken_one(tmp_path) -> None:
    """The compose tool's own validation (Debian's docker-compose: no engine needed)."""
    import shutil
    import subprocess

    tool = shutil.which("docker-compose")
    assert tool, "docker-compose is not installed: apt-get install docker-compose"
    checked = subprocess.run(
        [tool, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    with_cluster = subprocess.run(
        [tool, "-f", str(ROOT / "docker-compose.yml"), "--profile", "cluster", "config", "-q"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert with_cluster.returncode == 0, with_cluster.stderr
    broken = tmp_path / "docker-compose.yml"
    broken.write_text((ROOT / "docker-compose.yml").read_text().replace("ports:", "portz:"))
    refused = subprocess.run(
        [tool, "-f", str(broken), "config", "-q"], capture_output=True, text=True, cwd=tmp_path
    )
    assert refused.returncode != 0
    assert "portz" in refused.stderr


def test_the_nodes_trust_the_load_balancers_forwarded_for_and_no_one_elses() -> None:
    """Nodes cap connections per client address: behind nginx that is X-Forwarded-For, believed
    from nginx's fixed address only; and the Host nginx passes on keeps its port for the Origin
    check."""
    import ipaddress

    lb_address = SERVICES["lb"]["networks"]["default"]["ipv4_address"]
    subnet = COMPOSE["networks"]["default"]["ipam"]["config"][0]["subnet"]
    assert ipaddress.ip_address(lb_address) in ipaddress.ip_network(subnet)
    for service in NODES.values():
        assert parse(service["command"]).trusted_proxy == [lb_address]
    assert "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;" in NGINX
    assert "proxy_set_header Host $http_host;" in NGINX


def test_the_nodes_share_the_records_database_of_the_compose_file() -> None:
    """One PostgreSQL for every node (a SQLite file belongs to one process), with a volume; the
    nodes wait for it and name it in BLACKDREZ_DB_URL, which ``serve`` reads."""
    import os
    from unittest import mock

    records = SERVICES["records"]
    assert records["image"].startswith("postgres:")
    assert any(volume.endswith(":/var/lib/postgresql/data") for volume in records["volumes"])
    assert "pg_isready" in records["healthcheck"]["test"]
    env = records["environment"]
    expected = (
        f"postgresql://{env['POSTGRES_USER']}:{env['POSTGRES_PASSWORD']}@records:5432/"
        f"{env['POSTGRES_DB']}"
    )
    for name, service in {**NODES, **CLUSTER_NODES}.items():
        assert service["depends_on"]["records"]["condition"] == "service_healthy", name
        url = service["environment"]["BLACKDREZ_DB_URL"]
        assert url == expected, name
        with mock.patch.dict(os.environ, {"BLACKDREZ_DB_URL": url}):
            assert parse(service["command"]).db_url == url
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "chown blackdrez blackdrez-data" in dockerfile, "the default SQLite folder is writable"


def test_the_cluster_profile_joins_six_redis_nodes_into_three_masters_with_replicas() -> None:
    assert len(CLUSTER_REDIS) == 6
    for name, service in CLUSTER_REDIS.items():
        command = service["command"]
        assert command[0] == "redis-server"
        assert command[command.index("--cluster-enabled") + 1] == "yes"
        assert command[command.index("--appendonly") + 1] == "yes"
        assert any(volume.endswith(":/data") for volume in service["volumes"]), name
        assert service["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    init = SERVICES["redis-cluster-init"]
    assert init["profiles"] == ["cluster"]
    assert set(init["depends_on"]) == set(CLUSTER_REDIS)
    assert all(d["condition"] == "service_healthy" for d in init["depends_on"].values())
    script = " ".join(init["command"])
    assert "--cluster create" in script and "--cluster-replicas 1 --cluster-yes" in script
    assert f"for h in {' '.join(sorted(CLUSTER_REDIS))};" in script
    assert "cluster_state:ok" in script, "done only once the cluster serves every slot"


def test_the_cluster_profile_nodes_use_the_cluster_behind_their_own_load_balancer() -> None:
    assert len(CLUSTER_NODES) >= 2
    seeds = ",".join(f"{name}:6379" for name in sorted(CLUSTER_REDIS))
    for name, service in CLUSTER_NODES.items():
        args = parse(service["command"])
        assert args.redis_url == f"redis+cluster://{seeds}", "every cluster node is a seed"
        assert args.node_id == name and args.host == "0.0.0.0"
        condition = service["depends_on"]["redis-cluster-init"]["condition"]
        assert condition == "service_completed_successfully"
        assert service["build"] == NODES["node1"]["build"], "the same image as the other nodes"
    lb = SERVICES["cluster-lb"]
    assert "./deploy/nginx-cluster.conf:/etc/nginx/nginx.conf:ro" in lb["volumes"]
    upstreams = re.findall(r"^\s*server\s+([\w.-]+):(\d+)", nginx("nginx-cluster.conf"), re.M)
    ports = {name: parse(s["command"]).port for name, s in CLUSTER_NODES.items()}
    assert sorted(upstreams) == sorted((name, str(port)) for name, port in ports.items())
    assert lb["ports"] != SERVICES["lb"]["ports"], "both stacks can run side by side"
    address = lb["networks"]["default"]["ipv4_address"]
    assert address != SERVICES["lb"]["networks"]["default"]["ipv4_address"]
    for service in CLUSTER_NODES.values():
        assert parse(service["command"]).trusted_proxy == [address]
    upstream = re.compile(r"^\s*server\s+[\w.-]+:\d+[^\n]*\n", re.M)
    assert upstream.sub("", nginx("nginx-cluster.conf")) == upstream.sub("", NGINX), (
        "the same proxying as the other load balancer"
    )
