"""A typed, higher-level client: sessions, the queue, sending, abort, approvals, live views.

::

    async with ChatClient("http://127.0.0.1:8787", token) as chat:
        session = await chat.create_session(title="notes")
        final = await chat.prompt_streaming(session.id, "hello", lambda chunk: print(chunk, end=""))

Every call goes over one :class:`TrpcClient` WebSocket (``chat.trpc``, for procedures not wrapped here).
Errors are :class:`TrpcError` (``.code`` is ``NOT_FOUND``, ``UNAUTHORIZED``, ...), :class:`ServerUnreachable`
and :class:`ConnectionRejected`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

from server.domain.models import BusyPolicy, Message, QueuedMessage, Session, SessionSnapshot

from .trpc import ConnectionLost, TrpcClient, TrpcError
from .view import Change, SessionView

DEFAULT_URL = "http://127.0.0.1:8787"


@dataclass(frozen=True)
class SendResult:
    """What ``message.send`` did: ``started`` (a run answers it), ``queued`` or ``steered``."""

    status: Literal["started", "queued", "steered"]
    message: Message | None = None
    queued: QueuedMessage | None = None
    run_id: str | None = None

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> SendResult:
        return cls(
            status=data["status"],
            message=Message.model_validate(data["message"]) if data.get("message") else None,
            queued=QueuedMessage.model_validate(data["queued"]) if data.get("queued") else None,
            run_id=data.get("runId"),
        )


@dataclass(frozen=True)
class UploadedFile:
    """A file on the server (``POST /files``); attach it by passing it (or its ``id``) as an attachment."""

    id: str
    name: str
    media_type: str
    size: int
    sha256: str


# An attachment as the client methods take it: an uploaded file, its id, or a wire item (``{"path": ...}``).
Attachment = UploadedFile | str | dict[str, Any]


def _with_id(inp: dict[str, Any], request_id: str | None) -> dict[str, Any]:
    """``inp`` with a ``clientRequestId`` (the caller's, else a new one): a retry after a lost reply is safe."""
    return {**inp, "clientRequestId": request_id or str(uuid.uuid4())}


def _attachments(items: Sequence[Attachment]) -> list[dict[str, Any]]:
    return [
        {"fileId": a.id} if isinstance(a, UploadedFile) else {"fileId": a} if isinstance(a, str) else a for a in items
    ]


class RunFailed(Exception):
    """The run answering a prompt failed or was aborted; ``message`` is the partial answer, if any."""

    def __init__(self, reason: str, message: Message | None) -> None:
        self.reason = reason
        self.message = message
        super().__init__(reason)


class ChatClient:
    """Use as ``async with ChatClient(url, token) as chat: ...``."""

    def __init__(
        self,
        url: str | list[str] = DEFAULT_URL,
        token: str | None = None,
        *,
        reconnect: bool = True,
        connect_timeout: float = 10,
    ) -> None:
        self.trpc = TrpcClient(url, token, reconnect=reconnect)
        self.connect_timeout = connect_timeout

    async def __aenter__(self) -> ChatClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        await self.trpc.connect(self.connect_timeout)

    async def close(self) -> None:
        await self.trpc.close()

    # --- sessions ---------------------------------------------------------------------------------------

    async def list_sessions(
        self, search: str | None = None, limit: int | None = None, archived: bool | None = False
    ) -> list[Session]:
        """Your sessions, pinned first, then newest first (all pages, or the first ``limit``); ``search`` matches
        titles and message texts; ``archived``: only archived ones (True), the others (False) or all (None)."""
        out: list[Session] = []
        cursor: str | None = None
        while True:
            page_size = 200 if limit is None else min(200, limit - len(out))
            inp: dict[str, Any] = {"limit": page_size, "archived": archived}
            if cursor:
                inp["cursor"] = cursor
            if search:
                inp["search"] = search
            page = await self.trpc.query("session.list", inp)
            out += [Session.model_validate(s) for s in page["items"]]
            cursor = page.get("nextCursor")
            if not cursor or (limit is not None and len(out) >= limit):
                return out

    async def get_session(self, session_id: str) -> SessionSnapshot:
        return SessionSnapshot.model_validate(await self.trpc.query("session.get", {"sessionId": session_id}))

    async def list_messages(
        self, session_id: str, before: int | None = None, limit: int = 100, leaf_id: str | None = None
    ) -> tuple[list[Message], int | None]:
        """A page of the history, oldest first, ending before ordinal ``before`` (``get_session``'s
        ``messages_before`` for the messages older than the snapshot's), and the ``before`` of the page
        preceding it (``None`` at the start of the history). The active path, or with ``leaf_id`` the branch
        from the start down to that message."""
        args: dict[str, Any] = {"sessionId": session_id, "limit": limit}
        if before is not None:
            args["before"] = before
        if leaf_id is not None:
            args["leafId"] = leaf_id
        page = await self.trpc.query("message.list", args)
        return [Message.model_validate(m) for m in page["items"]], page["nextCursor"]

    async def create_session(self, **fields: Any) -> Session:
        """``session.create``; keyword names in either style (``busy_policy`` or ``busyPolicy``)."""
        from pydantic.alias_generators import to_camel

        return Session.model_validate(
            await self.trpc.mutation("session.create", {to_camel(k): v for k, v in fields.items()})
        )

    async def delete_session(self, session_id: str) -> None:
        await self.trpc.mutation("session.delete", {"sessionId": session_id})

    async def set_title(self, session_id: str, title: str) -> Session:
        return Session.model_validate(
            await self.trpc.mutation("session.setTitle", {"sessionId": session_id, "title": title})
        )

    async def clear_title(self, session_id: str) -> Session:
        return Session.model_validate(await self.trpc.mutation("session.clearTitle", {"sessionId": session_id}))

    async def regenerate_title(self, session_id: str, method: str | None = None) -> Session:
        inp: dict[str, Any] = {"sessionId": session_id}
        if method is not None:
            inp["method"] = method
        result = await self.trpc.mutation("session.regenerateTitle", inp)
        # The output is the Session; accept a {session} wrapper too, so a small server change does not break us.
        return Session.model_validate(result.get("session", result) if isinstance(result, dict) else result)

    # --- queue ------------------------------------------------------------------------------------------

    async def enqueue(self, session_id: str, content: str, attachments: Sequence[Attachment] = ()) -> QueuedMessage:
        inp: dict[str, Any] = {"sessionId": session_id, "content": content}
        if attachments:
            inp["attachments"] = _attachments(attachments)
        return QueuedMessage.model_validate(await self.trpc.mutation("message.enqueueMessage", inp))

    async def get_queue(self, session_id: str) -> list[QueuedMessage]:
        items = await self.trpc.query("message.getQueuedMessages", {"sessionId": session_id})
        return [QueuedMessage.model_validate(q) for q in items]

    async def update_queued(
        self,
        session_id: str,
        message_id: str,
        content: str | None = None,
        attachments: Sequence[Attachment] | None = None,
    ) -> QueuedMessage:
        """Change a queued message's text, its attachments (the whole list), or both."""
        inp: dict[str, Any] = {"sessionId": session_id, "messageId": message_id}
        if content is not None:
            inp["content"] = content
        if attachments is not None:
            inp["attachments"] = _attachments(attachments)
        return QueuedMessage.model_validate(await self.trpc.mutation("message.updateQueuedMessage", inp))

    async def move_queued(self, session_id: str, message_id: str, to_index: int) -> list[QueuedMessage]:
        items = await self.trpc.mutation(
            "message.moveQueuedMessage", {"sessionId": session_id, "messageId": message_id, "toIndex": to_index}
        )
        return [QueuedMessage.model_validate(q) for q in items]

    async def remove_queued(self, session_id: str, message_id: str) -> None:
        await self.trpc.mutation("message.removeQueuedMessage", {"sessionId": session_id, "messageId": message_id})

    async def dequeue(self, session_id: str) -> QueuedMessage | None:
        item = await self.trpc.mutation("message.dequeueMessage", {"sessionId": session_id})
        return QueuedMessage.model_validate(item) if item else None

    async def clear_queue(self, session_id: str) -> None:
        await self.trpc.mutation("message.clearQueue", {"sessionId": session_id})

    async def pause_queue(self, session_id: str) -> None:
        await self.trpc.mutation("message.pauseQueue", {"sessionId": session_id})

    async def resume_queue(self, session_id: str) -> str | None:
        run_id: str | None = (await self.trpc.mutation("message.resumeQueue", {"sessionId": session_id})).get("runId")
        return run_id

    # --- runs -------------------------------------------------------------------------------------------

    async def send(
        self,
        session_id: str,
        content: str,
        *,
        busy_policy: BusyPolicy | None = None,
        instructions: str | list[str] | None = None,
        attachments: Sequence[Attachment] = (),
    ) -> SendResult:
        inp: dict[str, Any] = {"sessionId": session_id, "content": content}
        if attachments:
            inp["attachments"] = _attachments(attachments)
        if busy_policy is not None:
            inp["busyPolicy"] = busy_policy
        if instructions is not None:
            inp["instructions"] = instructions
        return SendResult.from_wire(await self.trpc.mutation("message.send", inp))

    # --- versions and branches (docs/api.md "Versions and branches") ---------------------------------------

    async def edit_message(
        self,
        session_id: str,
        message_id: str,
        content: str,
        *,
        attachments: Sequence[Attachment] | None = None,
        busy_policy: Literal["reject", "interrupt"] | None = None,
        request_id: str | None = None,
    ) -> SendResult:
        """A new version of a user message, made active and answered."""
        inp: dict[str, Any] = {"sessionId": session_id, "messageId": message_id, "content": content}
        if attachments is not None:
            inp["attachments"] = _attachments(attachments)
        if busy_policy is not None:
            inp["busyPolicy"] = busy_policy
        return SendResult.from_wire(await self.trpc.mutation("message.edit", _with_id(inp, request_id)))

    async def regenerate(
        self,
        session_id: str,
        message_id: str | None = None,
        *,
        provider: str | None = None,
        model: str | None = None,
        busy_policy: Literal["reject", "interrupt"] | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """A new version of an answer (default: the last one), by the session's model or the one given;
        ``{runId, parentId, provider, model}``."""
        inp: dict[str, Any] = {"sessionId": session_id}
        for key, value in (("messageId", message_id), ("provider", provider), ("model", model)):
            if value is not None:
                inp[key] = value
        if busy_policy is not None:
            inp["busyPolicy"] = busy_policy
        return dict(await self.trpc.mutation("run.regenerate", _with_id(inp, request_id)))

    async def continue_answer(self, session_id: str, request_id: str | None = None) -> dict[str, Any]:
        """The last answer, stopped at the length limit, goes on in the same message; ``{runId, messageId}``."""
        return dict(await self.trpc.mutation("run.continue", _with_id({"sessionId": session_id}, request_id)))

    async def switch_branch(self, session_id: str, message_id: str, request_id: str | None = None) -> dict[str, Any]:
        """The path through ``message_id`` becomes the active one; ``{changed, leafId}``."""
        inp = {"sessionId": session_id, "messageId": message_id}
        return dict(await self.trpc.mutation("session.switchBranch", _with_id(inp, request_id)))

    async def fork_session(
        self, session_id: str, message_id: str, title: str | None = None, request_id: str | None = None
    ) -> Session:
        """A new session whose history is the path up to ``message_id``."""
        inp: dict[str, Any] = {"sessionId": session_id, "messageId": message_id}
        if title is not None:
            inp["title"] = title
        return Session.model_validate(await self.trpc.mutation("session.fork", _with_id(inp, request_id)))

    async def abort(self, session_id: str) -> bool:
        return bool((await self.trpc.mutation("run.abort", {"sessionId": session_id}))["aborted"])

    async def approve(self, session_id: str, call_id: str, approved: bool = True, reason: str | None = None) -> None:
        inp: dict[str, Any] = {"sessionId": session_id, "callId": call_id, "approved": approved}
        if reason is not None:
            inp["reason"] = reason
        await self.trpc.mutation("tool.approve", inp)

    # --- presence (docs/devices.md) -----------------------------------------------------------------------

    async def report_presence(
        self, session_id: str, *, visible: bool = True, focused: bool = True, typing: bool = False
    ) -> float:
        """Say this client has the session open; returns how many seconds until it should say so again."""
        inp = {"sessionId": session_id, "visible": visible, "focused": focused, "typing": typing}
        return float((await self.trpc.mutation("presence.update", inp))["heartbeatSeconds"])

    async def leave_presence(self, session_id: str) -> None:
        await self.trpc.mutation("presence.leave", {"sessionId": session_id})

    # --- files ------------------------------------------------------------------------------------------

    @property
    def http_url(self) -> str:
        """The server's HTTP base, from the WebSocket address in use."""
        parts = urlsplit(self.trpc.url)
        scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
        return urlunsplit((scheme, parts.netloc, parts.path.removesuffix("/trpc"), "", ""))

    async def upload(self, path: str | Path, name: str | None = None, *, timeout: float = 300) -> UploadedFile:
        """Upload a local file (streamed from disk, never read whole); ``name`` defaults to the file's name.
        Raises :class:`TrpcError` with the server's code (``PAYLOAD_TOO_LARGE``, ...) when it is refused."""
        path = Path(path)
        # A blocking open of a local file is short; the body is then read in chunks as it is sent.
        with path.open("rb") as f:  # noqa: ASYNC230
            async with httpx.AsyncClient(base_url=self.http_url, timeout=timeout) as http:
                reply = await http.post(
                    "/files",
                    files={"file": (name or path.name, f)},
                    headers={"authorization": f"Bearer {self.trpc.token}"},
                )
        return _uploaded(reply)

    async def download(self, file_id: str, *, timeout: float = 300) -> bytes:
        async with httpx.AsyncClient(base_url=self.http_url, timeout=timeout) as http:
            reply = await http.get(f"/files/{file_id}", headers={"authorization": f"Bearer {self.trpc.token}"})
        if reply.status_code != 200:
            raise _http_error(reply)
        return reply.content

    async def export_session(self, session_id: str, format: str = "json", *, timeout: float = 300) -> bytes:
        """``GET /sessions/{id}/export``: the session as JSON (re-importable) or ``markdown``."""
        async with httpx.AsyncClient(base_url=self.http_url, timeout=timeout) as http:
            try:
                reply = await http.get(
                    f"/sessions/{quote(session_id, safe='')}/export",
                    params={"format": format},
                    headers={"authorization": f"Bearer {self.trpc.token}"},
                )
            except httpx.TransportError as exc:
                raise ConnectionLost(f"export: {exc}") from exc
        if reply.status_code != 200:
            raise _http_error(reply)
        return reply.content

    async def import_session(self, export: bytes, request_id: str | None = None, *, timeout: float = 300) -> Session:
        """``POST /sessions/import``: a JSON export as a new session. With ``request_id`` (the
        ``Idempotency-Key``), sending it again after a lost reply imports nothing more."""
        headers = {"authorization": f"Bearer {self.trpc.token}", "content-type": "application/json"}
        if request_id is not None:
            headers["idempotency-key"] = request_id
        attempts = 3 if request_id is not None else 1  # without a key a repeat could import twice
        async with httpx.AsyncClient(base_url=self.http_url, timeout=timeout) as http:
            for attempt in range(attempts):
                try:
                    reply = await http.post("/sessions/import", content=export, headers=headers)
                    break
                except httpx.TransportError as exc:
                    if attempt == attempts - 1:
                        raise ConnectionLost(f"import: {exc}") from exc
        if reply.status_code != 200:
            raise _http_error(reply)
        return Session.model_validate(reply.json())

    # --- live -------------------------------------------------------------------------------------------

    async def open_session(self, session_id: str) -> SessionView:
        """A started :class:`SessionView` of the session (close it, or use it with ``async with``)."""
        return await SessionView(self, session_id).start()

    async def prompt_streaming(
        self, session_id: str, text: str, on_chunk: Callable[[str], Any], *, timeout: float = 120
    ) -> Message:
        """Send ``text`` and call ``on_chunk(delta)`` for each piece of the answer, in order.

        Returns the run's final assistant message. When the session is busy the message is queued (its busy
        policy permitting) and streamed once the queue sends it. The chunks of one answer join to its text,
        across reconnects too: after a resync only the text not yet passed on is. Raises :class:`RunFailed`
        when the run fails or is aborted.
        """
        changes: asyncio.Queue[Change] = asyncio.Queue()
        view = SessionView(self, session_id)
        view.add_listener(changes.put_nowait)
        await view.start()
        try:
            sent = await self.send(session_id, text)
            return await asyncio.wait_for(self._follow(view, sent, changes, on_chunk), timeout)
        finally:
            await view.close()

    @staticmethod
    async def _follow(
        view: SessionView, sent: SendResult, changes: asyncio.Queue[Change], on_chunk: Callable[[str], Any]
    ) -> Message:
        run_id = sent.run_id
        queued_id = sent.queued.id if sent.queued else None
        was_sent = False  # our queued message left the queue: the next run-started is ours
        emitted: dict[str, int] = {}  # message id -> characters passed to on_chunk
        last: Message | None = None
        while True:
            change = await changes.get()
            e = change.event or {}
            if run_id is None:
                if e.get("type") == "queue-message-removed" and e.get("messageId") == queued_id:
                    if e.get("reason") != "sent":
                        raise RunFailed(f"queued message was {e.get('reason')}", None)
                    was_sent = True
                elif e.get("type") == "run-started" and was_sent:
                    run_id = e["runId"]
                continue
            if change.chunk is not None and change.chunk.run_id == run_id:
                msg = view.message(change.chunk.message_id)
                if msg is not None and msg.role == "assistant":
                    emitted[msg.id] = emitted.get(msg.id, 0) + len(change.chunk.text)
                    on_chunk(change.chunk.text)
            elif change.kind == "snapshot":
                # A resync replaced the text: pass on whatever grew past what the caller already has.
                for msg in view.messages:
                    if msg.run_id == run_id and msg.role == "assistant" and len(msg.content) > emitted.get(msg.id, 0):
                        on_chunk(msg.content[emitted.get(msg.id, 0) :])
                        emitted[msg.id] = len(msg.content)
            if (
                change.kind == "message-completed"
                and e["message"].get("runId") == run_id
                and e["message"]["role"] == "assistant"
            ):
                last = Message.model_validate(e["message"])
                tail = last.content[emitted.get(last.id, 0) :]
                if tail:  # the stream was cut short (e.g. disableStreaming): the rest arrives whole
                    on_chunk(tail)
                    emitted[last.id] = len(last.content)
            elif change.kind in ("run-finished", "run-failed", "run-aborted") and e.get("runId") == run_id:
                if change.kind != "run-finished":
                    raise RunFailed(change.kind, last)
                if last is None:
                    raise RunFailed("run finished without an answer", None)
                return last


def _http_error(reply: httpx.Response) -> TrpcError:
    try:
        error = reply.json()["error"]
        return TrpcError({"code": -1, "message": error["message"], "data": {"code": error["code"]}})
    except (ValueError, KeyError, TypeError):
        return TrpcError({"code": -1, "message": f"HTTP {reply.status_code}", "data": {"code": "BAD_GATEWAY"}})


def _uploaded(reply: httpx.Response) -> UploadedFile:
    if reply.status_code != 200:
        raise _http_error(reply)
    body = reply.json()
    return UploadedFile(
        id=body["id"], name=body["name"], media_type=body["mediaType"], size=body["size"], sha256=body["sha256"]
    )
