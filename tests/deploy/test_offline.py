"""deploy/offline.py without an engine: which images it must provide, and a complete wheelhouse."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import pytest

from tests.deploy.harness import COMPOSE_FILE, ROOT

_spec = importlib.util.spec_from_file_location("offline", ROOT / "deploy" / "offline.py")
assert _spec is not None and _spec.loader is not None
offline = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(offline)


def target(python: str) -> dict:
    """What ``TARGET_PROBE`` prints for a CPython ``python`` on x86_64 glibc 2.36."""
    return {
        "markers": {
            "implementation_name": "cpython",
            "implementation_version": python,
            "os_name": "posix",
            "platform_machine": "x86_64",
            "platform_release": "6.1.0",
            "platform_system": "Linux",
            "platform_version": "#1 SMP",
            "python_full_version": python,
            "platform_python_implementation": "CPython",
            "python_version": ".".join(python.split(".")[:2]),
            "sys_platform": "linux",
        },
        "abi": "cp311",
        "libc": ["glibc", "2.36"],
    }


def wheel(folder: Path, name: str, version: str, *requires: str) -> None:
    """A minimal wheel whose metadata declares ``requires``."""
    metadata = "".join(
        [f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"]
        + [f"Requires-Dist: {r}\n" for r in requires]
    )
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as archive:
        archive.writestr(f"{name}-{version}.dist-info/METADATA", metadata)


def test_every_image_the_deployment_pulls_has_a_stand_in() -> None:
    images = offline.needed_images([COMPOSE_FILE], ROOT / "Dockerfile")
    assert {"python:3.11-slim", "redis:7-alpine", "nginx:1.27-alpine"} <= set(images)
    missing = [image for image in images if not offline.standin_dockerfile(image).is_file()]
    # Debian packages no Grafana: the monitoring profile's dashboards need a registry (the compose
    # test leaves the service out and says so; Prometheus has its stand-in).
    assert [image.split(":")[0] for image in missing] == ["grafana/grafana"], missing
    assert offline.docker_base(ROOT / "Dockerfile") == "python:3.11-slim"


def test_a_dependency_under_a_marker_is_needed_only_where_the_marker_holds(tmp_path) -> None:
    wheel(tmp_path, "redis", "8.1.0", "async-timeout>=4.0.3; python_full_version < '3.11.3'")
    wanted = ["redis>=5"]
    assert offline.missing_requirements(tmp_path, wanted, target("3.11.2")) == [
        "async-timeout>=4.0.3"
    ]
    assert offline.missing_requirements(tmp_path, wanted, target("3.11.9")) == []
    wheel(tmp_path, "async_timeout", "5.0.1")
    assert offline.missing_requirements(tmp_path, wanted, target("3.11.2")) == []


def test_a_wheel_of_the_wrong_version_or_an_extra_asked_for_counts_as_missing(tmp_path) -> None:
    wheel(tmp_path, "websockets", "13.0")
    wheel(tmp_path, "rich", "13.0", "pygments>=2; extra == 'jupyter'")
    wanted = ["websockets>=14", "rich[jupyter]>=13"]
    missing = offline.missing_requirements(tmp_path, wanted, target("3.11.2"))
    assert missing == ["pygments>=2", "websockets>=14"]


def test_an_extra_asked_for_by_a_dependency_brings_its_own_requirements(tmp_path) -> None:
    wheel(tmp_path, "app", "1.0", "lib[fast]>=1")
    wheel(tmp_path, "lib", "1.2", "speedups>=2; extra == 'fast'", "slow>=1; extra == 'slow'")
    assert offline.missing_requirements(tmp_path, ["app"], target("3.11.2")) == ["speedups>=2"]


def test_the_project_requirements_are_the_runtime_ones_and_the_build_backend() -> None:
    wanted = offline.project_requirements(target("3.11.2"))
    names = {w.split(">")[0].split(";")[0].strip() for w in wanted}
    assert {"websockets", "msgspec", "redis", "setuptools"} <= names
    assert "pytest" not in names, "test extras stay out of the image"


@pytest.mark.parametrize(
    ("libc", "expected"),
    [
        (["glibc", "2.36"], ["manylinux_2_36_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"]),
        (["glibc", "2.17"], ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"]),
    ],
)
def test_platform_tags_follow_the_images_glibc(libc: list[str], expected: list[str]) -> None:
    described = {**target("3.11.2"), "libc": libc}
    tags = offline.platform_tags(described)
    assert tags[0] == expected[0]
    assert set(expected) <= set(tags)
    newer = f"manylinux_2_{int(libc[1].split('.')[1]) + 1}_x86_64"
    assert newer not in tags


def test_a_musl_image_is_refused_with_a_reason() -> None:
    with pytest.raises(offline.Failed, match="musl"):
        offline.platform_tags({**target("3.11.2"), "libc": ["musl", "1.2"]})
