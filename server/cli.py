"""The ``blackdrez`` command: serve, simulate, verify."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys


def _serve(args: argparse.Namespace) -> int:
    from server.app import Settings, run

    settings = Settings(
        host=args.host,
        port=args.port,
        redis_url=args.redis_url or None,
        max_frame_bytes=args.max_frame_bytes,
        messages_per_second=args.rate,
        burst=args.burst,
        allowed_origins=args.allowed_origin or None,
        compression=args.compression,
    )
    if args.node_id:
        settings.node_id = args.node_id
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        import uvloop
    except ImportError:
        asyncio.run(run(settings))
    else:
        uvloop.run(run(settings))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``blackdrez`` console script."""
    parser = argparse.ArgumentParser(prog="blackdrez", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run a game server node")
    serve.add_argument("--host", default=os.environ.get("BLACKDREZ_HOST", "127.0.0.1"))
    serve.add_argument("--port", type=int, default=int(os.environ.get("BLACKDREZ_PORT", "8765")))
    serve.add_argument(
        "--redis-url",
        default=os.environ.get("BLACKDREZ_REDIS_URL"),
        help="share the lobby through Redis (default: in memory; env BLACKDREZ_REDIS_URL)",
    )
    serve.add_argument("--node-id", default=os.environ.get("BLACKDREZ_NODE_ID"))
    serve.add_argument("--max-frame-bytes", type=int, default=16 * 1024)
    serve.add_argument("--rate", type=float, default=30.0, help="messages per second per client")
    serve.add_argument("--burst", type=int, default=60)
    serve.add_argument(
        "--allowed-origin", action="append", help="accept browsers only from this Origin"
    )
    serve.add_argument(
        "--compression", action="store_true", help="enable permessage-deflate (off by default)"
    )
    serve.set_defaults(run=_serve)

    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
