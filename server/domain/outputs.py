"""What procedures return where that is not a wire model of :mod:`server.domain.models`: typed dicts, each the JSON
exactly as it goes out (camelCase keys, as the dicts the services build have them).

A key marked ``NotRequired`` is left out when it has no value; every other key is always there (``None`` goes out
as ``null``). A field holding a wire model's JSON (a dict from its ``.wire()``) is typed :data:`MessageJson` and
the like: a dict to the checker, the model to the schema. The TypeScript types of ``client_js/src/router.gen.ts``
are generated from these and from each handler's return annotation.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field
from typing_extensions import TypeAliasType, TypedDict

from .models import (
    McpPolicy,
    Message,
    PendingApproval,
    PendingToolCall,
    QueuedMessage,
    RunState,
    Session,
    SessionSnapshot,
    SessionStatus,
    StreamingText,
    TitleSource,
    WireOf,
)

__all__ = [
    "Aborted",
    "Added",
    "Attention",
    "BranchSwitched",
    "Continued",
    "DecidedBy",
    "Device",
    "DeviceList",
    "Draft",
    "DraftItem",
    "DraftWrite",
    "FileInfo",
    "LinkMaker",
    "McpServerInfo",
    "McpServers",
    "McpToolInfo",
    "Me",
    "MessageJson",
    "MessagePage",
    "NewLink",
    "OutputsSubmitted",
    "PendingApproval",
    "PendingLink",
    "PendingToolCall",
    "PresenceDevice",
    "PresenceItem",
    "PresenceSet",
    "PresenceTimes",
    "ProviderInfo",
    "PushEvent",
    "PushSubscribed",
    "PushSubscriptionInfo",
    "QueueResumed",
    "QueuedJson",
    "Regenerated",
    "Resolved",
    "RunState",
    "SendQueued",
    "SendResult",
    "SendStarted",
    "SendSteered",
    "SentNow",
    "SessionChanges",
    "SessionListed",
    "SessionPage",
    "SessionState",
    "SessionSummary",
    "StreamingText",
    "ToolDefinitionInfo",
    "UserInfo",
    "WireOf",
]


MessageJson = Annotated[dict[str, Any], WireOf(Message)]
QueuedJson = Annotated[dict[str, Any], WireOf(QueuedMessage)]
Attention = Literal["answer", "failure", "approval"]
PushEvent = Literal["approval-needed", "answer-finished", "run-failed"]


# --- sessions ---------------------------------------------------------------------------------------------


class SessionListed(Session):
    """A session as a list shows it: its queue's length, and whether it is unread (an answer, a failure or an
    approval request its owner has not looked at: ``attention`` says which)."""

    queue_length: int
    unread: bool
    attention: Attention | None


class SessionChanges(Session):
    """What ``session-updated`` carries: every field of the session except the large ones (tools, system prompt,
    defaults, metadata), which are there only when they changed. Merged into the session a client has."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=False)  # the large ones may be absent

    system_prompt: str | None = None
    defaults: dict[str, Any] = Field(default_factory=dict)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    pinned: bool
    archived: bool
    mcp_servers: list[str]
    mcp_tools: dict[str, dict[str, Any]]


# What ``session.get`` returns: everything needed to follow the session from ``lastEventId`` on.
SessionState = TypeAliasType("SessionState", SessionSnapshot)


class SessionPage(TypedDict):
    """A page of ``session.list``. ``feedEventId`` is where ``session.feed`` should start to miss nothing."""

    items: list[Annotated[dict[str, Any], WireOf(SessionListed)]]
    nextCursor: str | None
    feedEventId: str


class SessionSummary(TypedDict):
    """A session as the live list (``session.feed``) carries it."""

    id: str
    title: str
    titleSource: TitleSource
    status: SessionStatus
    provider: str
    model: str
    queueLength: int
    queuePaused: bool
    createdAt: int
    updatedAt: int
    unread: bool
    attention: Attention | None
    pinned: bool
    archived: bool


class BranchSwitched(TypedDict):
    """``session.switchBranch``: whether the active path changed, and the leaf it now ends at."""

    changed: bool
    leafId: str | None


# --- messages and runs ------------------------------------------------------------------------------------


class MessagePage(TypedDict):
    """A page of ``message.list``; ``nextCursor`` is the ``before`` of the previous page."""

    items: list[MessageJson]
    nextCursor: int | None


class SendStarted(TypedDict):
    """``message.send`` on an idle session: the stored message and the run that answers it."""

    status: Literal["started"]
    message: MessageJson
    runId: str


class SendQueued(TypedDict):
    """``message.send`` while a run is in progress, with the busy policy ``enqueue``: the queued message."""

    status: Literal["queued"]
    queued: QueuedJson


class SendSteered(TypedDict):
    """``message.send`` with the busy policy ``steer``: the stored message, answered within the run in progress."""

    status: Literal["steered"]
    message: MessageJson
    runId: str


# What ``message.send`` did with the message (the call's or the session's busy policy decides).
SendResult = TypeAliasType("SendResult", SendStarted | SendQueued | SendSteered)


class Added(TypedDict):
    """``message.addInstructions``: the system messages added, and the run they started (``respond``)."""

    messages: list[MessageJson]
    runId: str | None


class QueueResumed(TypedDict):
    """``message.resumeQueue``: the run started with the queue's head, if one did."""

    runId: str | None


class SentNow(TypedDict):
    """``message.sendQueuedNow``: what became of the message (docs/runs.md)."""

    status: Literal["started", "steered", "next", "interrupting"]
    mode: Literal["interrupt", "steer", "next"]
    runId: str | None


class OutputsSubmitted(TypedDict):
    """``tool.submitOutputs``: the tool messages stored, and whether the run went on."""

    messages: list[MessageJson]
    resumed: bool


class Resolved(TypedDict):
    """``tool.approve`` and ``push.decide``: the approval is answered."""

    resolved: Literal[True]


class Aborted(TypedDict):
    """``run.abort``: whether a run was in progress to abort."""

    aborted: bool


class Regenerated(TypedDict):
    """``run.regenerate``: the run making the new version, where it attaches, and the model it asks."""

    runId: str
    parentId: str | None
    provider: str
    model: str


class Continued(TypedDict):
    """``run.continue``: the run and the answer it goes on with."""

    runId: str
    messageId: str


class DecidedBy(TypedDict):
    """Who answered an approval (``tool-approval-resolved``); ``deviceName`` is None for a token that is no device."""

    userId: str
    userName: str
    deviceName: str | None


# --- tools and providers ----------------------------------------------------------------------------------


class ToolDefinitionInfo(TypedDict):
    """A tool the server runs itself (``tool.builtins``), as a session declares it in ``tools``."""

    name: str
    description: str
    parameters: dict[str, Any]
    executor: Literal["client", "server"]
    requiresApproval: bool


class ProviderInfo(TypedDict):
    """A provider this server knows (``provider.list``): whether it can be used (else ``reason`` says why: no key),
    the models it knows, and whether the model is typed (``freeText``: an OpenAI-compatible server, Ollama)."""

    id: str
    label: str
    available: bool
    reason: str | None
    models: list[str]
    freeText: bool


class McpToolInfo(TypedDict):
    """One tool of an MCP server: its name, description and default policy."""

    name: str
    description: str
    policy: McpPolicy


class McpServerInfo(TypedDict):
    """An MCP server the caller may enable on a session, with its tools and their default policies."""

    name: str
    transport: Literal["stdio", "http"]
    approval: McpPolicy
    description: str
    toolPolicies: NotRequired[dict[str, McpPolicy]]
    tools: list[McpToolInfo]
    error: NotRequired[str]


class McpServers(TypedDict):
    """``mcp.servers``: the MCP servers the caller may enable on a session."""

    servers: list[McpServerInfo]


# --- who the caller is, and their devices -----------------------------------------------------------------


class UserInfo(TypedDict):
    """A user: id, name and role."""

    id: str
    name: str
    role: str


class Me(TypedDict):
    """``auth.me``: the caller, and the device their token belongs to."""

    user: UserInfo
    deviceId: str | None
    deviceName: str | None


class Device(TypedDict):
    """A device signed in with a token of the caller's."""

    id: str
    name: str
    createdAt: int
    lastUsedAt: int | None
    current: bool


class NewLink(TypedDict):
    """A sign-in link just made (``auth.createLink``)."""

    id: str
    url: str
    code: str
    expiresAt: int


class LinkMaker(TypedDict):
    """The device that made a sign-in link; ``current`` when it is the caller's own."""

    id: str
    name: str
    current: bool


class PendingLink(TypedDict):
    """A sign-in link of the caller's that is waiting to be used: the name the new device gets (``deviceName``),
    and the device that made it (``madeBy``; None when made on the server's command line)."""

    id: str
    deviceName: str | None
    createdAt: int
    expiresAt: int
    madeBy: LinkMaker | None


class DeviceList(TypedDict):
    """``auth.watchDevices``: the caller's devices and pending links."""

    devices: list[Device]
    links: list[PendingLink]


# --- presence, drafts, push -------------------------------------------------------------------------------


class PresenceTimes(TypedDict):
    """``presence.update``: how long an entry lives, and how often a client should renew it."""

    ttlSeconds: float
    heartbeatSeconds: float


class PresenceDevice(TypedDict):
    """A client that has a session open (``presence.watch``); ``current`` is the watcher's own."""

    deviceId: str | None
    deviceName: str
    visible: bool
    focused: bool
    typing: bool
    current: bool


class FileInfo(TypedDict):
    """An uploaded file as a message or a draft carries it."""

    fileId: str
    name: str
    mediaType: str
    size: int


class Draft(TypedDict):
    """A session's unsent composer text, per user (``draft.*``); ``version`` 0 is "no draft yet"."""

    sessionId: str
    text: str
    attachments: list[FileInfo]
    version: int
    deviceId: str | None
    deviceName: str | None
    updatedAt: int | None


class DraftWrite(TypedDict):
    """``draft.save`` / ``draft.clear``: ``saved`` false when the draft had moved on (``draft`` is the newer one)."""

    saved: bool
    draft: Draft


class PresenceSet(TypedDict):
    """A ``presence.watch`` item: the clients that have the session open now."""

    type: Literal["presence"]
    sessionId: str
    devices: list[PresenceDevice]


class DraftItem(TypedDict):
    """A ``presence.watch`` item: the session's draft as it is now."""

    type: Literal["draft"]
    sessionId: str
    draft: Draft


# What ``presence.watch`` gives: the draft, the set of clients, and each change of either.
PresenceItem = TypeAliasType("PresenceItem", PresenceSet | DraftItem)


class PushSubscriptionInfo(TypedDict):
    """A device's Web Push subscription (``push.subscriptions``)."""

    endpoint: str
    deviceId: str
    deviceName: str
    events: list[PushEvent]
    current: bool


class PushSubscribed(TypedDict):
    """``push.subscribe``: the subscription as stored, for this device, with the events it gets."""

    endpoint: str
    deviceId: str
    events: list[PushEvent]
