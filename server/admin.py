"""The operator's HTTP API: drain a node for an upgrade (and the admin view's calls).

Theory of operation
-------------------
Every path under ``/admin/`` is answered here, on the game port, and only when the node was given
an admin token (``--admin-token`` or ``BLACKDREZ_ADMIN_TOKEN``): without one they do not exist
(404). A call must carry ``Authorization: Bearer <token>`` (compared in constant time), else 401.
A browser on another site cannot send that header without a CORS preflight, which is never
granted, so the token also keeps other pages from driving these calls.

``POST /admin/drain`` answers 202 at once and starts the node's graceful stop: it takes no new
table from then on, tells its clients to reconnect (``shutdown``, then close 1001: they come back
on another node), hands every table it hosts over to the other nodes (they adopt it from its log
at once) and the process exits. :func:`drain` is the client side (``blackdrez drain``): it asks,
then waits until the node stops answering ``/healthz`` as ``stopping``.
"""

from __future__ import annotations

import http
import json
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

if TYPE_CHECKING:
    from server.app import GameServer

PREFIX = "/admin/"


def json_response(status: http.HTTPStatus, value: Any) -> Response:
    """A JSON response (never cached)."""
    body = msgspec.json.encode(value)
    headers = Headers(
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
        ]
    )
    return Response(status.value, status.phrase, headers, body)


def authorized(request: Request, token: str | None) -> Response | None:
    """``None`` when ``request`` carries the admin token, else the response refusing it."""
    if not token:
        return json_response(http.HTTPStatus.NOT_FOUND, {"error": "not found"})
    given = request.headers.get_all("Authorization")
    expected = f"Bearer {token}".encode()
    if len(given) != 1 or not secrets.compare_digest(given[0].encode(), expected):
        return json_response(http.HTTPStatus.UNAUTHORIZED, {"error": "admin token required"})
    return None


@dataclass
class Route:
    """One admin call: its method, and the handler given the path's remainder and query."""

    method: str
    handler: Callable[[str, dict[str, str]], Awaitable[Response]]


class DrainError(Exception):
    """The node refused the drain or could not be reached; the message says why."""


def _call(url: str, token: str, method: str, path: str, timeout: float) -> tuple[int, Any]:
    request = urllib.request.Request(
        url.rstrip("/") + path, method=method, headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def drain(url: str, token: str, timeout: float = 60.0, say: Callable[[str], None] = print) -> float:
    """Drain the node at ``url`` (``http://host:port``) and wait until it is gone (it stops
    answering, or a new process answers ``ok``); return the seconds it took.

    Raises :class:`DrainError` if the node refuses, cannot be reached, or is still stopping
    after ``timeout`` seconds.
    """
    started = time.monotonic()
    try:
        status, body = _call(url, token, "POST", "/admin/drain", 10.0)
    except (OSError, ValueError) as error:
        raise DrainError(f"cannot reach {url}: {error}") from None
    if status != http.HTTPStatus.ACCEPTED:
        raise DrainError(f"{url} refused the drain ({status}): {body}")
    say(f"node {body['node']} draining: {body['tables']} table(s) to hand over")
    while time.monotonic() - started < timeout:
        time.sleep(0.2)
        try:
            _, health = _call(url, token, "GET", "/healthz", 2.0)
        except (OSError, ValueError):
            break  # it no longer answers: it exited
        if health.get("status") != "stopping":
            break  # a new process already serves (a supervisor restarted it)
    else:
        raise DrainError(f"{url} was still stopping after {timeout:.0f} s")
    took = time.monotonic() - started
    say(f"node {body['node']} drained and exited in {took:.1f} s")
    return took


class AdminApi:
    """The ``/admin/`` calls of one server node (see the module docstring)."""

    def __init__(self, server: GameServer) -> None:
        self.server = server
        self.routes: dict[str, Route] = {
            "drain": Route("POST", self._drain),
        }

    async def handle(self, request: Request) -> Response:
        """Answer one ``/admin/...`` request."""
        refused = authorized(request, self.server.settings.admin_token)
        if refused is not None:
            return refused
        path, _, query = request.path.partition("?")
        name, _, rest = path[len(PREFIX) :].partition("/")
        route = self.routes.get(name)
        if route is None:
            return json_response(http.HTTPStatus.NOT_FOUND, {"error": f"no admin call {name!r}"})
        if request.method != route.method:
            return json_response(
                http.HTTPStatus.METHOD_NOT_ALLOWED, {"error": f"{name} takes {route.method}"}
            )
        params = dict(urllib.parse.parse_qsl(query))
        return await route.handler(rest, params)

    async def _drain(self, rest: str, params: dict[str, str]) -> Response:
        server = self.server
        tables = len(server.node.rooms)
        server.drain()
        return json_response(
            http.HTTPStatus.ACCEPTED,
            {"node": server.settings.node_id, "status": "draining", "tables": tables},
        )
