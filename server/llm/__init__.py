"""LLM provider layer: canonical history types, the conversion layer, provider adapters and the registry.

Typical use by the orchestrator::

    provider = get_provider(session.provider_id)          # "echo" | "openai" | "anthropic" | "google" | "ollama"
    request = ChatRequest(messages=history, options=RequestOptions(model=session.model), tools=tools)
    async for event in provider.stream(request):          # TurnEvent; ends with Finished or ErrorEvent
        ...
"""

from .catalog import provider_catalog
from .errors import ErrorCode, ProviderError
from .providers import PROVIDER_IDS, Provider, default_provider_id, get_provider, known_provider, register_provider
from .retry import NO_RETRY, RetryPolicy
from .types import (
    Attachment,
    ChatRequest,
    Completion,
    ErrorEvent,
    Finished,
    FinishReason,
    Message,
    MessageStatus,
    ModelInputs,
    RequestOptions,
    Role,
    TextDelta,
    TextDone,
    ToolCall,
    ToolCallDelta,
    ToolCallEvent,
    ToolCallStart,
    ToolDefinition,
    TurnEvent,
    Usage,
)

__all__ = [
    "NO_RETRY",
    "PROVIDER_IDS",
    "Attachment",
    "ChatRequest",
    "Completion",
    "ErrorCode",
    "ErrorEvent",
    "FinishReason",
    "Finished",
    "Message",
    "MessageStatus",
    "ModelInputs",
    "Provider",
    "ProviderError",
    "RequestOptions",
    "RetryPolicy",
    "Role",
    "TextDelta",
    "TextDone",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallEvent",
    "ToolCallStart",
    "ToolDefinition",
    "TurnEvent",
    "Usage",
    "default_provider_id",
    "get_provider",
    "known_provider",
    "provider_catalog",
    "register_provider",
]
