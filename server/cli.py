"""The ``blackdrez`` command: serve, simulate, verify."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``blackdrez`` console script."""
    parser = argparse.ArgumentParser(prog="blackdrez", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="run the game server")
    args = parser.parse_args(argv)
    if args.command == "serve":
        print("blackdrez serve: the server is not written yet", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
