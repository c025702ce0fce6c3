"""The browser client's static files: gzip, validators (ETag, Last-Modified, 304), HEAD, the
fingerprinted ``/v/<build>/`` URLs cached as immutable, no escape from the folder, and the page's
<head> (a meta description). Real HTTP requests against a live node."""

from __future__ import annotations

import asyncio
import email.utils
import gzip
import html.parser
import http.client
import os
import re
import shutil
import socket
from pathlib import Path

import pytest

from blackdrez.server.http.routes import GAMES_MODULE
from blackdrez.server.settings import STATIC_DIR

IMMUTABLE = "public, max-age=31536000, immutable"
GZIP = {"Accept-Encoding": "gzip, deflate, br"}
SECURITY = ("content-security-policy", "x-content-type-options", "x-frame-options")


class Answer:
    def __init__(self, response: http.client.HTTPResponse, body: bytes) -> None:
        self.status = response.status
        self.headers = {k.lower(): v for k, v in response.getheaders()}
        self.body = body

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def content(self) -> bytes:
        """The body as the file holds it (gunzipped when it came compressed)."""
        if self.header("Content-Encoding") == "gzip":
            return gzip.decompress(self.body)
        return self.body


def request(port: int, path: str, headers: dict[str, str] | None = None, method: str = "GET"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return Answer(response, response.read())
    finally:
        conn.close()


async def get(server, path: str, headers: dict[str, str] | None = None, method: str = "GET"):
    return await asyncio.to_thread(request, server.port, path, headers, method)


@pytest.fixture
def static(server, tmp_path) -> Path:
    """A copy of the browser client as the node's static folder (others may be editing the real
    one while the tests run: the build must not change under them)."""
    folder = tmp_path / "browser"
    shutil.copytree(STATIC_DIR, folder)
    server.settings.static_dir = folder
    return folder


def build_of(page: bytes) -> str:
    found = re.search(rb'src="/v/([^/"]+)/app\.js"', page)
    assert found is not None, page
    return found.group(1).decode()


def assert_secure(answer: Answer) -> None:
    for name in SECURITY:
        assert answer.header(name), (name, answer.headers)
    assert "script-src 'self'" in answer.header("Content-Security-Policy")


def edit(path: Path, text: str) -> None:
    """Rewrite a file and move its mtime on (a coarse file-system clock would not)."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))


# 1. compression


async def test_text_assets_are_gzipped_when_the_client_accepts_gzip(server, static) -> None:
    for path, name in (("/app.js", "app.js"), ("/style.css", "style.css"), ("/", "index.html")):
        plain = (static / name).read_bytes()
        answer = await get(server, path, GZIP)
        assert answer.status == 200
        assert answer.header("Content-Encoding") == "gzip", path
        assert answer.header("Vary") == "Accept-Encoding"
        assert int(answer.header("Content-Length")) == len(answer.body)
        if name != "index.html":  # (the page is served rewritten: see the fingerprints)
            assert answer.content == plain
        assert len(answer.body) < len(plain) * 0.6, path
        assert_secure(answer)
    answer = await get(server, "/games.js", GZIP)  # the generated module: validated too
    assert answer.status == 200 and answer.content == GAMES_MODULE
    assert answer.header("Vary") == "Accept-Encoding" and answer.header("ETag")
    assert answer.header("Content-Type") == "text/javascript"
    if len(GAMES_MODULE) >= 1024:
        assert answer.header("Content-Encoding") == "gzip"


@pytest.mark.parametrize(
    ("accept", "gzipped"),
    [
        (None, False),
        ("", False),
        ("identity", False),
        ("gzip", True),
        ("GZip", True),
        ("x-gzip", True),
        ("br;q=1.0, gzip;q=0.8, *;q=0.1", True),
        ("gzip;q=0", False),
        ("gzip; q=0.000", False),
        ("gzip;q=0, *", False),  # refused by name: the wildcard does not bring it back
        ("*", True),
        ("*;q=0", False),
        ("deflate, br", False),
        ("gzip;q=2", False),  # not a qvalue: the entry is ignored
        ("gzip;q=0.001", True),
    ],
)
async def test_accept_encoding_is_parsed_with_its_qvalues(server, static, accept, gzipped):
    headers = {"Accept-Encoding": accept} if accept is not None else {}
    if accept is None:
        headers["Accept-Encoding"] = "identity"  # (http.client's own default)
    answer = await get(server, "/app.js", headers)
    assert answer.status == 200
    assert (answer.header("Content-Encoding") == "gzip") is gzipped, accept
    assert answer.header("Vary") == "Accept-Encoding"
    assert answer.content == (static / "app.js").read_bytes()


async def test_a_small_file_stays_plain_and_other_files_are_not_compressed(server, static):
    (static / "tiny.js").write_text("export const tiny = 1;\n")
    (static / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(4000))
    tiny = await get(server, "/tiny.js", GZIP)
    assert tiny.status == 200 and tiny.header("Content-Encoding") is None
    assert tiny.header("Vary") == "Accept-Encoding"  # still chosen by the header
    picture = await get(server, "/logo.png", GZIP)
    assert picture.status == 200 and picture.header("Content-Encoding") is None
    assert picture.header("Vary") is None and picture.header("Content-Type") == "image/png"


async def test_a_file_is_compressed_once_and_an_edited_file_is_served_fresh(
    server, static, monkeypatch
) -> None:
    from blackdrez.server.http import assets

    compressed: list[int] = []
    real = assets.compress

    def counting(data: bytes) -> bytes:
        compressed.append(len(data))
        return real(data)

    monkeypatch.setattr(assets, "compress", counting)
    source = static / "lobby.js"
    for _ in range(5):
        answer = await get(server, "/lobby.js", GZIP)
        assert answer.content == source.read_bytes()
    assert len(compressed) == 1, compressed
    first = answer.header("ETag")
    edit(source, source.read_text() + "\n// edited\n" + "x" * 2000 + "\n")
    answer = await get(server, "/lobby.js", GZIP)
    assert answer.content == source.read_bytes()
    assert answer.header("ETag") != first
    assert len(compressed) == 2


# 2. validators


async def test_strong_etags_per_encoding_and_last_modified(server, static) -> None:
    zipped = await get(server, "/app.js", GZIP)
    plain = await get(server, "/app.js")
    for answer in (zipped, plain):
        assert re.fullmatch(r'"[0-9A-Za-z_-]{16,}"', answer.header("ETag")), answer.header("ETag")
        modified = email.utils.parsedate_to_datetime(answer.header("Last-Modified"))
        assert int(modified.timestamp()) == int((static / "app.js").stat().st_mtime)
        assert answer.header("Cache-Control") == "no-cache"
    assert zipped.header("ETag") != plain.header("ETag")
    assert (await get(server, "/app.js", GZIP)).header("ETag") == zipped.header("ETag")


async def test_if_none_match_answers_304_with_no_body(server, static) -> None:
    first = await get(server, "/app.js", GZIP)
    etag = first.header("ETag")
    for condition in (etag, f'"nope", {etag}', "*", f"W/{etag}", f'W/"x",W/{etag} , "y"'):
        answer = await get(server, "/app.js", {**GZIP, "If-None-Match": condition})
        assert answer.status == 304, condition
        assert answer.body == b""
        assert answer.header("ETag") == etag
        assert answer.header("Cache-Control") == "no-cache"
        assert answer.header("Vary") == "Accept-Encoding"
        assert_secure(answer)
    for condition in ('"nope"', 'W/"nope", "other"', etag[:-2] + '"'):
        answer = await get(server, "/app.js", {**GZIP, "If-None-Match": condition})
        assert answer.status == 200 and answer.content == (static / "app.js").read_bytes()
    # the plain variant's tag does not validate the gzip variant
    plain = await get(server, "/app.js")
    answer = await get(server, "/app.js", {**GZIP, "If-None-Match": plain.header("ETag")})
    assert answer.status == 200 and answer.header("Content-Encoding") == "gzip"


async def test_if_modified_since_only_without_if_none_match(server, static) -> None:
    first = await get(server, "/style.css", GZIP)
    stamp = first.header("Last-Modified")
    answer = await get(server, "/style.css", {**GZIP, "If-Modified-Since": stamp})
    assert answer.status == 304 and answer.body == b""
    assert answer.header("ETag") == first.header("ETag")
    assert_secure(answer)
    earlier = email.utils.formatdate((static / "style.css").stat().st_mtime - 60, usegmt=True)
    answer = await get(server, "/style.css", {**GZIP, "If-Modified-Since": earlier})
    assert answer.status == 200
    answer = await get(server, "/style.css", {**GZIP, "If-Modified-Since": "not a date"})
    assert answer.status == 200
    both = {**GZIP, "If-Modified-Since": stamp, "If-None-Match": '"changed"'}
    assert (await get(server, "/style.css", both)).status == 200  # If-None-Match wins


async def test_head_sends_the_headers_and_no_body(server, static) -> None:
    """websockets parses any method and hands it to ``process_request``: a HEAD reaches the
    static files. The raw socket shows that no body follows the headers."""
    full = await get(server, "/app.js", GZIP)

    def raw_head() -> bytes:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(
                b"HEAD /app.js HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: gzip\r\n\r\n"
            )
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
            return received

    received = await asyncio.to_thread(raw_head)
    head, _, rest = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert rest == b""
    fields = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
    assert fields["Content-Length"] == str(len(full.body))
    assert fields["ETag"] == full.header("ETag")
    assert fields["Content-Encoding"] == "gzip"
    answer = await get(server, "/app.js", GZIP, method="HEAD")  # (http.client reads no body)
    assert answer.status == 200 and answer.header("ETag") == full.header("ETag")
    assert_secure(answer)
    refused = await get(server, "/app.js", method="POST")  # other methods: refused, not served
    assert refused.status == 405 and refused.header("Allow") == "GET, HEAD"


# 3. fingerprints


async def test_the_page_points_at_fingerprinted_assets_cached_as_immutable(server, static):
    page = await get(server, "/", GZIP)
    assert page.header("Cache-Control") == "no-cache"
    assert page.header("Content-Type") == "text/html"
    build = build_of(page.content)
    assert re.fullmatch(r"[0-9a-f]{8,16}", build)
    text = page.content.decode()
    assert f'href="/v/{build}/style.css"' in text
    assert '"/app.js"' not in text and '"/style.css"' not in text
    assert 'href="/"' in text and 'href="#/ratings"' in text  # not files: left alone
    # the modules import each other by relative path: they resolve under the same prefix
    for name in ("app.js", "net.js", "lobby.js", "style.css"):
        answer = await get(server, f"/v/{build}/{name}", GZIP)
        assert answer.status == 200, name
        assert answer.header("Cache-Control") == IMMUTABLE
        assert answer.content == (static / name).read_bytes()
        assert answer.header("ETag") and answer.header("Vary") == "Accept-Encoding"
        assert_secure(answer)
    games = await get(server, f"/v/{build}/games.js", GZIP)
    assert games.status == 200 and games.content == GAMES_MODULE
    assert games.header("Cache-Control") == IMMUTABLE
    admin = await get(server, "/admin.html")  # every page of the folder is rewritten
    assert f'href="/v/{build}/admin.css"' in admin.content.decode()
    # the plain paths still work, revalidated
    plain = await get(server, "/app.js", GZIP)
    assert plain.status == 200 and plain.header("Cache-Control") == "no-cache"
    # an old page asks with an old build: the current file, never cached as immutable
    stale = await get(server, "/v/0123456789ab/app.js", GZIP)
    assert stale.status == 200 and stale.header("Cache-Control") == "no-cache"
    assert stale.content == (static / "app.js").read_bytes()
    # a revalidation under the prefix keeps the prefix's policy
    again = await get(server, f"/v/{build}/app.js", {**GZIP, "If-None-Match": "*"})
    assert again.status == 304 and again.header("Cache-Control") == IMMUTABLE


async def test_a_changed_file_gives_a_new_build(server, static) -> None:
    old = build_of((await get(server, "/")).body)
    assert build_of((await get(server, "/")).body) == old  # computed once, stable
    edit(static / "net.js", (static / "net.js").read_text() + "\n// v2\n")
    page = await get(server, "/")
    new = build_of(page.body)
    assert new != old
    answer = await get(server, f"/v/{old}/net.js")  # the old page's URL: fresh, not immutable
    assert answer.header("Cache-Control") == "no-cache"
    assert answer.content == (static / "net.js").read_bytes()
    answer = await get(server, f"/v/{new}/net.js")
    assert answer.header("Cache-Control") == IMMUTABLE
    assert answer.content == (static / "net.js").read_bytes()


async def test_a_changed_file_is_not_immutable_under_the_build_before(server, static) -> None:
    """Edited with no page load in between: the asset's own request sees the build is stale."""
    old = build_of((await get(server, "/")).body)
    edit(static / "cards.js", (static / "cards.js").read_text() + "\n// v2\n")
    answer = await get(server, f"/v/{old}/cards.js")
    assert answer.content == (static / "cards.js").read_bytes()
    assert answer.header("Cache-Control") == "no-cache"


async def test_no_escape_from_the_folder_with_or_without_the_prefix(server, static) -> None:
    build = build_of((await get(server, "/")).body)
    assert (await get(server, f"/v/{build}/app.js")).status == 200
    (static.parent / "secret.txt").write_text("secret")
    (static / "link.txt").symlink_to(static.parent / "secret.txt")
    for path in (
        f"/v/{build}/../../etc/passwd",
        f"/v/{build}/../secret.txt",
        f"/v/{build}/../../pyproject.toml",
        f"/v/{build}//etc/passwd",
        f"/v/{build}/%2e%2e/secret.txt",
        f"/v/{build}/..%2fsecret.txt",
        f"/v/{build}/link.txt",
        f"/v/{build}/",
        f"/v/{build}",
        "/v/../secret.txt",
        "/v//app.js",
        "/../secret.txt",
        "/..%2fsecret.txt",
        "/..%2f..%2fetc%2fpasswd",
        "/%2e%2e/secret.txt",
        "/link.txt",
        "//etc/passwd",
        "/nope.js",
    ):
        answer = await get(server, path, GZIP)
        assert answer.status == 404, path
        assert b"secret" not in answer.content and b"root:" not in answer.content
        assert_secure(answer)


# 4. the page's <head>


class Head(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs) -> None:
        if tag == "head":
            self.inside = True
        elif self.inside:
            self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag) -> None:
        if tag == "head":
            self.inside = False


async def test_the_page_has_a_meta_description_and_no_inline_or_foreign_resource(server):
    page = await get(server, "/")
    head = Head()
    head.feed(page.content.decode())
    metas = {attrs.get("name"): attrs.get("content") for tag, attrs in head.tags if tag == "meta"}
    description = metas.get("description") or ""
    assert 50 <= len(description) <= 160, description
    for words in ("BlackDrez", "2 to 8 players", "solitaire", "browser", "sign-up"):
        assert words.lower() in description.lower(), words
    assert re.fullmatch(r"#[0-9a-fA-F]{6}", metas.get("theme-color") or "")
    assert metas.get("viewport") and any(tag == "title" for tag, _ in head.tags)
    for tag, attrs in head.tags:
        assert tag not in ("script", "style"), "no inline script or style: the CSP forbids them"
        for name in ("href", "src"):
            url = attrs.get(name)
            if url:
                assert url.startswith(("/", "data:")) and not url.startswith("//"), url
