"""The operator's HTTP API: the admin view's calls, and draining a node for an upgrade.

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

The admin view (``/admin.html`` in the browser client; any node answers for all of them):

=========================================  ==================================================
``GET /admin/tables``                      every live table of every node: its info (game,
                                           seats, status...) and ``host_node``
``GET /admin/table?id=T&limit=30``         one table and its last log entries (the commands
                                           that made it, with their event numbers)
``POST /admin/close?table=T&reason=...``   close the table (logged as a ``stop`` command)
``POST /admin/remove?table=T&player=P``    take the player's seat away (as if they left)
``GET /admin/nodes``                       live nodes and their load: tables hosted, people
                                           seated; connections for the node answering
``GET /admin/reports?limit=50``            the chat lines players reported, newest first:
                                           the line, who wrote and who reported it, why, and
                                           the lines before it (kept 30 days)
=========================================  ==================================================

Closing and removing are run by the table's host like any command (forwarded over the bus when
the table lives elsewhere), so they are logged and survive a failover. A ``stop`` forwarded to a
node older than this module cannot be decoded there: during a rolling upgrade, close a table
once its host runs the new version.
"""

from __future__ import annotations

import http
import json
import os
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.settings import Settings
from blackdrez.server.stores import Stores, StoreUnavailable
from blackdrez.server.table.chat import ChatReport
from blackdrez.server.table.commands import Answer, Stop, decode_entry

PREFIX = "/admin/"
OPERATOR = "operator"
"""The name an operator's commands are logged with."""


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
    if not given:
        return json_response(http.HTTPStatus.UNAUTHORIZED, {"error": "admin token required"})
    if len(given) != 1 or not secrets.compare_digest(given[0].encode(), expected):
        return json_response(http.HTTPStatus.UNAUTHORIZED, {"error": "wrong admin token"})
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
    except ValueError:  # (JSON's errors are ValueErrors)
        raise DrainError(f"{url} answered, but not as a BlackDrez game port does") from None
    except OSError as error:
        raise DrainError(f"cannot reach {url}: {_unreachable(error)}") from None
    if status == http.HTTPStatus.NOT_FOUND:
        raise DrainError(f"{url} has no admin API: start the node with --admin-token")
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


def _unreachable(error: OSError) -> str:
    """Why a node could not be reached, in words (``urllib`` wraps the system's error)."""
    reason = getattr(error, "reason", error)
    if isinstance(reason, TimeoutError):
        return "no answer in time"
    if isinstance(reason, OSError) and reason.errno:
        return f"{os.strerror(reason.errno).lower()} (is the node running?)"
    return str(reason)


class OperatedNode(Protocol):
    """What the admin calls need of the node they operate: its load, and its router."""

    @property
    def rooms(self) -> Mapping[str, object]:
        """The tables this node hosts."""

    @property
    def clients(self) -> Mapping[str, object]:
        """The players connected to this node."""

    async def route(
        self, player: str, name: str, table: str, message: Any, *, bot: bool = False
    ) -> Answer:
        """Run a table request wherever the table lives."""


class AdminApi:
    """The ``/admin/`` calls of one server node (see the module docstring): its ``settings``
    (the admin token, read at each call, and the node's id), its ``store`` (the tables of every
    node), its ``node`` and how to ``drain`` it."""

    def __init__(
        self,
        settings: Settings,
        store: Stores,
        node: OperatedNode,
        drain: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.store = store
        self.node = node
        self.drain = drain
        self.routes: dict[str, Route] = {
            "drain": Route("POST", self._drain),
            "tables": Route("GET", self._tables),
            "table": Route("GET", self._table),
            "close": Route("POST", self._close),
            "remove": Route("POST", self._remove),
            "nodes": Route("GET", self._nodes),
            "reports": Route("GET", self._reports),
        }

    async def handle(self, request: Request) -> Response:
        """Answer one ``/admin/...`` request."""
        refused = authorized(request, self.settings.admin_token)
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
        try:
            return await route.handler(rest, params)
        except KeyError as missing:
            return json_response(http.HTTPStatus.BAD_REQUEST, {"error": f"give {missing}"})
        except ValueError as error:
            return json_response(http.HTTPStatus.BAD_REQUEST, {"error": str(error)})
        except StoreUnavailable:
            return json_response(
                http.HTTPStatus.SERVICE_UNAVAILABLE, {"error": "the store cannot be reached"}
            )

    async def _drain(self, rest: str, params: dict[str, str]) -> Response:
        tables = len(self.node.rooms)
        self.drain()
        return json_response(
            http.HTTPStatus.ACCEPTED,
            {"node": self.settings.node_id, "status": "draining", "tables": tables},
        )

    async def _live_tables(self) -> list[dict[str, Any]]:
        found = []
        for _, node, record in await self.store.lobby.all():
            info = msgspec.msgpack.decode(record, type=v1.TableInfo)
            found.append({**msgspec.to_builtins(info), "host_node": node})
        return [t for t in found if t["status"] != "closed"]

    async def _tables(self, rest: str, params: dict[str, str]) -> Response:
        return json_response(http.HTTPStatus.OK, {"tables": await self._live_tables()})

    async def _table(self, rest: str, params: dict[str, str]) -> Response:
        table = params["id"]
        limit = max(1, min(int(params.get("limit", "30")), 500))
        store = self.store
        hosted = await store.lobby.get(table)
        logged, entries = await store.logs.read_last(table, limit)
        if hosted is None or not logged:
            return json_response(http.HTTPStatus.NOT_FOUND, {"error": f"no live table {table!r}"})
        info = msgspec.msgpack.decode(hosted[1], type=v1.TableInfo)
        recent = []
        for data in entries:
            entry = decode_entry(data)
            recent.append(
                {
                    "seq": entry.seq,
                    "at": entry.now,
                    "player": entry.player,
                    "name": entry.name,
                    "command": msgspec.to_builtins(entry.command),
                }
            )
        body = {
            "table": {**msgspec.to_builtins(info), "host_node": hosted[0]},
            "log_entries": logged,
            "recent": recent,
        }
        return json_response(http.HTTPStatus.OK, body)

    async def _command(self, table: str, player: str, message: Any) -> Response:
        answer = await self.node.route(player, OPERATOR, table, message)
        errors = [r for r in answer.replies if isinstance(r, v1.Error)]
        if errors:
            statuses: dict[str, http.HTTPStatus] = {
                ErrorCode.NOT_FOUND: http.HTTPStatus.NOT_FOUND,
                ErrorCode.MOVING: http.HTTPStatus.CONFLICT,
                ErrorCode.UNAVAILABLE: http.HTTPStatus.SERVICE_UNAVAILABLE,
            }
            status = statuses.get(errors[0].code, http.HTTPStatus.BAD_REQUEST)
            return json_response(status, {"error": errors[0].message, "code": errors[0].code})
        return json_response(http.HTTPStatus.OK, {"ok": True, "table": table})

    async def _close(self, rest: str, params: dict[str, str]) -> Response:
        reason = params.get("reason") or "closed by an operator"
        return await self._command(params["table"], "", Stop(reason=reason[:200]))

    async def _remove(self, rest: str, params: dict[str, str]) -> Response:
        table = params["table"]
        return await self._command(table, params["player"], v1.LeaveTable(table=table))

    async def _reports(self, rest: str, params: dict[str, str]) -> Response:
        limit = max(1, min(int(params.get("limit", "50")), 500))
        reports = [
            msgspec.to_builtins(msgspec.msgpack.decode(data, type=ChatReport))
            for data in await self.store.reports.recent(limit)
        ]
        return json_response(http.HTTPStatus.OK, {"reports": reports})

    async def _nodes(self, rest: str, params: dict[str, str]) -> Response:
        live = await self.store.presence.live_nodes()
        nodes: dict[str, dict[str, Any]] = {
            node: {"id": node, "live": True, "tables": 0, "players": 0} for node in sorted(live)
        }
        for table in await self._live_tables():
            node = nodes.setdefault(
                table["host_node"],
                {"id": table["host_node"], "live": False, "tables": 0, "players": 0},
            )
            node["tables"] += 1
            node["players"] += sum(1 for seat in table["seats"] if seat and not seat["bot"])
        node_id = self.settings.node_id
        me = nodes.setdefault(node_id, {"id": node_id, "live": True, "tables": 0, "players": 0})
        me["connections"] = len(self.node.clients)
        me["answering"] = True
        return json_response(http.HTTPStatus.OK, {"nodes": list(nodes.values())})
