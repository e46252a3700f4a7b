"""A live, local copy of one session, kept in sync from ``session.events``.

:class:`SessionView` reads ``session.get`` once, subscribes from its ``lastEventId`` and applies every event to
its state: messages (streaming text assembled from ``text-delta`` and ``stream-snapshot``), the queue, the run, the
pending tool approvals and the connection state. UIs register a listener and redraw on each change.

Invariant: an assistant message's text grows only by a delta whose ``offset`` equals the text's current length
(offsets count code points, like Python's ``len``). A delta behind that length that repeats text already there
(the part a snapshot covered) is ignored; anything else — a gap, a contradiction, a delta for a message we do
not know — means our copy can no longer be trusted, so we *resync*: refetch ``session.get`` and subscribe again
from its ``lastEventId``. The server asks for the same with ``resync-required`` when our position left its log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from server.domain.models import Message, QueuedMessage, Session, SessionSnapshot, ToolDecision, Versions

from .trpc import ConnectionLost, Subscription, TrpcError

if TYPE_CHECKING:
    from .chat import ChatClient

log = logging.getLogger(__name__)

ConnectionState = Literal["connecting", "connected", "reconnecting", "resumed", "closed"]


@dataclass(frozen=True)
class TextChunk:
    """Text appended to a streaming message (a delta, or the new tail of a snapshot)."""

    message_id: str
    run_id: str | None
    text: str


@dataclass(frozen=True)
class Change:
    """What a listener is told after the view applied something.

    ``kind`` is the event type (``text-delta``, ``queue-message-added``, ...) or one of the view's own:
    ``snapshot`` (state replaced from ``session.get``), ``connection`` (``view.connection`` changed).
    """

    kind: str
    event: dict[str, Any] | None = None
    chunk: TextChunk | None = None


Listener = Callable[[Change], None]


class SessionView:
    """Local state of one session. Create with :meth:`ChatClient.open_session` (started) or ``start()``."""

    def __init__(self, client: ChatClient, session_id: str) -> None:
        self.client = client
        self.session_id = session_id
        self.session: Session | None = None
        self.messages: list[Message] = []
        self.queue: list[QueuedMessage] = []
        self.run: dict[str, Any] | None = None
        self.tool_calls: dict[str, dict[str, Any]] = {}  # callId -> tool-call-ready of the current run
        self.pending_approvals: dict[str, dict[str, Any]] = {}  # callId -> {callId, name, arguments}
        self.tool_progress: dict[str, dict[str, Any]] = {}  # callId -> the latest tool-call-progress
        self.last_event_id: str | None = None
        self.connection: ConnectionState = "connecting"
        self.deleted = False
        self.resyncs = 0  # how often the local copy was thrown away and refetched
        self._listeners: list[Listener] = []
        self._sub: Subscription | None = None
        self._task: asyncio.Task[None] | None = None
        self._tick = asyncio.Event()  # set and replaced on every change
        self._unlisten: Callable[[], None] | None = None
        self._was_down = False

    # --- public ---------------------------------------------------------------------------------------

    @property
    def status(self) -> str:
        return self.session.status if self.session is not None else "idle"

    @property
    def busy(self) -> bool:
        return self.run is not None or self.status in ("running", "requires-action")

    def message(self, message_id: str) -> Message | None:
        for m in self.messages:
            if m.id == message_id:
                return m
        return None

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(change)`` after every applied change; returns a function that removes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def start(self) -> SessionView:
        self._unlisten = self.client.trpc.add_connection_listener(self._on_connection)
        await self._load()
        self._set_connection("connected")
        self._task = asyncio.create_task(self._pump())
        return self

    async def close(self) -> None:
        if self._unlisten is not None:
            self._unlisten()
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._sub is not None:
            with suppress(Exception):
                await self._sub.close()
        self.connection = "closed"

    async def __aenter__(self) -> SessionView:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def wait_until(self, predicate: Callable[[SessionView], bool], timeout: float = 10) -> None:
        """Wait until ``predicate(view)`` holds (checked after each change)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate(self):
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError("condition not met")
            with suppress(TimeoutError):
                await asyncio.wait_for(self._tick.wait(), remaining)

    # --- loading and the event loop ---------------------------------------------------------------------

    async def _load(self) -> None:
        """Replace the state with ``session.get`` and subscribe from its ``lastEventId``."""
        if self._sub is not None:
            with suppress(Exception):
                await self._sub.close()
        snap = await self.client.get_session(self.session_id)
        self._apply_snapshot(snap)
        self._sub = await self.client.trpc.subscribe(
            "session.events", {"sessionId": self.session_id}, last_event_id=snap.last_event_id
        )
        self._notify(Change("snapshot"))

    async def resync(self) -> None:
        """Throw the local copy away: refetch ``session.get`` and subscribe again from its ``lastEventId``."""
        self.resyncs += 1
        await self._load()

    async def _pump(self) -> None:
        while not self.deleted:
            assert self._sub is not None
            try:
                async for tracked_id, event in self._sub:
                    if tracked_id is not None:
                        self.last_event_id = tracked_id
                    if not self._apply(event):
                        break  # _apply asked for a resync
                    if self.deleted:
                        return
                else:
                    if self.deleted:
                        return
            except TrpcError as exc:
                if exc.code == "NOT_FOUND":
                    self._mark_deleted()
                    return
                log.warning("session.events failed (%s); resyncing", exc)
            await self._resync_retrying()

    def _mark_deleted(self) -> None:
        """The session is gone (deleted, or no longer ours): stop following it."""
        self.deleted = True
        self._notify(Change("session-deleted"))

    async def _resync_retrying(self) -> None:
        delay = 0.05
        while True:
            try:
                await self.resync()
                return
            except TrpcError as exc:
                if exc.code == "NOT_FOUND":
                    self._mark_deleted()
                    return
                raise
            except (ConnectionLost, TimeoutError) as exc:  # the socket is down: the trpc client reconnects
                log.debug("resync failed: %r", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _on_connection(self, up: bool) -> None:
        if not up:
            self._was_down = True
            self._set_connection("reconnecting")
        elif self._was_down:
            # TrpcClient re-subscribed with the last tracked id it saw: nothing is lost or repeated.
            self._set_connection("resumed")

    def _set_connection(self, state: ConnectionState) -> None:
        if self.connection != state:
            self.connection = state
            self._notify(Change("connection"))

    def _notify(self, change: Change) -> None:
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("SessionView listener failed")
        self._tick.set()
        self._tick = asyncio.Event()

    # --- applying state ---------------------------------------------------------------------------------

    def _apply_snapshot(self, snap: SessionSnapshot) -> None:
        self.session = snap.session
        self.messages = list(snap.messages)
        self.queue = list(snap.queue)
        self.run = snap.run
        self.last_event_id = snap.last_event_id
        self.tool_calls = {}
        self.pending_approvals = {}
        if snap.run:
            for call in snap.run.get("pendingToolCalls") or []:
                self.tool_calls[call["callId"]] = call
            for appr in snap.run.get("pendingApprovals") or []:
                self.pending_approvals[appr["callId"]] = appr
            streaming = snap.run.get("streaming")
            if streaming:
                self._set_text(streaming["messageId"], streaming["text"])

    def _versions_changed(self, msg: Message) -> None:
        """A new message's versions are the new list of its siblings: update those held (on the path)."""
        if msg.sibling_ids is None:
            return
        for i, m in enumerate(self.messages):
            if m.id != msg.id and m.id in msg.sibling_ids:
                index = msg.sibling_ids.index(m.id)
                versions = Versions(index=index, count=len(msg.sibling_ids))
                self.messages[i] = m.model_copy(update={"versions": versions, "sibling_ids": list(msg.sibling_ids)})

    def _replace_message(self, msg: Message) -> None:
        for i, m in enumerate(self.messages):
            if m.id == msg.id:
                self.messages[i] = msg
                return
        self.messages.append(msg)

    def _put_decision(self, e: dict[str, Any]) -> None:
        """Who answered an approval, kept on the call as ``session.get`` shows it (``toolCalls[].decision``)."""
        by = e.get("decidedBy")
        if not by or e.get("decidedAt") is None:
            return
        decision = ToolDecision(
            approved=e["approved"],
            user_name=by["userName"],
            device_name=by.get("deviceName"),
            decided_at=e["decidedAt"],
        )
        for m in self.messages:
            for i, call in enumerate(m.tool_calls or []):
                if call.id == e["callId"]:
                    m.tool_calls[i] = call.model_copy(update={"decision": decision})  # type: ignore[index]
                    return

    def _set_text(self, message_id: str, text: str) -> TextChunk | None:
        """Set a streaming message's text from a snapshot; returns the new tail when it extends the old."""
        msg = self.message(message_id)
        if msg is None:
            return None
        old = msg.content
        self._replace_message(msg.model_copy(update={"content": text}))
        if text.startswith(old) and len(text) > len(old):
            return TextChunk(message_id, msg.run_id, text[len(old) :])
        return None

    def _apply(self, e: dict[str, Any]) -> bool:
        """Apply one event. Returns False when the local copy must be refetched."""
        kind = e.get("type", "")
        chunk: TextChunk | None = None
        if kind == "resync-required":
            return False
        if kind == "text-delta":
            msg = self.message(e["messageId"])
            if msg is None:
                return False
            text, offset, delta = msg.content, int(e["offset"]), e["delta"]
            if offset == len(text):
                self._replace_message(msg.model_copy(update={"content": text + delta}))
                chunk = TextChunk(msg.id, msg.run_id, delta)
            elif offset < len(text) and text[offset : offset + len(delta)] == delta:
                return True  # already covered by a snapshot: not a change
            else:
                log.info("delta at %d for %d chars of %s: resyncing", offset, len(text), msg.id)
                return False
        elif kind == "stream-snapshot":
            if self.message(e["messageId"]) is None:
                return False
            chunk = self._set_text(e["messageId"], e["text"])
        elif kind == "message-created":
            msg = Message.model_validate(e["message"])
            self._replace_message(msg)
            self._versions_changed(msg)
        elif kind in ("message-completed", "message-continued"):
            msg = Message.model_validate(e["message"])
            old = self.message(msg.id)
            if old is not None and msg.versions is None:  # keep the versions we know
                msg = msg.model_copy(update={"versions": old.versions, "sibling_ids": old.sibling_ids})
            self._replace_message(msg)
        elif kind == "branch-changed":
            # The active path is now the path up to parentId followed by the messages carried: no refetch.
            parent = e.get("parentId")
            ids = [m.id for m in self.messages]
            if parent is not None and parent not in ids:
                return False  # older than the messages held: read the session again
            self.messages = self.messages[: ids.index(parent) + 1] if parent is not None else []
            self.messages += [Message.model_validate(m) for m in e["path"]]
        elif kind == "queue-message-added":
            self.queue.append(QueuedMessage.model_validate(e["message"]))
        elif kind == "queue-message-removed":
            self.queue = [q for q in self.queue if q.id != e["messageId"]]
        elif kind == "queue-cleared":
            self.queue = []
        elif kind == "queue-message-updated":
            new = QueuedMessage.model_validate(e["message"])
            self.queue = [new if q.id == new.id else q for q in self.queue]
        elif kind == "queue-reordered":
            by_id = {q.id: q for q in self.queue}
            self.queue = [by_id[i] for i in e["order"] if i in by_id]
        elif kind in ("queue-paused", "queue-resumed") and self.session is not None:
            self.session = self.session.model_copy(update={"queue_paused": kind == "queue-paused"})
        elif kind == "session-updated":
            # Large fields (tools, system prompt, ...) are there only when they changed: merge.
            base = self.session.wire() if self.session is not None else {}
            self.session = Session.model_validate({**base, **e["session"]})
        elif kind == "title-changed" and self.session is not None:
            self.session = self.session.model_copy(update={"title": e["title"], "title_source": e["source"]})
        elif kind == "run-started":
            self.run = {
                "id": e["runId"],
                "status": "running",
                "streaming": None,
                "pendingToolCalls": [],
                "pendingApprovals": [],
            }
            self.tool_calls, self.pending_approvals = {}, {}
        elif kind in ("run-finished", "run-failed", "run-aborted"):
            self.run = None
            self.tool_calls, self.pending_approvals, self.tool_progress = {}, {}, {}
        elif kind == "tool-call-progress":
            self.tool_progress[e["callId"]] = e
        elif kind == "tool-call-result":
            self.tool_progress.pop(e["callId"], None)
        elif kind == "tool-call-ready":
            self.tool_calls[e["callId"]] = e
        elif kind == "tool-approval-requested":
            call = self.tool_calls.get(e["callId"], {})
            self.pending_approvals[e["callId"]] = {
                "callId": e["callId"],
                "name": call.get("name", "?"),
                "arguments": call.get("arguments", ""),
            }
        elif kind == "tool-approval-resolved":
            self.pending_approvals.pop(e["callId"], None)
            self._put_decision(e)
        elif kind == "session-deleted":
            self.deleted = True
        self._notify(Change(kind, e, chunk))
        return True
