"""Stored rows -> the canonical ``ChatRequest`` every provider adapter converts (invariant 6).

Choices made here:

* Attachments are file references, not file contents: they reach the model as a line
  ``[Attached file: <path>]`` after the user's text.
* The assistant message being streamed (empty, status ``streaming``) is left out; every other message is
  sent, interrupted ones included — ``server.llm.convert`` pairs their calls with synthesised results.
* Generation defaults come from the session (``defaults`` holds camelCase keys as sent on the wire).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..llm import ChatRequest, Message, RequestOptions, ToolCall, ToolDefinition
from ..store.models import ChatSession
from ..store.models import Message as MessageRow


def _content(row: MessageRow) -> str:
    if row.role != "user" or not row.attachments:
        return row.content
    lines = [f"[Attached file: {a.get('relativePath') or a.get('path')}]" for a in row.attachments]
    return "\n\n".join([row.content, "\n".join(lines)]) if row.content else "\n".join(lines)


def to_message(row: MessageRow) -> Message:
    status = "interrupted" if row.status == "streaming" else row.status
    return Message(
        role=row.role,  # type: ignore[arg-type]
        content=_content(row),
        tool_calls=tuple(ToolCall(id=c["id"], name=c["name"], arguments=c.get("arguments") or "{}")
                         for c in row.tool_calls or ()),
        tool_call_id=row.tool_call_id if row.role == "tool" else None,
        is_error=bool(row.is_error),
        status=status,  # type: ignore[arg-type]
    )


def tool_definitions(session: ChatSession) -> tuple[ToolDefinition, ...]:
    return tuple(ToolDefinition(name=t["name"], description=t.get("description") or "",
                                parameters=t.get("parameters") or {"type": "object", "properties": {}})
                 for t in session.tools or ())


def build_request(session: ChatSession, rows: Sequence[MessageRow], *, exclude: str | None = None) -> ChatRequest:
    defaults: dict[str, Any] = session.defaults or {}
    options = RequestOptions(
        model=session.model,
        temperature=defaults.get("temperature"),
        max_tokens=defaults.get("maxTokens", defaults.get("max_tokens")),
        top_p=defaults.get("topP", defaults.get("top_p")),
        system_prompt=session.system_prompt,
    )
    messages = tuple(to_message(r) for r in rows
                     if r.id != exclude and not (r.role == "tool" and not r.tool_call_id))
    return ChatRequest(messages=messages, options=options, tools=tool_definitions(session))
