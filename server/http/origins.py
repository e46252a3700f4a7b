"""Which browser pages may open a WebSocket to this server (``CHATSYNC_ALLOWED_ORIGINS``, ``CHATSYNC_PUBLIC_URL``)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from ..settings import Settings


def origin_allowed(settings: Settings, origin: str | None, host: str | None) -> bool:
    """Non-browser clients send no Origin; browsers must come from an allowed origin or this server itself.

    "This server itself" never means "whatever the Host header says": with DNS rebinding, a page of
    ``evil.example`` whose name now resolves to this machine sends ``Origin`` and ``Host`` that agree. So a
    page of the server's own is recognised by ``CHATSYNC_PUBLIC_URL``, or by an origin naming the address the
    browser connected to as an IP literal or ``localhost`` (names an attacker's DNS cannot hand out) — a page
    served under another domain name needs that name in ``CHATSYNC_ALLOWED_ORIGINS``."""
    if origin is None:
        return True
    origin = origin.rstrip("/")
    if "*" in settings.allowed_origins or origin in settings.allowed_origins:
        return True
    if settings.public_url and origin == settings.public_url.rstrip("/"):
        return True
    if host is None:
        return False
    parts = urlsplit(origin)
    return parts.netloc == host and _is_literal_address(parts.hostname or "")


def _is_literal_address(hostname: str) -> bool:
    if hostname == "localhost":
        return True
    try:
        ipaddress.ip_address(hostname)
    except ValueError:
        return False
    return True
