"""Procedure inputs (docs/api.md). Every field is validated here, at the boundary."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ..domain.models import (
    BusyPolicy,
    FileAttachment,
    GenerationDefaults,
    McpName,
    McpServerChoice,
    SessionMetadata,
    StrictInput,
    ToolDefinition,
    ToolMode,
)

Id = Field(min_length=1, max_length=64)


class FileRef(StrictInput):
    """An uploaded file (``POST /files``) by its id; the caller must own it."""

    file_id: str = Field(min_length=1, max_length=64)


# What a message carries: an uploaded file, or a path on the server's own machine.
Attachment = FileRef | FileAttachment
Attachments: Any = Field(default_factory=list, max_length=32)


class Idempotent(StrictInput):
    """A write a client may repeat safely: the same ``clientRequestId`` again returns the first reply and
    changes nothing (``server.services.requests``)."""

    client_request_id: str | None = Field(default=None, min_length=1, max_length=64)


class SessionRef(StrictInput):
    """One of the caller's sessions, by id (the input of the procedures that need nothing else)."""

    session_id: str = Id


class SessionSettings(StrictInput):
    """What a session's owner may set at creation and change later (``session.update``)."""

    provider: str | None = Field(default=None, max_length=32)
    model: str | None = Field(default=None, max_length=200)
    system_prompt: str | None = Field(default=None, max_length=100_000)
    defaults: GenerationDefaults | None = None
    tools: list[ToolDefinition] | None = Field(default=None, max_length=128)
    tool_mode: ToolMode | None = None
    busy_policy: BusyPolicy | None = None
    disable_streaming: bool | None = None
    # MCP servers the session's runs may use (docs/tools.md), and per server: policies and a tool filter.
    mcp_servers: list[McpName] | None = Field(default=None, max_length=64)
    mcp_tools: dict[McpName, McpServerChoice] | None = Field(default=None, max_length=64)


class SessionCreate(SessionSettings, Idempotent):
    """``session.create``: the new session's settings, title, metadata, and whether its queue starts held."""

    title: str | None = Field(default=None, max_length=500)
    metadata: SessionMetadata | None = None
    # Start with the queue held: queued messages wait until `message.resumeQueue` or a send.
    queue_paused: bool | None = None


class SessionList(StrictInput):
    """``session.list``: a page of the caller's sessions (pinned first, then newest), optionally searched."""

    limit: int = Field(default=50, ge=1, le=200)
    cursor: str | None = Field(default=None, max_length=500)
    search: str | None = Field(default=None, max_length=200)
    # Archived sessions only (true), the others (false), or both (null).
    archived: bool | None = False


class SessionUpdate(SessionRef, SessionSettings):
    """``session.update``: the settings to change, and pinning or archiving (fields not given stay)."""

    pinned: bool | None = None
    archived: bool | None = None


class SetTitle(SessionRef):
    """``session.setTitle``: a title the user chose (the server then never replaces it unasked)."""

    title: str = Field(min_length=1, max_length=500)


class RegenerateTitle(SessionRef):
    """``session.regenerateTitle``: a new title made from the conversation, by truncation or by the model."""

    method: Literal["truncate", "model"] | None = None  # default: CHATSYNC_TITLE_MODE


class SwitchContext(SessionRef):
    """``session.switchContext``: the directory or agent (or both) the session now works in."""

    directory: str | None = Field(default=None, min_length=1, max_length=4096)
    agent: str | None = Field(default=None, min_length=1, max_length=200)
    regenerate_title: bool = False

    @model_validator(mode="after")
    def _something_to_switch(self) -> SwitchContext:
        if self.directory is None and self.agent is None:
            raise ValueError("give a directory, an agent, or both")
        return self


# A position in an event log: a BIGINT, so at most 18 digits (anything longer is no position we gave out).
EventId = Field(default=None, max_length=18, pattern=r"^\d{1,18}$")


MAX_MESSAGES_PER_PAGE = 500  # messages one session.get or message.list returns


class SessionGet(SessionRef):
    # The newest messages only: a long history is read further back with message.list (messagesBefore).
    """``session.get``: the session with its newest messages (at most ``messageLimit``)."""

    message_limit: int = Field(default=200, ge=1, le=MAX_MESSAGES_PER_PAGE)


class SessionEvents(SessionRef):
    """``session.events``: the session's events after ``lastEventId`` (none given: from now)."""

    last_event_id: str | None = EventId


class SessionFeed(StrictInput):
    """``session.feed``: the caller's session-list events after ``lastEventId`` (none given: from now)."""

    last_event_id: str | None = EventId


# --- devices (server/api/auth.py) ------------------------------------------------------------------------


class DeviceRef(StrictInput):
    """One of the caller's devices, by id (``auth.revokeDevice``)."""

    device_id: str = Id


class RenameDevice(DeviceRef):
    """``auth.renameDevice``: a device's new name."""

    name: str = Field(min_length=1, max_length=200)


class CreateLink(StrictInput):
    """``auth.createLink``: a one-time sign-in link, optionally naming the device it will sign in."""

    device_name: str | None = Field(default=None, min_length=1, max_length=200)


class LinkRef(StrictInput):
    """One of the caller's pending sign-in links, by id (``auth.revokeLink``)."""

    link_id: str = Id


class MessageList(SessionRef):
    """``message.list``: older messages of the active path (or of the branch ending at ``leafId``), a page at a
    time."""

    before: int | None = Field(default=None, ge=1, le=2**31 - 1)
    limit: int = Field(default=100, ge=1, le=MAX_MESSAGES_PER_PAGE)
    # Another branch than the active one: the path from the start down to this message.
    leaf_id: str | None = Field(default=None, min_length=1, max_length=64)


# What a run in progress means for an edit or a regenerate (default: the session's busy policy; ``reject`` is
# CONFLICT, anything else interrupts the run).
EditBusyPolicy = Literal["reject", "interrupt"]


class EditMessage(SessionRef, Idempotent):
    """``message.edit``: a new version of a user message, with its text and files, then answered."""

    message_id: str = Id
    content: str
    # The new version's files (default: those of the message edited).
    attachments: list[Attachment] | None = Field(default=None, max_length=32)
    busy_policy: EditBusyPolicy | None = None


class Regenerate(SessionRef, Idempotent):
    # An answer (any of its messages; default: the last answer on the active path).
    """``run.regenerate``: another version of an answer (default: the last one), optionally by another model."""

    message_id: str | None = Field(default=None, min_length=1, max_length=64)
    provider: str | None = Field(default=None, min_length=1, max_length=32)
    model: str | None = Field(default=None, min_length=1, max_length=200)
    busy_policy: EditBusyPolicy | None = None


class ContinueRun(SessionRef, Idempotent):
    """``run.continue``: the last answer, cut off at the length limit, goes on in the same message."""


class SwitchBranch(SessionRef, Idempotent):
    """``session.switchBranch``: make the branch through this message the active path."""

    message_id: str = Id


class Fork(SessionRef, Idempotent):
    """``session.fork``: a new session holding the conversation up to this message."""

    message_id: str = Id
    title: str | None = Field(default=None, min_length=1, max_length=500)


class Enqueue(SessionRef, Idempotent):
    """``message.enqueueMessage``: a message for the end of the session's queue."""

    content: str
    attachments: list[Attachment] = Attachments


class QueuedRef(SessionRef):
    """One queued message of a session, by id (``message.removeQueuedMessage``)."""

    message_id: str = Field(min_length=1, max_length=64)


class UpdateQueued(QueuedRef):
    """``message.updateQueuedMessage``: a queued message's new text or files."""

    content: str | None = None
    attachments: list[Attachment] | None = Field(default=None, max_length=32)


class SendQueuedNow(QueuedRef):
    """``message.sendQueuedNow``: send a queued message now, interrupting the run, steering it, or next."""

    mode: Literal["interrupt", "steer", "next"] = "interrupt"


class MoveQueued(QueuedRef):
    """``message.moveQueuedMessage``: a queued message's new position."""

    to_index: int = Field(ge=0)


# --- runs (server/api/send.py, tools.py, runs.py) -----------------------------------------------------

MAX_INSTRUCTIONS = 64  # system messages one call may add (each at most CHATSYNC_MAX_CONTENT_CHARS)
Instructions = str | Annotated[list[str], Field(max_length=MAX_INSTRUCTIONS)]


def instruction_list(value: Instructions | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


class Send(SessionRef, Idempotent):
    """``message.send``: a user message, its files and instructions, and what to do if a run is in progress."""

    content: str
    attachments: list[Attachment] = Attachments
    instructions: Instructions | None = None
    busy_policy: BusyPolicy | None = None


class AddInstructions(SessionRef, Idempotent):
    """``message.addInstructions``: system messages for the session, answered at once unless ``respond`` is
    false."""

    instructions: Instructions
    respond: bool = True


class ToolOutput(StrictInput):
    """The result of one client-run tool call."""

    call_id: str = Field(min_length=1, max_length=200)
    output: str
    is_error: bool = False


class SubmitOutputs(SessionRef, Idempotent):
    """``tool.submitOutputs``: results of client-run tool calls the run waits on."""

    tool_outputs: list[ToolOutput] = Field(min_length=1, max_length=128)


class Approve(SessionRef, Idempotent):
    """``tool.approve``: the answer to a tool call that waits for approval."""

    call_id: str = Field(min_length=1, max_length=200)
    approved: bool
    reason: str | None = Field(default=None, max_length=4096)
