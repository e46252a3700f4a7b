"""``GET /sessions/{id}/export`` and ``POST /sessions/import``: a whole session out as a file and back in.

Plain HTTP beside ``/trpc``, authenticated like ``GET /files`` (``Authorization: Bearer <token>``): an export is
a download the browser saves, and an import a body larger than a tRPC frame may be. Both count against the
caller's rate limit like a mutation. What the files hold: ``services/transcripts.py`` and docs/api.md.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

import orjson
from pydantic import ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from ..protocol.errors import RpcError, to_rpc_error
from ..protocol.inputs import check_json, check_text
from ..rpc.context import Services
from ..rpc.http import bearer_token, plain_error_response
from ..services.requests import RequestKey
from ..services.transcripts import Transcript, Transcripts, markdown
from ..settings import Settings
from ..store.models import User

_NO_STORE = {"cache-control": "no-store"}
FORMATS = {"json": ("application/json", "json"), "markdown": ("text/markdown; charset=utf-8", "md")}


def transcript_routes(services: Callable[[], Services], settings: Settings) -> list[Route]:
    """The routes; ``services()`` returns the running app's services (they exist only inside the lifespan)."""
    max_bytes = settings.max_import_bytes

    async def caller(request: Request) -> User:
        principal = await services().auth.identify(bearer_token(request))
        if principal is None:
            raise RpcError("UNAUTHORIZED", "Send Authorization: Bearer <token> with a valid token")
        await services().limiter.admit(principal.user.id)
        return principal.user

    def transcripts() -> Transcripts:
        s = services()
        return Transcripts(s.db, s.sessions)

    async def export(request: Request) -> Response:
        try:
            kind = request.query_params.get("format", "json")
            if kind not in FORMATS:
                raise RpcError("BAD_REQUEST", f"format must be one of {', '.join(FORMATS)}")
            user = await caller(request)
            data = await transcripts().export(user, request.path_params["session_id"])
        except Exception as exc:
            return plain_error_response(to_rpc_error(exc), headers=_NO_STORE)
        media_type, ext = FORMATS[kind]
        body = markdown(data).encode() if kind == "markdown" else orjson.dumps(data, option=orjson.OPT_INDENT_2)
        headers = {
            **_NO_STORE,
            "content-disposition": f'attachment; filename="{_file_name(data["session"]["title"])}.{ext}"',
            "x-content-type-options": "nosniff",
        }
        return Response(body, media_type=media_type, headers=headers)

    async def import_(request: Request) -> Response:
        try:
            user = await caller(request)
            body = await _body(request, max_bytes)
            try:
                data = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise RpcError("BAD_REQUEST", f"The body is not JSON: {exc}") from None
            check_json(data)
            try:
                transcript = Transcript.model_validate(data)
            except ValidationError as exc:
                raise RpcError("BAD_REQUEST", f"Not a chatsync session export: {_first_problem(exc)}") from None
            session = await transcripts().import_(user, transcript, _request_key(request, user, body))
        except Exception as exc:
            err = to_rpc_error(exc)
            retry = {"retry-after": str(-(-err.retry_after_ms // 1000))} if err.retry_after_ms else {}
            return plain_error_response(err, headers={**_NO_STORE, **retry})
        return Response(orjson.dumps(session), media_type="application/json", headers=_NO_STORE)

    return [
        Route("/sessions/{session_id}/export", export, methods=["GET"]),
        Route("/sessions/import", import_, methods=["POST"]),
    ]


async def _body(request: Request, limit: int) -> bytes:
    """The request's body, refused with ``PAYLOAD_TOO_LARGE`` as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    too_large = RpcError("PAYLOAD_TOO_LARGE", f"An import is at most {limit} bytes (CHATSYNC_MAX_IMPORT_BYTES)")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
    except ClientDisconnect:
        raise RpcError("BAD_REQUEST", "The body ended early") from None
    return b"".join(chunks)


def _request_key(request: Request, user: User, body: bytes) -> RequestKey | None:
    """The ``Idempotency-Key`` header as a client request id: the same key again returns the first import."""
    key = request.headers.get("idempotency-key")
    if key is None:
        return None
    if not 1 <= len(key) <= 64:
        raise RpcError("BAD_REQUEST", "Idempotency-Key must be 1 to 64 characters")
    check_text(key)
    return RequestKey(user.id, key, "session.import", hashlib.sha256(body).hexdigest())


def _first_problem(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "the body"
    return f"{where}: {err['msg']}"


def _file_name(title: str) -> str:
    """A file name for the download: the title's letters and digits (ASCII), else ``chat``."""
    return re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-")[:80] or "chat"
