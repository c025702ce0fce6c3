"""The HTTP responses of a node's port: plain bodies, 429s, and the security headers of all.

Theory of operation
-------------------
``websockets`` answers a plain HTTP request with the :class:`~websockets.http11.Response` its
``process_request`` returns; :func:`response` makes one (never cached), :func:`too_many` a 429
with ``Retry-After``. Every response, the WebSocket handshake's included, then goes through
:func:`add_security_headers` (``process_response``): a Content-Security-Policy allowing only this
origin's scripts, styles and WebSocket, no framing, ``nosniff`` and no referrer.
"""

from __future__ import annotations

import http
import math
import re
from typing import Literal

import msgspec
from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

HealthStatus = Literal["starting", "ok", "stopping", "store_unreachable"]
"""What ``/healthz`` says (``blackdrez.server.http.routes`` says when each holds)."""


class Health(msgspec.Struct, kw_only=True):
    """``/healthz``'s body (200 when ``status`` is ``ok``, else 503)."""

    status: HealthStatus
    node: str
    """The node's id."""
    store: Literal["up", "down"]
    connections: int
    tables: int
    """Tables hosted here."""


_SAFE_HOST = re.compile(r"[A-Za-z0-9.\-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")


def response(status: http.HTTPStatus, body: bytes, content_type: str) -> Response:
    """A response of ``body``, never cached."""
    headers = Headers(
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-cache"),
        ]
    )
    return Response(status.value, status.phrase, headers, body)


def too_many(body: bytes, content_type: str, wait: float) -> Response:
    """A 429 whose ``Retry-After`` is ``wait`` seconds in whole seconds (rounded up: a client
    that waits that long is not refused again)."""
    refused = response(http.HTTPStatus.TOO_MANY_REQUESTS, body, content_type)
    refused.headers["Retry-After"] = str(max(1, math.ceil(wait)))
    return refused


def secure_headers(host: str | None) -> list[tuple[str, str]]:
    """The security headers of every response. The browser client is plain ES modules and one
    stylesheet from this origin (no inline script or style, CSSOM only), images inline as
    ``data:`` (the icon), and one WebSocket back to the page's own host: ``'self'`` covers
    ``ws:``/``wss:`` in CSP 3, the explicit ``ws://host`` and ``wss://host`` older browsers.
    A ``Host`` that is not a plain host name and port is left out rather than echoed."""
    sockets = ""
    if host and _SAFE_HOST.fullmatch(host):
        sockets = f" ws://{host} wss://{host}"
    policy = (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src 'self'{sockets}; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    )
    return [
        ("Content-Security-Policy", policy),
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "no-referrer"),
        ("Cross-Origin-Opener-Policy", "same-origin"),
    ]


def add_security_headers(connection: ServerConnection, request: Request, answer: Response) -> None:
    """``process_response``: add the security headers to whatever is answered."""
    hosts = request.headers.get_all("Host")
    for name, value in secure_headers(hosts[0] if len(hosts) == 1 else None):
        answer.headers[name] = value
