"""``POST /auth/link/info`` and ``POST /auth/link``: what a device sign-in code signs in to, then spending it.

Plain HTTP beside ``/trpc``: the caller has no token yet (or one it may keep), and the code travels in a small
JSON body, never in a URL, so it reaches no access log. Both answer ``no-store``. Attempts are limited per
client address (``CHATSYNC_LINK_ATTEMPTS_PER_MINUTE``), so a flood of guessed codes is refused before it
costs a database read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..protocol.errors import RpcError, to_rpc_error
from ..protocol.inputs import check_json
from ..rpc.context import Services
from ..rpc.http import plain_error_response
from ..rpc.limits import RateLimiter
from ..services.auth import MAX_DEVICE_NAME
from ..services.links import LinkError
from ..settings import Settings

MAX_BODY_BYTES = 4096
_NO_STORE = {"cache-control": "no-store"}


def link_routes(services: Callable[[], Services], settings: Settings) -> list[Route]:
    """The routes; ``services()`` returns the running app's services (they exist only inside the lifespan)."""
    per_minute = settings.link_attempts_per_minute
    attempts = RateLimiter(per_minute / 60, max(per_minute, 1))

    async def read(request: Request, fields: tuple[str, ...]) -> dict[str, str | None]:
        """The body's string fields (``code`` required), or ``BAD_REQUEST``; counts an attempt first."""
        attempts.take(request.client.host if request.client else "")
        try:
            body = orjson.loads(await _small_body(request))
        except (ValueError, ClientDisconnect):
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("code"), str):
            raise RpcError("BAD_REQUEST", f"Send JSON {{{', '.join(fields)}}}.")
        check_json(body)
        out: dict[str, str | None] = {}
        for name in fields:
            value = body.get(name)
            if value is not None and not isinstance(value, str):
                raise RpcError("BAD_REQUEST", f"{name} must be a string.")
            out[name] = value
        return out

    async def answer(request: Request, fields: tuple[str, ...], act: Callable[[dict[str, Any]], Any]) -> Response:
        try:
            return JSONResponse(await act(await read(request, fields)), headers=_NO_STORE)
        except LinkError as exc:
            err = RpcError("BAD_REQUEST", str(exc))
        except Exception as exc:
            err = to_rpc_error(exc)
        retry = {"retry-after": str(-(-err.retry_after_ms // 1000))} if err.retry_after_ms else {}
        return plain_error_response(err, headers={**_NO_STORE, **retry})

    async def info(request: Request) -> Response:
        """``{code}`` → ``{userName, deviceName, expiresAt}``; the code stays unspent."""
        return await answer(request, ("code",), lambda body: services().links.info(body["code"]))

    async def exchange(request: Request) -> Response:
        """``{code, deviceName}`` → ``{token, deviceId, user: {id, name}}``; the code is spent."""

        async def spend(body: dict[str, Any]) -> Any:
            name = (body["deviceName"] or "").strip()[:MAX_DEVICE_NAME] or None
            signed_in = await services().links.exchange(body["code"], name)
            await services().devices.changed(signed_in["user"]["id"])  # the Devices pages list it at once
            return signed_in

        return await answer(request, ("code", "deviceName"), spend)

    return [
        Route("/auth/link/info", info, methods=["POST"]),
        Route("/auth/link", exchange, methods=["POST"]),
    ]


async def _small_body(request: Request) -> bytes:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise ValueError("body too large")
    return body
