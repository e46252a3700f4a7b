"""What clients ask of runs: send (with busy policies), add instructions, resume the queue, submit tool
outputs, approve tool calls, abort. Each is one locked unit of work; a run it starts or resumes is claimed
in that same transaction and then driven by this process's orchestrator.

Busy means a run is in progress (``running`` or ``requires-action``). Busy policies (docs/runs.md):

* ``enqueue`` (default): the content goes to the end of the queue (``queue-message-added``); auto-send
  delivers it when the run ends with stop/length.
* ``reject``: ``CONFLICT``; nothing is written.
* ``interrupt``: abort the run (as ``run.abort`` would: partial answer kept, queue paused), wait for it to
  stop (at most ``INTERRUPT_WAIT_SECONDS``, else ``TIMEOUT``), then send — and a send resumes the queue.
* ``steer``: the user message is stored at once, tagged with the run; the run answers it at its next step
  boundary (see ``server.engine.run``). Status ``steered``.

Choices made here:

* ``instructions`` (``message.send``) and ``message.addInstructions`` append system messages at once, also
  while busy (they are appended at once); a busy session's run sees them at its next step, and
  ``addInstructions`` then starts no second run (``runId`` is null).
* A send to an idle session whose queue is paused resumes the queue (``queue-resumed``) first.
* A send that finds a run whose process died (lease expired) recovers it first, as the sweeper would.
* ``tool.submitOutputs`` accepts outputs only for known client calls without a result of the run in progress
  (``NOT_FOUND``, ``CONFLICT`` when it already has one or its run has ended, ``PRECONDITION_FAILED`` while its
  approval is pending or for a server tool). ``tool.approve`` on a call whose run has ended is ``CONFLICT``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal, Protocol

from pydantic import TypeAdapter
from sqlalchemy.ext.asyncio import AsyncSession
from typing_extensions import TypedDict

from ..domain import events, outputs
from ..domain.models import ToolOutcome
from ..files import refs as file_refs
from ..protocol.errors import RpcError
from ..store import repo, run_rows
from ..store.models import ChatSession, User
from ..store.run_rows import CallRow, MessageRow, RunRow
from . import queue, transitions
from .lease import lease_live
from .queue import QueueService
from .requests import MISSING, Expand, Receipt, RequestKey, as_is, kept_whole
from .sessions import SessionService
from .uow import SessionTx, UnitOfWork

INTERRUPT_WAIT_SECONDS = 10.0
ABORT_WAIT_SECONDS = 5.0


class DrivenRun(Protocol):
    """A run this process is driving, as the run service waits on it."""

    done: asyncio.Event


class RunDriver(Protocol):
    """The part of the process that drives runs (``engine.Orchestrator``), as the run service sees it. The
    service writes the transitions; the driver runs the model for the runs it is told to start."""

    owner: str  # this process's lease owner id

    def start(self, session_id: str, run_id: str, first: Any = None) -> None:
        """Drive a run this process has just claimed (its lease is written in the same transaction); ``first``:
        what :meth:`first_step` returned when that transaction started the run's first step too."""

    async def first_step(self, tx: SessionTx, run: RunRow, question: MessageRow) -> Any:
        """Start the first step of ``run``, which ``tx`` has just begun with the user message ``question``, in
        ``tx`` (its assistant message and model request), so that the run's start and its first step commit
        together."""

    def local_loop(self, session_id: str) -> DrivenRun | None:
        """The run this process drives for the session, if any."""

    def abort_local(self, session_id: str) -> DrivenRun | None:
        """Ask the run this process drives for the session (if any) to stop; returns it."""

    def partial_text(self, session_id: str, message_id: str) -> str | None:
        """The text streamed so far of a message this process streams, or None."""

    async def shared_texts(self, session_id: str) -> dict[str, str]:
        """The text of the session's streams as every replica saw them, by message."""

    async def take_over(self, tx: SessionTx, shared: dict[str, str]) -> RunRow | None:
        """Take over a run whose process is gone (``transitions.take_over``) for this process."""


# --- what an exactly-once record keeps of a reply (``services.requests``) -----------------------------------
# The messages a reply carries by id (read again on a repeat: a live session keeps every message), a queued
# message by id and time, the rest (status, run ids, flags) as it is.


class StartedReceipt(TypedDict):
    status: Literal["started"]
    message: str
    runId: str


class SteeredReceipt(TypedDict):
    status: Literal["steered"]
    message: str
    runId: str


class SendQueuedReceipt(TypedDict):
    status: Literal["queued"]
    queued: queue.QueuedReceipt


SentReceipt = StartedReceipt | SteeredReceipt | SendQueuedReceipt


class MessagesReceipt(TypedDict):
    """``message.addInstructions``'s record: the system messages by id, and the run they started."""

    messages: list[str]
    runId: str | None


class SubmittedReceipt(TypedDict):
    """``tool.submitOutputs``'s record: the tool messages by id, and whether the run went on."""

    messages: list[str]
    resumed: bool


SENT: Receipt[SentReceipt, outputs.SendResult] = Receipt(TypeAdapter(SentReceipt), TypeAdapter(outputs.SendResult))
STARTED: Receipt[StartedReceipt, outputs.SendStarted] = Receipt(
    TypeAdapter(StartedReceipt), TypeAdapter(outputs.SendStarted)
)
ADDED: Receipt[MessagesReceipt, outputs.Added] = Receipt(TypeAdapter(MessagesReceipt), TypeAdapter(outputs.Added))
SUBMITTED: Receipt[SubmittedReceipt, outputs.OutputsSubmitted] = Receipt(
    TypeAdapter(SubmittedReceipt), TypeAdapter(outputs.OutputsSubmitted)
)
RESOLVED: Receipt[outputs.Resolved, outputs.Resolved] = kept_whole(TypeAdapter(outputs.Resolved))


def sent_receipt(reply: outputs.SendResult) -> SentReceipt:
    if reply["status"] == "queued":
        queued = reply["queued"]
        return {"status": "queued", "queued": {"id": queued["id"], "enqueuedAt": queued["enqueuedAt"]}}
    if reply["status"] == "steered":
        return {"status": "steered", "message": reply["message"]["id"], "runId": reply["runId"]}
    return started_receipt(reply)


def started_receipt(reply: outputs.SendStarted) -> StartedReceipt:
    return {"status": "started", "message": reply["message"]["id"], "runId": reply["runId"]}


async def messages_again(tx: SessionTx, ids: list[str]) -> list[outputs.MessageJson]:
    """The messages ``ids`` of a receipt, read again (``NOT_FOUND`` when one is gone)."""
    db, found = await tx.plain(), {}
    for message_id in dict.fromkeys(ids):  # one prepared read each: a receipt names a message or a few
        row = await run_rows.get(db, MessageRow, message_id)
        if row is None:
            raise RpcError("NOT_FOUND", "Message not found")
        found[message_id] = repo.message_wire(row).wire()
    return [found[i] for i in ids]


def sent_again(
    tx: SessionTx, content: str, attachments: list[dict[str, Any]], crid: str | None
) -> Expand[SentReceipt, outputs.SendResult]:
    """Rebuilds a ``message.send`` reply from its receipt: the message read again, a queued message from the
    repeated call's own ``content`` and ``attachments``."""

    async def expand(receipt: SentReceipt) -> outputs.SendResult:
        if receipt["status"] == "queued":
            queued = queue.queued_again(receipt["queued"], content, attachments, crid)
            return {"status": "queued", "queued": queued.wire()}
        (message,) = await messages_again(tx, [receipt["message"]])
        if receipt["status"] == "steered":
            return {"status": "steered", "message": message, "runId": receipt["runId"]}
        return {"status": "started", "message": message, "runId": receipt["runId"]}

    return expand


def started_again(tx: SessionTx) -> Expand[StartedReceipt, outputs.SendStarted]:
    async def expand(receipt: StartedReceipt) -> outputs.SendStarted:
        (message,) = await messages_again(tx, [receipt["message"]])
        return {"status": "started", "message": message, "runId": receipt["runId"]}

    return expand


def added_again(tx: SessionTx) -> Expand[MessagesReceipt, outputs.Added]:
    async def expand(receipt: MessagesReceipt) -> outputs.Added:
        return {"messages": await messages_again(tx, receipt["messages"]), "runId": receipt["runId"]}

    return expand


def submitted_again(tx: SessionTx) -> Expand[SubmittedReceipt, outputs.OutputsSubmitted]:
    async def expand(receipt: SubmittedReceipt) -> outputs.OutputsSubmitted:
        return {"messages": await messages_again(tx, receipt["messages"]), "resumed": receipt["resumed"]}

    return expand


class RunService:
    """Sending messages and driving runs from the API: ``message.send``, instructions, tool outputs and
    approvals, send-now, resume and abort; each one locked unit of work, then the orchestrator starts the run."""

    def __init__(
        self,
        uow: UnitOfWork,
        orchestrator: RunDriver,
        *,
        queue: QueueService,
        run_lease_seconds: float,
        max_content_chars: int,
    ) -> None:
        self.uow = uow
        self.o = orchestrator
        self.queue_service = queue  # the queue's rules: a busy session's send enqueues through them
        self.lease_seconds = run_lease_seconds
        self.max_content_chars = max_content_chars

    def check_content(self, *texts: str) -> None:
        """Refuse a text longer than ``max_content_chars`` (``PAYLOAD_TOO_LARGE``)."""
        for content in texts:
            if len(content) > self.max_content_chars:
                raise RpcError("PAYLOAD_TOO_LARGE", f"content exceeds {self.max_content_chars} characters")

    # --- message.send ---------------------------------------------------------------------------------

    async def send(
        self,
        user: User,
        session_id: str,
        content: str,
        attachments: list[dict[str, Any]],
        instructions: list[str],
        busy_policy: str | None,
        request: RequestKey | None = None,
    ) -> outputs.SendResult:
        self.check_content(content, *instructions)
        crid = request.request_id if request is not None else None
        deadline = time.monotonic() + INTERRUPT_WAIT_SECONDS
        while True:
            started = taken = first = None
            result: outputs.SendResult | None = None
            async with self.uow.session(user, session_id) as tx:
                replayed = await tx.replay(request, SENT, sent_again(tx, content, attachments, crid))
                if replayed is not MISSING:
                    return replayed
                row = tx.row
                policy = busy_policy or row.busy_policy
                await file_refs.link(await tx.plain(), session_id, attachments)
                taken = await self.recover_orphaned(tx)
                if row.run_id is not None:
                    if policy == "reject":
                        raise RpcError("CONFLICT", "A run is in progress in this session")
                    if policy == "interrupt":
                        if row.status == "requires-action":
                            await transitions.stop_run(tx, "aborted")  # nobody drives it: abort here, then send below
                        else:
                            row.abort_requested = True
                    elif policy == "steer":
                        await transitions.add_system_messages(tx, instructions, crid)
                        message = await transitions.add_message(
                            tx, "user", content, attachments=attachments, run_id=row.run_id, client_request_id=crid
                        )
                        result = {
                            "status": "steered",
                            "message": repo.message_wire(message).wire(),
                            "runId": row.run_id,
                        }
                    else:
                        await transitions.add_system_messages(tx, instructions, crid)
                        queued = await self.queue_service.append(tx, content, attachments, crid)
                        result = {"status": "queued", "queued": queued.wire()}
                if result is None and row.run_id is None:
                    queue.set_paused(tx, False)
                    await transitions.add_system_messages(tx, instructions, crid)
                    message, run = await transitions.start_with_message(
                        tx, self.o.owner, self.lease_seconds, content, attachments, "message", crid
                    )
                    started = run.id
                    result = {"status": "started", "message": repo.message_json(message), "runId": run.id}
                    # Committed with the message and the run: the run's first step (one transaction fewer).
                    first = await self.o.first_step(tx, run, message)
                if result is not None:
                    tx.remember(request, SENT, sent_receipt(result))
            self.start_runs(session_id, taken)
            if started is not None:
                self.o.start(session_id, started, first)
            if result is not None:
                return result
            # interrupt: the abort is recorded; wait for the run to stop, then try again
            await self.wait_interrupted(session_id, deadline)

    def start_runs(self, session_id: str, *run_ids: str | None) -> None:
        """Drive the runs a committed transaction claimed for this process."""
        for run_id in run_ids:
            if run_id is not None:
                self.o.start(session_id, run_id)

    async def wait_interrupted(self, session_id: str, deadline: float) -> None:
        """After an abort written to make room: wait (a while) for the run to stop; ``TIMEOUT`` past ``deadline``."""
        if time.monotonic() > deadline:
            raise RpcError("TIMEOUT", "The running answer did not stop in time")
        await self._wait_stopped(session_id, min(1.0, deadline - time.monotonic()))

    async def recover_orphaned(self, tx: SessionTx) -> str | None:
        """A run marked running whose lease lapsed and which no loop here drives: its process died (or handed
        it over as it stopped). Take it over before going on, as the sweeper would (``transitions.take_over``:
        the answer it streamed goes on, or the run fails); returns the id of a run this process now drives,
        which the caller starts once its transaction committed."""
        row = tx.row
        if (
            row.run_id is not None
            and row.status == "running"
            and not lease_live(row)
            and self.o.local_loop(row.id) is None
        ):
            run = await self.o.take_over(tx, await self.o.shared_texts(row.id))
            return run.id if run is not None else None
        return None

    async def _wait_stopped(self, session_id: str, timeout: float) -> None:
        loop = self.o.abort_local(session_id)
        if loop is not None:
            # Not ``asyncio.wait_for``: on Python 3.11 it returns normally when the caller is cancelled just as the
            # run stops, and a caller that is to stop would go on sending.
            try:
                async with asyncio.timeout(max(timeout, 0.01)):
                    await loop.done.wait()
            except TimeoutError:
                pass
        else:
            await asyncio.sleep(0.05)  # driven by another replica: it polls abort_requested

    # --- message.addInstructions / message.resumeQueue -------------------------------------------------

    async def add_instructions(
        self, user: User, session_id: str, instructions: list[str], respond: bool, request: RequestKey | None = None
    ) -> outputs.Added:
        self.check_content(*instructions)
        crid = request.request_id if request is not None else None
        started = None
        async with self.uow.session(user, session_id) as tx:
            replayed = await tx.replay(request, ADDED, added_again(tx))
            if replayed is not MISSING:
                return replayed
            messages = await transitions.add_system_messages(tx, instructions, crid)
            if respond and tx.row.run_id is None:
                started = (
                    await transitions.begin_run(
                        tx, self.o.owner, self.lease_seconds, "instructions", client_request_id=crid
                    )
                ).id
            result: outputs.Added = {"messages": [repo.message_wire(m).wire() for m in messages], "runId": started}
            kept: MessagesReceipt = {"messages": [m.id for m in messages], "runId": started}
            tx.remember(request, ADDED, kept)
        if started is not None:
            self.o.start(session_id, started)
        return result

    async def resume_queue(self, user: User, session_id: str) -> outputs.QueueResumed:
        started = None
        async with self.uow.session(user, session_id) as tx:
            queue.set_paused(tx, False)
            run = await transitions.send_next_queued(tx, self.o.owner, self.lease_seconds)
            started = run.id if run is not None else None
        if started is not None:
            self.o.start(session_id, started)
        return {"runId": started}

    # --- tools ------------------------------------------------------------------------------------------

    async def submit_outputs(
        self, user: User, session_id: str, given: list[dict[str, Any]], request: RequestKey | None = None
    ) -> outputs.OutputsSubmitted:
        for item in given:
            self.check_content(item["output"])
        resumed = None
        async with self.uow.session(user, session_id) as tx:
            replayed = await tx.replay(request, SUBMITTED, submitted_again(tx))
            if replayed is not MISSING:
                return replayed
            messages = []
            for item in given:
                call = await tx.load(CallRow, session_id, item["callId"])
                if call is None:
                    raise RpcError("NOT_FOUND", f"No tool call {item['callId']!r} in this session")
                if call.has_result:
                    raise RpcError("CONFLICT", f"Tool call {call.id!r} already has a result")
                if call.executor != "client":
                    raise RpcError("PRECONDITION_FAILED", f"Tool call {call.id!r} is run by the server")
                if call.approval == "pending":
                    raise RpcError("PRECONDITION_FAILED", f"Tool call {call.id!r} is waiting for approval")
                if call.run_id != tx.row.run_id:
                    # Its run was aborted or failed: the model moved on, and the history already reads this call
                    # as interrupted. Storing the output now would put a result after later turns, where no
                    # provider accepts it (an orphan) — refuse it, as a late approval is refused.
                    raise RpcError("CONFLICT", "The run that made this tool call has ended")
                outcome: ToolOutcome = "error" if item.get("isError") else "ok"
                message = await transitions.add_tool_result(tx, call, item["output"], outcome)
                messages.append(repo.message_wire(message).wire())
            run = await transitions.maybe_resume(tx, self.o.owner, self.lease_seconds)
            resumed = run.id if run is not None else None
            result: outputs.OutputsSubmitted = {"messages": messages, "resumed": resumed is not None}
            kept: SubmittedReceipt = {"messages": [m["id"] for m in messages], "resumed": resumed is not None}
            tx.remember(request, SUBMITTED, kept)
        if resumed is not None:
            self.o.start(session_id, resumed)
        return result

    async def approve(
        self,
        user: User,
        session_id: str,
        call_id: str,
        approved: bool,
        reason: str | None,
        request: RequestKey | None = None,
        device_name: str | None = None,
    ) -> outputs.Resolved:
        resumed = None
        async with self.uow.session(user, session_id) as tx:
            replayed = await tx.replay(request, RESOLVED, as_is)
            if replayed is not MISSING:
                return replayed
            call = await tx.load(CallRow, session_id, call_id)
            if call is None:
                raise RpcError("NOT_FOUND", f"No tool call {call_id!r} in this session")
            if call.approval != "pending":
                raise RpcError("CONFLICT", "This tool call needs no approval or was already answered")
            if call.run_id != tx.row.run_id:
                raise RpcError("CONFLICT", "The run that made this tool call has ended")
            # Who decided, so every other device can show it (the first answer wins; later ones are CONFLICT).
            decided_by = {"userId": user.id, "userName": user.name, "deviceName": device_name}
            decided_at = int(time.time() * 1000)
            tx.emit(events.tool_approval_resolved(call.id, approved, decided_by, decided_at))
            # Kept with the call on its message, so a device that loads the session later shows it too.
            decision = {"approved": approved, "userName": user.name, "deviceName": device_name, "decidedAt": decided_at}
            await transitions.record_decision(tx, call, decision)
            # Changed after the message's read: the call's row is written once, with its result when denied.
            call.approval = "approved" if approved else "denied"
            call.approval_reason = reason
            if not approved:
                text = transitions.DENIED_RESULT + (f" Reason: {reason}" if reason else "")
                await transitions.add_tool_result(tx, call, text, "denied")
            run = await transitions.maybe_resume(tx, self.o.owner, self.lease_seconds)
            resumed = run.id if run is not None else None
            result: outputs.Resolved = {"resolved": True}
            tx.remember(request, RESOLVED, result)
        if resumed is not None:
            self.o.start(session_id, resumed)
        return result

    # --- message.sendQueuedNow ---------------------------------------------------------------------------

    async def send_queued_now(
        self, user: User, session_id: str, message_id: str, mode: Literal["interrupt", "steer", "next"]
    ) -> outputs.SentNow:
        """Send one queued message ahead of the rest, in one locked transaction (docs/runs.md):

        * idle session: it is sent at once (``started``);
        * ``steer``: it leaves the queue and joins the current run, answered at its next step boundary;
        * ``next``: it moves to the head of the queue and goes when the current run ends;
        * ``interrupt``: it moves to the head, and the current run is aborted (partial answer kept) with
          ``abort_then_send``, so the abort does not pause the queue and the head goes at once after it.

        In every case the queue is resumed (pressing "send now" means the queue should flow) and the other
        items keep their order behind it. Two presses for two items at once both move their item to the
        head; the session's lock orders them, and the runs follow each other, never two at once.
        """
        signal = False
        started = None
        async with self.uow.session(user, session_id) as tx:
            row = tx.row
            items = await repo.queue_rows(await tx.orm(), session_id)
            item = queue.find(items, message_id)
            taken = await self.recover_orphaned(tx)
            queue.set_paused(tx, False)
            if row.run_id is None:
                run = await transitions.send_queued(tx, self.o.owner, self.lease_seconds, item)
                started = run.id
                return_value: outputs.SentNow = {"status": "started", "mode": mode, "runId": run.id}
            elif mode == "steer":
                await queue.take(tx, item, "sent")
                await transitions.add_message(
                    tx,
                    "user",
                    item.content,
                    attachments=item.attachments,
                    run_id=row.run_id,
                    client_request_id=item.client_request_id,
                )
                return_value = {"status": "steered", "mode": mode, "runId": row.run_id}
            else:
                await queue.reorder(tx, items, item, 0)
                return_value = {"status": "next", "mode": mode, "runId": row.run_id}
                if mode == "interrupt":
                    if row.status == "requires-action":
                        # Nobody drives a suspended run: abort it here and send the head in this transaction.
                        row.abort_then_send = True
                        resumed = await transitions.stop_run(
                            tx, "aborted", owner=self.o.owner, lease_seconds=self.lease_seconds
                        )
                        started = resumed.id if resumed is not None else None
                        return_value = {"status": "started", "mode": mode, "runId": started}
                    else:
                        row.abort_requested = True
                        row.abort_then_send = True
                        signal = True
                        return_value = {"status": "interrupting", "mode": mode, "runId": row.run_id}
        self.start_runs(session_id, taken, started)
        if signal:
            self.o.abort_local(session_id)  # on another replica, its owner polls abort_requested
        return return_value

    # --- run.abort --------------------------------------------------------------------------------------

    async def abort(
        self, user: User, session_id: str, device: tuple[str | None, str | None] = (None, None)
    ) -> outputs.Aborted:
        """Stop the run; ``device``: (id, name) of the device asking, kept on the answer it stops."""
        signal = False
        by = {"userId": user.id, "userName": user.name, "deviceId": device[0], "deviceName": device[1]}
        async with self.uow.session(user, session_id) as tx:
            row = tx.row
            if row.run_id is None:
                return {"aborted": False}
            if row.status == "requires-action" or (not lease_live(row) and self.o.local_loop(session_id) is None):
                await transitions.stop_run(tx, "aborted", stopped_by=by)  # no process drives it
            else:
                await transitions.mark_stopping(tx, by)
                row.abort_requested = True
                row.abort_then_send = False  # Stop wins over a send-now waiting for this abort: the queue pauses
                signal = True
        if signal:
            loop = self.o.abort_local(session_id)
            if loop is not None:
                # Answer once the abort is written down, so the caller's next read sees it.
                try:
                    await asyncio.wait_for(loop.done.wait(), ABORT_WAIT_SECONDS)
                except TimeoutError:
                    pass
        return {"aborted": True}

    # --- session.get's ``run`` ----------------------------------------------------------------------------

    async def run_snapshot(self, db: AsyncSession, row: ChatSession) -> dict[str, Any] | None:
        """The ``run`` field of ``session.get``, read in the caller's transaction ``db``."""
        if row.run_id is None:
            return None
        session_id = row.id
        run = await repo.get_run(db, row.run_id)
        calls = await repo.run_tool_calls(db, session_id, row.run_id, open_only=True)
        streaming = None
        for message in await repo.streaming_messages(db, session_id):
            text = self.o.partial_text(session_id, message.id)
            text = message.content if text is None else text
            streaming = {"messageId": message.id, "offset": len(text), "text": text}
        return {
            "id": row.run_id,
            "status": run.status if run is not None else row.status,
            "streaming": streaming,
            "pendingToolCalls": [
                {
                    "callId": c.id,
                    "name": c.name,
                    "arguments": c.arguments,
                    "executor": c.executor,
                    "requiresApproval": c.requires_approval,
                    "approval": c.approval,
                }
                for c in calls
            ],
            "pendingApprovals": [
                {"callId": c.id, "name": c.name, "arguments": c.arguments} for c in calls if c.approval == "pending"
            ],
        }


class RunAwareSessionService(SessionService):
    """``session.get`` with its ``run`` field filled in (``domain.models.SessionSnapshot``), read in the same
    transaction as the rest. The partial text comes from the stream buffer, which may be ahead of the rows;
    that is safe because stream events carry offsets."""

    def __init__(self, *args: Any, runs: RunService, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.runs = runs

    async def _run_snapshot(self, db: AsyncSession, row: ChatSession) -> dict[str, Any] | None:
        return await self.runs.run_snapshot(db, row)
