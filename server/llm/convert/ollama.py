"""Canonical history -> Ollama native ``/api/chat`` request.

Ollama validates nothing itself (the model's chat template renders whatever arrives), so the target is the
documented shape: system messages in place, ``arguments`` as objects, one ``tool`` message per call in call order
carrying ``tool_name`` — the field ollama-python's typed ``Message`` actually sends (it has no ``tool_call_id``,
so pairing is by name and order, as in the docs). The repaired history keeps every call next to its
result, which matters because the server silently drops the oldest messages to fit ``num_ctx``.
"""

from __future__ import annotations

from typing import Any

from ..types import ChatRequest, ToolDefinition
from .encode import arguments_object
from .files import BinaryPart, inputs_for, joined_text, user_parts
from .history import ANCHOR_TEXT, AssistantTurn, ResultsTurn, SystemTurn, UserTurn, request_turns


def ollama_tools(tools: tuple[ToolDefinition, ...]) -> list[dict[str, Any]]:
    """Tool definitions in the ``/api/chat`` shape."""
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


def to_ollama_messages(request: ChatRequest) -> list[dict[str, Any]]:
    """The ``messages`` array for ``request``."""
    out: list[dict[str, Any]] = []
    if request.options.system_prompt:
        out.append({"role": "system", "content": request.options.system_prompt})
    turns = request_turns(request, prefill=False)
    files = user_parts(turns, "ollama", inputs_for(request, "ollama"))
    for position, turn in enumerate(turns):
        if isinstance(turn, SystemTurn):
            out.append({"role": "system", "content": turn.text})
        elif isinstance(turn, UserTurn):
            parts = files.get(position, [])
            msg: dict[str, Any] = {"role": "user", "content": joined_text(parts, turn.text)}
            images = [p.data for p in parts if isinstance(p, BinaryPart)]
            if images:
                # Raw bytes: ollama-python base64-encodes them into the message's `images` [AT8]. (A string would
                # first be tried as a file path on this machine.)
                msg["images"] = images
            out.append(msg)
        elif isinstance(turn, AssistantTurn):
            reply: dict[str, Any] = {"role": "assistant", "content": turn.text}
            if turn.calls:
                reply["tool_calls"] = [
                    {"function": {"name": c.name, "arguments": arguments_object(c.arguments)}} for c in turn.calls
                ]
            out.append(reply)
        elif isinstance(turn, ResultsTurn):
            out.extend({"role": "tool", "tool_name": r.call.name, "content": r.content} for r in turn.results)
    if not out:
        out.append({"role": "user", "content": ANCHOR_TEXT})  # never `messages: []`
    return out


def to_ollama_request(request: ChatRequest) -> dict[str, Any]:
    """Keyword arguments for ``ollama.AsyncClient().chat`` (without ``stream``)."""
    opts = request.options
    body: dict[str, Any] = {"model": opts.model, "messages": to_ollama_messages(request)}
    if request.tools:
        body["tools"] = ollama_tools(request.tools)
    options: dict[str, Any] = {}
    if opts.temperature is not None:
        options["temperature"] = opts.temperature
    if opts.top_p is not None:
        options["top_p"] = opts.top_p
    if opts.max_tokens is not None:
        options["num_predict"] = opts.max_tokens
    if options:
        body["options"] = options
    return body
