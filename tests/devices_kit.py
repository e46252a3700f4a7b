"""Helpers of the tests of devices that know about each other: waiting for presence items, and a local push
service that checks what the server sends as a browser's push service would (VAPID, RFC 8292) and decrypts the
payload as the browser would (RFC 8291)."""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import http_ece
import orjson
from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


async def until(sub: Any, pred: Callable[[Any], bool], timeout: float = 20) -> Any:
    """The first item of ``sub`` (its data) for which ``pred`` holds; earlier ones are skipped."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no matching item")
        _id, item = await sub.next(left)
        if pred(item):
            return item


def devices(item: Any) -> list[dict[str, Any]] | None:
    """The device list of a presence item (None for any other item)."""
    if isinstance(item, dict) and item.get("type") == "presence":
        return list(item["devices"])
    return None


def others(item: Any) -> list[dict[str, Any]] | None:
    found = devices(item)
    return None if found is None else [d for d in found if not d["current"]]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Browser:
    """A push subscription's keys, as a browser makes them."""

    key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    auth: bytes = field(default_factory=lambda: os.urandom(16))

    @property
    def p256dh(self) -> str:
        return b64(
            self.key.public_key().public_bytes(
                serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
            )
        )

    def keys(self) -> dict[str, str]:
        return {"p256dh": self.p256dh, "auth": b64(self.auth)}

    def decrypt(self, body: bytes) -> dict[str, Any]:
        plain = http_ece.decrypt(body, private_key=self.key, auth_secret=self.auth, version="aes128gcm")
        return orjson.loads(plain)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    payload: dict[str, Any]
    claims: dict[str, Any]


class PushService:
    """A push service on 127.0.0.1: every subscription is ``/push/<name>``; ``answer`` decides the status of the
    next request of a name (default 201). Each accepted request is checked and decrypted; a request that fails
    a check is recorded in ``problems`` and answered 400."""

    def __init__(self, vapid_public_key: Callable[[], str]) -> None:
        self.vapid_public_key = vapid_public_key
        self.browsers: dict[str, Browser] = {}
        self.received: list[Received] = []
        self.problems: list[str] = []
        self.requests: list[str] = []  # every request's name, answered or not
        self.answers: dict[str, list[int]] = {}
        self.hold: dict[str, asyncio.Event] = {}  # a name whose requests wait until the event is set
        self.arrived = asyncio.Condition()
        self.url = ""
        self._runner: web.AppRunner | None = None

    def subscription(self, name: str) -> dict[str, Any]:
        browser = self.browsers.setdefault(name, Browser())
        return {"endpoint": f"{self.url}/push/{name}", "keys": browser.keys()}

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/push/{name}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        for event in self.hold.values():
            event.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def wait_for(self, pred: Callable[[list[Received]], bool], timeout: float = 30) -> list[Received]:
        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(lambda: pred(self.received)), timeout)
        return list(self.received)

    async def wait_requests(self, n: int, timeout: float = 30) -> None:
        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(lambda: len(self.requests) >= n), timeout)

    async def _handle(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        body = await request.read()
        async with self.arrived:
            self.requests.append(name)
            self.arrived.notify_all()
        held = self.hold.get(name)
        if held is not None:
            await held.wait()
        answers = self.answers.get(name)
        status = answers.pop(0) if answers else 201
        if status != 201:
            headers = {"Retry-After": "0"} if status in (429, 503) else {}
            return web.Response(status=status, headers=headers)
        try:
            claims = self._check(request, name)
            payload = self.browsers[name].decrypt(body)
        except Exception as exc:
            self.problems.append(f"{name}: {type(exc).__name__}: {exc}")
            return web.Response(status=400)
        async with self.arrived:
            self.received.append(Received(name, dict(request.headers), payload, claims))
            self.arrived.notify_all()
        return web.Response(status=201)

    def _check(self, request: web.Request, name: str) -> dict[str, Any]:
        """What a browser's push service checks (RFC 8292 section 4, RFC 8030 section 5)."""
        scheme, _, params = request.headers["Authorization"].partition(" ")
        assert scheme == "vapid", scheme
        parts = dict(p.strip().split("=", 1) for p in params.split(","))
        assert parts["k"] == self.vapid_public_key(), "k is not the server's published key"
        header_b64, claims_b64, sig_b64 = parts["t"].split(".")
        assert orjson.loads(unb64(header_b64)) == {"typ": "JWT", "alg": "ES256"}
        key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64(parts["k"]))
        raw = unb64(sig_b64)
        signature = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
        try:
            key.verify(signature, f"{header_b64}.{claims_b64}".encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise AssertionError("bad VAPID signature") from None
        claims: dict[str, Any] = orjson.loads(unb64(claims_b64))
        assert claims["aud"] == self.url, claims
        assert time.time() < claims["exp"] <= time.time() + 24 * 3600, claims
        assert claims["sub"].startswith(("mailto:", "https:")), claims
        assert int(request.headers["TTL"]) > 0
        topic = request.headers["Topic"]
        assert 0 < len(topic) <= 32 and all(c.isalnum() or c in "-_" for c in topic), topic
        assert request.headers["Urgency"] in ("very-low", "low", "normal", "high")
        assert request.headers["Content-Encoding"] == "aes128gcm"
        return claims
