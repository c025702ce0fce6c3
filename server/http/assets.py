"""The browser client's static files as a node serves them: compressed once, validated, and
cacheable for a year under a fingerprinted prefix.

Theory of operation
-------------------
:class:`StaticAssets` answers a GET or HEAD for a file of one folder (``Settings.static_dir``,
``clients/browser/``) and for the modules the server generates (``/games.js``). Each file is read
once and kept in memory with its gzip variant (text files of :data:`MIN_COMPRESSED` bytes or more;
:func:`compress`, deterministic), keyed by its path and checked against the file's mtime and size
on every request: an edited file is read and compressed again, an unchanged one never. Each
variant carries a strong ``ETag`` (a hash of the bytes sent) and every file a ``Last-Modified``;
``If-None-Match`` (a list, ``*``, weak comparison as RFC 9110 asks) and, only without it,
``If-Modified-Since`` answer 304 with no body. A text file's answer says
``Vary: Accept-Encoding`` whichever variant it sends; gzip is sent when the request's
``Accept-Encoding`` accepts it (``q=0`` refuses, ``*`` stands for what is not named).

**Fingerprints.** Every file is also served under ``/v/<build>/<path>``, where the build is a short
hash of all the folder's files and the generated modules (:meth:`StaticAssets.build`). An HTML page
is served rewritten: its ``src`` and ``href`` naming a file of the folder (``/style.css``,
``/app.js``) point at ``/v/<build>/...``, so that the modules' relative imports resolve under the
same prefix by themselves. The page is revalidated on every load (``no-cache``); a file under the
current build is cached for a year as ``immutable``, since another content gets another build. A
request under another build (an old page after an upgrade, or a file edited since) gets the current
file with ``no-cache``: a file is ``immutable`` under a build only if its content is the one that
build hashed, so no stale mix can be cached. The plain paths (``/app.js``) keep working,
revalidated. The build is computed on the first request that needs it, and again when a page is
served (a ``stat`` of each file) or a file's content no longer matches it.

No path leaves the folder: a path is taken as it comes (no percent-decoding), resolved (symbolic
links followed) and answered only if it is a regular file inside the folder.
"""

from __future__ import annotations

import base64
import email.utils
import gzip
import hashlib
import http
import mimetypes
import os
import re
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from websockets.datastructures import Headers
from websockets.http11 import Response

from blackdrez.server.http.responses import response

VERSIONED = "/v/"
"""The prefix of the fingerprinted URLs: ``/v/<build>/<path>``."""
IMMUTABLE = "public, max-age=31536000, immutable"
"""``Cache-Control`` of a file under the current build: its URL names its content."""
REVALIDATE = "no-cache"
"""``Cache-Control`` of a page and of a file under a plain path or another build."""
COMPRESSIBLE = frozenset(
    {".html", ".htm", ".js", ".mjs", ".css", ".svg", ".json", ".map", ".txt", ".xml", ".md"}
)
"""The suffixes of text files: answered gzip-compressed when the client accepts it."""
MIN_COMPRESSED = 1024
"""Smaller files are sent as they are: gzip would save next to nothing."""
BUILD_LENGTH = 12
"""Hex digits of the build in the fingerprinted URLs."""

_QVALUE = re.compile(r"0(\.[0-9]{0,3})?|1(\.0{0,3})?")
_ENTITY_TAG = re.compile(r'[\s,]*(?:W/)?("[^"]*")\s*(?:,|$)')
_ASSET_URL = re.compile(
    r"""(\s(?:src|href)\s*=\s*)(["'])(/(?!/)[^"'?#\s]*)([^"'\s]*)\2""", re.IGNORECASE
)


def compress(data: bytes) -> bytes:
    """The gzip variant of ``data``: the same bytes for the same data (no timestamp), so its
    ``ETag`` is the same on every node."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def accepts_gzip(values: list[str]) -> bool:
    """Whether ``Accept-Encoding`` (its values, from every such header) accepts gzip: named
    (``gzip``, else its alias ``x-gzip``) with a q-value above 0, or not named and ``*`` above 0.
    An entry whose q-value is not one is ignored. No header, or an empty one: no."""
    weights: dict[str, float] = {}
    for value in values:
        for entry in value.split(","):
            coding, *parameters = entry.split(";")
            coding = coding.strip().lower()
            weight = 1.0
            for parameter in parameters:
                name, _, text = parameter.partition("=")
                if name.strip().lower() == "q":
                    text = text.strip()
                    weight = float(text) if _QVALUE.fullmatch(text) else -1.0
            if coding and weight >= 0:
                weights[coding] = weight
    for coding in ("gzip", "x-gzip", "*"):
        if coding in weights:
            return weights[coding] > 0
    return False


def none_match(values: list[str], etag: str) -> bool:
    """Whether ``If-None-Match`` (its values) names ``etag``, or is ``*``: the weak comparison of
    RFC 9110 (``W/"x"`` matches ``"x"``). A malformed list names nothing after its fault."""
    for value in values:
        if value.strip() == "*":
            return True
        position = 0
        while position < len(value):
            found = _ENTITY_TAG.match(value, position)
            if found is None or found.end() == position:
                break
            if found.group(1) == etag:
                return True
            position = found.end()
    return False


def modified_since(values: list[str], modified: int) -> bool:
    """Whether the file changed after ``If-Modified-Since`` (one valid HTTP date; else yes)."""
    if len(values) != 1:
        return True
    try:
        since = email.utils.parsedate_to_datetime(values[0])
    except (TypeError, ValueError, IndexError):
        return True
    if since.tzinfo is None:
        return True  # (not an HTTP date: those are GMT)
    return modified > since.timestamp()


def _etag(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()[:18]
    return '"' + base64.urlsafe_b64encode(digest).decode() + '"'


@dataclass(frozen=True)
class Variant:
    """One encoding of a file as sent."""

    body: bytes
    etag: str


@dataclass(frozen=True)
class Asset:
    """A file in memory: its variants, checked against ``stamp`` on every request."""

    stamp: tuple[object, ...]
    """What the file was read at: its mtime and size (and, for a page, the build)."""
    digest: str
    """The hash of the file's content (before any rewriting), as the build hashed it."""
    content_type: str
    modified: int
    """The file's mtime in whole seconds (``If-Modified-Since``)."""
    last_modified: str
    """``modified`` as an HTTP date (``Last-Modified``)."""
    plain: Variant
    gzipped: Variant | None
    compressible: bool


def _files(folder: str, prefix: str) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Every file below ``folder`` (not in a hidden folder, not hidden), as its path from the
    top (``prefix``, ``/``-separated) and its entry. Links to folders are not followed."""
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False):
            yield from _files(entry.path, f"{prefix}{entry.name}/")
        else:
            yield f"{prefix}{entry.name}", entry


def _content_type(name: str) -> str:
    if name.endswith((".js", ".mjs")):
        return "text/javascript"
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


class StaticAssets:
    """The static files of the folder ``root`` and the ``generated`` modules (a name, such as
    ``games.js``, and its bytes), answered as the module docstring says."""

    def __init__(self, root: Path, generated: Mapping[str, bytes] | None = None) -> None:
        self.root = root.resolve()
        self.generated = dict(generated or {})
        self._born = int(time.time())
        self._assets: dict[str, Asset] = {}
        self._digests: dict[str, tuple[tuple[int, int], str]] = {}
        """Each file's hash as the last build saw it, with its mtime and size then."""
        self._build: str | None = None
        self._built: dict[str, str] = {}
        """The hash of each file the current build covers."""

    # the build

    def build(self, rescan: bool = False) -> str:
        """The build: a short hash of every file of the folder and the generated modules. Kept
        once computed; ``rescan`` looks at the files again (one ``stat`` each, a read for a file
        whose mtime or size changed) and changes it if they did."""
        if self._build is not None and not rescan:
            return self._build
        digests: dict[str, tuple[tuple[int, int], str]] = {}
        for relative, entry in _files(str(self.root), ""):
            if entry.is_symlink() and self.locate(relative) is None:
                continue  # a link out of the folder: never served, not read
            try:
                status = entry.stat()
                if not stat.S_ISREG(status.st_mode):
                    continue
                stamp = (status.st_mtime_ns, status.st_size)
                known = self._digests.get(relative)
                if known is not None and known[0] == stamp:
                    digests[relative] = known
                else:
                    with open(entry.path, "rb") as file:
                        digests[relative] = (stamp, hashlib.sha256(file.read()).hexdigest())
            except OSError:  # gone meanwhile
                continue
        built = {relative: digest for relative, (_, digest) in digests.items()}
        for name, body in self.generated.items():
            built[name] = hashlib.sha256(body).hexdigest()
        whole = hashlib.sha256()
        for relative in sorted(built):
            whole.update(f"{relative}\0{built[relative]}\n".encode())
        self._digests, self._built = digests, built
        self._build = whole.hexdigest()[:BUILD_LENGTH]
        return self._build

    def _immutable(self, build: str, relative: str, digest: str) -> bool:
        """Whether ``relative`` with content ``digest`` is what ``build`` (from a URL) names, the
        build being the current one: the build is looked at again if the file changed since."""
        if self.build() != build:
            return False
        if self._built.get(relative) != digest:
            self.build(rescan=True)  # the file changed since: so did the build
        return self._build == build and self._built.get(relative) == digest

    # the files

    def locate(self, relative: str) -> Path | None:
        """The regular file ``relative`` names inside the folder, or ``None``."""
        if not relative or relative.startswith(("/", "\\")) or "\0" in relative:
            return None
        try:
            target = (self.root / relative).resolve()
        except (OSError, RuntimeError, ValueError):  # a loop of links, a name too long
            return None
        if self.root not in target.parents or not target.is_file():
            return None
        return target

    def _asset(self, relative: str) -> tuple[str, Asset] | None:
        """The file ``relative`` names (or the generated module), read again if it changed, with
        its path in the folder as kept (``a/../app.js`` is ``app.js``: one copy of each file)."""
        if relative in self.generated:
            cached = self._assets.get(relative)
            if cached is None:
                body = self.generated[relative]
                cached = self._keep(relative, ("generated",), body, body, self._born)
            return relative, cached
        target = self.locate(relative)
        if target is None:
            return None
        relative = target.relative_to(self.root).as_posix()
        try:
            status = target.stat()
        except OSError:
            return None
        stamp: tuple[object, ...] = (status.st_mtime_ns, status.st_size)
        modified = int(status.st_mtime)
        page = target.suffix in (".html", ".htm")
        build = ""
        if page:  # the page names the build: a new build is a new page, modified when it was
            build = self.build(rescan=True)
            stamp = (*stamp, build)
            newest = max((stamp_[0] for stamp_, _ in self._digests.values()), default=0)
            modified = max(modified, newest // 1_000_000_000, self._born)
        cached = self._assets.get(relative)
        if cached is not None and cached.stamp == stamp:
            return relative, cached
        try:
            content = target.read_bytes()
        except OSError:
            return None
        body = self._rewrite(content, build) if page else content
        return relative, self._keep(relative, stamp, content, body, modified)

    def _keep(
        self, relative: str, stamp: tuple[object, ...], content: bytes, body: bytes, modified: int
    ) -> Asset:
        """Make the file's variants (the one compression) and keep them."""
        compressible = Path(relative).suffix.lower() in COMPRESSIBLE
        gzipped = None
        if compressible and len(body) >= MIN_COMPRESSED:
            packed = compress(body)
            if len(packed) < len(body):
                gzipped = Variant(packed, _etag(packed))
        asset = Asset(
            stamp=stamp,
            digest=hashlib.sha256(content).hexdigest(),
            content_type=_content_type(relative),
            modified=modified,
            last_modified=email.utils.formatdate(modified, usegmt=True),
            plain=Variant(body, _etag(body)),
            gzipped=gzipped,
            compressible=compressible,
        )
        self._assets[relative] = asset
        return asset

    def _rewrite(self, page: bytes, build: str) -> bytes:
        """The page with each ``src``/``href`` naming a file of the folder (or a generated
        module) under ``/v/<build>/``. The page is UTF-8, as the client's pages declare."""

        def versioned(found: re.Match[str]) -> str:
            attribute, quote, path, rest = found.groups()
            relative = path[1:]
            if relative not in self.generated and self.locate(relative) is None:
                return found.group(0)  # not a file: a link such as "/"
            return f"{attribute}{quote}{VERSIONED}{build}{path}{rest}{quote}"

        text = page.decode("utf-8", errors="surrogateescape")
        return _ASSET_URL.sub(versioned, text).encode("utf-8", errors="surrogateescape")

    # the answer

    def answer(self, path: str, method: str, headers: Headers) -> Response:
        """The answer to a GET or HEAD of ``path`` (its query removed)."""
        build = None
        if path.startswith(VERSIONED):
            build, slash, relative = path[len(VERSIONED) :].partition("/")
            if not build or not slash:
                return _not_found(method)
        else:
            relative = "index.html" if path in ("/", "") else path.lstrip("/")
        found = self._asset(relative)
        if found is None:
            return _not_found(method)
        relative, asset = found
        policy = REVALIDATE
        page = asset.content_type == "text/html"
        if build is not None and not page and self._immutable(build, relative, asset.digest):
            policy = IMMUTABLE
        variant = asset.plain
        if asset.gzipped is not None and accepts_gzip(headers.get_all("Accept-Encoding")):
            variant = asset.gzipped
        fields = [("Cache-Control", policy), ("ETag", variant.etag)]
        if asset.compressible:
            fields.append(("Vary", "Accept-Encoding"))
        fields.append(("Date", email.utils.formatdate(usegmt=True)))
        conditions = headers.get_all("If-None-Match")
        if conditions:
            fresh = none_match(conditions, variant.etag)
        else:
            fresh = not modified_since(headers.get_all("If-Modified-Since"), asset.modified)
        if fresh:
            status = http.HTTPStatus.NOT_MODIFIED
            return Response(status.value, status.phrase, Headers(fields), b"")
        fields += [
            ("Content-Type", asset.content_type),
            ("Content-Length", str(len(variant.body))),
            ("Last-Modified", asset.last_modified),
        ]
        if variant is asset.gzipped:
            fields.append(("Content-Encoding", "gzip"))
        body = b"" if method == "HEAD" else variant.body
        return Response(http.HTTPStatus.OK.value, http.HTTPStatus.OK.phrase, Headers(fields), body)


def _not_found(method: str) -> Response:
    refused = response(http.HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
    if method == "HEAD":
        refused.body = b""
    return refused
