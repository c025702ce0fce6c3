"""The Kubernetes manifests of deploy/kubernetes/ are valid, complete, and agree with the server.

Every document of both kustomizations (the nodes', and dependencies/, the starting point for a
Redis Cluster and a PostgreSQL) is validated against the Kubernetes schemas that
kubernetes-validate ships, strictly (a field the schema does not know is refused), at the oldest
Kubernetes the manifests are written for and at the newest the package knows; a broken document
is shown to be refused, so the validation cannot pass by checking nothing.

The Deployment is read against the code it depends on rather than against copies of its numbers:
its command must use only options ``blackdrez serve --help`` lists, and is parsed by the CLI's own
parser with the environment the pod gets (the ConfigMap, the example Secret, the node id from the
pod's name); the probes must reach ``/healthz`` on the port the node listens on; the termination
grace must cover the preStop sleep plus the server's own bounds on a stop; the autoscaler's metric
must be a gauge the nodes export; the Ingress must keep WebSockets open at least as long as
deploy/nginx.conf does. With ``kubectl`` installed, ``kubectl kustomize`` renders both folders and
what it renders is validated again (CI may lack kubectl: that test alone is then skipped).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import ipaddress
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import kubernetes_validate
import pytest
import yaml

from blackdrez.server.app import GameServer
from blackdrez.server.metrics import Metrics
from blackdrez.server.node.leases import Leases
from blackdrez.server.records.process import EXIT_WAIT
from blackdrez.server.records.writer import STOP_WAIT
from blackdrez.server.settings import Settings
from blackdrez.server.stores.redis_cluster import parse_cluster_url
from blackdrez.server.workers import STOP_TIMEOUT
from blackdrez.tools.cli import build_parser, serve_settings

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes"
DEPENDENCIES = MANIFESTS / "dependencies"
NAMESPACES = {MANIFESTS: "blackdrez", DEPENDENCIES: "blackdrez-deps"}
"""Each kustomization's namespace."""
OLDEST = "1.29"
"""The oldest Kubernetes the manifests are written for (autoscaling/v2, policy/v1, a
PodDisruptionBudget's ``unhealthyPodEvictionPolicy``; no native ``sleep`` preStop action)."""
VERSIONS = (OLDEST, kubernetes_validate.latest_version())
CLUSTER_SCOPED = {"Namespace"}
POD_NAME = "blackdrez-node-7d9c6b5f4-x2k8p"
"""A pod name as the Deployment's ReplicaSet makes them, for the downward API's node id."""
KUBECTL_TIMEOUT = 120.0


def documents(path: Path) -> list[dict[str, Any]]:
    """The YAML documents of ``path`` (empty ones left out)."""
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def manifest_files(folder: Path) -> list[Path]:
    """The manifests of ``folder``: its YAML files but the kustomization, examples included."""
    return sorted(p for p in folder.glob("*.yaml") if p.name != "kustomization.yaml")


def objects(folder: Path) -> list[dict[str, Any]]:
    """Every document of every manifest of ``folder``."""
    return [doc for path in manifest_files(folder) for doc in documents(path)]


def one(folder: Path, kind: str, name: str | None = None) -> dict[str, Any]:
    """The one object of ``kind`` (named ``name``) among ``folder``'s manifests."""
    found = [
        doc
        for doc in objects(folder)
        if doc["kind"] == kind and name in (None, doc["metadata"]["name"])
    ]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''} in {folder}"
    return found[0]


def validate(doc: dict[str, Any]) -> None:
    """Validate ``doc`` strictly at every version of :data:`VERSIONS`; an unknown kind or API
    version raises ``SchemaNotFoundError``, which fails the test like an invalid document."""
    for version in VERSIONS:
        kubernetes_validate.validate(doc, version, strict=True)


DEPLOYMENT = one(MANIFESTS, "Deployment", "blackdrez-node")
POD = DEPLOYMENT["spec"]["template"]
(NODE,) = POD["spec"]["containers"]
PORTS = {port["name"]: port["containerPort"] for port in NODE["ports"]}


@functools.cache
def serve_help() -> str:
    """``blackdrez serve --help``, as an operator reads it (the real command, in a process)."""
    return subprocess.run(
        [sys.executable, "-m", "blackdrez.tools.cli", "serve", "--help"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip


def pod_environment() -> dict[str, str]:
    """The environment the node's container gets: its ConfigMap and Secret (the example's
    placeholders), and its ``env`` entries (the node id from the pod's name)."""
    sources = {
        ("configMapRef", "ConfigMap"): lambda d: d.get("data", {}),
        ("secretRef", "Secret"): lambda d: d.get("stringData", {}),
    }
    env: dict[str, str] = {}
    for source in NODE.get("envFrom", []):
        for (ref, kind), values in sources.items():
            if ref in source:
                env.update(values(one(MANIFESTS, kind, source[ref]["name"])))
    for variable in NODE.get("env", []):
        if "value" in variable:
            env[variable["name"]] = variable["value"]
        else:
            assert variable["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
            env[variable["name"]] = POD_NAME
    return env


@contextlib.contextmanager
def pod_env() -> Iterator[dict[str, str]]:
    """This process's environment as the pod's: its ``BLACKDREZ_*`` variables replaced by the
    pod's (the CLI reads them when its parser is built)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLACKDREZ_")}
    env.update(pod_environment())
    with mock.patch.dict(os.environ, env, clear=True):
        yield env


def node_settings() -> Settings:
    """The node's settings: the container's command parsed by ``blackdrez serve``'s parser in
    the pod's environment, resolved as the command line resolves them."""
    command = NODE["command"]
    assert command[:2] == ["blackdrez", "serve"], command
    with pod_env():
        args = build_parser().parse_args(command[1:])
        return serve_settings(args)


def window(probe: dict[str, Any]) -> int:
    """Seconds of consecutive failures after which a probe acts (Kubernetes' defaults: every
    10 s, 3 failures)."""
    return int(probe.get("periodSeconds", 10)) * int(probe.get("failureThreshold", 3))


def written_waits(*functions: Callable[..., object]) -> float:
    """The seconds ``functions`` may wait where their source writes the bound as a number: the
    timeouts of their ``asyncio.wait_for`` calls and of the thread joins they run
    (``asyncio.to_thread(thread.join, 5.0)``)."""
    total = 0.0
    for function in functions:
        for call in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(function)))):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr in ("wait_for", "to_thread")
            ):
                total += sum(
                    arg.value
                    for arg in call.args
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, int | float)
                )
    return total


def quantity(text: str) -> float:
    """A Kubernetes resource quantity (``500m``, ``2``, ``512Mi``, ``1Gi``) as a number."""
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 1e3, "M": 1e6, "G": 1e9}
    match = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(text))
    assert match, text
    return float(match.group(1)) * (units[match.group(2)] if match.group(2) else 1)


def nginx_directives(name: str) -> dict[str, list[str]]:
    """The directives of deploy/nginx.conf's proxied location: each name's arguments."""
    text = "\n".join(
        line.split("#", 1)[0] for line in (ROOT / "deploy" / name).read_text().splitlines()
    )
    return {m[0]: m[1].split() for m in re.findall(r"^\s*(proxy_\w+)\s+([^;]*);", text, re.M)}


@pytest.mark.parametrize(
    ("path", "index"),
    [
        (path, index)
        for folder in NAMESPACES
        for path in manifest_files(folder)
        for index in range(len(documents(path)))
    ],
    ids=lambda value: str(value.relative_to(MANIFESTS)) if isinstance(value, Path) else str(value),
)
def test_every_document_validates_against_the_kubernetes_schemas(path: Path, index: int) -> None:
    """Each document, the examples applied by hand included, one test each (the failure names
    the file and the document)."""
    validate(documents(path)[index])


def test_the_validation_refuses_a_broken_document() -> None:
    """A misspelled field, a value of the wrong type, an API version that does not exist: each
    is refused, so that the validation above checks something."""
    misspelled = yaml.safe_load((MANIFESTS / "node-deployment.yaml").read_text())
    container = misspelled["spec"]["template"]["spec"]["containers"][0]
    container["livenesProbe"] = container.pop("livenessProbe")
    with pytest.raises(kubernetes_validate.ValidationError, match="livenesProbe"):
        validate(misspelled)
    mistyped = yaml.safe_load((MANIFESTS / "node-deployment.yaml").read_text())
    mistyped["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "a minute"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(mistyped)
    unknown = yaml.safe_load((MANIFESTS / "node-hpa.yaml").read_text())
    unknown["apiVersion"] = "autoscaling/v9"
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        validate(unknown)


@pytest.mark.parametrize("folder", list(NAMESPACES), ids=lambda f: f.name)
def test_each_kustomization_lists_every_manifest_of_its_folder(folder: Path) -> None:
    """No file forgotten or listed twice; the ``*.example.yaml`` files are applied by hand (a
    Secret's placeholders must never overwrite the real one at the next ``apply``)."""
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    expected = [p.name for p in manifest_files(folder) if not p.name.endswith(".example.yaml")]
    assert sorted(kustomization["resources"]) == expected
    assert len(set(kustomization["resources"])) == len(kustomization["resources"])
    assert kustomization["namespace"] == NAMESPACES[folder]
    (namespace,) = [doc for doc in objects(folder) if doc["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == NAMESPACES[folder]


def test_the_node_command_uses_only_options_blackdrez_serve_has() -> None:
    """Every option of the container's command is one ``blackdrez serve --help`` lists, and
    every variable its ConfigMap, Secret and ``env`` set is one the help names (OpenTelemetry's
    own ``OTEL_*`` apart)."""
    listed = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", serve_help()))
    used = {arg.split("=", 1)[0] for arg in NODE["command"][2:] if arg.startswith("--")}
    assert used, NODE["command"]
    assert used <= listed, used - listed
    words = " ".join(serve_help().split())  # (argparse wraps its helps where it likes)
    variables = set(re.findall(r"\benv (BLACKDREZ_[A-Z_]+)", words))
    assert "BLACKDREZ_NODE_ID" in variables
    given = set(pod_environment()) | set(one(MANIFESTS, "Secret")["stringData"])
    unknown = {v for v in given if v not in variables and not v.startswith("OTEL_")}
    assert unknown == set()


def test_the_node_runs_as_the_pod_environment_configures_it() -> None:
    """Parsed as ``blackdrez serve`` parses it: listening on every address, on the container's
    ports; named after its pod; on a Redis Cluster and a PostgreSQL (no data folder: the root
    filesystem is read-only); trusting the Ingress controller's pod network."""
    settings = node_settings()
    assert settings.host == "0.0.0.0"
    assert settings.port == PORTS["game"]
    assert (settings.metrics_host, settings.metrics_port) == ("0.0.0.0", PORTS["metrics"])
    assert POD["metadata"]["annotations"]["prometheus.io/port"] == str(PORTS["metrics"])
    assert settings.node_id == POD_NAME
    assert settings.redis_url is not None and settings.redis_url.startswith("redis+cluster://")
    assert settings.db_url is not None and settings.db_url.startswith("postgresql://")
    assert settings.data_dir is None
    networks = [ipaddress.ip_network(proxy) for proxy in settings.trusted_proxies]
    for pod_address in ("10.244.1.7", "10.42.0.12"):  # kubeadm with flannel, k3s
        assert any(ipaddress.ip_address(pod_address) in n for n in networks), pod_address


def test_the_probes_ask_healthz_on_the_game_port() -> None:
    """Readiness takes a node out of the Service within seconds of its 503; liveness waits
    minutes (a node cut off from its store answers 503 too, and a restart would not help it)
    and longer than a stop; the startup probe gives the store a minute at least."""
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = NODE[kind]
        assert probe["httpGet"]["path"] == "/healthz", kind
        port = probe["httpGet"]["port"]
        assert PORTS.get(port, port) == node_settings().port, kind
    assert window(NODE["readinessProbe"]) <= 10
    assert window(NODE["livenessProbe"]) >= 120
    assert window(NODE["livenessProbe"]) > POD["spec"]["terminationGracePeriodSeconds"]
    assert window(NODE["startupProbe"]) >= 60


def test_the_termination_grace_covers_the_prestop_sleep_and_the_nodes_stop() -> None:
    """The kubelet kills the container ``terminationGracePeriodSeconds`` after the pod began
    terminating, its preStop hook included. Past the sleep, the node's SIGTERM stop must fit:
    the bound the ``--workers`` supervisor gives a node to hand its tables over and exit, and
    the worst case of the stop's own waits, made one after another (``GameServer.stop``): the
    lease thread's join and the listeners' closes (bounds written in the code), the clients'
    close frames (``--close-timeout``), the records process (``STOP_WAIT + EXIT_WAIT``)."""
    pre_stop = NODE["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep" and len(pre_stop) == 2, pre_stop
    sleep = float(pre_stop[1])
    assert sleep >= 1, "long enough for the endpoint's removal to reach the Ingress controller"
    stop, lease_thread = written_waits(GameServer.stop), written_waits(Leases.stop)
    assert stop > 0 and lease_thread > 0, "the bounds written in the stop's code were not found"
    worst = node_settings().close_timeout + stop + lease_thread + STOP_WAIT + EXIT_WAIT
    grace = POD["spec"]["terminationGracePeriodSeconds"]
    assert grace > sleep + STOP_TIMEOUT
    assert grace > sleep + worst


def test_the_nodes_roll_and_are_disrupted_one_at_a_time() -> None:
    """As docs/operations.md's rolling upgrade: a new node ready before an old one drains, and a
    machine's drain evicts one node at a time."""
    rolling = DEPLOYMENT["spec"]["strategy"]["rollingUpdate"]
    assert (rolling["maxSurge"], rolling["maxUnavailable"]) == (1, 0)
    assert one(MANIFESTS, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1


def test_the_selectors_match_the_nodes_pods() -> None:
    """The Deployment's, the Service's and the PodDisruptionBudget's selectors all select the
    pods the Deployment makes, and the Ingress routes to the Service's game port."""
    labels = POD["metadata"]["labels"].items()
    service = one(MANIFESTS, "Service", "blackdrez-node")
    for selector in (
        DEPLOYMENT["spec"]["selector"]["matchLabels"],
        service["spec"]["selector"],
        one(MANIFESTS, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
    ):
        assert selector and selector.items() <= labels, selector
    targets = {port["name"]: port["targetPort"] for port in service["spec"]["ports"]}
    assert targets == {name: name for name in PORTS}
    ingress = one(MANIFESTS, "Ingress")
    backends = [
        path["backend"]["service"]
        for rule in ingress["spec"]["rules"]
        for path in rule["http"]["paths"]
    ]
    assert backends == [{"name": "blackdrez-node", "port": {"name": "game"}}]


def test_the_autoscaler_scales_the_deployment_on_a_gauge_the_nodes_export() -> None:
    """The Pods metric is a gauge of every node's ``/metrics`` (an average of a counter would
    mean nothing), the CPU target is relative to a CPU request the container has, and the
    Deployment leaves its replica count to the autoscaler."""
    hpa = one(MANIFESTS, "HorizontalPodAutoscaler")["spec"]
    assert hpa["scaleTargetRef"] == {
        "apiVersion": DEPLOYMENT["apiVersion"],
        "kind": "Deployment",
        "name": DEPLOYMENT["metadata"]["name"],
    }
    assert hpa["minReplicas"] >= 3 and hpa["maxReplicas"] > hpa["minReplicas"]
    assert "replicas" not in DEPLOYMENT["spec"], "an apply would reset the autoscaler's count"
    exported = dict(re.findall(r"^# TYPE (\S+) (\S+)$", Metrics().render().decode(), re.M))
    (pods,) = [m["pods"] for m in hpa["metrics"] if m["type"] == "Pods"]
    assert exported.get(pods["metric"]["name"]) == "gauge", pods["metric"]["name"]
    assert pods["target"]["type"] == "AverageValue" and quantity(pods["target"]["averageValue"]) > 0
    (cpu,) = [m["resource"] for m in hpa["metrics"] if m["type"] == "Resource"]
    assert cpu["name"] == "cpu" and cpu["target"]["type"] == "Utilization"
    assert quantity(NODE["resources"]["requests"]["cpu"]) > 0


def test_the_node_has_resource_requests_and_limits() -> None:
    """Requests (what the scheduler reserves, and what the CPU target is a share of) and limits
    for CPU and memory, none above its limit (the figures are explained in the manifest)."""
    resources = NODE["resources"]
    for resource in ("cpu", "memory"):
        request = quantity(resources["requests"][resource])
        assert 0 < request <= quantity(resources["limits"][resource]), resource


def test_the_node_runs_unprivileged_on_a_read_only_root_filesystem() -> None:
    """Not root, no privilege to gain, nothing written outside /tmp (an emptyDir), no token to
    the Kubernetes API (a node never calls it)."""
    pod = POD["spec"]["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0
    container = NODE["securityContext"]
    assert container["readOnlyRootFilesystem"] is True
    assert container["allowPrivilegeEscalation"] is False
    assert container["capabilities"]["drop"] == ["ALL"]
    volumes = {volume["name"]: volume for volume in POD["spec"]["volumes"]}
    (tmp,) = [mount for mount in NODE["volumeMounts"] if mount["mountPath"] == "/tmp"]
    assert "emptyDir" in volumes[tmp["name"]]
    assert POD["spec"]["automountServiceAccountToken"] is False


def test_the_ingress_keeps_websockets_open_as_long_as_the_compose_load_balancer() -> None:
    """ingress-nginx's timeouts are at least deploy/nginx.conf's, it retries elsewhere what
    nginx.conf retries (a node's 503 included), and no session is sticky."""
    annotations = one(MANIFESTS, "Ingress")["metadata"]["annotations"]
    directives = nginx_directives("nginx.conf")
    for name in ("proxy_read_timeout", "proxy_send_timeout"):
        (compose,) = directives[name]
        ingress = annotations[f"nginx.ingress.kubernetes.io/{name.replace('_', '-')}"]
        assert int(ingress) >= int(compose.removesuffix("s")), name
    retried = annotations["nginx.ingress.kubernetes.io/proxy-next-upstream"].split()
    assert set(directives["proxy_next_upstream"]) <= set(retried)
    assert not any("affinity" in key for key in annotations), "no sticky sessions"


def test_the_dependencies_are_what_the_nodes_are_configured_to_reach() -> None:
    """dependencies/ runs the Redis Cluster the ConfigMap names (every pod a seed) with
    docker-compose.yml's cluster options, forms it as compose does, and the PostgreSQL of the
    example Secret's database URL."""
    with pod_env() as env:
        seeds = parse_cluster_url(env["BLACKDREZ_REDIS_URL"])[0]
        database = env["BLACKDREZ_DB_URL"]
    redis = one(DEPENDENCIES, "StatefulSet", "redis-cluster")["spec"]
    service = one(DEPENDENCIES, "Service", redis["serviceName"])
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"]
    host = f"{redis['serviceName']}.{NAMESPACES[DEPENDENCIES]}.svc"
    pods = [(f"redis-cluster-{i}.{host}", 6379) for i in range(redis["replicas"])]
    assert sorted(seeds) == pods
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    (container,) = redis["template"]["spec"]["containers"]
    assert container["args"] == compose["x-cluster-redis"]["command"]
    init = one(DEPENDENCIES, "Job", "redis-cluster-init")["spec"]["template"]["spec"]
    script = " ".join(init["containers"][0]["args"])
    assert f"for i in {' '.join(str(i) for i in range(redis['replicas']))};" in script
    assert "--cluster create" in script and "--cluster-replicas 1 --cluster-yes" in script
    assert "cluster_state:ok" in script
    postgres = one(DEPENDENCIES, "StatefulSet", "postgres")["spec"]
    (container,) = postgres["template"]["spec"]["containers"]
    (source,) = container["envFrom"]
    account = one(DEPENDENCIES, "Secret", source["secretRef"]["name"])["stringData"]
    service = one(DEPENDENCIES, "Service", postgres["serviceName"])
    (port,) = [p["port"] for p in service["spec"]["ports"]]
    assert database == (
        f"postgresql://{account['POSTGRES_USER']}:{account['POSTGRES_PASSWORD']}"
        f"@{postgres['serviceName']}.{NAMESPACES[DEPENDENCIES]}.svc:{port}/{account['POSTGRES_DB']}"
    )


@pytest.mark.parametrize("folder", list(NAMESPACES), ids=lambda f: f.name)
def test_kubectl_kustomize_renders_valid_documents_in_the_namespace(folder: Path) -> None:
    """What ``kubectl kustomize`` renders (what ``kubectl apply -k`` sends) validates, holds
    exactly the objects of the listed files, each in the kustomization's namespace and labelled
    as part of the deployment."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the rendering of the kustomizations is not checked")
    rendered = subprocess.run(
        [kubectl, "kustomize", str(folder)],
        capture_output=True, text=True, timeout=KUBECTL_TIMEOUT,
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    docs = [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]
    listed = yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"]
    expected = [doc for name in listed for doc in documents(folder / name)]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in docs) == sorted(
        (d["kind"], d["metadata"]["name"]) for d in expected
    )
    namespace = NAMESPACES[folder]
    for doc in docs:
        validate(doc)
        metadata = doc["metadata"]
        if doc["kind"] in CLUSTER_SCOPED:
            assert metadata["name"] == namespace
        else:
            assert metadata["namespace"] == namespace, (doc["kind"], metadata["name"])
        assert "app.kubernetes.io/part-of" in metadata["labels"], (doc["kind"], metadata["name"])
