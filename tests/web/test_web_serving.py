"""How the built app is served: caching by file kind, the Content-Security-Policy on the HTML, nosniff, the
app's client-side routes, 404s for unknown assets, and the routes the app must never shadow."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from pathlib import Path

from starlette.applications import Starlette
from starlette.testclient import TestClient
from web_support import WebServer

from server.http.web import WebApp


def get(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return res.status, {k.lower(): v for k, v in res.headers.items()}, res.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def csp(headers: dict[str, str]) -> dict[str, str]:
    return {
        d.split(" ", 1)[0]: d.split(" ", 1)[1] if " " in d else ""
        for d in (p.strip() for p in headers["content-security-policy"].split(";"))
        if d
    }


def test_index_and_client_routes(web_server: WebServer) -> None:
    for path in ("/", "/s/some-session", "/link", "/devices"):
        status, headers, body = get(web_server.url + path)
        assert status == 200, path
        assert headers["content-type"].startswith("text/html")
        assert headers["cache-control"] == "no-store"
        assert headers["x-content-type-options"] == "nosniff"
        assert b'<div id="app">' in body
        policy = csp(headers)
        assert policy["default-src"] == "'self'"
        assert policy["script-src"] == "'self'"  # no 'unsafe-inline', no nonce: the build inlines nothing
        assert policy["object-src"] == "'none'" and policy["base-uri"] == "'none'"
        assert policy["frame-ancestors"] == "'none'"
        # Attachments are fetched with the token and shown as blob: URLs; no data: and no other origin.
        assert policy["img-src"].split() == ["'self'", "blob:"]
        host = web_server.url.removeprefix("http://")
        assert policy["connect-src"].split() == ["'self'", f"ws://{host}", f"wss://{host}"]
    # The page really has no inline script for that policy to refuse.
    assert not re.search(rb"<script(?![^>]*\bsrc=)[^>]*>", body)


def test_hashed_assets_are_immutable(web_server: WebServer) -> None:
    _, _, body = get(web_server.url + "/")
    assets = re.findall(rb'(?:src|href)="(/assets/[^"]+)"', body)
    assert any(a.endswith(b".js") for a in assets) and any(a.endswith(b".css") for a in assets)
    for asset in assets:
        assert re.search(rb"-[A-Za-z0-9_-]{8,}\.(js|css)$", asset), asset  # a content hash in the name
        status, headers, _ = get(web_server.url + asset.decode())
        assert status == 200
        assert headers["cache-control"] == "public, max-age=31536000, immutable"
        assert headers["x-content-type-options"] == "nosniff"
        assert "content-security-policy" not in headers
    status, headers, _ = get(web_server.url + assets[0].decode(), method="HEAD")
    assert status == 200 and headers["cache-control"].endswith("immutable")


def test_unknown_assets_are_404_and_never_cached(web_server: WebServer) -> None:
    for path in (
        "/assets/nope-12345678.js",
        "/assets/../web.py",
        "/assets/%2e%2e/%2e%2e/app.py",
        "/nope.txt",
        "/index.html",
    ):
        status, headers, _ = get(web_server.url + path)
        assert status == 404, path
        assert headers.get("cache-control") == "no-store", path


def test_server_routes_are_not_shadowed(web_server: WebServer) -> None:
    assert get(web_server.url + "/healthz")[0] == 200
    assert get(web_server.url + "/readyz")[0] == 200
    status, headers, _ = get(web_server.url + "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    status, headers, body = get(web_server.url + "/admin")
    assert status == 200 and b"chatsync admin" in body
    status, _, body = get(web_server.url + "/trpc/session.list")
    assert status == 401 and b"UNAUTHORIZED" in body
    req = urllib.request.Request(
        web_server.url + "/auth/link",
        data=b'{"code": "wrong", "deviceName": "x"}',
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        urllib.request.urlopen(req, timeout=10)
        raise AssertionError("a wrong code must be refused")
    except urllib.error.HTTPError as exc:
        assert exc.code == 400 and b"BAD_REQUEST" in exc.read()


def test_without_a_build_the_page_says_how_to_build(tmp_path: Path) -> None:
    app = Starlette(routes=WebApp(dist=tmp_path / "dist").routes())
    with TestClient(app) as client:
        res = client.get("/")
        assert res.status_code == 503
        assert "bash scripts/setup.sh" in res.text and res.headers["cache-control"] == "no-store"
        assert client.get("/assets/index-abcdef12.js").status_code == 404


def test_a_hostile_host_header_cannot_bend_the_policy(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "index.html").write_text("<!doctype html><title>x</title>")
    app = Starlette(routes=WebApp(dist=dist).routes())
    with TestClient(app) as client:
        res = client.get("/", headers={"Host": "evil.example; script-src *"})
        policy = csp({k.lower(): v for k, v in res.headers.items()})
        assert policy["connect-src"] == "'self'" and policy["script-src"] == "'self'"
