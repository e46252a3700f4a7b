"""State transitions of runs. Each function runs inside one locked unit of work (a ``SessionTx``) and emits
the durable events describing what it changed, so state and events commit together (invariant 2).

Both the user-facing service (``server.services.runs``) and the run loop (``server.engine.run``) change
run state only through these functions. The events they emit (made by ``domain.events``):

* ``message-created`` / ``message-completed``: every message row written or finalised; a user message
  stored in an untitled session is followed by its ``title-changed`` (``server.services.titles``);
* ``run-started {runId, trigger}`` (trigger: ``message`` | ``queue`` | ``instructions``),
  ``run-finished {runId, finishReason, usage}``, ``run-failed {runId, error}``, ``run-aborted {runId}``;
* ``tool-call-ready``, ``tool-approval-requested``, ``tool-call-result``;
* ``session-updated {session}`` whenever the session's status changes and when a run ends (usage);
* through the queue's rules (``server.services.queue``): ``queue-message-removed {reason: "sent"}`` when the
  head is sent, ``queue-paused`` when a run fails or is aborted.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from .. import metrics
from ..domain import events
from ..domain.events import RunTrigger
from ..domain.models import MessageStatus, Role, SessionStatus, ToolOutcome
from ..llm import ToolCallEvent
from ..llm.errors import ErrorCode
from ..protocol.errors import RpcError
from ..store import repo, run_rows
from ..store.models import QueuedMessage, utcnow
from ..store.run_rows import CallFields, CallRow, MessageFields, MessageRow, QueuedRow, RunFields, RunRow
from . import lease, queue
from .titles import title_from_first_message
from .uow import SessionTx

DENIED_RESULT = "The user denied this tool call."
CANCELLED_RESULT = "The tool call was cancelled: its answer stopped before it had a result."


def new_id() -> str:
    """A random (version 4) UUID as text, as ``str(uuid.uuid4())`` makes it: from the operating system's random
    bytes, read 4 KiB at a time rather than with one system call per id (a send makes three), and without building
    a ``UUID`` object."""
    global _random, _taken
    if _taken >= len(_random):
        _random, _taken = os.urandom(16 * 256).hex(), 0
    h = _random[_taken : _taken + 32]
    _taken += 32
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


# RFC 4122's variant: the high two bits of the id's 9th byte are 10 (its first hex digit is 8, 9, a or b).
_VARIANT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}
_random, _taken = "", 0  # random bytes as hex not yet used for ids, and how many hex digits of it are used


def _forget_random() -> None:
    """A forked process must not hand out the ids its parent would: it reads random bytes of its own."""
    global _random, _taken
    _random, _taken = "", 0


os.register_at_fork(after_in_child=_forget_random)


# --- messages -------------------------------------------------------------------------------------------


def _new_message(
    tx: SessionTx, ordinal: int, parent_id: str | None, role: Role, content: str, created_at: datetime, **fields: Any
) -> MessageRow:
    """A new message row of the session (not yet written), on the active path after ``parent_id``. ``fields``: the
    columns that differ from a complete message with no attachments, tool calls, run or client request."""
    return MessageRow(
        id=new_id(),
        session_id=tx.row.id,
        ordinal=ordinal,
        parent_id=parent_id,
        role=role,
        content=content,
        created_at=created_at,
        **fields,
    )


async def add_message(
    tx: SessionTx,
    role: Role,
    content: str = "",
    *,
    status: MessageStatus = "complete",
    run_id: str | None = None,
    attachments: list[dict[str, Any]] | None = None,
    tool_call_id: str | None = None,
    outcome: ToolOutcome | None = None,
    client_request_id: str | None = None,
    after: MessageRow | None = None,
) -> MessageRow:
    """Store a new message at the end of the active path (one ``INSERT``) and announce it (``message-created``).
    ``outcome``: a tool result's (``is_error`` follows from it). ``after``: the message this transaction stored
    last, still the end of the active path and the session's newest (a send's question, then its answer): the new
    one follows it as its only version, so where it goes and its versions are known without reading them. The row
    returned is plain: a caller that goes on changing the message loads it (``tx.get(Message, row.id)``)."""
    db = await tx.plain()
    point = None
    if after is None:
        point = await repo.append_point(db, tx.row.id)
        ordinal, parent_id = point.ordinal, point.parent_id
    else:
        ordinal, parent_id = after.ordinal + 1, after.id
    row = _new_message(
        tx,
        ordinal,
        parent_id,
        role,
        content,
        utcnow(),
        status=status,
        run_id=run_id,
        attachments=attachments or [],
        tool_call_id=tool_call_id,
        is_error=outcome not in (None, "ok"),
        outcome=outcome,
        client_request_id=client_request_id,
    )
    await run_rows.insert_messages(db, (row,))
    versions = {row.parent_id: [row.id]} if point is None else await repo.versions_at(db, tx.row.id, point, row)
    tx.emit(events.message_created(repo.message_json(row, versions)))
    if role == "user":
        await title_from_first_message(tx)  # in the transaction that stores the message
    return row


def complete_message(
    tx: SessionTx,
    row: MessageFields,
    *,
    status: MessageStatus,
    content: str,
    finish_reason: str | None,
    usage: dict[str, int] | None = None,
    tool_calls: list[dict[str, str]] | None = None,
    notices: list[dict[str, Any]] | None = None,
    error: dict[str, Any] | None = None,
) -> None:
    """``notices``: what the user is told about the step's request (files the model got only a placeholder for,
    docs/attachments.md), kept on the message. ``error``: why it failed (``run_error``), kept on it too. ``row``
    may be a plain row (``store.run_rows``) or an ORM object: either way its changes commit with ``tx``."""
    tx.track(row)
    row.status, row.content, row.finish_reason = status, content, finish_reason
    if error is not None:
        row.error = error
    if usage is not None:
        row.usage = usage
    if tool_calls:
        row.tool_calls = tool_calls
    if notices:
        row.notices = notices
    tx.emit(events.message_completed(repo.message_json(row)))


async def add_system_messages(
    tx: SessionTx, instructions: Iterable[str], client_request_id: str | None = None
) -> list[MessageRow]:
    """System messages in one write (one ordinal read, one ``INSERT``), not one round of work per message: a
    call may carry dozens of large instructions, and on SQLite this runs on the event loop."""
    texts = [text for text in instructions if text.strip()]
    if not texts:
        return []
    db = await tx.plain()
    point, now = await repo.append_point(db, tx.row.id), utcnow()
    rows, parent = [], point.parent_id
    for i, text in enumerate(texts):
        rows.append(
            _new_message(tx, point.ordinal + i, parent, "system", text, now, client_request_id=client_request_id)
        )
        parent = rows[-1].id
    await run_rows.insert_messages(db, rows)
    versions = await repo.versions_at(db, tx.row.id, point, rows[0])
    versions.update({before.id: [after.id] for before, after in itertools.pairwise(rows)})
    for row in rows:
        tx.emit(events.message_created(repo.message_wire(row, versions)))
    return rows


# --- session status and queue ---------------------------------------------------------------------------


def session_changed(tx: SessionTx) -> None:
    tx.emit(events.session_updated(repo.session_changes_wire(tx.row)))


def set_status(tx: SessionTx, status: SessionStatus) -> None:
    if tx.row.status != status:
        tx.row.status = status
        session_changed(tx)


# --- runs -----------------------------------------------------------------------------------------------


async def run_slot_free(tx: SessionTx) -> bool:
    """Whether the session's owner may start one more run (``CHATSYNC_MAX_ACTIVE_RUNS_PER_USER``).

    Counted under the owner's lock (``repo.lock_user``, taken after the session's: never the other way round),
    in the transaction that would start the run, so concurrent starts on any replica cannot pass the cap
    together: each counts the runs the ones before it committed. This session's own run, which the same
    transaction may have just ended, does not count."""
    limit = tx.max_active_runs
    if limit is None:
        return True
    db = await tx.plain()
    await repo.lock_user(db, tx.row.owner_id)
    return await repo.count_active_runs(db, tx.row.owner_id, other_than=tx.row.id) < limit


async def begin_run(
    tx: SessionTx,
    owner: str,
    lease_seconds: float,
    trigger: RunTrigger,
    run_id: str | None = None,
    client_request_id: str | None = None,
    *,
    provider: str | None = None,
    model: str | None = None,
    continues_id: str | None = None,
) -> RunRow:
    """Start a run (one ``INSERT``, made with the transaction's next plain statement) and claim its lease. Callers
    checked, under the lock, that no run is in progress. ``client_request_id`` is the client's id of the write that
    caused it (on ``run-started``); ``provider`` and ``model``: the model it asks when not the session's;
    ``continues_id``: the answer its first step goes on with. Past the owner's cap on runs in progress
    (:func:`run_slot_free`) it raises ``TOO_MANY_REQUESTS``, and the caller's transaction (the user message it
    stored with it included) rolls back. The row returned is plain (``store.run_rows``)."""
    if not await run_slot_free(tx):
        raise RpcError(
            "TOO_MANY_REQUESTS",
            f"At most {tx.max_active_runs} runs may be in progress at once; wait for one to end, or abort one",
        )
    run = RunRow(
        id=run_id or new_id(),
        session_id=tx.row.id,
        status="running",
        trigger=trigger,
        created_at=utcnow(),
        provider=provider,
        model=model,
        continues_id=continues_id,
    )
    # Written with the transaction's next plain statement: a step the same transaction starts is counted in it.
    tx.stage(run)
    tx.row.run_id = run.id
    tx.row.abort_requested = False
    lease.claim(tx.row, owner, lease_seconds)
    tx.emit(events.run_started(run.id, trigger, client_request_id))
    set_status(tx, "running")
    return run


async def start_with_message(
    tx: SessionTx,
    owner: str,
    lease_seconds: float,
    content: str,
    attachments: list[dict[str, Any]] | None,
    trigger: RunTrigger,
    client_request_id: str | None = None,
) -> tuple[MessageRow, RunRow]:
    """Store the user message (before any model call: invariant 7), then start a run for it."""
    run_id = new_id()
    message = await add_message(
        tx, "user", content, attachments=attachments, run_id=run_id, client_request_id=client_request_id
    )
    return message, await begin_run(tx, owner, lease_seconds, trigger, run_id, client_request_id)


def add_usage(tx: SessionTx, run: RunFields, input_tokens: int, output_tokens: int) -> None:
    tx.track(run)
    run.usage_input_tokens += input_tokens
    run.usage_output_tokens += output_tokens
    tx.row.usage_input_tokens += input_tokens
    tx.row.usage_output_tokens += output_tokens


def end_run(
    tx: SessionTx,
    run: RunFields | None,
    outcome: Literal["finished", "failed", "aborted"],
    *,
    finish_reason: str | None = None,
    error: dict[str, Any] | None = None,
    pause: bool = False,
) -> None:
    """Close the run (``finished`` | ``failed`` | ``aborted``). The caller then calls :func:`next_or_idle`
    (normal end) or :func:`go_idle` (error, abort)."""
    run_id = tx.row.run_id if run is None else run.id
    assert run_id is not None, "end_run needs the session's run"
    if run is not None:
        tx.track(run)
        run.status, run.finish_reason, run.error, run.ended_at = outcome, finish_reason, error, utcnow()
        metrics.run_ended(tx.row.provider, tx.row.model, outcome, run.created_at, run.ended_at)
    tx.row.run_id = None
    tx.row.abort_requested = False
    tx.row.abort_then_send = False
    if outcome == "finished":
        usage = {
            "inputTokens": run.usage_input_tokens if run else 0,
            "outputTokens": run.usage_output_tokens if run else 0,
        }
        tx.emit(events.run_finished(run_id, finish_reason, usage))
    elif outcome == "failed":
        assert error is not None, "a failed run says why"
        tx.emit(events.run_failed(run_id, error))
    else:
        tx.emit(events.run_aborted(run_id))
    if pause:
        queue.set_paused(tx, True)


def go_idle(tx: SessionTx) -> None:
    lease.release(tx.row)
    if tx.row.status != "idle":
        set_status(tx, "idle")
    else:
        session_changed(tx)  # usage changed


async def send_next_queued(tx: SessionTx, owner: str, lease_seconds: float) -> RunRow | None:
    """Auto-send: dequeue the head (``queue-message-removed``, reason ``sent``) and start a run with
    it. Exactly once: the dequeue and the new user message commit together, under the session lock.

    When the owner has no run slot free (:func:`run_slot_free`) nothing changes: the head stays at the head of
    the unpaused queue, and the sweeper sends it once one of the owner's runs has ended."""
    sent = await _send_head(tx, owner, lease_seconds)
    return None if sent is None else sent[1]


async def _send_head(tx: SessionTx, owner: str, lease_seconds: float) -> tuple[MessageRow, RunRow] | None:
    """:func:`send_next_queued`, returning the question it stored with the run."""
    if tx.row.queue_paused or tx.row.run_id is not None:
        return None
    head = await run_rows.queue_head(await tx.plain(), tx.row.id)
    if head is None:
        tx.queue_length = 0  # known now: the session list's feed event need not count the queue again
        return None
    if not await run_slot_free(tx):
        return None
    return await _send(tx, owner, lease_seconds, head)


async def send_queued(tx: SessionTx, owner: str, lease_seconds: float, item: QueuedMessage | QueuedRow) -> RunRow:
    """Take ``item`` out of the queue (``queue-message-removed``, reason ``sent``) and start a run with it,
    in one transaction (callers checked that no run is in progress)."""
    return (await _send(tx, owner, lease_seconds, item))[1]


async def _send(
    tx: SessionTx, owner: str, lease_seconds: float, item: QueuedMessage | QueuedRow
) -> tuple[MessageRow, RunRow]:
    await queue.take(tx, item, "sent")
    return await start_with_message(
        tx, owner, lease_seconds, item.content, item.attachments, "queue", item.client_request_id
    )


async def next_or_idle(tx: SessionTx, owner: str, lease_seconds: float) -> RunRow | None:
    """After a run ended with stop/length: the next queued message, or idle."""
    sent = await next_question_or_idle(tx, owner, lease_seconds)
    return None if sent is None else sent[1]


async def next_question_or_idle(tx: SessionTx, owner: str, lease_seconds: float) -> tuple[MessageRow, RunRow] | None:
    """:func:`next_or_idle`, returning the question the auto-send stored with the run: the run's first step,
    started in the same transaction, follows it (``engine.run.start_step``'s ``after``)."""
    sent = await _send_head(tx, owner, lease_seconds)
    if sent is None:
        go_idle(tx)
    else:
        session_changed(tx)
    return sent


async def stop_run(
    tx: SessionTx,
    outcome: Literal["aborted", "failed"],
    *,
    error: dict[str, Any] | None = None,
    run_id: str | None = None,
    live_text: tuple[str, str] | None = None,
    owner: str = "",
    lease_seconds: float = 0.0,
    stopped_by: dict[str, Any] | None = None,
) -> RunRow | None:
    """Stop the session's run (``run_id``, by default the row's): every message still streaming is kept as it
    stands, marked ``interrupted`` (``live_text``, ``(message id, text)``, is the newer text of the message this
    process was streaming), the run ends ``aborted`` or ``failed`` (with ``error``), and the session goes idle.

    A failure pauses the queue (nothing queued is sent behind the user's back). So does a plain abort; an abort
    that made room for the queue's head (``abort_then_send``) sends the head at once, claimed for ``owner``,
    and returns the run it started.

    Each message it ends keeps why, shown on it wherever it is read: the failure's ``error``, or who stopped it
    (``stopped_by``, or who asked for the abort while it streamed, :func:`mark_stopping`). A failure with no
    message streaming gets an empty answer of status ``error`` holding the reason."""
    finish_reason = "aborted" if outcome == "aborted" else "error"
    streaming = tx.adopt(await repo.streaming_rows(await tx.plain(), tx.row.id))
    for row in streaming:
        content = live_text[1] if live_text is not None and row.id == live_text[0] else row.content
        if outcome == "aborted" and stopped_by is not None:
            row.stopped_by = stopped_by
        complete_message(tx, row, status="interrupted", content=content, finish_reason=finish_reason, error=error)
    run_id = run_id or tx.row.run_id
    if outcome == "failed" and not streaming:
        failed = await add_message(tx, "assistant", status="error", run_id=run_id)
        complete_message(tx, failed, status="error", content="", finish_reason="error", error=error)
    if run_id:
        await cancel_open_calls(tx, run_id)
    run = await tx.load(RunRow, run_id) if run_id else None
    if outcome == "aborted":
        return await end_aborted(tx, run, owner, lease_seconds)
    end_run(tx, run, "failed", error=error, pause=True)
    go_idle(tx)
    return None


async def mark_stopping(tx: SessionTx, stopped_by: dict[str, Any]) -> None:
    """An abort was asked for while an answer streams: the answer will say who stopped it once it ends."""
    for row in tx.adopt(await repo.streaming_rows(await tx.plain(), tx.row.id)):
        row.stopped_by = stopped_by


async def recover(tx: SessionTx) -> None:
    """The process driving the run is gone: stop it as failed (``interrupted``, retryable)."""
    message = "The server running this answer stopped before it finished."
    await stop_run(tx, "failed", error=run_error(RunFailure.INTERRUPTED, message, retryable=True))


async def take_over(
    tx: SessionTx, owner: str, lease_seconds: float, *, resume: bool, shared: dict[str, str] | None = None
) -> RunRow | None:
    """The process driving the run is gone (its lease lapsed, or it handed the run over as it stopped). With
    ``resume``, an answer it was streaming goes on, once, driven by ``owner`` from here: the run is claimed,
    ``run-resumed`` names the message, and the run's next step continues it (``engine.run``). ``shared`` holds
    the text of streams as every replica saw them (the shared stream buffer), which may be ahead of the row's
    last flush: the answer goes on from there, so its text stays contiguous with what clients showed.

    Otherwise — resuming is off, nothing was streaming, the answer was continued once already — the run fails
    as :func:`recover` says; and a run a person asked to stop ends ``aborted``. Returns the run taken over."""
    if tx.row.abort_requested:
        await stop_run(tx, "aborted")
        return None
    run = await tx.load(RunRow, tx.row.run_id) if resume and tx.row.run_id else None
    streaming = []
    if run is not None and run.resumes == 0:
        found = await repo.streaming_rows(await tx.plain(), tx.row.id)
        streaming = tx.adopt([m for m in found if m.active and m.role == "assistant"])
    if run is None or not streaming:
        await recover(tx)
        return None
    message = streaming[-1]
    text = (shared or {}).get(message.id)
    if text is not None and len(text) > len(message.content) and text.startswith(message.content):
        message.content = text
    run.resumes += 1
    run.continues_id = message.id
    lease.claim(tx.row, owner, lease_seconds)
    tx.emit(events.run_resumed(run.id, message.id))
    return run


class RunFailure(StrEnum):
    """The codes of a ``run-failed`` error that are not the provider's (``llm.errors.ErrorCode``)."""

    INTERRUPTED = "interrupted"  # the process driving the run stopped (a crash, a lost lease, a shutdown)
    INTERNAL_ERROR = "internal_error"  # a bug on the server
    INVALID_TOOL_ARGUMENTS = "invalid_tool_arguments"  # the model's tool call could not be used


def run_error(code: RunFailure | ErrorCode, message: str, *, retryable: bool = False) -> dict[str, Any]:
    """The ``error`` of a ``run-failed`` event: ``{code, message, retryable}``."""
    return {"code": str(code), "message": message, "retryable": retryable}


async def end_aborted(tx: SessionTx, run: RunFields | None, owner: str, lease_seconds: float) -> RunRow | None:
    """The end of :func:`stop_run` for an abort (partial messages already marked). A plain abort pauses the
    queue; one that made room for the queue's head (``abort_then_send``) keeps the queue going and sends the
    head at once, returning the run it started."""
    then_send = tx.row.abort_then_send
    end_run(tx, run, "aborted", pause=not then_send)
    if then_send:
        return await next_or_idle(tx, owner, lease_seconds)
    go_idle(tx)
    return None


# --- tools ----------------------------------------------------------------------------------------------


def runnable(calls: Sequence[CallRow]) -> list[CallRow]:
    """Open calls the server can run now."""
    return [c for c in calls if not c.has_result and c.executor == "server" and c.approval in ("none", "approved")]


def waiting_on_people(calls: Sequence[CallFields]) -> bool:
    """An open call needs an approval or a client's output."""
    return any(not c.has_result and (c.approval == "pending" or c.executor == "client") for c in calls)


async def unique_call_ids(tx: SessionTx, calls: Sequence[ToolCallEvent]) -> list[str]:
    """Tool call ids unique within the session (some providers derive ids from position and name, so the
    same id can come back in a later step); a clash gets a ``_<n>`` suffix."""
    out: list[str] = []
    for call in calls:
        base = call.id or "call"
        candidate, n = base, 1
        while candidate in out or await tx.load(CallRow, tx.row.id, candidate) is not None:
            n += 1
            candidate = f"{base}_{n}"
        out.append(candidate)
    return out


async def register_tool_calls(
    tx: SessionTx,
    run: RunFields,
    message: MessageFields,
    calls: Sequence[dict[str, str]],
    definitions: dict[str, dict[str, Any]],
) -> None:
    """Store every call before it runs (invariant 7) and announce it; a call to a tool the session does not
    define gets an error result at once, so the model can read what went wrong."""
    for position, call in enumerate(calls):
        definition = definitions.get(call["name"])
        executor = (definition or {}).get("executor", "server")
        needs_approval = bool((definition or {}).get("requiresApproval"))
        row = CallRow(
            session_id=tx.row.id,
            id=call["id"],
            run_id=run.id,
            message_id=message.id,
            position=position,
            name=call["name"],
            arguments=call["arguments"],
            executor=executor,
            requires_approval=needs_approval,
            approval="pending" if needs_approval else "none",
            has_result=False,
            created_at=utcnow(),
        )
        await tx.add(row)
        tx.emit(events.tool_call_ready(row.id, row.name, row.arguments, executor, needs_approval))
        if definition is None:
            text = f"Unknown tool {row.name!r}: this session does not define it."
            await add_tool_result(tx, row, text, "unknown-tool")
        elif needs_approval:
            tx.emit(events.tool_approval_requested(row.id))


async def add_tool_result(
    tx: SessionTx,
    call: CallFields,
    output: str,
    outcome: ToolOutcome,
    attachments: Sequence[dict[str, Any]] = (),
) -> MessageRow:
    """A tool result (a ``tool`` message), stored as soon as it exists; ``attachments``: images it returned."""
    # Marked before the message is stored, so that the call's row is written once with whatever else changed on
    # it in this transaction (an approval's answer), before the message's ``INSERT``.
    tx.track(call)
    call.has_result = True
    message = await add_message(
        tx, "tool", output, tool_call_id=call.id, outcome=outcome, run_id=call.run_id, attachments=list(attachments)
    )
    tx.emit(events.tool_call_result(call.id, output, outcome))
    return message


async def cancel_open_calls(tx: SessionTx, run_id: str) -> None:
    """The run ends with calls still open (running, waiting for approval or for a client): each gets a
    ``cancelled`` result, so every device shows how it ended and a late answer finds it closed."""
    for call in tx.adopt(await repo.run_tool_calls(await tx.plain(), tx.row.id, run_id, open_only=True)):
        await add_tool_result(tx, call, CANCELLED_RESULT, "cancelled")


def suspend(tx: SessionTx, run: RunFields) -> None:
    """Wait for people (``requires-action``): the lease is released, any replica may resume."""
    tx.track(run)
    run.status = "requires-action"
    lease.release(tx.row)
    set_status(tx, "requires-action")


async def maybe_resume(tx: SessionTx, owner: str, lease_seconds: float) -> RunRow | None:
    """Resume a suspended run when nothing waits on people any more; claims the lease for this process."""
    if tx.row.run_id is None or tx.row.status != "requires-action":
        return None
    # Read after the transaction's own changes to its calls are written (``SessionTx.plain``): a result or an
    # approval it just stored counts.
    calls = await repo.run_tool_calls(await tx.plain(), tx.row.id, tx.row.run_id, open_only=True)
    if waiting_on_people(calls):
        return None
    run = await tx.load(RunRow, tx.row.run_id)
    if run is None:
        return None
    run.status = "running"
    lease.claim(tx.row, owner, lease_seconds)
    set_status(tx, "running")
    return run


async def record_decision(tx: SessionTx, call: CallFields, decision: dict[str, Any]) -> None:
    """Put an approval's answer (``{approved, userName, deviceName, decidedAt}``, as ``tool-approval-resolved``
    says it) on the call's entry in its assistant message, where ``session.get`` and ``message.list`` show it."""
    message = await tx.load(MessageRow, call.message_id)
    if message is None or not message.tool_calls:
        return
    # A new list: JSON columns track assignment, not changes inside.
    message.tool_calls = [{**c, "decision": decision} if c.get("id") == call.id else c for c in message.tool_calls]
