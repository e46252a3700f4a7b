"""Canonical history -> OpenAI Chat Completions request.

``OpenAIProfile`` captures what differs between OpenAI itself and OpenAI-compatible servers whose chat templates
validate the conversation (vLLM, llama.cpp, Ollama ``/v1``): where system messages may go, whether consecutive user
turns must be merged, which id shape is accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..types import ChatRequest, ToolDefinition
from .encode import IdStyle, arguments_string, map_tool_call_id
from .files import BinaryPart, Part, b64, has_binary, inputs_for, joined_text, user_parts
from .history import (
    AFTER_RESULTS_TEXT,
    ANCHOR_TEXT,
    AssistantTurn,
    ResultsTurn,
    SystemTurn,
    UserTurn,
    request_turns,
    split_leading_system,
    wrap_system,
)


@dataclass(frozen=True)
class OpenAIProfile:
    """Target quirks. ``OPENAI`` for api.openai.com, ``COMPATIBLE`` for template-validated servers."""

    # "inline": system messages stay where they are (OpenAI accepts them anywhere).
    # "leading": one merged leading system message; later ones become <system> user text (Qwen/Mistral templates).
    system_mode: Literal["inline", "leading"] = "inline"
    # Strict templates ("roles must alternate"): consecutive user turns and consecutive assistant turns are
    # merged, the conversation after the system message starts with a user turn (an anchor is added), and user
    # text right after tool results gets a placeholder assistant turn in between.
    merge_same_role: bool = False
    id_style: IdStyle = "openai"
    # o1+ models want `developer` instead of `system`; many compatible hosts reject it.
    system_role: Literal["system", "developer"] = "system"
    # OpenAI deprecated max_tokens for max_completion_tokens; compatible servers mostly only know max_tokens.
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_completion_tokens"
    # Attachment rules and limits (server.llm.capabilities, convert.files): only OpenAI itself has `file` parts.
    target: Literal["openai", "compatible"] = "openai"


OPENAI = OpenAIProfile()
COMPATIBLE = OpenAIProfile(
    system_mode="leading", merge_same_role=True, max_tokens_field="max_tokens", target="compatible"
)
MISTRAL = OpenAIProfile(
    system_mode="leading", merge_same_role=True, id_style="mistral", max_tokens_field="max_tokens", target="compatible"
)

Content = str | list[dict[str, Any]]


def _part(part: Part) -> dict[str, Any]:
    """An attachment as a content part: ``image_url`` with a data: URL, ``file`` with ``file_data`` [AT1][AT2]."""
    if not isinstance(part, BinaryPart):
        return {"type": "text", "text": part.text}
    url = f"data:{part.media_type};base64,{b64(part.data)}"
    if part.kind == "image":
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "file", "file": {"filename": part.name, "file_data": url}}


def _user_content(text: str, parts: list[Part]) -> Content:
    """A plain string unless there are images or documents: what every compatible server reads."""
    if not has_binary(parts):
        return joined_text(parts, text)
    content = [_part(p) for p in parts]
    if text:
        content.append({"type": "text", "text": text})
    return content


def _merge(first: Content, second: Content) -> Content:
    if isinstance(first, str) and isinstance(second, str):
        return f"{first}\n\n{second}"
    as_parts = [c if isinstance(c, list) else [{"type": "text", "text": c}] for c in (first, second)]
    return as_parts[0] + as_parts[1]


def openai_tools(tools: tuple[ToolDefinition, ...]) -> list[dict[str, Any]]:
    """Tool definitions in the Chat Completions ``tools`` shape."""
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


def to_openai_messages(request: ChatRequest, profile: OpenAIProfile = OPENAI) -> list[dict[str, Any]]:
    """The ``messages`` array for ``request`` under ``profile``."""
    turns = request_turns(request, prefill=False)
    out: list[dict[str, Any]] = []
    if profile.system_mode == "leading":
        leading, turns = split_leading_system(turns, request.options.system_prompt)
        if leading:
            out.append({"role": profile.system_role, "content": "\n\n".join(leading)})
    elif request.options.system_prompt:
        out.append({"role": profile.system_role, "content": request.options.system_prompt})
    files = user_parts(turns, profile.target, inputs_for(request, profile.target))

    def add_user(content: Content) -> None:
        last = out[-1] if out else None
        if profile.merge_same_role and last is not None and last["role"] == "user":
            last["content"] = _merge(last["content"], content)
            return
        if profile.merge_same_role and last is not None and last["role"] == "tool":
            out.append({"role": "assistant", "content": AFTER_RESULTS_TEXT})
        out.append({"role": "user", "content": content})

    for position, turn in enumerate(turns):
        if isinstance(turn, SystemTurn):
            if profile.system_mode == "inline":
                out.append({"role": profile.system_role, "content": turn.text})
            else:
                add_user(wrap_system(turn.text))
        elif isinstance(turn, UserTurn):
            add_user(_user_content(turn.text, files.get(position, [])))
        elif isinstance(turn, AssistantTurn):
            msg: dict[str, Any] = {"role": "assistant"}
            if turn.calls:
                # content may be null only when tool_calls are present.
                msg["content"] = turn.text or None
                msg["tool_calls"] = [
                    {
                        "id": map_tool_call_id(c.id, profile.id_style),
                        "type": "function",
                        "function": {"name": c.name, "arguments": arguments_string(c.arguments)},
                    }
                    for c in turn.calls
                ]
            else:
                msg["content"] = turn.text
            last = out[-1] if out else None
            if profile.merge_same_role and last is not None and last["role"] == "assistant":
                # Only a text-only assistant can precede (calls are always followed by results): merge into it.
                texts = [t for t in (last["content"], msg.get("content")) if t]
                msg["content"] = "\n\n".join(texts) if texts else None
                out[-1] = msg
            else:
                out.append(msg)
        elif isinstance(turn, ResultsTurn):
            # One `tool` message per call, adjacent to the assistant message, in call order.
            out.extend(
                {"role": "tool", "tool_call_id": map_tool_call_id(r.call.id, profile.id_style), "content": r.content}
                for r in turn.results
            )
    first = next((k for k, m in enumerate(out) if m["role"] not in ("system", "developer")), None)
    if first is None:
        # Never `messages: []` (or only a system message): an empty send or instructions on a new session.
        out.append({"role": "user", "content": ANCHOR_TEXT})
    elif profile.merge_same_role and out[first]["role"] != "user":
        out.insert(first, {"role": "user", "content": ANCHOR_TEXT})
    return out


def to_openai_request(request: ChatRequest, profile: OpenAIProfile = OPENAI) -> dict[str, Any]:
    """Keyword arguments for ``AsyncOpenAI().chat.completions.create`` (without ``stream``)."""
    opts = request.options
    body: dict[str, Any] = {"model": opts.model, "messages": to_openai_messages(request, profile)}
    if request.tools:
        body["tools"] = openai_tools(request.tools)
    if opts.temperature is not None:
        body["temperature"] = opts.temperature
    if opts.top_p is not None:
        body["top_p"] = opts.top_p
    if opts.max_tokens is not None:
        body[profile.max_tokens_field] = opts.max_tokens
    return body
