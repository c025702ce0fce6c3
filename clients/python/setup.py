"""The client's own wheel: ``blackdrez.protocol``, ``blackdrez.games`` and ``blackdrez.clients``.

``src/blackdrez/`` holds three links to the checkout's own folders (two levels up), so the wheel
is built from the same files as the server's: ``pip install ./clients/python`` gives a bot author
the client, the bots and the engines they think with, over websockets and msgspec only, in the
``blackdrez`` namespace beside nothing else. The server's wheel (the repository's top level)
carries the same three packages: install one or the other, not both.
"""

from setuptools import find_packages, setup

FOLDERS = ("protocol", "games", "clients")

packages = [
    f"blackdrez.{name}"
    for name in find_packages("src/blackdrez", include=[f"{folder}*" for folder in FOLDERS])
]
setup(
    packages=packages,
    package_dir={"": "src"},
    package_data={package: ["*.json"] for package in packages},
)
