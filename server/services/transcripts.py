"""A session's transcript out and back in: export as JSON (complete, re-importable) or Markdown (to read), and
import of such JSON as a new session of the caller's.

The JSON form (``format: "chatsync.session"``, ``version: 1``) is the session's settings and its messages as
the wire shows them (docs/api.md "Export and import"). Importing makes a new session — new ids, the
caller's — with the same messages in the same order: roles, texts, tool calls and their results, statuses,
usage and times. What it cannot carry over is left out rather than refused, so a transcript from another
server imports too: an uploaded file the importer does not own (its bytes are not in the transcript), and
unknown fields (a newer server's). A message that was still streaming when exported is imported as
``interrupted``.

An import is one transaction: the session, its messages, the files it references and the owner's feed event
(``session-created``) are written together, under the owner's lock that also checks
``CHATSYNC_MAX_SESSIONS_PER_USER``. With a request id (the ``Idempotency-Key`` header of ``POST
/sessions/import``) a repeat answers with the first import's session and imports nothing.
"""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from ..domain import models as wire
from ..domain.models import (
    BusyPolicy,
    FileAttachment,
    GenerationDefaults,
    MessageStatus,
    Role,
    SessionMetadata,
    TitleSource,
    ToolDefinition,
    ToolMode,
    ToolOutcome,
)
from ..files import refs
from ..llm import PROVIDER_IDS, known_provider
from ..protocol.errors import RpcError
from ..store import repo
from ..store.db import Database
from ..store.models import ChatSession, FileBlob, Message, StoredFile, User, utcnow
from .requests import MISSING, RequestKey, as_is
from .sessions import KEPT_WHOLE, SessionService

FORMAT = "chatsync.session"
VERSION = 1
MAX_IMPORT_MESSAGES = 20_000
MAX_MS = 2**53  # a time on the wire (ms since the epoch) that JavaScript holds exactly


class _Lenient(BaseModel):
    """Transcript parts: camelCase as exported; fields this version does not know are ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class ImportedToolCall(_Lenient):
    """A tool call of an imported message."""

    id: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=200)
    arguments: str = ""


class ImportedMessage(_Lenient):
    """A message of an imported transcript, as the wire shows it."""

    role: Role
    content: str = ""
    attachments: list[dict[str, Any]] = Field(default_factory=list, max_length=32)
    tool_calls: list[ImportedToolCall] | None = Field(default=None, max_length=128)
    tool_call_id: str | None = Field(default=None, max_length=200)
    status: MessageStatus = "complete"
    finish_reason: str | None = Field(default=None, max_length=24)
    usage: dict[str, Any] | None = None
    created_at: int | None = Field(default=None, ge=0, le=MAX_MS)
    notices: list[wire.Notice] | None = Field(default=None, max_length=64)
    outcome: ToolOutcome | None = None


class ImportedSession(_Lenient):
    """An imported transcript (``format: "chatsync.session"``): the session's settings and its messages."""

    title: str = Field(default="", max_length=500)
    title_source: TitleSource = "none"
    provider: str | None = Field(default=None, max_length=32)
    model: str | None = Field(default=None, max_length=200)
    system_prompt: str | None = Field(default=None, max_length=100_000)
    defaults: GenerationDefaults | None = None
    tools: list[ToolDefinition] = Field(default_factory=list, max_length=128)
    tool_mode: ToolMode = "parallel"
    busy_policy: BusyPolicy = "enqueue"
    disable_streaming: bool = False
    metadata: SessionMetadata | None = None
    pinned: bool = False


class Transcript(_Lenient):
    """What ``POST /sessions/import`` takes: a JSON export."""

    format: Literal["chatsync.session"]
    version: Literal[1]
    session: ImportedSession
    messages: list[ImportedMessage] = Field(max_length=MAX_IMPORT_MESSAGES)


def _when(ms: int | None, default: datetime) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC) if ms is not None else default


class Transcripts:
    """Export and import of whole sessions (``GET /sessions/{id}/export``, ``POST /sessions/import``)."""

    def __init__(self, db: Database, sessions: SessionService) -> None:
        self.db = db
        self.sessions = sessions

    async def export(self, user: User, session_id: str) -> dict[str, Any]:
        """The session and its whole history, read in one transaction (``NOT_FOUND`` unless it is the caller's
        or the caller is an admin). Its cost is the session's: every message is read and written out once."""
        async with self.db.read() as s:
            row = await repo.get_session(s, session_id)
            if row is None or (row.owner_id != user.id and user.role != "admin"):
                raise RpcError("NOT_FOUND", "Session not found")
            messages = await repo.list_messages(s, session_id)
        session = repo.session_wire(row).wire()
        for name in ("lastSeq", "status", "queuePaused", "usage"):  # the state of the original, not of a copy
            session.pop(name, None)
        out = []
        for m in messages:
            body = repo.message_wire(m).wire()
            # Ids that mean something only here (the export is the active path: a line, as an import rebuilds it).
            for name in ("sessionId", "runId", "clientRequestId", "parentId", "versions", "siblingIds"):
                body.pop(name, None)
            out.append({k: v for k, v in body.items() if v is not None})
        return {
            "format": FORMAT,
            "version": VERSION,
            "exportedAt": repo.ms(utcnow()),
            "session": session,
            "messages": out,
        }

    async def import_(self, user: User, transcript: Transcript, request: RequestKey | None) -> dict[str, Any]:
        """A new session of ``user`` holding the transcript's messages (see the module docstring)."""
        replayed = await self.sessions.replayed(request, KEPT_WHOLE, as_is)
        if replayed is not MISSING:
            return replayed.wire()
        meta = transcript.session
        if meta.provider is not None and not known_provider(meta.provider):
            raise RpcError("BAD_REQUEST", f"unknown provider {meta.provider!r}; known: {', '.join(PROVIDER_IDS)}")
        provider, model = self.sessions.resolve_model(meta.provider, meta.model)
        now = utcnow()
        row = ChatSession(
            id=str(uuid.uuid4()),
            owner_id=user.id,
            title=meta.title,
            title_source=meta.title_source if meta.title else "none",
            provider=provider,
            model=model,
            system_prompt=meta.system_prompt,
            defaults=meta.defaults.model_dump(mode="json", by_alias=True, exclude_none=True) if meta.defaults else {},
            tools=[t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in meta.tools],
            tool_mode=meta.tool_mode,
            busy_policy=meta.busy_policy,
            disable_streaming=meta.disable_streaming,
            meta=meta.metadata.model_dump(mode="json", by_alias=True, exclude_none=True) if meta.metadata else {},
            status="idle",
            queue_paused=False,
            usage_input_tokens=0,
            usage_output_tokens=0,
            last_seq=0,
            created_at=now,
            updated_at=now,
            pinned=meta.pinned,
            archived=False,
        )

        async def messages(s: AsyncSession) -> None:
            owned = await _owned_files(s, user.id, transcript.messages)
            rows = [_message_row(row.id, i, m, owned, now) for i, m in enumerate(transcript.messages, 1)]
            for before, after in itertools.pairwise(rows):  # one line: each message's parent is the one before it
                after["parent_id"] = before["id"]
            if rows:
                await s.execute(insert(Message.__table__), rows)
            for r in rows:
                await refs.link(s, row.id, r["attachments"])

        session = await self.sessions.insert(user, row, request, KEPT_WHOLE, repo.session_wire(row), as_is, messages)
        return session.wire()


async def _owned_files(db: Any, user_id: str, messages: list[ImportedMessage]) -> dict[str, dict[str, Any]]:
    """The uploaded files the messages name that ``user_id`` owns, by id, as a message carries them (the
    name, type and size stored here, whatever the transcript says)."""
    ids = list(dict.fromkeys(str(a["fileId"]) for m in messages for a in m.attachments if "fileId" in a))
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(ids), 500):  # bounded statements, whatever the transcript names
        stmt = (
            select(StoredFile.id, StoredFile.name, FileBlob.media_type, FileBlob.size)
            .join(FileBlob, FileBlob.id == StoredFile.blob_id)
            .where(StoredFile.id.in_(ids[start : start + 500]), StoredFile.user_id == user_id)
        )
        for fid, name, media_type, size in (await db.execute(stmt)).all():
            found[fid] = {"fileId": fid, "name": name, "mediaType": media_type, "size": size}
    return found


def _attachments(items: list[dict[str, Any]], owned: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The attachments an imported message keeps: the importer's own uploaded files and references to paths
    (as ``message.send`` takes them); anything else is left out."""
    kept: list[dict[str, Any]] = []
    for item in items:
        if "fileId" in item:
            if str(item["fileId"]) in owned:
                kept.append(owned[str(item["fileId"])])
        elif "path" in item:
            try:
                path = FileAttachment.model_validate(item)
            except ValueError:
                continue
            kept.append(path.model_dump(mode="json", by_alias=True, exclude_none=True))
    return kept


def _message_row(
    session_id: str, ordinal: int, m: ImportedMessage, owned: dict[str, dict[str, Any]], now: datetime
) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "session_id": session_id,
        "ordinal": ordinal,
        "parent_id": None,
        "active": True,
        "left_seq": 0,
        "role": m.role,
        "content": m.content,
        "attachments": _attachments(m.attachments, owned),
        "tool_calls": [c.model_dump() for c in m.tool_calls] if m.tool_calls else None,
        "tool_call_id": m.tool_call_id,
        "status": "interrupted" if m.status == "streaming" else m.status,
        "finish_reason": m.finish_reason,
        "usage": m.usage,
        "run_id": None,
        "created_at": _when(m.created_at, now),
        "is_error": m.outcome not in (None, "ok"),
        "outcome": m.outcome,
        "client_request_id": None,
        "notices": [n.model_dump(mode="json", by_alias=True) for n in m.notices] if m.notices else None,
    }


# --- Markdown -------------------------------------------------------------------------------------------------

_SPEAKERS = {"user": "You", "assistant": "Assistant", "system": "System", "tool": "Tool result"}


def _fence(text: str, info: str = "") -> str:
    """``text`` as a fenced code block whose fence no run of backticks inside it can close."""
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _iso(ms: int | None) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC") if ms is not None else ""


def markdown(export: dict[str, Any]) -> str:
    """An export (:meth:`Transcripts.export`) as Markdown to read: a heading per message, its text as written
    (answers are Markdown already), tool calls and results as code blocks. Not meant to be imported."""
    session = export["session"]
    names: dict[str, str] = {}  # tool call id -> tool name, for the results
    out = [
        f"# {session['title'] or 'Untitled chat'}",
        "",
        f"- Model: {session['provider']} / {session['model']}",
        f"- Started: {_iso(session.get('createdAt'))}",
        f"- Exported: {_iso(export.get('exportedAt'))}",
    ]
    if session.get("systemPrompt"):
        out += ["", "System prompt:", "", _fence(session["systemPrompt"])]
    for m in export["messages"]:
        role = m["role"]
        out += ["", f"## {_SPEAKERS.get(role, role)}"]
        status = m.get("status", "complete")
        if status != "complete":
            out += ["", f"*({status})*"]
        if role == "tool":
            name = names.get(m.get("toolCallId") or "")
            out += ["", f"Result of `{name}`:"] if name else []
            out += ["", _fence(m.get("content", ""))]
            continue
        if m.get("content"):
            out += ["", m["content"]]
        for a in m.get("attachments") or []:
            out += ["", f"Attached: {a.get('name') or a.get('path') or 'a file'}"]
        for call in m.get("toolCalls") or []:
            names[call["id"]] = call["name"]
            out += ["", f"Tool call `{call['name']}`:", "", _fence(call.get("arguments", ""), "json")]
    return "\n".join(out) + "\n"
