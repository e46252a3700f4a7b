"""The run loop: drives one run of one session on this process, step after step.

``RunLoop.main`` repeats: load the run's state; run the server tools that may run; suspend when a call waits
for people; otherwise make one model call (a :class:`~server.engine.turn.Turn`). It ends when the run ends
(``stop``/``length`` — then the queue's auto-send may hand it the next run —, error, abort, suspension, the step
limit) or when this process loses the lease.

Eager persistence (invariant 7), step by step:

1. one transaction creates the assistant message with status ``streaming`` (``message-created``);
2. deltas go to the stream buffer, then to the bus as ephemeral ``text-delta {messageId, offset, delta}``;
   a heartbeat writes the partial text to the row every ``stream_flush_seconds`` and renews the lease;
3. one transaction completes the message (``message-completed``) and stores its tool calls
   (``tool-call-ready``) before any runs; each server tool result is stored as soon as it exists.

Choices made here:

* Steering: a message sent with ``busyPolicy: "steer"`` is stored at once, tagged with the run's id. A step
  that ends with ``stop``/``length`` while such a message arrived after the step's assistant message does not
  end the run: the next step answers it. After a ``tool-calls`` step it simply joins the next step's history.
* The step limit (``max_steps_per_run``) ends the run with ``run-finished`` (finishReason of the last step,
  usually ``tool-calls``) and the queue continues; calls without results get synthesised results later.
* A step that ends with finishReason ``error`` and no error event (tool arguments that do not parse) fails the
  run with code ``invalid_tool_arguments``.
* Abort keeps the partial answer (status ``interrupted``, finishReason ``aborted``), emits ``run-aborted`` and
  pauses the queue. Calls that never got a result stay without one; the converter synthesises "interrupted".
* Uploaded files of the history are read just before each model call, outside the transaction and as part of
  the abortable work (one read per file per run); a file that cannot be read for another reason than being gone
  fails the step with ``attachment_unavailable`` (retryable) rather than answering without it. Files the model
  gets only a placeholder for are listed as ``notices`` on the step's ``message-completed``.
* Shutdown of this process (graceful) while an answer streams hands the answer over: its text so far is written
  to its row and the lease released; the next process to sweep (this one restarted, another replica) continues
  it once (``run-resumed``, then ``message-continued``: the same message, its text growing on). Otherwise — or
  with ``CHATSYNC_RESUME_INTERRUPTED_ANSWERS=false`` — it is treated like a crash that we get to write down
  ourselves: ``run-failed`` with code ``interrupted``, the partial answer marked, the queue paused.
* A run asks the model its run names (``run.regenerate`` with another model), else the session's. A run that
  continues an answer (``run.continue``, or taken over after a restart) extends that message in its first step,
  with a continuation request (``llm.RequestOptions.continuation``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import tracing
from ..domain import events
from ..llm import ChatRequest, ErrorEvent, Finished, TextDelta, ToolCallDelta, ToolCallEvent, ToolCallStart
from ..llm.convert.history import normalize_ahead
from ..llm.errors import ErrorCode
from ..services import transitions
from ..services.lease import LeaseLost, fenced_tx, heartbeat, next_tick, release
from ..services.transitions import RunFailure
from ..services.uow import SessionTx
from ..store import repo
from ..store.run_rows import CallRow, MessageRow, RunRow
from . import mcp_tools
from .history import StoredHistory, has_files, load_files, notices, request_frame, with_history
from .turn import Turn

if TYPE_CHECKING:
    from .run_context import RunContext

log = logging.getLogger(__name__)


@dataclass
class StepResult:
    """What one model call gave: its tool calls, finish reason, token usage, error, and the notices about
    files the model got only a placeholder for."""

    calls: list[ToolCallEvent] = field(default_factory=list)
    finish: str | None = None
    usage: tuple[int, int] = (0, 0)
    error: ErrorEvent | None = None
    notices: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class StepStart:
    """A model call as the transaction that started it left it: what to ask, and where the answer goes."""

    request: ChatRequest  # without its messages: they are made of ``history`` outside the transaction
    history: StoredHistory
    owner_id: str
    provider_id: str
    streaming: bool
    message_id: str
    initial: str  # the answer's text so far (a continued answer), or ""
    mcp: mcp_tools.McpContext | None  # what the step's MCP tools are offered for


async def start_step(ctx: RunContext, tx: SessionTx, run: RunRow, after: MessageRow | None = None) -> StepStart:
    """In the transaction that decided on a model call of ``run`` (a step of the run loop, or the send that began
    the run): its assistant message (``message-created``, or the answer it continues) and its request. ``after``:
    the message the same transaction stored just before (a send's question), which the answer follows
    (``transitions.add_message``)."""
    session = tx.row
    provider_id, model = run.provider or session.provider, run.model or session.model
    tx.track(run)  # a run the same transaction began is written with it too
    continued = await _continued(tx, run)
    run.steps += 1
    if continued is not None:
        # The answer goes on in the same message: streaming again, from the text it has.
        run.continues_id = None
        continued.status, continued.finish_reason = "streaming", None
        tx.emit(events.message_continued(repo.message_wire(continued)))
        mid, exclude, initial = continued.id, None, continued.content
    else:
        message = await transitions.add_message(tx, "assistant", "", status="streaming", run_id=run.id, after=after)
        mid, exclude, initial = message.id, message.id, ""
    # The conversation is read here, as this transaction leaves it; converting it waits until the transaction is
    # over (``RunLoop._prepare_and_consume``): for a long chat that is many milliseconds no writer must wait for.
    history = StoredHistory(session.id, await repo.stored_history(await tx.plain(), session.id), exclude)
    request = request_frame(
        session, inputs=ctx.model_inputs(provider_id, model), model=model, continuation=exclude is None
    )
    mcp = await mcp_tools.context(await tx.plain(), session)
    return StepStart(request, history, session.owner_id, provider_id, not session.disable_streaming, mid, initial, mcp)


async def _continued(tx: SessionTx, run: RunRow) -> MessageRow | None:
    """The answer this run's next step goes on with (``run.continue``, or a run taken over mid-answer): the
    message it names while that is still the last of the active path, else None (a new message)."""
    if run.continues_id is None:
        return None
    row = await tx.load(MessageRow, run.continues_id)
    if row is None or row.role != "assistant" or await repo.active_leaf(await tx.plain(), tx.row.id) != row.id:
        run.continues_id = None
        return None
    return row


class RunLoop:
    """One run (and the runs auto-send chains to it) of one session, on this process."""

    def __init__(self, ctx: RunContext, session_id: str, run_id: str, first: StepStart | None = None) -> None:
        self.ctx = ctx
        self.session_id = session_id
        self.run_id: str | None = run_id
        # The run's first step, when the transaction that began the run started it too (``start_step``).
        self._first = first
        self._check_abort = False  # whether the row must say if an abort asked meanwhile was for the new run
        self.abort_requested = False
        self.done = asyncio.Event()
        self._inner: asyncio.Task[Any] | None = None
        self._turn: Turn | None = None  # the model call in progress, for the idle limit (``_tick``)
        self._lease_lost = False
        self._streaming: str | None = None  # id of the message being streamed
        self._flushed = 0  # characters of it already written to its row
        self._files: dict[str, bytes] = {}  # uploaded files read by this run's steps, by id
        self._mcp: mcp_tools.McpContext | None = None  # what the step's MCP tools are offered for
        self._mcp_defs: dict[str, dict[str, Any]] = {}  # the MCP tools offered in the step, by name
        self._cut: tuple[str, str] | None = None  # (message id, text) of the last step's stream as it ended
        self._trace = tracing.RunTrace(session_id)  # the run's span and log ids (``server.tracing``)

    # --- control (called from the orchestrator) ------------------------------------------------------------

    def request_abort(self) -> None:
        """Stop the provider stream / tools now; the loop then writes the abort down."""
        self.abort_requested = True
        if self._inner is not None and not self._inner.done():
            self._inner.cancel()

    # --- the loop -----------------------------------------------------------------------------------------

    async def main(self) -> None:
        ticker = asyncio.create_task(self._tick())
        try:
            while self.run_id is not None:
                self._trace.at(self.run_id)
                if self.abort_requested:
                    # A first step the send started belongs to the run this ends (its answer is marked
                    # interrupted with it), never to the run that may follow.
                    self._first = None
                    await self._finish_aborted()
                    continue  # None, or the queue's head an abort made room for
                if self._check_abort:
                    self._check_abort = False
                    if await self._abort_on_row():
                        self.abort_requested = True
                        continue
                first, self._first = self._first, None
                if first is not None:
                    await self._begin_step(first)
                else:
                    await self._advance()
        except LeaseLost:
            log.info("session %s: run %s is no longer ours; stopping without writing", self.session_id, self.run_id)
        except asyncio.CancelledError:
            # Shutdown: hand a streaming answer over (the next process to sweep continues it), or write the
            # interruption down ourselves, as the sweeper would after a crash.
            ticker.cancel()
            await asyncio.shield(self._safely(self._stopping()))
            raise
        except Exception:
            log.exception("session %s: run %s failed", self.session_id, self.run_id)
            await self._safely(self._fail(RunFailure.INTERNAL_ERROR, "The run failed on the server."))
        finally:
            self._trace.close()
            ticker.cancel()
            if self._streaming is not None:
                self.ctx.partial_texts.end(self.session_id, self._streaming)
                self._streaming = None
            self.done.set()
            self.ctx.loop_finished(self)

    async def _safely(self, coro: Any) -> None:
        try:
            await coro
        except LeaseLost:
            pass
        except Exception:
            log.exception("session %s: could not record the end of run %s", self.session_id, self.run_id)

    def _tx(self) -> AbstractAsyncContextManager[SessionTx]:
        assert self.run_id is not None
        return fenced_tx(
            self.ctx.uow, self.session_id, self.run_id, self.ctx.owner, self.ctx.settings.run_lease_seconds
        )

    async def _advance(self) -> None:
        """One transaction decides what comes next and, for a model call, starts it (its assistant message and
        request): reading the run's state under the lock that changes it saves the separate read a step
        used to begin with."""
        assert self.run_id is not None
        settings = self.ctx.settings
        todo: list[CallRow] = []
        step: StepStart | None = None
        finished = None
        async with self._tx() as tx:
            if tx.row.abort_requested:
                self.abort_requested = True
                return
            run = await tx.load(RunRow, self.run_id)
            if run is None:
                raise LeaseLost(self.session_id)
            # A run's tool calls are stored by its steps (``_finish_step``): before its first one it has none.
            calls = (
                await repo.run_tool_calls(await tx.plain(), self.session_id, self.run_id, open_only=True)
                if run.steps
                else []
            )
            todo, tool_mode = transitions.runnable(calls), tx.row.tool_mode
            if todo:
                pass  # run outside the transaction, below
            elif transitions.waiting_on_people(calls):
                transitions.suspend(tx, run)
                self.run_id = None
                return
            elif run.steps >= settings.max_steps_per_run:
                finished = self.run_id
                transitions.end_run(tx, run, "finished", finish_reason=run.finish_reason)
                nxt = await transitions.next_or_idle(tx, self.ctx.owner, settings.run_lease_seconds)
            else:
                step = await start_step(self.ctx, tx, run)
        if todo:
            await self._inner_run(self._execute_tools(todo, tool_mode))
        elif finished is not None:
            self.ctx.run_finished(self.session_id, finished)
            self.run_id = nxt.id if nxt else None
        elif step is not None:
            await self._begin_step(step)

    async def _begin_step(self, step: StepStart) -> None:
        self._mcp = step.mcp
        await self._step(step)

    async def _inner_run(self, coro: Any) -> None:
        """Run the abortable part (provider stream, tools) as a task ``request_abort`` can cancel."""
        if self.abort_requested:  # asked before the task existed: there is nothing to cancel, so do not start
            coro.close()
            return
        self._inner = asyncio.create_task(coro)
        try:
            await self._inner
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if (current is not None and current.cancelling()) or not (self.abort_requested or self._lease_lost):
                raise
        finally:
            self._inner = None
        if self._lease_lost:
            raise LeaseLost(self.session_id)

    # --- one step -----------------------------------------------------------------------------------------

    @tracing.traced("step")
    async def _step(self, start: StepStart) -> None:
        request, owner_id, provider_id, streaming = start.request, start.owner_id, start.provider_id, start.streaming
        mid, initial = start.message_id, start.initial
        self.ctx.partial_texts.start(self.session_id, mid, initial)
        await self.ctx.shared_texts.started(self.session_id, mid, initial)
        self._streaming, self._flushed = mid, len(initial)
        result = StepResult()
        try:
            await self._inner_run(
                self._prepare_and_consume(request, start.history, owner_id, provider_id, streaming, mid, result)
            )
            if self.abort_requested:
                await self._finish_aborted(mid)
            else:
                await self._finish_step(mid, result)
        finally:
            self._cut = self._live_text(mid)  # what a shutdown cutting this step short hands over
            self.ctx.partial_texts.end(self.session_id, mid)
            self._streaming = None
            await self.ctx.shared_texts.ended(self.session_id, mid)

    async def _prepare_and_consume(
        self,
        request: ChatRequest,
        history: StoredHistory,
        owner_id: str,
        provider_id: str,
        streaming: bool,
        mid: str,
        result: StepResult,
    ) -> None:
        """Make the request's messages and load its uploaded files (outside any transaction, abortable), then run
        the model call."""
        request = await with_history(request, history, self.ctx.conversations)
        offered = [
            t for t in await mcp_tools.offer(self.ctx, self._mcp) if t.name not in {d.name for d in request.tools}
        ]
        self._mcp_defs = {t.name: t.definition() for t in offered}
        if offered:
            request = request.model_copy(update={"tools": request.tools + mcp_tools.definitions(offered)})
        if has_files(request):
            files = self.ctx.files
            read = None if files is None else (lambda file_id: files.read(owner_id, file_id))
            try:
                request = await load_files(request, read, self._files)
            except Exception:
                log.warning("session %s: an attached file could not be read", self.session_id, exc_info=True)
                result.error = ErrorEvent(
                    code="attachment_unavailable",
                    retryable=True,
                    message="A file attached to the conversation could not be read.",
                )
                return
            result.notices = notices(request)
        # Held until the model call is over: the adapter's repair of the conversation resumes where this one
        # stopped, instead of repairing thousands of messages in one stretch of the event loop.
        ahead = await normalize_ahead(request.messages)
        turn = Turn(lambda: self.ctx.provider(provider_id), request, streaming=streaming, provider_id=provider_id)
        self._turn = turn
        try:
            await self._consume(turn, mid, result)
        finally:
            self._turn = None
            del ahead

    async def _consume(self, turn: Turn, mid: str, result: StepResult) -> None:
        sid, texts, publish = self.session_id, self.ctx.partial_texts, self.ctx.publish_ephemeral
        arg_offsets: dict[str, int] = {}
        async for event in turn.events():
            if isinstance(event, TextDelta):
                offset = texts.append(sid, mid, event.delta)  # before publishing: see buffer.py
                await self.ctx.publish_delta(sid, events.text_delta(sid, mid, offset, event.delta), mid, event.delta)
            elif isinstance(event, ToolCallStart):
                arg_offsets[event.call_id] = 0
                await publish(sid, events.tool_call_start(sid, mid, event.call_id, event.name, event.index))
            elif isinstance(event, ToolCallDelta):
                offset = arg_offsets.get(event.call_id, 0)
                arg_offsets[event.call_id] = offset + len(event.delta)
                await publish(sid, events.tool_call_delta(sid, mid, event.call_id, offset, event.delta))
            elif isinstance(event, ToolCallEvent):
                result.calls.append(event)
            elif isinstance(event, Finished):
                result.finish = event.finish_reason
                result.usage = (event.usage.input_tokens, event.usage.output_tokens)
            elif isinstance(event, ErrorEvent):
                result.error = event

    async def _finish_step(self, mid: str, result: StepResult) -> None:
        text = self.ctx.partial_texts.text(self.session_id, mid) or ""
        assert self.run_id is not None
        nxt: str | None = self.run_id
        finished = None
        first: StepStart | None = None
        async with self._tx() as tx:
            found = await repo.step_end(await tx.plain(), self.session_id, self.run_id, mid)
            assert found is not None
            run, row, steered = found
            tx.adopt([run])
            tx.adopt([row])
            error = None
            if result.error is not None:
                error = {
                    "code": result.error.code,
                    "message": result.error.message,
                    "retryable": result.error.retryable,
                }
            elif result.finish is None or (result.finish == "error" and not result.calls):
                code = RunFailure.INVALID_TOOL_ARGUMENTS if result.finish == "error" else ErrorCode.STREAM_ERROR
                error = transitions.run_error(code, "The model's response could not be used.", retryable=True)
            if error is not None:
                transitions.complete_message(
                    tx, row, status="error", content=text, finish_reason="error", notices=result.notices, error=error
                )
                transitions.end_run(tx, run, "failed", error=error, pause=True)
                transitions.go_idle(tx)
                nxt = None
            else:
                # The reads first: the run and the message are then written once each, with everything below.
                calls = []
                if result.calls:
                    ids = await transitions.unique_call_ids(tx, result.calls)
                    calls = [{"id": i, "name": c.name, "arguments": c.arguments} for i, c in zip(ids, result.calls)]
                usage = {"inputTokens": result.usage[0], "outputTokens": result.usage[1]}
                transitions.add_usage(tx, run, *result.usage)
                run.finish_reason = result.finish
                transitions.complete_message(
                    tx,
                    row,
                    status="complete",
                    content=text,
                    finish_reason=result.finish,
                    usage=usage,
                    tool_calls=calls,
                    notices=result.notices,
                )
                if calls:
                    definitions = {**self._mcp_defs, **{t["name"]: t for t in tx.row.tools or ()}}
                    await transitions.register_tool_calls(tx, run, row, calls, definitions)
                elif not steered:
                    transitions.end_run(tx, run, "finished", finish_reason=result.finish)
                    finished = run.id
                    sent = await transitions.next_question_or_idle(
                        tx, self.ctx.owner, self.ctx.settings.run_lease_seconds
                    )
                    if sent is not None:
                        # The queue's next run starts its first step in this transaction too, as a send's run
                        # does: its answer commits with the question (one write transaction fewer).
                        question, following = sent
                        nxt, first = following.id, await start_step(self.ctx, tx, following, after=question)
                    else:
                        nxt = None
        if finished is not None:
            self.ctx.run_finished(self.session_id, finished)  # after the commit: the answer is out already
        self._next_run(nxt, first)

    def _next_run(self, run_id: str | None, first: StepStart | None = None) -> None:
        """Go on with ``run_id`` (the same run's next step, the queue's next run, or None: stop); ``first``: the
        new run's first step, when the transaction that began the run started it too."""
        if run_id != self.run_id:
            # An abort asked of this process belonged to the run that just ended (its transaction cleared the
            # row's flag); one meant for the new run is on the row, which every step reads. A first step
            # started with the run reads nothing before it streams: when an abort was asked meanwhile, the row
            # says which run it was for (``_abort_on_row``).
            self._check_abort = first is not None and self.abort_requested
            self.abort_requested = False
            self._files.clear()
        self.run_id = run_id
        self._first = first

    def _live_text(self, mid: str | None) -> tuple[str, str] | None:
        """The text this process streamed so far of message ``mid`` (newer than the row's last flush)."""
        text = self.ctx.partial_texts.text(self.session_id, mid) if mid else None
        return (mid, text) if mid is not None and text is not None else None

    async def _finish_aborted(self, mid: str | None = None) -> None:
        live = self._live_text(mid)
        assert self.run_id is not None
        async with self._tx() as tx:
            nxt = await transitions.stop_run(
                tx,
                "aborted",
                run_id=self.run_id,
                live_text=live,
                owner=self.ctx.owner,
                lease_seconds=self.ctx.settings.run_lease_seconds,
            )
        self._next_run(nxt.id if nxt is not None else None)

    async def _stopping(self) -> None:
        """This process stops while the run is in progress. An answer streaming now is handed over — its text
        so far written to its row, still ``streaming``, and the lease released, so that the sweeper of the next
        process to look (this one restarted, or another replica) continues it (``transitions.take_over``) —
        when answers may go on after a restart (``CHATSYNC_RESUME_INTERRUPTED_ANSWERS``), nobody asked to stop
        it, and it was not continued once already. Otherwise the run fails with ``interrupted``."""
        if self.run_id is None:
            return
        live = self._live_text(self._streaming) or self._cut
        if live is not None and self.ctx.settings.resume_interrupted_answers and not self.abort_requested:
            async with self._tx() as tx:
                run = await tx.load(RunRow, self.run_id)
                row = await tx.load(MessageRow, live[0])
                if run is not None and run.resumes == 0 and row is not None and row.status == "streaming":
                    row.content = live[1]
                    release(tx.row)
                    self.run_id = None
                    return
        await self._fail(
            RunFailure.INTERRUPTED, "The server stopped before the answer finished.", retryable=True, live=live
        )

    async def _fail(
        self, code: RunFailure, message: str, *, retryable: bool = False, live: tuple[str, str] | None = None
    ) -> None:
        if self.run_id is None:
            return
        live = live or self._live_text(self._streaming)
        async with self._tx() as tx:
            error = transitions.run_error(code, message, retryable=retryable)
            await transitions.stop_run(tx, "failed", error=error, run_id=self.run_id, live_text=live)
        self.run_id = None

    # --- tools --------------------------------------------------------------------------------------------

    async def _execute_tools(self, calls: list[CallRow], mode: str) -> None:
        """Server tools of one step: all at once (``parallel``) or in call order (``sequential``, the
        tool queue). Each result is stored the moment it exists, so in parallel mode results arrive in
        completion order and in sequential mode in call order."""
        if mode == "sequential":
            for call in calls:
                await self._execute_one(call)
        else:
            await asyncio.gather(*(self._execute_one(call) for call in calls))

    @tracing.traced("tool call", lambda _self, call: {"tool": call.name, "call_id": call.id})
    async def _execute_one(self, call: CallRow) -> None:
        result = await mcp_tools.execute(self.ctx, self.session_id, call)
        async with self._tx() as tx:
            row = await tx.load(CallRow, self.session_id, call.id)
            if row is not None and not row.has_result:
                await transitions.add_tool_result(tx, row, result.output, result.outcome, result.attachments)

    # --- heartbeat ----------------------------------------------------------------------------------------

    async def _abort_on_row(self) -> bool:
        """Whether the session's row asks to stop its run: an abort committed after the transaction that began
        the run (one committed before it was for the run that transaction ended, and cleared by it)."""
        async with self.ctx.db.read() as s:
            session = await repo.get_session(s, self.session_id)
        return session is not None and session.abort_requested

    async def _lease_still_ours(self) -> bool:
        async with self.ctx.db.read() as s:
            session = await repo.get_session(s, self.session_id)
        return session is not None and session.lease_owner == self.ctx.owner

    async def _tick(self) -> None:
        """Renew the lease and flush partial text every ``stream_flush_seconds``; between flushes, poll for an
        abort requested on another replica (only when there can be other replicas: not on ``memory://``). Every
        tick, end a model call that has waited on its provider for ``provider_idle_timeout_seconds``."""
        settings = self.ctx.settings
        poll = settings.abort_poll_seconds if self.ctx.multi_replica else settings.stream_flush_seconds
        interval = min(poll, settings.stream_flush_seconds, settings.run_lease_seconds / 3)
        last_flush = time.monotonic()
        while True:
            await asyncio.sleep(next_tick(interval))  # with every other loop's: one heartbeat write per tick
            run_id = self.run_id
            if run_id is None:
                continue
            # A model call waiting on its provider past the idle limit ends with a ``timeout`` error, its step as a
            # failed one (``Turn.expire``); not one an abort, a shutdown or a lost lease is stopping already.
            turn, inner = self._turn, self._inner
            if turn is not None and inner is not None and not inner.cancelling():
                if turn.expire(settings.provider_idle_timeout_seconds):
                    inner.cancel()
            try:
                now = time.monotonic()
                # Half a tick of slack: ticks land on the shared clock, so two of them can be a little under
                # ``interval`` apart when this one was late.
                if (
                    now - last_flush
                    >= min(settings.stream_flush_seconds, settings.run_lease_seconds / 3) - interval / 2
                ):
                    last_flush = now
                    flush = None
                    mid = self._streaming
                    text = self.ctx.partial_texts.text(self.session_id, mid) if mid else None
                    if mid is not None and text is not None and len(text) != self._flushed:
                        flush = (mid, text)
                    abort = await heartbeat(
                        self.ctx.uow, self.session_id, run_id, self.ctx.owner, settings.run_lease_seconds, flush
                    )
                    # A step that started while the write was under way counts its own message from zero.
                    if flush is not None and self._streaming == flush[0]:
                        self._flushed = len(flush[1])
                elif self.ctx.multi_replica:
                    abort = await self.ctx.abort_flag(self.session_id)
                else:  # one process: an abort reaches this loop directly (``Orchestrator.abort_local``)
                    continue
                # The flag was read for ``run_id``; when this loop has moved on to the queue's next run meanwhile
                # (the abort it asked for ended that run), it is not the new run's: one asked of the new run is
                # on the row, read again at the next tick or step.
                if abort and run_id == self.run_id:
                    self.request_abort()
            except LeaseLost:
                # The heartbeat names the run it read before awaiting; the loop may have moved on to the
                # next run meanwhile (a finishing transaction that auto-sent the queue commits, then
                # publishes, and only then updates ``self.run_id``). The lease is lost only if the session's
                # lease now belongs to someone else.
                if run_id == self.run_id and not await self._lease_still_ours():
                    self._lease_lost = True
                    if self._inner is not None:
                        self._inner.cancel()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("session %s: heartbeat failed", self.session_id, exc_info=True)
