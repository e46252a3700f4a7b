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
from itertools import chain
from operator import attrgetter
from typing import Any, NamedTuple, cast

from ..domain.models import MessageStatus, Role
from ..llm import Attachment, ChatRequest, Message, ModelInputs, RequestOptions, ToolCall, ToolDefinition
from ..llm.convert.files import NO_IMAGES, OVER_BUDGET, UNSUPPORTED, kind_of
from ..llm.convert.history import ResumePoint, resume_point
from ..llm.convert.slices import Sliced, at_once, sharing_loop
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
    cache: Conversations,
) -> ChatRequest:
    """:func:`build_request` for the rows of ``repo.stored_history`` (what a run's step reads): the part of the
    conversation the session's last step converted comes from ``cache`` (the process's, ``RunContext``), and only
    the rows after it are converted. In one go: a step does the same in two parts (:func:`request_frame` in its
    transaction, :func:`with_history` after it)."""
    messages = cache.messages(session.id, rows, exclude)
    return _request(session, messages, inputs, model, continuation)


class StoredHistory(NamedTuple):
    """What a step read of its conversation (``repo.stored_history``) in the transaction that started it: the
    request's messages are made of it once that transaction is over (:func:`with_history`)."""

    session_id: str
    rows: Sequence[StoredRow]
    exclude: str | None  # the answer being written, left out


def request_frame(
    session: SessionFields,
    *,
    inputs: ModelInputs | None = None,
    model: str | None = None,
    continuation: bool = False,
) -> ChatRequest:
    """The request of a step without its messages (:func:`with_history` adds them): what the session's row says,
    taken while the transaction that read it is open."""
    return _request(session, (), inputs, model, continuation)


async def with_history(request: ChatRequest, history: StoredHistory, cache: Conversations) -> ChatRequest:
    """``request`` with the messages of ``history``, converted as :func:`build_stored_request` does but giving the
    event loop back every ``CONVERT_SLICE`` rows: the first step of a long chat after a restart converts
    thousands of messages, and every other session of the process streams meanwhile."""
    messages = await cache.messages_sharing_loop(history.session_id, history.rows, history.exclude)
    return ChatRequest.model_construct(messages=messages, options=request.options, tools=request.tools)


def _request(
    session: SessionFields,
    messages: Sequence[Message],
    inputs: ModelInputs | None,
    model: str | None,
    continuation: bool,
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
    # Every part is a model already validated (the messages when converted): constructing the request does not
    # validate them all again, which for a long chat cost more than finding its messages.
    return ChatRequest.model_construct(messages=tuple(messages), options=options, tools=tool_definitions(session))


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


def _stored_messages(row: StoredRow) -> tuple[Message, ...]:
    """What one stored row is in a request: nothing for a tool result without a call id, else :func:`converted`."""
    mid, role, content, attachments, tool_calls, call_id, status, is_error = row
    if role == "tool" and not call_id:
        return ()
    return converted(
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


def _size(row: StoredRow) -> int:
    """What a row counts for against the bound: its text and an entry's overhead (an image a tool returned is
    held twice: its base64 text in the row, its bytes in the message)."""
    return ENTRY_OVERHEAD + len(row[2]) + 2 * len(row[3] or "") + len(row[4] or "")


def _common_prefix(old: Sequence[StoredRow], new: Sequence[StoredRow]) -> int:
    """How many rows ``old`` and ``new`` begin with alike. Slices are compared whole (in C): a step usually finds
    everything the last one kept and rows after it, or (an answer that goes on) all but the last row."""
    n = min(len(old), len(new))
    if old[:n] == new[:n]:
        return n
    if old[: n - 1] == new[: n - 1]:
        return n - 1
    alike, differs = 0, n - 1  # old[:alike] == new[:alike], old[:differs] != new[:differs]
    while differs - alike > 1:
        mid = (alike + differs) // 2
        if old[:mid] == new[:mid]:
            alike = mid
        else:
            differs = mid
    return alike


class _Conversation:
    """What a session's last step read (its rows as stored) and the messages made of them, in order: row ``i``
    made ``messages[starts[i]:starts[i + 1]]``, and the first ``i`` rows count ``sizes[i]`` against the bound;
    and where the providers' normalization of those messages can resume (held here, so it lives as long)."""

    __slots__ = ("messages", "point", "rows", "sizes", "starts")

    def __init__(self, rows: list[StoredRow], messages: list[Message], starts: list[int], sizes: list[int]) -> None:
        self.rows, self.messages, self.starts, self.sizes = rows, messages, starts, sizes
        self.point: ResumePoint | None = None


class Conversations:
    """Stored conversations -> the messages of their requests, kept per session between steps.

    Every step of a run reads its whole conversation (``repo.stored_history``), and a step of a long chat would
    otherwise convert every message again to add one or two (their JSON read, the request's models built). So the
    messages the session's last step made are kept with the rows they came from; the next step compares what it
    read with those rows (whole slices, in C), takes the messages of the rows that are alike and converts only the
    rest: new messages, the answer that was being written, everything after a branch point or an edited message.
    Nothing is ever invalidated: a row that changed in any column is simply not alike. The messages are immutable.

    Bounded by ``budget`` (bytes: the characters of the rows held plus ``ENTRY_OVERHEAD`` a row); the
    sessions whose steps came least recently go first. While the cache is full, a conversation that was not held
    is not kept, but one in ``FULL_INSERT_EVERY`` goes in as the most recent. The steps of a process may together
    read more conversations than fit, each in turn: with every conversation going in, each step would push out
    the one the next step needs (every step a miss), and a conversation kept only until the next miss would live
    just long enough for the collector to move its thousands of objects into its older generations. So the
    conversations that are found again stay, the others are dropped as soon as their step is done, and a new
    working set still takes over, a conversation in ``FULL_INSERT_EVERY`` at a time.
    """

    __slots__ = ("_entries", "_held", "_inserts", "budget")

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._entries: OrderedDict[str, _Conversation] = OrderedDict()
        self._held = 0
        self._inserts = 0  # conversations not held met while the cache was full

    def messages(self, session_id: str, rows: Sequence[StoredRow], exclude: str | None = None) -> tuple[Message, ...]:
        """The request's messages for ``rows`` (the session's active path as stored), without the row ``exclude``
        (the answer being written)."""
        return at_once(self._messages(session_id, rows, exclude))

    async def messages_sharing_loop(
        self, session_id: str, rows: Sequence[StoredRow], exclude: str | None = None
    ) -> tuple[Message, ...]:
        """:meth:`messages`, letting the event loop run other work every ``CONVERT_SLICE`` rows converted. The
        session's conversation is out of the cache meanwhile (its steps come one after another)."""
        return await sharing_loop(self._messages(session_id, rows, exclude))

    def _messages(self, session_id: str, rows: Sequence[StoredRow], exclude: str | None) -> Sliced[tuple[Message, ...]]:
        """:meth:`messages`, pausing (a ``yield``) after every ``CONVERT_SLICE`` rows it converts."""
        end = len(rows)
        if exclude is not None:
            # The answer being written is the path's last row; anywhere else it is looked for from the end. It is
            # neither converted nor kept: its next step reads it changed, or not left out.
            for index in range(len(rows) - 1, -1, -1):
                if rows[index][0] == exclude:
                    end = index
                    break
        held = self._entries.pop(session_id, None)
        if held is None:
            alike, kept, messages, starts, sizes = 0, [], [], [0], [0]
        else:
            self._held -= held.sizes[-1]
            alike = min(_common_prefix(held.rows, rows), end)
            # The rows held are kept (the ones just read are equal): one copy of each text in the process.
            kept, starts, sizes = held.rows[:alike], held.starts[: alike + 1], held.sizes[: alike + 1]
            messages = held.messages[: starts[-1]]
        total = sizes[-1]
        for count, row in enumerate(rows[alike:end], 1):
            messages.extend(_stored_messages(row))
            starts.append(len(messages))
            total += _size(row)
            sizes.append(total)
            if not count % CONVERT_SLICE:
                yield
        kept.extend(rows[alike:end])
        conversation = _Conversation(kept, messages, starts, sizes)
        if self._keep(session_id, conversation, held is not None) and messages:
            # The normalization every adapter makes of the request resumes where the last one stopped
            # (``llm.convert.history.normalize``), for as long as the conversation is kept.
            point = None if held is None else held.point
            conversation.point = (
                point if point is not None and point.first is messages[0] else resume_point(messages[0])
            )
        if end + 1 < len(rows):  # rows after the one left out: converted, not kept
            return (*messages, *chain.from_iterable(map(_stored_messages, rows[end + 1 :])))
        return tuple(messages)

    def _keep(self, session_id: str, conversation: _Conversation, was_held: bool) -> bool:
        size = conversation.sizes[-1]
        if size > self.budget:
            return False
        entries = self._entries
        if not was_held and self._held + size > self.budget:
            self._inserts += 1
            if self._inserts % FULL_INSERT_EVERY:
                return False  # not kept: its next step reads it in full, as it would after it had been pushed out
        while entries and self._held + size > self.budget:
            self._held -= entries.popitem(last=False)[1].sizes[-1]
        entries[session_id] = conversation
        self._held += size
        return True

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def held(self) -> int:
        """Characters of the rows held (the bound's measure)."""
        return self._held


# What a row costs besides its text, in bytes: its tuple and column strings, its message, the turn normalizing
# made of it and the cache's own lists. About 1,500 bytes measured (tracemalloc, CPython 3.11; the test of the
# bound keeps this at or above the real figure), rounded up.
ENTRY_OVERHEAD = 2048
# While the cache is full, one conversation in this many not held goes in (as the most recently used).
FULL_INSERT_EVERY = 32
# Rows a step converts before it lets the event loop run other work (a few milliseconds of conversion).
CONVERT_SLICE = 256


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
    return any(map(_ATTACHMENTS, request.messages))


_ATTACHMENTS = attrgetter("attachments")


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
