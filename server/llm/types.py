"""Canonical chat history, requests and the Turn events every provider adapter yields.

The stored history is provider-neutral: roles ``system | user | assistant | tool``,
assistant messages carry ``tool_calls`` whose ``arguments`` is JSON *text* (kept verbatim, even when a stream was cut
and it is not valid JSON), tool messages carry ``tool_call_id``. The conversion layer (``server.llm.convert``) is the
only place that turns this into a provider's wire shape.

Events are pydantic models with snake_case attributes and camelCase aliases, so ``event.model_dump(by_alias=True)``
is the wire shape (``{"type": "tool-call-start", "callId": ..., "name": ..., "index": ...}``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

Role = Literal["system", "user", "assistant", "tool"]
MessageStatus = Literal["complete", "streaming", "interrupted", "error"]
FinishReason = Literal["stop", "length", "tool-calls", "content-filter", "error", "aborted"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, alias_generator=to_camel)


class ToolCall(_Frozen):
    """One tool call made by the model. ``arguments`` is JSON text, possibly invalid after an interrupted stream."""

    id: str
    name: str
    arguments: str = "{}"
    # Provider-opaque replay state (Gemini ``thought_signature``, base64). Only replayed to ``signature_provider``
    # because another provider cannot verify it.
    signature: str | None = None
    signature_provider: str | None = None


class Attachment(_Frozen):
    """An uploaded file on a user message. ``data`` holds its bytes, loaded just before the request is built; when
    they could not be loaded, ``missing`` says why and the model is told so in a text placeholder instead."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    name: str
    media_type: str
    data: bytes = Field(default=b"", repr=False)
    file_id: str | None = None
    missing: str | None = None


class ModelInputs(_Frozen):
    """What a model takes besides text: images as image parts, PDFs as document parts (else their text)."""

    images: bool = True
    documents: bool = True


class Message(_Frozen):
    """One stored message of the canonical history."""

    role: Role
    content: str = ""
    # User messages only: uploaded files, rendered per target by ``server.llm.convert.files``.
    attachments: tuple[Attachment, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    # Optional on tool messages; the converter takes the name from the matching call, which is authoritative.
    tool_name: str | None = None
    # A tool result that reports a failure (Anthropic ``is_error``, Gemini ``{"error": ...}``).
    is_error: bool = False
    status: MessageStatus = "complete"

    @model_validator(mode="after")
    def _role_fields(self) -> Message:
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only assistant messages carry tool_calls")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("tool messages need a tool_call_id")
        if self.role != "tool" and self.tool_call_id is not None:
            raise ValueError("only tool messages carry a tool_call_id")
        if self.attachments and self.role != "user":
            raise ValueError("only user messages carry attachments")
        return self


class ToolDefinition(_Frozen):
    """A tool the model may call; ``parameters`` is a JSON schema for the arguments object."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class RequestOptions(_Frozen):
    """Per-request model settings. ``system_prompt`` is placed before every system message of the history."""

    model: str
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    system_prompt: str | None = None
    # What the model takes; ``None``: the documented rule for the target and model (``server.llm.capabilities``).
    inputs: ModelInputs | None = None
    # The history ends with an answer that is to go on where it stopped (``run.continue``): targets that take an
    # assistant prefill (Anthropic) get it as the final assistant message; the others get a user turn after it
    # asking to go on (``server.llm.convert.history.request_turns``).
    continuation: bool = False


class ChatRequest(_Frozen):
    """Everything one model call needs: the canonical history, the tools and the options."""

    messages: tuple[Message, ...]
    options: RequestOptions
    tools: tuple[ToolDefinition, ...] = ()


class Usage(_Frozen):
    """Token counts of one step (per the provider's own counting)."""

    input_tokens: int = 0
    output_tokens: int = 0


class TextDelta(_Frozen):
    """A fragment of assistant text, in order."""

    type: Literal["text-delta"] = "text-delta"
    delta: str


class TextDone(_Frozen):
    """All assistant text of the step; emitted once, before the tool calls, when there was any text."""

    type: Literal["text-done"] = "text-done"
    text: str


class ToolCallStart(_Frozen):
    """The model began a tool call (``index`` = its position in the step)."""

    type: Literal["tool-call-start"] = "tool-call-start"
    call_id: str
    name: str
    index: int


class ToolCallDelta(_Frozen):
    """A raw fragment of a call's JSON arguments; not guaranteed to be valid JSON until the call is finalised."""

    type: Literal["tool-call-delta"] = "tool-call-delta"
    call_id: str
    delta: str


class ToolCallEvent(_Frozen):
    """A finalised tool call (arguments parse as JSON). Emitted only when the step ended normally."""

    type: Literal["tool-call"] = "tool-call"
    id: str
    name: str
    arguments: str
    signature: str | None = None
    signature_provider: str | None = None

    def to_tool_call(self) -> ToolCall:
        """The canonical ``ToolCall`` to store on the assistant message."""
        return ToolCall(
            id=self.id,
            name=self.name,
            arguments=self.arguments,
            signature=self.signature,
            signature_provider=self.signature_provider,
        )


class Finished(_Frozen):
    """Terminal event of a successful step."""

    type: Literal["finished"] = "finished"
    finish_reason: FinishReason
    usage: Usage = Field(default_factory=Usage)


class ErrorEvent(_Frozen):
    """Terminal event of a failed step (after the adapter's retries). ``code`` is one of ``errors.ErrorCode``."""

    type: Literal["error"] = "error"
    code: str
    message: str
    retryable: bool = False


TurnEvent = Annotated[
    TextDelta | TextDone | ToolCallStart | ToolCallDelta | ToolCallEvent | Finished | ErrorEvent,
    Field(discriminator="type"),
]
"""Everything a provider stream yields. Every stream ends with exactly one ``Finished`` or ``ErrorEvent``."""


class Completion(_Frozen):
    """The result of a blocking ``Provider.complete`` call."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason | None = None
    usage: Usage = Field(default_factory=Usage)
    error: ErrorEvent | None = None

    def events(self) -> list[TextDone | ToolCallEvent | Finished | ErrorEvent]:
        """The non-streaming event sequence of this step (as a blocking run sees it): text-done, tool-calls, end."""
        out: list[TextDone | ToolCallEvent | Finished | ErrorEvent] = []
        if self.text:
            out.append(TextDone(text=self.text))
        out.extend(
            ToolCallEvent(
                id=c.id,
                name=c.name,
                arguments=c.arguments,
                signature=c.signature,
                signature_provider=c.signature_provider,
            )
            for c in self.tool_calls
        )
        if self.error is not None:
            out.append(self.error)
        elif self.finish_reason is not None:
            out.append(Finished(finish_reason=self.finish_reason, usage=self.usage))
        return out
