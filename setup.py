"""The packages of the wheel: the repository's top-level folders installed under ``blackdrez``.

The checkout keeps ``server/``, ``protocol/``, ``games/``, ``clients/`` and ``tools/`` at the top
(they read like the architecture); installed, they are ``blackdrez.server``, ``blackdrez.protocol``
and so on, so a wheel claims no generic top-level name (a bot author's own ``protocol.py`` cannot
shadow ours). ``blackdrez`` itself is a namespace package: the client's own wheel
(``clients/python/``) installs ``blackdrez.protocol``, ``blackdrez.games`` and
``blackdrez.clients`` into the same namespace. Everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup

FOLDERS = ("server", "protocol", "games", "clients", "tools")
DATA = ["*.json", "*.html", "*.js", "*.css", "*.svg", "*.md.in", "*.pxd"]

packages = [f"blackdrez.{name}" for name in find_packages(include=[f"{f}*" for f in FOLDERS])]
setup(
    packages=packages,
    package_dir={f"blackdrez.{folder}": folder for folder in FOLDERS},
    package_data={package: DATA for package in packages}
    | {"blackdrez.clients": ["browser/*", "js/index.js", "js/*.d.ts", "js/package.json"]},
)
