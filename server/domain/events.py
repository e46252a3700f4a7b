"""The session event union (docs/api.md "Events"): one typed constructor per event, and the envelope that carries
one event through the process.

Durable events have a ``seq`` (their place in the session's event log); ephemeral ones (streaming previews)
do not. Code that changes a session makes its events only with the constructors here: a durable one is an
:class:`Event` that ``SessionTx.emit`` appends to the log; a streaming one is an :class:`EventEnvelope` at
once. Each type's fields are a typed dict in :data:`EVENT_FIELDS`, which its constructor builds; the TypeScript side
of the union is generated from that table.
An event is serialised to JSON once, when it is created or read from the log, and every transport
builds its frames around that text — never once per subscriber.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NamedTuple, NotRequired, get_args

import orjson
from typing_extensions import TypeAliasType, TypedDict

from .models import Message, MessageError, QueuedMessage, TitleSource, ToolOutcome
from .outputs import DecidedBy, MessageJson, QueuedJson, SessionChanges, SessionSummary, WireOf

DurableEventType = Literal[
    "queue-message-added",
    "queue-message-removed",
    "queue-cleared",
    "queue-message-updated",
    "queue-reordered",
    "queue-paused",
    "queue-resumed",
    "message-created",
    "message-completed",
    "message-continued",
    "branch-changed",
    "run-started",
    "run-resumed",
    "run-finished",
    "run-failed",
    "run-aborted",
    "tool-call-ready",
    "tool-approval-requested",
    "tool-approval-resolved",
    "tool-call-result",
    "session-updated",
    "title-changed",
    "session-deleted",
]
StreamEventType = Literal["text-delta", "tool-call-start", "tool-call-delta", "stream-snapshot", "tool-call-progress"]
DURABLE_EVENT_TYPES: frozenset[str] = frozenset(get_args(DurableEventType))
EPHEMERAL_EVENT_TYPES: frozenset[str] = frozenset(get_args(StreamEventType))

QueueRemovalReason = Literal["sent", "dequeued", "removed"]
RunTrigger = Literal["message", "queue", "instructions", "edit", "regenerate", "continue"]
ToolExecutor = Literal["client", "server"]


def dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


@dataclass(slots=True)
class EventEnvelope:
    """One event as it travels from the log or the bus to connections."""

    session_id: str
    seq: int | None
    type: str
    json: str  # the event object as clients receive it
    # Ephemeral stream events only: which message they extend and at which character offset.
    message_id: str | None = None
    offset: int | None = None
    _event_id: str | None = field(default=None, repr=False)
    _ws_tail: str | None = field(default=None, repr=False)
    _ws_tail_b: bytes | None = field(default=None, repr=False)
    # Whole WebSocket frames by subscription prefix: subscribers whose subscription ids are equal (tRPC
    # clients number them from 1 per socket, so most are) share one frame object.
    _frames: dict[bytes, bytes] | None = field(default=None, repr=False)
    # Set on the first event of a batch as it is published: the wall-clock time (a stream event's: when it
    # was made) and, while tracing, the trace it was committed in (``server.tracing``). The bus carries both.
    published_at: float = field(default=0.0, repr=False)
    trace_parent: str | None = field(default=None, repr=False)

    @classmethod
    def build(cls, session_id: str, seq: int | None, type_: str, fields: Mapping[str, Any]) -> EventEnvelope:
        if type_ not in DURABLE_EVENT_TYPES and type_ not in EPHEMERAL_EVENT_TYPES:
            raise ValueError(f"unknown event type {type_!r}")
        if (seq is None) != (type_ in EPHEMERAL_EVENT_TYPES):
            raise ValueError(f"{type_} must {'not ' if seq is None else ''}carry a seq")
        body = {"type": type_, "sessionId": session_id, **fields}
        env = cls(session_id, seq, type_, dumps(body), fields.get("messageId"), fields.get("offset"))
        if seq is None:
            env.published_at = time.time()  # a stream event is published as soon as it is made
        return env

    @property
    def event_id(self) -> str:
        eid = self._event_id
        if eid is None:
            eid = self._event_id = str(self.seq)
        return eid

    def ws_tail(self) -> str:
        """The part of a tracked tRPC WebSocket data frame after the subscription id, built once per
        durable event and shared by every subscriber. A full frame is ``{"id":<subscription id>`` + this.
        """
        tail = self._ws_tail
        if tail is None:
            tail = self._ws_tail = tracked_tail(self.event_id, self.json)
        return tail

    def ws_tail_bytes(self) -> bytes:
        tail = self._ws_tail_b
        if tail is None:
            tail = self._ws_tail_b = self.ws_tail().encode()
        return tail

    def ws_frame_as(self, prefix: bytes, event_id: str, header: Callable[[int], bytes]) -> bytes:
        """A frame tracked under another event's id (ephemeral events carry the last durable id); shared
        by subscribers with the same prefix and the same id, like :meth:`ws_frame`."""
        frames = self._frames
        if frames is None:
            frames = self._frames = {}
        key = prefix + b"@" + event_id.encode()
        frame = frames.get(key)
        if frame is None:
            payload = prefix + tracked_tail(event_id, self.json).encode()
            frame = header(len(payload)) + payload
            if len(frames) < MAX_CACHED_FRAMES:
                frames[key] = frame
        return frame

    def ws_frame(self, prefix: bytes, header: Callable[[int], bytes]) -> bytes:
        """The complete frame (WebSocket header + ``prefix`` + shared tail), built once per prefix."""
        frames = self._frames
        if frames is None:
            frames = self._frames = {}
        frame = frames.get(prefix)
        if frame is None:
            payload = prefix + self.ws_tail_bytes()
            frame = header(len(payload)) + payload
            if len(frames) < MAX_CACHED_FRAMES:
                frames[prefix] = frame
        return frame


MAX_CACHED_FRAMES = 16


def tracked_tail(event_id: str, json: str) -> str:
    """``,"result":{...}}`` of a tracked tRPC data frame: the id appears inside data and beside it."""
    return ',"result":{"type":"data","data":{"id":"' + event_id + '","data":' + json + '},"id":"' + event_id + '"}}'


def untracked_tail(json: str) -> str:
    return ',"result":{"type":"data","data":' + json + "}}"


# --- each event's fields (besides ``type`` and ``sessionId``), as clients receive them ----------------------


class _Empty(TypedDict):
    pass


class _MessageField(TypedDict):
    message: MessageJson


class _QueuedField(TypedDict):
    message: QueuedJson


class QueueMessageRemoved(TypedDict):
    """``queue-message-removed``: a message left the queue (``reason``: ``sent``, ``dequeued`` or ``removed``)."""

    messageId: str
    reason: QueueRemovalReason


class QueueReordered(TypedDict):
    """``queue-reordered``: the ids of the queued messages in their new order."""

    order: list[str]


class BranchChanged(TypedDict):
    """``branch-changed``: the active path is now the path up to ``parentId`` (None: from the start) followed
    by ``path``."""

    parentId: str | None
    path: list[MessageJson]


class RunResumed(TypedDict):
    """``run-resumed``: a run cut short by a restart goes on, continuing the answer ``messageId``."""

    runId: str
    messageId: str


class RunStarted(TypedDict):
    """``run-started``: a run began, and what started it (``trigger``)."""

    runId: str
    trigger: RunTrigger
    clientRequestId: NotRequired[str | None]  # always written now; absent from runs logged before it was


class RunFinished(TypedDict):
    """``run-finished``: the run ended normally, with the last step's finish reason and the run's token usage."""

    runId: str
    finishReason: str | None
    usage: dict[str, Any] | None


class RunFailed(TypedDict):
    """``run-failed``: the run ended with an error."""

    runId: str
    error: Annotated[dict[str, Any], WireOf(MessageError)]


class RunRef(TypedDict):
    """The fields of an event about a run that need nothing but its id (``run-aborted``)."""

    runId: str


class ToolCallReady(TypedDict):
    """``tool-call-ready``: a tool call of the answer, complete, with who runs it and whether it needs approval."""

    callId: str
    name: str
    arguments: str
    executor: ToolExecutor
    requiresApproval: bool


class CallRef(TypedDict):
    """The fields of an event about a tool call that need nothing but its id (``tool-approval-requested``)."""

    callId: str


class ToolApprovalResolved(TypedDict):
    """``tool-approval-resolved``: the first answer to an approval, and who gave it when."""

    callId: str
    approved: bool
    # Always written now; absent from approvals logged before they were.
    decidedBy: NotRequired[Annotated[dict[str, Any], WireOf(DecidedBy)]]
    decidedAt: NotRequired[int]


class ToolCallResult(TypedDict):
    """``tool-call-result``: a tool call's result, and how the call ended."""

    callId: str
    output: str
    isError: bool
    outcome: ToolOutcome


class SessionUpdated(TypedDict):
    """``session-updated``: the session's changed fields (the large ones only when they changed); merge them."""

    session: Annotated[dict[str, Any], WireOf(SessionChanges)]


class TitleChanged(TypedDict):
    """``title-changed``: the session's new title and where it came from."""

    title: str
    source: TitleSource


class TextDelta(TypedDict):
    """``text-delta`` (ephemeral): text appended to a streaming answer at ``offset`` (code points)."""

    messageId: str
    offset: int
    delta: str


class StreamSnapshot(TypedDict):
    """``stream-snapshot`` (ephemeral): the text so far of an answer streaming when the subscriber joined."""

    messageId: str
    offset: int
    text: str


class ToolCallStart(TypedDict):
    """``tool-call-start`` (ephemeral): the model began a tool call of a streaming answer."""

    messageId: str
    callId: str
    name: str
    index: int


class ToolCallDelta(TypedDict):
    """``tool-call-delta`` (ephemeral): more of a streaming tool call's arguments, at ``offset``."""

    messageId: str
    callId: str
    offset: int
    delta: str


class ToolCallProgress(TypedDict):
    """``tool-call-progress`` (ephemeral): how far a running server tool call has got."""

    callId: str
    progress: float
    total: NotRequired[float]
    message: NotRequired[str]


EVENT_FIELDS: dict[str, type] = {
    "queue-message-added": _QueuedField,
    "queue-message-removed": QueueMessageRemoved,
    "queue-cleared": _Empty,
    "queue-message-updated": _QueuedField,
    "queue-reordered": QueueReordered,
    "queue-paused": _Empty,
    "queue-resumed": _Empty,
    "message-created": _MessageField,
    "message-completed": _MessageField,
    "message-continued": _MessageField,
    "branch-changed": BranchChanged,
    "run-resumed": RunResumed,
    "run-started": RunStarted,
    "run-finished": RunFinished,
    "run-failed": RunFailed,
    "run-aborted": RunRef,
    "tool-call-ready": ToolCallReady,
    "tool-approval-requested": CallRef,
    "tool-approval-resolved": ToolApprovalResolved,
    "tool-call-result": ToolCallResult,
    "session-updated": SessionUpdated,
    "title-changed": TitleChanged,
    "session-deleted": _Empty,
    "text-delta": TextDelta,
    "tool-call-start": ToolCallStart,
    "tool-call-delta": ToolCallDelta,
    "stream-snapshot": StreamSnapshot,
    "tool-call-progress": ToolCallProgress,
}
"""The fields of every event type, in the order the TypeScript union lists them."""


class _SessionRef(TypedDict):
    sessionId: str


class _FeedSession(TypedDict):
    sessionId: str
    session: Annotated[dict[str, Any], WireOf(SessionSummary)]


FEED_EVENT_FIELDS: dict[str, type] = {
    "session-created": _FeedSession,
    "session-updated": _FeedSession,
    "session-deleted": _SessionRef,
}
"""The fields of a user's feed events (``session.feed``), by type."""


class ResyncRequired(TypedDict):
    """Sent untracked when the position asked for left the log; the subscription then ends."""

    type: Literal["resync-required"]
    sessionId: NotRequired[str]
    lastEventId: str


# The items of ``session.events`` and ``session.feed``: an event tracked by its id (``{id, data}`` as
# @trpc/client hands it to ``onData``), or ``resync-required``. Plain dicts here; the generated TypeScript spells
# out the union from EVENT_FIELDS and FEED_EVENT_FIELDS under these names.
SessionEventItem = TypeAliasType("SessionEventItem", dict[str, Any])
FeedEventItem = TypeAliasType("FeedEventItem", dict[str, Any])


# --- durable events -------------------------------------------------------------------------------------


class Event(NamedTuple):
    """A durable event before it has its place in a log: its type and its fields as clients receive them
    (camelCase; ``type`` and ``sessionId`` are added by the envelope)."""

    type: DurableEventType
    fields: Mapping[str, Any]


def queue_message_added(message: QueuedMessage) -> Event:
    return Event("queue-message-added", _QueuedField(message=message.wire()))


def queue_message_removed(message_id: str, reason: QueueRemovalReason) -> Event:
    return Event("queue-message-removed", QueueMessageRemoved(messageId=message_id, reason=reason))


def queue_cleared() -> Event:
    return Event("queue-cleared", _Empty())


def queue_message_updated(message: QueuedMessage) -> Event:
    return Event("queue-message-updated", _QueuedField(message=message.wire()))


def queue_reordered(order: list[str]) -> Event:
    """``order``: every queued message's id, head first."""
    return Event("queue-reordered", QueueReordered(order=order))


def queue_paused() -> Event:
    return Event("queue-paused", _Empty())


def queue_resumed() -> Event:
    return Event("queue-resumed", _Empty())


def message_created(message: Message | MessageJson) -> Event:
    """``message``: the wire model, or its JSON as the model gives it (``store.repo.message_json``)."""
    return Event("message-created", _MessageField(message=message if isinstance(message, dict) else message.wire()))


def message_completed(message: Message | MessageJson) -> Event:
    """``message``: the wire model, or its JSON as the model gives it (``store.repo.message_json``)."""
    return Event("message-completed", _MessageField(message=message if isinstance(message, dict) else message.wire()))


def message_continued(message: Message) -> Event:
    """An answer goes on (``run.continue``, or after the process streaming it stopped): ``message`` is streaming
    again with the text it has; ``text-delta`` offsets go on from its length."""
    return Event("message-continued", _MessageField(message=message.wire()))


def branch_changed(parent_id: str | None, path: list[Message]) -> Event:
    """The active path changed: it is now the path up to ``parent_id`` (None: from the start) followed by
    ``path``, the messages below it, in order, each with its versions."""
    return Event("branch-changed", BranchChanged(parentId=parent_id, path=[m.wire() for m in path]))


def run_resumed(run_id: str, message_id: str) -> Event:
    """The run was taken over after the process driving it stopped mid-answer; it goes on with ``message_id``."""
    return Event("run-resumed", RunResumed(runId=run_id, messageId=message_id))


def run_started(run_id: str, trigger: RunTrigger, client_request_id: str | None) -> Event:
    """``client_request_id``: the client's id of the write that started the run, so its author knows it."""
    return Event("run-started", RunStarted(runId=run_id, trigger=trigger, clientRequestId=client_request_id))


def run_finished(run_id: str, finish_reason: str | None, usage: dict[str, Any] | None) -> Event:
    return Event("run-finished", RunFinished(runId=run_id, finishReason=finish_reason, usage=usage))


def run_failed(run_id: str, error: dict[str, Any]) -> Event:
    """``error``: ``{code, message, retryable}`` (``RunFailure`` or a provider's ``ErrorCode``, docs/runs.md)."""
    return Event("run-failed", RunFailed(runId=run_id, error=error))


def run_aborted(run_id: str) -> Event:
    return Event("run-aborted", RunRef(runId=run_id))


def tool_call_ready(call_id: str, name: str, arguments: str, executor: ToolExecutor, requires_approval: bool) -> Event:
    return Event(
        "tool-call-ready",
        ToolCallReady(
            callId=call_id, name=name, arguments=arguments, executor=executor, requiresApproval=requires_approval
        ),
    )


def tool_approval_requested(call_id: str) -> Event:
    return Event("tool-approval-requested", CallRef(callId=call_id))


def tool_approval_resolved(call_id: str, approved: bool, decided_by: dict[str, Any], decided_at: int) -> Event:
    """``decided_by``: ``{userId, userName, deviceName}`` of whoever answered first; ``decided_at`` in ms (the
    same as the call's kept ``decision.decidedAt``)."""
    return Event(
        "tool-approval-resolved",
        ToolApprovalResolved(callId=call_id, approved=approved, decidedBy=decided_by, decidedAt=decided_at),
    )


def tool_call_result(call_id: str, output: str, outcome: ToolOutcome) -> Event:
    """``isError`` is true for every outcome but ``ok`` (what a model is told); ``outcome`` says which."""
    result = ToolCallResult(callId=call_id, output=output, isError=outcome != "ok", outcome=outcome)
    return Event("tool-call-result", result)


def session_updated(changes: dict[str, Any]) -> Event:
    """``changes``: the session as ``session-updated`` carries it (``store.repo.session_changes_wire``)."""
    return Event("session-updated", SessionUpdated(session=changes))


def title_changed(title: str, source: TitleSource) -> Event:
    return Event("title-changed", TitleChanged(title=title, source=source))


def session_deleted() -> Event:
    return Event("session-deleted", _Empty())


# --- a user's feed (session.feed) ---------------------------------------------------------------------------

FeedEventType = Literal["session-created", "session-updated", "session-deleted"]


class FeedEvent(NamedTuple):
    """An event of a user's feed before it has its place there; ``fields`` as clients receive them."""

    type: FeedEventType
    fields: Mapping[str, Any]


def feed_session_created(session_id: str, summary: dict[str, Any]) -> FeedEvent:
    """``summary``: what a session list shows of the session (``services.feed.summary``)."""
    return FeedEvent("session-created", _FeedSession(sessionId=session_id, session=summary))


def feed_session_updated(session_id: str, summary: dict[str, Any]) -> FeedEvent:
    return FeedEvent("session-updated", _FeedSession(sessionId=session_id, session=summary))


def feed_session_deleted(session_id: str) -> FeedEvent:
    return FeedEvent("session-deleted", _SessionRef(sessionId=session_id))


# --- streaming previews -----------------------------------------------------------------------------------
# Built straight into their envelope: a text delta is made once per streamed token.


def _stream(session_id: str, type_: StreamEventType, body: Mapping[str, Any]) -> str:
    return dumps({"type": type_, "sessionId": session_id, **body})


def text_delta(session_id: str, message_id: str, offset: int, delta: str) -> EventEnvelope:
    """``delta`` extends the message's text at character ``offset``."""
    body: TextDelta = {"messageId": message_id, "offset": offset, "delta": delta}
    return EventEnvelope(
        session_id,
        None,
        "text-delta",
        _stream(session_id, "text-delta", body),
        message_id,
        offset,
        published_at=time.time(),
    )


def stream_snapshot(session_id: str, message_id: str, offset: int, text: str) -> EventEnvelope:
    """The message's text so far (``offset`` characters), for a subscriber that missed the deltas."""
    body: StreamSnapshot = {"messageId": message_id, "offset": offset, "text": text}
    return EventEnvelope(
        session_id, None, "stream-snapshot", _stream(session_id, "stream-snapshot", body), message_id, offset
    )


# Tool-call previews carry an offset into the call's *arguments*, not into the message text, so their envelope
# has no text offset (which deliveries compare with text snapshots).


def tool_call_start(session_id: str, message_id: str, call_id: str, name: str, index: int) -> EventEnvelope:
    body: ToolCallStart = {"messageId": message_id, "callId": call_id, "name": name, "index": index}
    json = _stream(session_id, "tool-call-start", body)
    return EventEnvelope(session_id, None, "tool-call-start", json, message_id, published_at=time.time())


def tool_call_progress(
    session_id: str, call_id: str, progress: float, total: float | None, message: str | None
) -> EventEnvelope:
    """A server tool (an MCP tool) reported how far it got: ``progress`` of ``total`` (when known)."""
    body: ToolCallProgress = {"callId": call_id, "progress": progress}
    if total is not None:
        body["total"] = total
    if message:
        body["message"] = message[:500]
    return EventEnvelope(session_id, None, "tool-call-progress", _stream(session_id, "tool-call-progress", body))


def tool_call_delta(session_id: str, message_id: str, call_id: str, offset: int, delta: str) -> EventEnvelope:
    body: ToolCallDelta = {"messageId": message_id, "callId": call_id, "offset": offset, "delta": delta}
    json = _stream(session_id, "tool-call-delta", body)
    return EventEnvelope(session_id, None, "tool-call-delta", json, message_id, published_at=time.time())
