"""Sending one Web Push message: the payload encrypted to the subscription's keys (RFC 8291, aes128gcm, by
``pywebpush``), signed for the push service with the server's VAPID key (RFC 8292, by ``py_vapid``), and posted
(RFC 8030) with ``TTL``, ``Topic`` and ``Urgency``.

**Only to public push services.** A push endpoint is a URL a client gave us, so posting to it is a request the
client chose the target of. Unless ``CHATSYNC_PUSH_ALLOW_INSECURE_ENDPOINTS`` is set, an endpoint must be an
``https`` URL, and every address it is reached at must be a public one: no loopback, private (RFC 1918, unique
local), link-local, shared, multicast, reserved or unspecified address. Names are resolved by the HTTP client's
own resolver here (:class:`PublicResolver`), which hands the connection only the addresses that pass, so a name
that resolves elsewhere by the time of the post (DNS rebinding) reaches nothing. Redirects are not followed.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

if TYPE_CHECKING:
    import aiohttp

# The HTTP client and the push libraries are imported when the first message is sent: a process that never
# sends one (most tests, most replicas for a while) does not pay for loading them.

SEND_TIMEOUT_SECONDS = 10.0
MAX_ENDPOINT_CHARS = 2048
VAPID_EXPIRY_SECONDS = 12 * 3600  # RFC 8292: at most 24 hours


class EndpointRefused(ValueError):
    """A push endpoint that is not an https URL of a public address (see the module docstring)."""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def public_address(address: str) -> bool:
    """Whether ``address`` is a public unicast address (IPv4-mapped IPv6 judged as its IPv4 address)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def check_url(endpoint: str, allow_insecure: bool) -> tuple[str, int]:
    """``(host, port)`` of an acceptable endpoint URL, else :class:`EndpointRefused` (nothing resolved yet)."""
    if len(endpoint) > MAX_ENDPOINT_CHARS:
        raise EndpointRefused(f"a push endpoint is at most {MAX_ENDPOINT_CHARS} characters")
    try:
        parts = urlsplit(endpoint)
        port = parts.port
    except ValueError as exc:
        raise EndpointRefused("the push endpoint is not a URL") from exc
    allowed = ("https", "http") if allow_insecure else ("https",)
    if parts.scheme not in allowed or not parts.hostname:
        raise EndpointRefused("a push endpoint must be an https URL")
    if parts.username is not None or parts.password is not None:
        raise EndpointRefused("a push endpoint carries no user name or password")
    host = parts.hostname
    if not allow_insecure and _is_literal(host) and not public_address(host):
        raise EndpointRefused("a push endpoint must be on a public address")
    return host, port or (443 if parts.scheme == "https" else 80)


async def check_endpoint(endpoint: str, allow_insecure: bool) -> None:
    """:func:`check_url`, and (unless insecure endpoints are allowed) every address the name has now is public."""
    host, port = check_url(endpoint, allow_insecure)
    if allow_insecure or _is_literal(host):
        return
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise EndpointRefused("the push endpoint's host name does not resolve") from exc
    addresses = {str(info[4][0]) for info in infos}
    if not addresses or not all(public_address(a) for a in addresses):
        raise EndpointRefused("a push endpoint must be on a public address")


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def public_resolver() -> Any:
    """The HTTP client's resolver: the system's answers, less every address that is not public."""
    from aiohttp.abc import AbstractResolver, ResolveResult
    from aiohttp.resolver import DefaultResolver

    class PublicResolver(AbstractResolver):
        """A DNS resolver that answers only public addresses, so a push endpoint cannot point into the server's
        own network."""

        def __init__(self) -> None:
            self._inner = DefaultResolver()

        async def resolve(
            self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
        ) -> list[ResolveResult]:
            found = await self._inner.resolve(host, port, family)
            public = [r for r in found if public_address(str(r["host"]))]
            if not public:
                raise OSError(f"{host} has no public address")
            return public

        async def close(self) -> None:
            await self._inner.close()

    return PublicResolver()


@dataclass
class Delivery:
    """What the push service answered: its HTTP status and ``Retry-After`` (None: no answer at all)."""

    status: int | None
    retry_after: str | None = None
    error: str | None = None
    refused: bool = False  # never sent: the endpoint is not one we post to


def new_private_key() -> str:
    """A fresh VAPID private key: the P-256 scalar, base64url (what ``push_keys`` keeps)."""
    key = ec.generate_private_key(ec.SECP256R1())
    return b64url(key.private_numbers().private_value.to_bytes(32, "big"))


def load_private_key(text: str) -> ec.EllipticCurvePrivateKey:
    """A VAPID private key given as PEM or as the base64url P-256 scalar."""
    stripped = text.strip()
    if stripped.startswith("-----BEGIN"):
        key = serialization.load_pem_private_key(stripped.encode(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
            raise ValueError("the VAPID key must be a P-256 (prime256v1) EC key")
        return key
    raw = b64url_decode(stripped)
    if len(raw) != 32:
        raise ValueError("the VAPID key must be 32 bytes, base64url (or a PEM EC key)")
    return ec.derive_private_key(int.from_bytes(raw, "big"), ec.SECP256R1())


def public_key_of(key: ec.EllipticCurvePrivateKey) -> str:
    """The application server key browsers subscribe with: the uncompressed point, base64url."""
    return b64url(
        key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    )


class Sender:
    """Posts push messages through one HTTP client (connections reused), guarded as the module says."""

    def __init__(self, key: ec.EllipticCurvePrivateKey, subject: str, allow_insecure: bool) -> None:
        self.key = key
        self.subject = subject
        self.allow_insecure = allow_insecure
        self._http: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._http is None:
            connector = aiohttp.TCPConnector(
                resolver=None if self.allow_insecure else public_resolver(), limit=64, ttl_dns_cache=None
            )
            timeout = aiohttp.ClientTimeout(total=SEND_TIMEOUT_SECONDS)
            self._http = aiohttp.ClientSession(connector=connector, timeout=timeout)
        return self._http

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def send(
        self, endpoint: str, p256dh: str, auth: str, payload: bytes, *, ttl: int, topic: str, urgency: str
    ) -> Delivery:
        try:
            check_url(endpoint, self.allow_insecure)
        except EndpointRefused as exc:
            return Delivery(None, error=str(exc), refused=True)
        import aiohttp
        from py_vapid import Vapid02
        from pywebpush import WebPusher

        subscription = {"endpoint": endpoint, "keys": {"p256dh": p256dh, "auth": auth}}
        body: Any = WebPusher(subscription).encode(payload, "aes128gcm")["body"]
        parts = urlsplit(endpoint)
        audience = f"{parts.scheme}://{parts.netloc}"
        claims = {"aud": audience, "sub": self.subject, "exp": int(time.time()) + VAPID_EXPIRY_SECONDS}
        headers: dict[str, str] = dict(Vapid02(private_key=self.key).sign(claims))
        headers.update(
            {
                "TTL": str(ttl),
                "Topic": topic,
                "Urgency": urgency,
                "Content-Encoding": "aes128gcm",
                "Content-Type": "application/octet-stream",
            }
        )
        try:
            async with self._client().post(endpoint, data=body, headers=headers, allow_redirects=False) as resp:
                await resp.read()
                return Delivery(resp.status, resp.headers.get("Retry-After"))
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return Delivery(None, error=f"{type(exc).__name__}: {exc}")
