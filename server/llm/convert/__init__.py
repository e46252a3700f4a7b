"""The one conversion layer from canonical history to each provider's request: the stored history stays
provider-neutral, and every provider's rules are applied here, on the way out.

``normalize`` repairs the history once (pairing, orphans, ids, empties); each ``to_*_request`` renders the repaired
turns for one target, the files of user messages through ``files`` (image, document and text parts within the
target's limits, docs/attachments.md). All functions are pure and deterministic: the same history always gives the
same request.
"""

from .anthropic import to_anthropic_messages, to_anthropic_request
from .encode import arguments_object, arguments_string, map_tool_call_id
from .google import to_google_contents, to_google_request
from .history import (
    INTERRUPTED_RESULT,
    AssistantTurn,
    ResultsTurn,
    SystemTurn,
    ToolResult,
    UserTurn,
    normalize,
)
from .ollama import to_ollama_messages, to_ollama_request
from .openai import COMPATIBLE, MISTRAL, OPENAI, OpenAIProfile, to_openai_messages, to_openai_request

__all__ = [
    "COMPATIBLE",
    "INTERRUPTED_RESULT",
    "MISTRAL",
    "OPENAI",
    "AssistantTurn",
    "OpenAIProfile",
    "ResultsTurn",
    "SystemTurn",
    "ToolResult",
    "UserTurn",
    "arguments_object",
    "arguments_string",
    "map_tool_call_id",
    "normalize",
    "to_anthropic_messages",
    "to_anthropic_request",
    "to_google_contents",
    "to_google_request",
    "to_ollama_messages",
    "to_ollama_request",
    "to_openai_messages",
    "to_openai_request",
]
