"""Wire shapes (the objects of docs/api.md): pydantic models, camelCase on the wire, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler
from pydantic.alias_generators import to_camel
from pydantic_core import CoreSchema, core_schema
from typing_extensions import TypedDict

BusyPolicy = Literal["enqueue", "reject", "interrupt", "steer"]
ToolMode = Literal["parallel", "sequential"]
TitleSource = Literal["none", "truncate", "model", "user"]
SessionStatus = Literal["idle", "running", "requires-action", "error"]
Role = Literal["system", "user", "assistant", "tool"]
MessageStatus = Literal["complete", "streaming", "interrupted", "error"]
# How a tool call ended (a ``tool`` message's ``outcome``): it ran (``ok``), it ran and reported a failure
# (``error``), the user denied it, the session defines no such tool, or its run stopped before it had a result.
ToolOutcome = Literal["ok", "error", "denied", "unknown-tool", "cancelled"]


def jsonable(value: Any) -> Any:
    """A reply as JSON values: wire models dumped camelCase, lists of them too; anything else as it is."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    return value


class WireModel(BaseModel):
    """Base for everything on the wire: camelCase aliases, Python names accepted too. Every field goes out, so the
    schema of what goes out (``mode="serialization"``) requires them all, defaults or not."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, json_schema_serialization_defaults_required=True
    )

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class StrictInput(WireModel):
    """Base for procedure inputs: unknown fields are an error, so typos do not pass silently."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class FileAttachment(StrictInput):
    """A path reference: a file on the server's own machine named by its path; the model is told its name in
    a line of text, never its bytes (uploaded files are referenced by id instead, docs/attachments.md)."""

    path: str = Field(max_length=4096)
    relative_path: str | None = Field(default=None, max_length=4096)
    size: int | None = Field(default=None, ge=0, le=2**53)
    mime_type: str | None = Field(default=None, max_length=200)


class ToolDefinition(StrictInput):
    """A tool the session offers its model: its name, description and JSON-schema parameters, who runs a call
    (``client`` or ``server``), and whether a call waits for approval."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = Field(default="", max_length=4096)
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    executor: Literal["client", "server"] = "server"
    requires_approval: bool = False


McpPolicy = Literal["ask", "auto", "deny"]
# An MCP server's or tool's name as a session names it (the server checks it against what is configured).
McpName = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")]


class McpServerChoice(StrictInput):
    """A session's settings for one MCP server: its tools' policy (``approval``, then per tool), and ``only``: the
    tools offered to the model (not given: all of them). The operator's ``deny`` cannot be loosened."""

    approval: McpPolicy | None = None
    tools: dict[McpName, McpPolicy] = Field(default_factory=dict, max_length=256)
    only: list[McpName] | None = Field(default=None, max_length=256)


class GenerationDefaults(StrictInput):
    """The session's sampling settings (unset: the provider's default). ``maxTokens`` goes with every request;
    ``temperature`` and ``topP`` go to the providers that take them and are left out of Anthropic's requests, whose
    API version (2026-10-21) refuses them."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, le=2**31 - 1)
    top_p: float | None = Field(default=None, ge=0, le=1)


class SessionMetadata(StrictInput):
    """Where the session's user works (``directory``) and with which agent; a context switch changes it."""

    directory: str | None = Field(default=None, max_length=4096)
    agent: str | None = Field(default=None, max_length=200)


class Usage(WireModel):
    """Tokens used: input and output."""

    input_tokens: int = 0
    output_tokens: int = 0


class Session(WireModel):
    """A session as clients see it: its settings, run status, queue state, token usage and the seq of its last
    event."""

    id: str
    title: str
    title_source: TitleSource
    provider: str
    model: str
    system_prompt: str | None
    defaults: dict[str, Any]
    tools: list[dict[str, Any]]
    tool_mode: ToolMode
    busy_policy: BusyPolicy
    disable_streaming: bool
    metadata: dict[str, Any]
    status: SessionStatus
    queue_paused: bool
    usage: Usage
    last_seq: int
    created_at: int
    updated_at: int
    # Shown first in the owner's list / kept out of it (``session.list``'s ``archived``).
    pinned: bool = False
    archived: bool = False
    # The MCP servers the session's runs may use, and the owner's settings for them (docs/tools.md).
    mcp_servers: list[str] = Field(default_factory=list)
    mcp_tools: dict[str, dict[str, Any]] = Field(default_factory=dict)


class ToolDecision(WireModel):
    """Who answered a tool call's approval and when (the first answer; it is kept with the call)."""

    approved: bool
    user_name: str
    device_name: str | None = None
    decided_at: int  # ms since the epoch


class ToolCall(WireModel):
    """A tool call of an answer: its id and name, the arguments as JSON text, and the approval decision once
    answered."""

    id: str
    name: str
    arguments: str
    # For a call that needed approval, once answered: by whom, on which device, when.
    decision: ToolDecision | None = None


class Notice(WireModel):
    """What the user is told about the request an answer was made from (docs/attachments.md)."""

    code: str  # ``attachment-not-sent``
    file_id: str
    name: str
    message: str


class MessageError(WireModel):
    """Why an answer did not finish: a ``run-failed`` error (``code``: a provider's or ``interrupted``, ...)."""

    code: str
    message: str
    retryable: bool = False


class StoppedBy(WireModel):
    """Who stopped an answer (``run.abort``); the device is None for a token that is no device."""

    user_id: str
    user_name: str
    device_id: str | None = None
    device_name: str | None = None


class Versions(WireModel):
    """A message's place among its versions (the messages with its parent): ``index`` 0-based, in creation order."""

    index: int
    count: int


class Message(WireModel):
    """A message as clients see it: role, content and files, the tool calls it makes or the call it answers, its
    status, and its place in the conversation tree (``parentId``, ``versions``)."""

    id: str
    session_id: str
    role: Role
    content: str
    attachments: list[dict[str, Any]]
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    status: MessageStatus
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    run_id: str | None = None
    created_at: int
    # The ``clientRequestId`` of the write that stored it (a send or the queued message it came from).
    client_request_id: str | None = None
    # An answer's notices: files of the messages it answers that the model was given only as a placeholder.
    notices: list[Notice] | None = None
    # Tool results only: how the call ended (``ToolOutcome``); ``None`` on every other message.
    outcome: ToolOutcome | None = None
    # An answer that did not finish (status ``interrupted`` or ``error``): why it failed, or who stopped it.
    error: MessageError | None = None
    stopped_by: StoppedBy | None = None
    # The message before it on its branch (None: the first of a branch from the start).
    parent_id: str | None = None
    # Where the message stands among its versions, and their ids (in creation order, this one included):
    # given by ``session.get``, ``message.list``, ``branch-changed`` and a new message's ``message-created``;
    # absent (null) where the reader keeps what it had (``message-completed``).
    versions: Versions | None = None
    sibling_ids: list[str] | None = None


class QueuedMessage(WireModel):
    """A message waiting to be sent."""

    id: str
    content: str
    attachments: list[dict[str, Any]]
    enqueued_at: int
    # The ``clientRequestId`` of the enqueue, so a client can match its optimistic item to this one.
    client_request_id: str | None = None


@dataclass(frozen=True)
class WireOf:
    """``Annotated[dict[str, Any], WireOf(T)]``: a dict that is the JSON of ``T`` (a wire model's ``.wire()``, or a
    typed dict built without naming its type). To the checker and at run time it is the plain dict it is (taken and
    sent as it is, never validated again); to the schema, and so to the generated TypeScript, it is ``T``."""

    type: Any

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.json_or_python_schema(
            json_schema=handler(self.type),
            python_schema=handler(source),
            serialization=core_schema.plain_serializer_function_ser_schema(_as_is),
        )


def _as_is(value: Any) -> Any:
    return value


class PendingToolCall(TypedDict):
    """A tool call the current run is waiting on (``session.get``'s ``run.pendingToolCalls``)."""

    callId: str
    name: str
    arguments: str  # the call's arguments as JSON text
    executor: Literal["client", "server"]
    requiresApproval: bool
    approval: Literal["none", "pending", "approved", "denied"]


class PendingApproval(TypedDict):
    """A call waiting for ``tool.approve``."""

    callId: str
    name: str
    arguments: str


class StreamingText(TypedDict):
    """The partial answer being streamed, with its length in code points."""

    messageId: str
    offset: int
    text: str


class RunState(TypedDict):
    """``session.get``'s ``run``: the run in progress."""

    id: str
    status: str
    streaming: StreamingText | None
    pendingToolCalls: list[PendingToolCall]
    pendingApprovals: list[PendingApproval]


class SessionSnapshot(WireModel):
    """``session.get``'s answer: the session, its newest messages, its queue, the run in progress, and the
    event id a subscription resumes after."""

    session: Session
    # The newest messages (``session.get``'s ``messageLimit``) in history order.
    messages: list[Message]
    # ``message.list``'s ``before`` for the messages older than these; ``None`` when there are none.
    messages_before: int | None = None
    queue: list[QueuedMessage]
    run: Annotated[dict[str, Any], WireOf(RunState)] | None  # the run in progress
    last_event_id: str
