"""Canonical history -> Anthropic Messages request.

- leading system texts (and the request's system prompt) go to top-level ``system``; later system messages
  become ``<system>`` user text placed after the tool results (the inline ``role: system`` beta is model-gated and
  not used here);
- messages strictly alternate, starting with ``user``: same-role turns are merged into one message with several
  blocks, and a minimal user anchor is prepended when the history starts with the assistant;
- tool results are ``tool_result`` blocks at the *start* of the next user message, text after them;
- ids are sanitised to ``^[a-zA-Z0-9_-]+$`` with the same mapping on ``tool_use`` and ``tool_result``;
- ``input`` is always an object (invalid/non-object JSON wrapped);
- no empty text blocks, no empty messages; a final assistant prefill loses trailing whitespace;
- no sampling options: the API version the SDK speaks (``anthropic-version: 2026-10-21``) refuses ``temperature``,
  ``top_p`` and ``top_k`` with a 400, so a session's ``temperature`` and ``topP`` are not sent here.
"""

from __future__ import annotations

from typing import Any

from ..types import ChatRequest, ToolDefinition
from .encode import arguments_object, map_tool_call_id
from .files import BinaryPart, Part, b64, inputs_for, user_parts
from .history import (
    ANCHOR_TEXT,
    AssistantTurn,
    ResultsTurn,
    SystemTurn,
    UserTurn,
    request_turns,
    split_leading_system,
    wrap_system,
)

DEFAULT_MAX_TOKENS = 4096  # Anthropic requires max_tokens; the canonical options may leave it unset.
EMPTY_RESULT = "(no output)"  # an empty tool_result content is risky (an empty list is rejected)


def anthropic_tools(tools: tuple[ToolDefinition, ...]) -> list[dict[str, Any]]:
    """Tool definitions in the Messages API shape."""
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _part(part: Part) -> dict[str, Any]:
    """An attachment part: ``image`` / ``document`` blocks with base64 sources [AT4][AT5], or text."""
    if not isinstance(part, BinaryPart):
        return _text(part.text)
    source = {"type": "base64", "media_type": part.media_type, "data": b64(part.data)}
    if part.kind == "image":
        return {"type": "image", "source": source}
    return {"type": "document", "source": source, "title": part.name}


def to_anthropic_messages(request: ChatRequest) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system, messages)`` for ``request``."""
    leading, turns = split_leading_system(request_turns(request, prefill=True), request.options.system_prompt)
    files = user_parts(turns, "anthropic", inputs_for(request, "anthropic"))
    messages: list[dict[str, Any]] = []

    def blocks_for(role: str) -> list[dict[str, Any]]:
        # Appending to the last message when the role repeats is what keeps the roles alternating.
        if not messages or messages[-1]["role"] != role:
            messages.append({"role": role, "content": []})
        blocks: list[dict[str, Any]] = messages[-1]["content"]
        return blocks

    for position, turn in enumerate(turns):
        if isinstance(turn, SystemTurn):
            blocks_for("user").append(_text(wrap_system(turn.text)))
        elif isinstance(turn, UserTurn):
            # Files before the text: "Claude works best when images come before text" [AT4].
            blocks = blocks_for("user")
            blocks.extend(_part(p) for p in files.get(position, ()))
            if turn.text:
                blocks.append(_text(turn.text))
        elif isinstance(turn, AssistantTurn):
            blocks = blocks_for("assistant")
            if turn.text:
                blocks.append(_text(turn.text))
            blocks.extend(
                {
                    "type": "tool_use",
                    "id": map_tool_call_id(c.id, "anthropic"),
                    "name": c.name,
                    "input": arguments_object(c.arguments),
                }
                for c in turn.calls
            )
        elif isinstance(turn, ResultsTurn):
            # Always a fresh user message: the previous message is the assistant turn holding the calls.
            blocks = blocks_for("user")
            for r in turn.results:
                block: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": map_tool_call_id(r.call.id, "anthropic"),
                    "content": r.content or EMPTY_RESULT,
                }
                if r.is_error:
                    block["is_error"] = True
                blocks.append(block)

    if messages and messages[0]["role"] == "assistant":
        messages.insert(0, {"role": "user", "content": [_text(ANCHOR_TEXT)]})
    if messages and messages[-1]["role"] == "assistant":
        last = messages[-1]["content"]
        # A final assistant message is a prefill and "cannot end with trailing whitespace".
        if last[-1]["type"] == "text":
            last[-1]["text"] = last[-1]["text"].rstrip()
            if not last[-1]["text"]:
                last.pop()
        if not last:
            messages.pop()
    if not messages:
        messages.append({"role": "user", "content": [_text(ANCHOR_TEXT)]})
    system = "\n\n".join(leading) if leading else None
    return system, messages


def to_anthropic_request(request: ChatRequest) -> dict[str, Any]:
    """Keyword arguments for ``AsyncAnthropic().messages.create`` (without ``stream``)."""
    opts = request.options
    system, messages = to_anthropic_messages(request)
    body: dict[str, Any] = {
        "model": opts.model,
        "messages": messages,
        "max_tokens": opts.max_tokens or DEFAULT_MAX_TOKENS,
    }
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = anthropic_tools(request.tools)
    return body
