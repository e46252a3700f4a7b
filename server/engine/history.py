"""Stored rows -> the canonical ``ChatRequest`` every provider adapter converts (invariant 6).

Choices made here:

* Uploaded files (``{"fileId", "name", "mediaType", "size"}``) become canonical attachments; their bytes are
  loaded by :func:`load_files` just before the request goes out (newest messages first, at most
  ``LOAD_BUDGET_BYTES`` in all), and ``server.llm.convert`` renders them per provider (docs/attachments.md).
* Path references (``{"path", "relativePath"}``, files on the server's own machine) are not read: they reach the
  model as a line ``[Attached file: <path>]`` after the user's text.
* The assistant message being streamed (empty, status ``streaming``) is left out; every other message is
  sent, interrupted ones included — ``server.llm.convert`` pairs their calls with synthesised results.
* Images a tool returned (MCP tools, kept on the tool message with their bytes) follow the tool's result as a
  user message holding them, so every provider gets them as it gets a user's images; ``server.llm.convert``
  places it after all the step's results.
* Generation defaults come from the session (``defaults`` holds camelCase keys as sent on the wire).
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple, cast

from ..domain.models import MessageStatus, Role
from ..llm import Attachment, ChatRequest, Message, ModelInputs, RequestOptions, ToolCall, ToolDefinition
from ..llm.convert.files import NO_IMAGES, OVER_BUDGET, UNSUPPORTED, kind_of
from ..protocol.errors import RpcError
from ..store.prepared import json_value
from ..store.repo import HistoryRow as MessageRow
from ..store.repo import StoredRow
from ..store.session_row import SessionFields

# Bytes of uploaded files held for one request (each file is bounded by CHATSYNC_MAX_FILE_BYTES); files of older
# messages past it are named to the model instead. Every provider's own request limit is lower (convert.files).
LOAD_BUDGET_BYTES = 64 * 1024 * 1024
GONE = "it is no longer stored."
NOT_SERVED = "this server keeps no uploaded files."


def _uploaded(items: Sequence[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [a for a in items or () if "fileId" in a]


def _content(row: MessageRow) -> str:
    paths = [a for a in row.attachments or () if "fileId" not in a] if row.role == "user" else []
    if not paths:
        return row.content
    lines = [f"[Attached file: {a.get('relativePath') or a.get('path')}]" for a in paths]
    return "\n\n".join([row.content, "\n".join(lines)]) if row.content else "\n".join(lines)


def to_message(row: MessageRow) -> Message:
    status = "interrupted" if row.status == "streaming" else row.status
    files = tuple(
        Attachment(
            name=a.get("name") or "file",
            media_type=a.get("mediaType") or "application/octet-stream",
            file_id=a["fileId"],
        )
        for a in (_uploaded(row.attachments) if row.role == "user" else ())
    )
    # The columns are plain text and the model's fields literal types: the rows hold only values written from
    # those literals, which the row types (``repo.HistoryRow``, the ORM's ``Message``) assert.
    return Message(
        role=row.role,
        content=_content(row),
        attachments=files,
        tool_calls=tuple(
            ToolCall(id=c["id"], name=c["name"], arguments=c.get("arguments") or "{}") for c in row.tool_calls or ()
        ),
        tool_call_id=row.tool_call_id if row.role == "tool" else None,
        is_error=bool(row.is_error),
        status=status,
    )


def tool_definitions(session: SessionFields) -> tuple[ToolDefinition, ...]:
    return tuple(
        ToolDefinition(
            name=t["name"],
            description=t.get("description") or "",
            parameters=t.get("parameters") or {"type": "object", "properties": {}},
        )
        for t in session.tools or ()
    )


def converted(row: MessageRow) -> tuple[Message, ...]:
    """What one stored message is in a request: its message, and for a tool result with images the user message
    holding them (:func:`tool_images`)."""
    if row.role == "tool" and row.attachments:
        return (to_message(row), tool_images(row))
    return (to_message(row),)


def build_request(
    session: SessionFields,
    rows: Sequence[MessageRow],
    *,
    exclude: str | None = None,
    inputs: ModelInputs | None = None,
    model: str | None = None,
    continuation: bool = False,
) -> ChatRequest:
    """The request for ``rows`` (uploaded files named, not loaded: see :func:`load_files`). ``inputs``: what the
    session's model takes, when the caller decided it (else the converters apply the documented rule).
    ``model``: another model than the session's (a regenerate's); ``continuation``: the last row is an answer
    that goes on."""
    messages: list[Message] = []
    for row in rows:
        if row.id != exclude and (row.role != "tool" or row.tool_call_id):
            messages.extend(converted(row))
    return _request(session, messages, inputs, model, continuation)


def build_stored_request(
    session: SessionFields,
    rows: Sequence[StoredRow],
    *,
    exclude: str | None = None,
    inputs: ModelInputs | None = None,
    model: str | None = None,
    continuation: bool = False,
    cache: ConvertedMessages | None = None,
) -> ChatRequest:
    """:func:`build_request` for the rows of ``repo.stored_history`` (what a run's step reads), each converted
    once per process: the messages of a row seen before come from ``cache`` (the process's by default)."""
    of = (CONVERTED if cache is None else cache).of
    messages: list[Message] = []
    for row in rows:
        if row[0] != exclude and (row[1] != "tool" or row[5]):
            messages.extend(of(row))
    return _request(session, messages, inputs, model, continuation)


def _request(
    session: SessionFields, messages: list[Message], inputs: ModelInputs | None, model: str | None, continuation: bool
) -> ChatRequest:
    defaults: dict[str, Any] = session.defaults or {}
    options = RequestOptions(
        model=model or session.model,
        continuation=continuation,
        temperature=defaults.get("temperature"),
        max_tokens=defaults.get("maxTokens", defaults.get("max_tokens")),
        top_p=defaults.get("topP", defaults.get("top_p")),
        system_prompt=session.system_prompt,
        inputs=inputs,
    )
    return ChatRequest(messages=tuple(messages), options=options, tools=tool_definitions(session))


class _Stored(NamedTuple):
    """A :data:`StoredRow` with its JSON read (a ``repo.HistoryRow``)."""

    id: str
    role: Role
    content: str
    attachments: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    status: MessageStatus
    is_error: bool


class ConvertedMessages:
    """Stored messages -> what they are in a request (:func:`converted`), remembered by the whole stored row.

    Every step of a run reads its whole conversation, and converting a message (its JSON read, the request's
    models built) costs far more than finding it again: a step of a 400-message chat would convert 400 messages
    to add one. The key is every column the conversion reads, so a message whose row changed (an answer that went
    on, a status) is simply another key, and nothing is ever invalidated; the messages are immutable, so steps
    of any session share them. Bounded by ``budget`` (characters of the rows held, about their bytes); the
    messages used least recently go first.

    While the cache is full, a new row goes in at the end that leaves first, and only one in
    ``FULL_INSERT_EVERY`` at the other: the steps of a process may together read more conversations than fit,
    each conversation in full at every step, and with every new row going in as the most recent each step would
    push out what the next one needs (every row a miss, and the collector busy with messages made and dropped).
    So the rows that are found again stay, the ones that are not leave first, and a new working set still takes
    over, a row in ``FULL_INSERT_EVERY`` at a time.
    """

    __slots__ = ("_entries", "_held", "_inserts", "budget")

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._entries: OrderedDict[StoredRow, tuple[tuple[Message, ...], int]] = OrderedDict()
        self._held = 0
        self._inserts = 0  # rows put in while the cache was full

    def of(self, row: StoredRow) -> tuple[Message, ...]:
        entries = self._entries
        found = entries.get(row)
        if found is not None:
            entries.move_to_end(row)
            return found[0]
        mid, role, content, attachments, tool_calls, call_id, status, is_error = row
        messages = converted(
            _Stored(
                mid,
                cast(Role, role),
                content,
                json_value(attachments) or [],
                json_value(tool_calls),
                call_id,
                cast(MessageStatus, status),
                bool(is_error),
            )
        )
        # An image a tool returned is held twice (its base64 text in the key, its bytes in the message).
        size = ENTRY_OVERHEAD + len(content) + 2 * len(attachments or "") + len(tool_calls or "")
        if size <= self.budget:
            full = False
            while self._held + size > self.budget:
                self._held -= entries.popitem(last=False)[1][1]
                full = True
            entries[row] = (messages, size)
            self._held += size
            if full:
                self._inserts += 1
                if self._inserts % FULL_INSERT_EVERY:
                    entries.move_to_end(row, last=False)  # the next to leave, unless found again first
        return messages

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def held(self) -> int:
        """Characters of the rows held (the bound's measure)."""
        return self._held


# What an entry costs besides its text (the key's tuple, the message objects), counted as characters.
ENTRY_OVERHEAD = 512
# While the cache is full, one new row in this many goes in as the most recently used (the others as the least).
FULL_INSERT_EVERY = 32
# The process's converted messages: 32 Mi characters of conversation, some thousands of chats' recent history.
CONVERTED = ConvertedMessages(32 * 1024 * 1024)


def tool_images(row: MessageRow) -> Message:
    """The images of a tool result as the user message the model gets them in."""
    images = tuple(
        Attachment(
            name=str(a.get("name") or "image"),
            media_type=str(a.get("mediaType") or "application/octet-stream"),
            data=base64.b64decode(a.get("data") or ""),
        )
        for a in row.attachments
    )
    return Message(role="user", content=f"[Images returned by tool call {row.tool_call_id}]", attachments=images)


Reader = Callable[[str], Awaitable[bytes]]


def has_files(request: ChatRequest) -> bool:
    return any(m.attachments for m in request.messages)


async def load_files(request: ChatRequest, read: Reader | None, cache: dict[str, bytes] | None = None) -> ChatRequest:
    """``request`` with the bytes of its uploaded files, newest messages first, at most ``LOAD_BUDGET_BYTES``.

    ``read(file_id)`` returns a file's bytes and raises ``RpcError(NOT_FOUND)`` for a file that is gone (it is then
    named as gone); any other failure propagates, since answering without a file the user sent would be wrong.
    ``cache`` (file id -> bytes) lets the steps of one run read each file once."""
    cache = {} if cache is None else cache
    budget = LOAD_BUDGET_BYTES
    messages = list(request.messages)
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not message.attachments:
            continue
        loaded = []
        for att in message.attachments:
            loaded.append(await _load(att, read, cache, budget))
            budget -= len(loaded[-1].data)
        messages[index] = message.model_copy(update={"attachments": tuple(loaded)})
    return request.model_copy(update={"messages": tuple(messages)})


async def _load(att: Attachment, read: Reader | None, cache: dict[str, bytes], budget: int) -> Attachment:
    if att.file_id is None or att.data or att.missing:
        return att
    if read is None:
        return att.model_copy(update={"missing": NOT_SERVED})
    data = cache.get(att.file_id)
    if data is None:
        if budget <= 0:
            return att.model_copy(update={"missing": OVER_BUDGET})
        try:
            data = await read(att.file_id)
        except RpcError as exc:
            if exc.code != "NOT_FOUND":
                raise
            return att.model_copy(update={"missing": GONE})
        cache[att.file_id] = data
    if len(data) > budget:
        return att.model_copy(update={"missing": OVER_BUDGET})
    return att.model_copy(update={"data": data})


def notices(request: ChatRequest) -> list[dict[str, Any]]:
    """What the user should be told about the files of the messages this step answers (those after the last
    assistant message): each one the model is given only as a placeholder, and why. The same words as the
    placeholder the model sees (``server.llm.convert.files``)."""
    inputs = request.options.inputs
    out: list[dict[str, Any]] = []
    for message in reversed(request.messages):
        if message.role == "assistant":
            break
        for att in reversed(message.attachments):
            kind = kind_of(att)
            if att.missing is not None:
                why = att.missing
            elif kind == "image" and inputs is not None and not inputs.images:
                why = NO_IMAGES
            elif kind == "other":
                why = f"its type ({att.media_type}) {UNSUPPORTED}"
            else:
                continue
            out.append(
                {
                    "code": "attachment-not-sent",
                    "fileId": att.file_id,
                    "name": att.name,
                    "message": f"{att.name} was not given to the model: {why}",
                }
            )
    out.reverse()
    return out
