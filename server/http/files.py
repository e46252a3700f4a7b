"""``POST /files`` and ``GET /files/{id}``: uploads streamed through an incremental multipart parser into
storage (no part is ever held whole), and downloads streamed back to their owner."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING
from urllib.parse import quote

import orjson
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .. import metrics
from ..files.lifecycle import Files, Upload
from ..files.sniff import IMAGE_TYPES
from ..protocol.errors import RpcError, to_rpc_error
from ..rpc.context import Services
from ..rpc.http import bearer_token, plain_error_response

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

FILE_FIELD = "file"
# What a body may carry beyond the file itself: boundaries, part headers, small other fields.
MULTIPART_SLACK = 64 * 1024
# One part's headers: names and values together, and how many (the parser's own bounds are set to match).
MAX_PART_HEADER_BYTES = 16 * 1024
MAX_PART_HEADERS = 32
# Body chunks at least this large are parsed and digested on a worker thread (smaller ones cost less than the
# hand-over).
OFFLOAD_BYTES = 32 * 1024
# After a limit is hit, read (and drop) at most this much more of the body, so an ordinary client gets to
# read the 413 instead of failing to write the rest; past it the connection is closed.
DRAIN_BYTES = 16 * 1024 * 1024


def error(code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    return plain_error_response(RpcError(code, message), headers={"cache-control": "no-store", **(headers or {})})


def file_routes(services: Callable[[], Services]) -> list[Route]:
    """The routes; ``services()`` returns the running app's services (they exist only inside the lifespan)."""

    async def user_id(request: Request) -> str:
        token = bearer_token(request)
        if token is None:
            raise RpcError("UNAUTHORIZED", "Send Authorization: Bearer <token>")
        principal = await services().auth.identify(token)
        if principal is None:
            raise RpcError("UNAUTHORIZED", "Invalid token")
        return principal.user.id

    async def upload(request: Request) -> Response:
        outcome = "stored"  # chatsync_uploads_total: stored, client-gone, or the error code
        try:
            owner = await user_id(request)
            await services().limiter.admit(owner)  # an upload is a mutation like any other
            boundary = _boundary(request)
            declared = request.headers.get("content-length", "")
            files: Files = services().files
            most = int(declared) if declared.isdigit() else None
            least = max(most - MULTIPART_SLACK, 0) if most is not None else 0
            async with files.upload(owner, least=least, most=most) as up:
                return await _receive(request, up, boundary)
        except ClientDisconnect:
            outcome = "client-gone"
            return Response(status_code=400)  # nobody reads it; the upload was discarded on the way out
        except FormParserError as exc:
            outcome = "BAD_REQUEST"
            return error("BAD_REQUEST", f"The body is not valid multipart/form-data: {exc}")
        except RpcError as exc:
            outcome = exc.code
            if exc.code == "PAYLOAD_TOO_LARGE":
                await _drain(request)
            retry = {"retry-after": str(-(-exc.retry_after_ms // 1000))} if exc.retry_after_ms else None
            return error(exc.code, exc.message, retry)
        except Exception as exc:
            err = to_rpc_error(exc)
            outcome = err.code
            return error(err.code, err.message)
        finally:
            metrics.UPLOADS.labels(outcome=outcome).inc()

    async def download(request: Request) -> Response:
        try:
            owner = await user_id(request)
            info, chunks = await services().files.open(owner, request.path_params["file_id"])
            try:
                first = await anext(chunks)
            except StopAsyncIteration:
                first = b""
            except FileNotFoundError:
                raise RpcError("NOT_FOUND", "File not found") from None
        except RpcError as exc:
            return error(exc.code, exc.message)
        except Exception as exc:
            err = to_rpc_error(exc)
            return error(err.code, err.message)

        async def body() -> AsyncIterator[bytes]:
            yield first
            async for chunk in chunks:
                yield chunk

        # Only images are served as what they are (shown inline). Everything else is bytes to save: text that
        # is really a page (an HTML file sent as an image) can never be rendered as one, whatever it claims.
        image = info.media_type in IMAGE_TYPES
        media_type = info.media_type if image else "application/octet-stream"
        disposition = "inline" if image else "attachment"
        headers = {
            "content-length": str(info.size),
            "content-disposition": f"{disposition}; {_filename_params(info.name)}",
            "x-content-type-options": "nosniff",
            # Opened directly, a file is still inert: no scripts, no plugins, not framed by other origins.
            "content-security-policy": "default-src 'none'; sandbox",
            # A file is its owner's, and its id is all it takes to ask for it: no cache (a browser's, a shared
            # proxy's) keeps a copy that outlives the file or reaches someone else.
            "cache-control": "no-store",
        }
        return StreamingResponse(body(), media_type=media_type, headers=headers)

    return [
        Route("/files", upload, methods=["POST"]),
        Route("/files/{file_id}", download, methods=["GET"]),
    ]


def _filename_params(name: str) -> str:
    fallback = "".join(ch if 32 <= ord(ch) < 127 and ch not in '"\\' else "_" for ch in name)
    return f"filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


def _boundary(request: Request) -> bytes:
    content_type, params = parse_options_header(request.headers.get("content-type", ""))
    boundary = params.get(b"boundary")
    if content_type != b"multipart/form-data" or not boundary:
        raise RpcError("BAD_REQUEST", "Send multipart/form-data with one part named \"file\"")
    return boundary


async def _receive(request: Request, up: Upload, boundary: bytes) -> Response:
    """Parse the multipart body as it arrives, writing the ``file`` part's bytes to ``up``."""
    part = _Parts()
    parser = MultipartParser(
        boundary, part.callbacks(), max_header_count=MAX_PART_HEADERS, max_header_size=MAX_PART_HEADER_BYTES
    )
    body_bytes = 0
    async for chunk in request.stream():
        body_bytes += len(chunk)
        if body_bytes > up.limit + MULTIPART_SLACK:  # other parts are dropped, but they are bounded too
            raise up.too_large()
        if len(chunk) >= OFFLOAD_BYTES:
            pieces = await asyncio.to_thread(_parse, parser, part, up, chunk)
        else:
            pieces = _parse(parser, part, up, chunk)
        for data in pieces:
            await up.store(data)
    for data in _parse(parser, part, up, None):
        await up.store(data)
    if not part.ended:
        raise RpcError("BAD_REQUEST", "The body has no complete part named \"file\"")
    info = await up.finish(part.filename)
    return Response(orjson.dumps(info.wire()), media_type="application/json", headers={"cache-control": "no-store"})


def _parse(parser: MultipartParser, part: _Parts, up: Upload, chunk: bytes | None) -> list[bytes]:
    """Feed the parser the next chunk of the body (``None``: the body ended) and digest the file's bytes it
    gave. Only computation, so a large chunk is handed to a worker thread: the event loop is not held by it."""
    if chunk is None:
        parser.finalize()
    else:
        parser.write(chunk)
    if part.error is not None:
        raise part.error
    pieces = part.take()
    for data in pieces:
        up.digest(data)
    return pieces


class _Parts:
    """The parser's callbacks: keeps the ``file`` part's data until the upload takes it, drops other parts."""

    def __init__(self) -> None:
        self.filename: str | None = None
        self.ended = False
        self.error: RpcError | None = None
        self._in_file = False
        self._seen_file = False
        self._pending: list[bytes] = []
        self._header_bytes = 0
        self._field = b""
        self._value = b""
        self._headers: dict[bytes, bytes] = {}

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self._begin,
            "on_header_field": self._header_field,
            "on_header_value": self._header_value,
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._data,
            "on_part_end": self._end,
        }

    def take(self) -> list[bytes]:
        pending, self._pending = self._pending, []
        return pending

    def _begin(self) -> None:
        self._headers, self._header_bytes = {}, 0

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._count(end - start)
        self._field += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._count(end - start)
        self._value += data[start:end]

    def _count(self, n: int) -> None:
        self._header_bytes += n
        if self._header_bytes > MAX_PART_HEADER_BYTES and self.error is None:
            self.error = RpcError("BAD_REQUEST", "A part's headers are too long")

    def _header_end(self) -> None:
        self._headers[self._field.lower()] = self._value
        self._field, self._value = b"", b""

    def _headers_finished(self) -> None:
        _kind, params = parse_options_header(self._headers.get(b"content-disposition", b""))
        if params.get(b"name") != FILE_FIELD.encode():
            return
        if self._seen_file:
            self.error = self.error or RpcError("BAD_REQUEST", "Send one part named \"file\"")
            return
        self._seen_file = self._in_file = True
        raw = params.get(b"filename")
        # Browsers (and httpx) send names as UTF-8 with '"', CR and LF escaped as %22, %0D, %0A (the HTML
        # standard's multipart/form-data encoding).
        self.filename = (
            None
            if raw is None
            else raw.decode("utf-8", "replace").replace("%22", '"').replace("%0D", "").replace("%0A", "")
        )

    def _data(self, data: bytes, start: int, end: int) -> None:
        if self._in_file:
            self._pending.append(data[start:end])

    def _end(self) -> None:
        if self._in_file:
            self._in_file, self.ended = False, True


async def _drain(request: Request) -> None:
    read = 0
    try:
        async for chunk in request.stream():
            read += len(chunk)
            if read > DRAIN_BYTES:
                return
    except (ClientDisconnect, RuntimeError):
        return
