"""Canonical history -> Gemini ``contents`` + ``GenerateContentConfig``.

- roles are ``user`` and ``model`` only; function responses live in ``user`` contents;
- every system text goes to ``system_instruction``: leading ones verbatim, later ones are ``<system>`` user text at
  their position (vercel rejects them, pydantic-ai wraps them);
- consecutive same-role contents are merged ("multiturn requests alternate") — except that a content holding
  ``function_response`` parts holds nothing else, because the combined form returns empty answers on some
  models. User text right after results (the answer to them was interrupted, or a message was steered in) gets a
  short placeholder ``model`` turn in between, as hermes-agent does: the one form every source accepts
  (two ``user`` contents in a row are still refused by some models);
- contents start with ``user`` (a model function call must follow a user turn); a non-empty anchor is
  prepended when needed (an empty text part is rejected);
- ``args``/``response`` are objects: results are ``{"output": ...}`` or ``{"error": ...}``;
- Gemini 3 ``thought_signature``: replayed on its own part when it came from Gemini; otherwise the first call of a
  model turn gets the documented dummy ``skip_thought_signature_validator``.
"""

from __future__ import annotations

import base64
from typing import Any

from ..types import ChatRequest, ToolCall, ToolDefinition
from .encode import arguments_object
from .files import BinaryPart, inputs_for, user_parts
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

DUMMY_SIGNATURE = b"skip_thought_signature_validator"
PROVIDER_ID = "google"


def google_tools(tools: tuple[ToolDefinition, ...]) -> list[dict[str, Any]]:
    """One ``Tool`` with all function declarations (JSON schema passed through as-is)."""
    if not tools:
        return []
    return [
        {
            "function_declarations": [
                {"name": t.name, "description": t.description, "parameters_json_schema": t.parameters} for t in tools
            ]
        }
    ]


def _call_part(call: ToolCall, first: bool, include_ids: bool) -> dict[str, Any]:
    function_call: dict[str, Any] = {"name": call.name, "args": arguments_object(call.arguments)}
    if include_ids:
        function_call["id"] = call.id
    part: dict[str, Any] = {"function_call": function_call}
    if call.signature and call.signature_provider == PROVIDER_ID:
        part["thought_signature"] = base64.b64decode(call.signature)
    elif first:
        part["thought_signature"] = DUMMY_SIGNATURE
    return part


def to_google_contents(request: ChatRequest, *, include_ids: bool = True) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system_instruction, contents)``. ``include_ids=False`` for Vertex, which rejects call ids."""
    leading, turns = split_leading_system(request_turns(request, prefill=False), request.options.system_prompt)
    files = user_parts(turns, "google", inputs_for(request, "google"))
    contents: list[dict[str, Any]] = []

    def parts_for(role: str, *, results: bool = False) -> list[dict[str, Any]]:
        last = contents[-1] if contents else None
        mergeable = (
            last is not None
            and last["role"] == role
            and results == any("function_response" in p for p in last["parts"])
        )
        if not mergeable:
            contents.append({"role": role, "parts": []})
        parts: list[dict[str, Any]] = contents[-1]["parts"]
        return parts

    for position, turn in enumerate(turns):
        if isinstance(turn, (SystemTurn, UserTurn)):
            text = wrap_system(turn.text) if isinstance(turn, SystemTurn) else turn.text
            if contents and any("function_response" in p for p in contents[-1]["parts"]):
                contents.append({"role": "model", "parts": [{"text": AFTER_RESULTS_TEXT}]})
            parts = parts_for("user")
            # Files first, then the prompt (the documented order for a single page or image [AT7]); images and
            # PDFs are inline_data blobs the SDK sends base64-encoded [AT6].
            for part in files.get(position, ()):
                if isinstance(part, BinaryPart):
                    parts.append({"inline_data": {"mime_type": part.media_type, "data": part.data}})
                else:
                    parts.append({"text": part.text})
            if text:
                parts.append({"text": text})
        elif isinstance(turn, AssistantTurn):
            parts = parts_for("model")
            if turn.text:
                parts.append({"text": turn.text})
            parts.extend(_call_part(c, i == 0, include_ids) for i, c in enumerate(turn.calls))
        elif isinstance(turn, ResultsTurn):
            parts = parts_for("user", results=True)
            for r in turn.results:
                response: dict[str, Any] = {
                    "name": r.call.name,
                    "response": {"error" if r.is_error else "output": r.content},
                }
                if include_ids:
                    response["id"] = r.call.id
                parts.append({"function_response": response})

    if not contents or contents[0]["role"] != "user":
        contents.insert(0, {"role": "user", "parts": [{"text": ANCHOR_TEXT}]})
    system = "\n\n".join(leading) if leading else None
    return system, contents


def to_google_request(request: ChatRequest, *, include_ids: bool = True) -> dict[str, Any]:
    """Keyword arguments for ``client.aio.models.generate_content_stream`` (``config`` as a dict)."""
    opts = request.options
    system, contents = to_google_contents(request, include_ids=include_ids)
    config: dict[str, Any] = {}
    if system:
        config["system_instruction"] = system
    if request.tools:
        config["tools"] = google_tools(request.tools)
        # We run tools ourselves; the SDK's automatic function calling only applies to Python callables anyway.
        config["automatic_function_calling"] = {"disable": True}
    if opts.temperature is not None:
        config["temperature"] = opts.temperature
    if opts.top_p is not None:
        config["top_p"] = opts.top_p
    if opts.max_tokens is not None:
        config["max_output_tokens"] = opts.max_tokens
    return {"model": opts.model, "contents": contents, "config": config}
