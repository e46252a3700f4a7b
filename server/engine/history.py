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
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..llm import Attachment, ChatRequest, Message, ModelInputs, RequestOptions, ToolCall, ToolDefinition
from ..llm.convert.files import NO_IMAGES, OVER_BUDGET, UNSUPPORTED, kind_of
from ..protocol.errors import RpcError
from ..store.repo import HistoryRow as MessageRow
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
    messages: list[Message] = []
    for row in rows:
        if row.id == exclude or (row.role == "tool" and not row.tool_call_id):
            continue
        messages.append(to_message(row))
        if row.role == "tool" and row.attachments:
            messages.append(tool_images(row))
    return ChatRequest(messages=tuple(messages), options=options, tools=tool_definitions(session))


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
