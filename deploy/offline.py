"""Prepare docker-compose.yml for a machine that cannot pull images: ``python3 deploy/offline.py``.

Theory of operation
-------------------
The compose file and the Dockerfile name public images (``python:3.11-slim``, ``redis:7-alpine``,
``nginx:1.27-alpine``), and the Dockerfile installs the project's Python packages from PyPI. Where
no image registry is reachable, this script makes both work without touching either file:

1. It lists the images needed: the ``image:`` of every service that is not built (in every
   profile) and every ``FROM`` of the Dockerfile.
2. Each one missing locally is pulled if it can be (``--no-pull`` skips trying). Otherwise a
   stand-in is built from ``deploy/standins/NAME-TAG.Dockerfile`` and tagged with the real name,
   so the compose file finds it. Stand-ins are Debian bookworm with the same program from
   Debian's packages, on a base image made once by ``debootstrap --variant=minbase`` and
   ``docker import`` (only when a stand-in is needed); the stand-ins build side by side, on
   the host's network. An image that is present, or that a registry gives, is never replaced.
3. It fills ``deploy/wheelhouse`` with wheels for the Python inside the Dockerfile's base image
   (its version, ABI, glibc and environment markers, read from the image itself: Debian's Python
   3.11.2 needs ``async-timeout``, a newer one does not), plus the build backend. Then
   ``BLACKDREZ_OFFLINE=1 docker compose up --build`` builds the project image with
   ``pip --no-index``.

The host needs a running Docker engine, and for a stand-in, root and ``debootstrap``; the wheels
come from the host's own package index (``pip download``). Run it again after changing the
project's dependencies.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Iterable
from email.parser import Parser
from pathlib import Path

try:
    from packaging.markers import Marker
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name, parse_wheel_filename
except ImportError:  # pip always carries it
    from pip._vendor.packaging.markers import Marker  # type: ignore[no-redef]
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import (  # type: ignore[no-redef]
        canonicalize_name,
        parse_wheel_filename,
    )

ROOT = Path(__file__).resolve().parent.parent
STANDINS = ROOT / "deploy" / "standins"
WHEELHOUSE = ROOT / "deploy" / "wheelhouse"
SUITE = "bookworm"
"""The Debian release the stand-ins are written for (its Python is 3.11, as the Dockerfile's)."""
BASE_IMAGE = f"blackdrez/debian-minbase:{SUITE}"
MIRROR = "http://deb.debian.org/debian"
SECURITY_MIRROR = "http://deb.debian.org/debian-security"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PULL_TIMEOUT = 300.0
CLOSURE_ROUNDS = 8
"""Rounds of "download what the wheels still need" before giving up (one or two suffice)."""

TARGET_PROBE = """
import json, os, platform, sys
print(json.dumps({
    "markers": {
        "implementation_name": sys.implementation.name,
        "implementation_version": platform.python_version(),
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    },
    "abi": sys.implementation.cache_tag.replace("cpython-", "cp"),
    "libc": platform.libc_ver(),
}))
"""


class Failed(Exception):
    """A step cannot be done; the message says why and what to do."""


def run(command: list[str], **options: object) -> subprocess.CompletedProcess[str]:
    """Run a command, echoing it; raise :class:`Failed` with its output when it fails."""
    shown = [arg if len(arg) < 60 and "\n" not in arg else "..." for arg in command]
    platforms = shown.count("--platform")
    if platforms > 1:  # one line, not forty manylinux tags
        first = shown.index("--platform")
        shown[first : first + 2 * platforms] = [*shown[first : first + 2], f"(+{platforms - 1})"]
    print("+ " + " ".join(shown), flush=True)
    done = subprocess.run(command, text=True, **options)  # type: ignore[call-overload]
    if done.returncode != 0:
        detail = (done.stderr or "").strip() if isinstance(done.stderr, str) else ""
        raise Failed(f"{command[0]} {command[1]} failed (exit {done.returncode}) {detail}")
    return done


# ---------------------------------------------------------------------------- images
def needed_images(compose_files: Iterable[Path], dockerfile: Path) -> list[str]:
    """The images the deployment uses but does not build, in a stable order."""
    import yaml

    images: list[str] = []
    for path in compose_files:
        services = (yaml.safe_load(path.read_text()) or {}).get("services", {})
        for service in services.values():
            if "image" in service and "build" not in service:
                images.append(service["image"])
    for line in dockerfile.read_text().splitlines():
        words = line.split()
        if words and words[0].upper() == "FROM":
            images.append(next(w for w in words[1:] if not w.startswith("--")))
    return list(dict.fromkeys(images))


def standin_dockerfile(image: str) -> Path:
    """Where the stand-in for ``image`` is written: ``redis:7-alpine`` -> ``redis-7-alpine``."""
    return STANDINS / (image.replace("/", "_").replace(":", "-") + ".Dockerfile")


def image_present(image: str) -> bool:
    """Whether the engine already has ``image``."""
    found = subprocess.run(["docker", "image", "inspect", image], capture_output=True)
    return found.returncode == 0


def try_pull(image: str) -> bool:
    """Pull ``image``; False when no registry gives it (quietly: that is what we expect here)."""
    print(f"+ docker pull {image}", flush=True)
    try:
        pulled = subprocess.run(
            ["docker", "pull", image], capture_output=True, text=True, timeout=PULL_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        print(f"  no answer from the registry in {PULL_TIMEOUT:.0f} s")
        return False
    if pulled.returncode != 0:
        print("  " + (pulled.stderr.strip().splitlines() or ["pull failed"])[-1])
    return pulled.returncode == 0


def build_base(mirror: str, security_mirror: str) -> None:
    """Make the Debian base image: debootstrap a minimal root filesystem, import it."""
    if os.geteuid() != 0:
        raise Failed("building the Debian base image needs root (debootstrap)")
    if shutil.which("debootstrap") is None:
        raise Failed("debootstrap is not installed: apt-get install debootstrap")
    with tempfile.TemporaryDirectory(prefix="blackdrez-rootfs-", dir="/var/tmp") as work:
        rootfs = Path(work) / "rootfs"
        try:
            run(["debootstrap", "--variant=minbase", SUITE, str(rootfs), mirror])
            (rootfs / "etc" / "apt" / "sources.list").write_text(
                f"deb {mirror} {SUITE} main\n"
                f"deb {mirror} {SUITE}-updates main\n"
                f"deb {security_mirror} {SUITE}-security main\n"
            )
            shutil.rmtree(rootfs / "var" / "cache" / "apt" / "archives", ignore_errors=True)
            print(f"+ tar -C {rootfs} -c . | docker import - {BASE_IMAGE}", flush=True)
            tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
            imported = subprocess.run(
                [
                    "docker", "import",
                    "--change", f"ENV PATH={PATH}",
                    "--change", "ENV LANG=C.UTF-8",
                    "--change", 'CMD ["bash"]',
                    "-", BASE_IMAGE,
                ],
                stdin=tar.stdout,
                capture_output=True,
                text=True,
            )  # fmt: skip
            assert tar.stdout is not None
            tar.stdout.close()
            if tar.wait() != 0 or imported.returncode != 0:
                raise Failed(f"docker import failed: {imported.stderr.strip()}")
        finally:
            _unmount_below(rootfs)  # debootstrap leaves /proc mounted if it fails midway


def _unmount_below(path: Path) -> None:
    """Unmount whatever is mounted inside ``path`` (deepest first), so it can be removed."""
    prefix = str(path.resolve()) + "/"
    with open("/proc/mounts") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False)


def build_standin(image: str) -> str:
    """Build the stand-in for ``image`` on the Debian base and tag it with ``image``'s name;
    what the build printed."""
    dockerfile = standin_dockerfile(image)
    # On the host's network: apt-get reaches the mirror as the host does, even from an engine
    # that sets up no NAT for its bridge (dockerd --iptables=false).
    built = subprocess.run(
        [
            "docker", "build", "--network", "host", "--build-arg", f"BASE={BASE_IMAGE}",
            "-t", image, "-f", str(dockerfile), str(STANDINS),
        ],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    if built.returncode != 0:
        raise Failed(f"the stand-in for {image} did not build:\n{built.stdout[-3000:]}")
    return built.stdout


def prepare_images(
    images: list[str], pull: bool, mirror: str, security_mirror: str, allow_missing: bool = False
) -> dict:
    """Make every image present; return what was done for each. An image that cannot be pulled
    and has no stand-in fails the whole preparation, unless ``allow_missing``: then it is only
    reported, and the services that use it cannot run here."""
    done: dict[str, str] = {}
    missing = []
    for image in images:
        if image_present(image):
            done[image] = "present"
        elif pull and try_pull(image):
            done[image] = "pulled"
        else:
            missing.append(image)
    unknown = [image for image in missing if not standin_dockerfile(image).is_file()]
    if unknown and allow_missing:
        for image in unknown:
            done[image] = f"MISSING: cannot be pulled, no {standin_dockerfile(image).name}"
        missing = [image for image in missing if image not in unknown]
        unknown = []
    if unknown:
        names = ", ".join(str(standin_dockerfile(i).relative_to(ROOT)) for i in unknown)
        raise Failed(f"cannot pull {', '.join(unknown)} and no stand-in is written for it: {names}")
    if missing and not image_present(BASE_IMAGE):
        started = time.monotonic()
        build_base(mirror, security_mirror)
        done[BASE_IMAGE] = f"built with debootstrap ({time.monotonic() - started:.0f} s)"
    started = time.monotonic()
    # Side by side: each build mostly waits for the mirror and dpkg, not for the same thing.
    with concurrent.futures.ThreadPoolExecutor(max(1, len(missing))) as builds:
        for image in missing:
            print(f"+ docker build -t {image} -f {standin_dockerfile(image).relative_to(ROOT)}")
        for image, printed in zip(missing, builds.map(build_standin, missing), strict=True):
            print(f"--- {image}:\n{printed}", flush=True)
    for image in missing:
        done[image] = (
            f"stand-in built from Debian {SUITE} ({len(missing)} side by side, "
            f"{time.monotonic() - started:.0f} s)"
        )
    return done


# ---------------------------------------------------------------------------- wheelhouse
def target_python(image: str) -> dict:
    """The marker environment, ABI and libc of the Python inside ``image``."""
    probed = run(
        ["docker", "run", "--rm", "--network", "none", "--entrypoint", "python3", image,
         "-c", TARGET_PROBE],
        capture_output=True,
    )  # fmt: skip
    return json.loads(probed.stdout)


def platform_tags(target: dict) -> list[str]:
    """The manylinux platform tags the target's glibc accepts, newest first."""
    machine = target["markers"]["platform_machine"]
    libc, version = target["libc"]
    if libc != "glibc":
        raise Failed(f"the image's Python runs on {libc or 'an unknown libc'}, not glibc")
    major, minor = (int(part) for part in version.split(".")[:2])
    tags = [f"manylinux_{major}_{m}_{machine}" for m in range(minor, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    return tags + [f"{name}_{machine}" for m, name in legacy.items() if minor >= m]


def project_requirements(target: dict) -> list[str]:
    """The project's runtime requirements that apply to ``target``, and its build backend."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    runtime = [
        r
        for r in pyproject["project"]["dependencies"]
        if _applies(Requirement(r), target["markers"], extras=())
    ]
    return runtime + list(pyproject["build-system"]["requires"])


def _requires(wheel: Path) -> list[str]:
    """The ``Requires-Dist`` lines of a wheel."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(name).decode())
    return metadata.get_all("Requires-Dist") or []


def _applies(requirement: Requirement, markers: dict[str, str], extras: Iterable[str]) -> bool:
    """Whether ``requirement`` applies on the target, for the extras asked of its owner."""
    if requirement.marker is None:
        return True
    marker: Marker = requirement.marker
    return any(marker.evaluate({**markers, "extra": extra}) for extra in ("", *extras))


def missing_requirements(wheelhouse: Path, wanted: list[str], target: dict) -> list[str]:
    """Requirements (``wanted`` and those of every wheel present) that no wheel satisfies."""
    versions: dict[str, list[str]] = {}
    declared: dict[str, list[Requirement]] = {}
    for wheel in wheelhouse.glob("*.whl"):
        name, version, _, _ = parse_wheel_filename(wheel.name)
        versions.setdefault(name, []).append(str(version))
        declared.setdefault(name, []).extend(Requirement(line) for line in _requires(wheel))
    extras: dict[str, set[str]] = {}
    while True:  # until the extras asked for stop growing (an extra may ask for another)
        needs = [Requirement(r) for r in wanted] + [
            requirement
            for owner, requirements in declared.items()
            for requirement in requirements
            if _applies(requirement, target["markers"], extras.get(owner, ()))
        ]
        asked: dict[str, set[str]] = {}
        for requirement in needs:
            asked.setdefault(canonicalize_name(requirement.name), set()).update(requirement.extras)
        if asked == extras:
            break
        extras = asked
    missing = []
    for requirement in needs:
        have = versions.get(canonicalize_name(requirement.name), [])
        if not any(requirement.specifier.contains(v, prereleases=True) for v in have):
            missing.append(str(requirement).split(";")[0].strip())
    return sorted(set(missing))


def fill_wheelhouse(image: str, wheelhouse: Path) -> int:
    """Put in ``wheelhouse`` every wheel the project image needs; return how many there are."""
    target = target_python(image)
    python = target["markers"]["python_full_version"]
    print(f"  the image's Python: {python} ({target['abi']}, {' '.join(target['libc'])})")
    download = [
        sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
        "--python-version", python, "--implementation", "cp", "--abi", target["abi"],
        *(option for tag in platform_tags(target) for option in ("--platform", tag)),
    ]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="blackdrez-wheels-") as work:
        fresh = Path(work) / "wheelhouse"
        fresh.mkdir()
        wanted = project_requirements(target)
        missing = wanted
        for _ in range(CLOSURE_ROUNDS):
            run([*download, "-d", str(fresh), *missing])
            missing = missing_requirements(fresh, wanted, target)
            if not missing:
                break
        else:
            raise Failed(f"the wheelhouse still misses {', '.join(missing)}")
        wheelhouse.mkdir(parents=True, exist_ok=True)
        for old in wheelhouse.glob("*.whl"):
            old.unlink()
        for wheel in fresh.glob("*.whl"):
            shutil.move(wheel, wheelhouse / wheel.name)
    return len(list(wheelhouse.glob("*.whl")))


# ---------------------------------------------------------------------------- command line
def docker_base(dockerfile: Path) -> str:
    """The image the Dockerfile builds on (its first ``FROM``)."""
    return needed_images([], dockerfile)[0]


def main(argv: list[str] | None = None) -> int:
    """Prepare the images and the wheelhouse; print what was done."""
    parser = argparse.ArgumentParser(prog="deploy/offline.py", description=__doc__.split("\n")[0])
    parser.add_argument(
        "-f", "--file", action="append", type=Path, dest="files",
        help="compose file(s) to read (default: docker-compose.yml)",
    )  # fmt: skip
    parser.add_argument("--no-pull", action="store_true", help="do not try registries first")
    parser.add_argument("--no-wheelhouse", action="store_true", help="images only")
    parser.add_argument("--mirror", default=MIRROR, help=f"Debian mirror (default {MIRROR})")
    parser.add_argument("--security-mirror", default=SECURITY_MIRROR)
    parser.add_argument("--wheelhouse", type=Path, default=WHEELHOUSE)
    parser.add_argument(
        "--allow-missing", action="store_true",
        help="report an image that can be neither pulled nor stood in for, instead of failing "
        "(the services that use it cannot run)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    dockerfile = ROOT / "Dockerfile"
    files = args.files or [ROOT / "docker-compose.yml"]
    try:
        if shutil.which("docker") is None:
            raise Failed("no docker command: apt-get install docker.io")
        if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
            raise Failed("no Docker engine answers: start dockerd (as root) first")
        images = needed_images(files, dockerfile)
        done = prepare_images(
            images, not args.no_pull, args.mirror, args.security_mirror, args.allow_missing
        )
        if not args.no_wheelhouse:
            started = time.monotonic()
            count = fill_wheelhouse(docker_base(dockerfile), args.wheelhouse)
            done[str(args.wheelhouse)] = f"{count} wheels ({time.monotonic() - started:.0f} s)"
    except Failed as error:
        print(f"deploy/offline.py: {error}", file=sys.stderr)
        return 1
    width = max(map(len, done))
    for what, how in done.items():
        print(f"{what:<{width}}  {how}")
    print("now: BLACKDREZ_OFFLINE=1 docker compose up --build  (or docker-compose)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
