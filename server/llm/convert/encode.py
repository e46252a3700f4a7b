"""Field-level encodings shared by the renderers: tool-call ids and arguments.

Id mappings are pure functions of the id, so a call and its result always map to the same value, and an id that
is already valid is kept unchanged (stable prompt-cache prefixes). A changed id gets a hash suffix of the original,
so two different foreign ids cannot collapse into one.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal

IdStyle = Literal["keep", "openai", "anthropic", "mistral"]

_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_OPENAI_MAX_ID = 40  # `string_above_max_length` seen on OpenAI for longer ids
_ANTHROPIC_MAX_ID = 64


def _digest(value: str, n: int) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:n]


def map_tool_call_id(call_id: str, style: IdStyle) -> str:
    """The id to send for ``call_id`` under ``style`` (identity when already valid for the target)."""
    if style == "keep":
        return call_id
    if style == "mistral":
        # Mistral templates demand exactly 9 chars of [a-zA-Z0-9].
        return call_id if re.fullmatch(r"[a-zA-Z0-9]{9}", call_id) else _digest(call_id, 9)
    if style == "anthropic":
        if _ANTHROPIC_ID.match(call_id) and len(call_id) <= _ANTHROPIC_MAX_ID:
            return call_id
        cleaned = re.sub(r"[^a-zA-Z0-9_-]", "_", call_id)[: _ANTHROPIC_MAX_ID - 9]
        return f"{cleaned}_{_digest(call_id, 8)}"
    if len(call_id) <= _OPENAI_MAX_ID:
        return call_id
    return f"{call_id[: _OPENAI_MAX_ID - 9]}_{_digest(call_id, 8)}"


def arguments_object(arguments: str) -> dict[str, Any]:
    """Arguments as the JSON object Anthropic/Gemini/Ollama require.

    Empty text or ``null`` means "no arguments" (``{}``). Anything that is not a JSON object — cut-off JSON from an
    interrupted stream, an array, a string — is wrapped as ``{"INVALID_JSON": <raw text>}`` (pydantic-ai's
    ``args_as_dict``) so the request stays valid and the model can still see what it produced.
    """
    text = arguments.strip()
    if not text or text == "null":
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"INVALID_JSON": arguments}
    return value if isinstance(value, dict) else {"INVALID_JSON": arguments}


def arguments_string(arguments: str) -> str:
    """Arguments as the JSON string OpenAI-style APIs take; kept verbatim ("may not always be valid JSON")."""
    return arguments if arguments.strip() else "{}"
