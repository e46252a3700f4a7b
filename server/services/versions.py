"""What clients ask of a conversation's versions: ``message.edit``, ``run.regenerate``, ``run.continue`` and
``session.switchBranch`` (``session.fork`` is ``SessionService.fork``). The tree itself is ``branches``.

Each is one locked unit of work, exactly-once with ``clientRequestId`` like every write, and answers with what
it made. Rules, as built:

* Bad input is refused before anything changes: a message that is not the session's is ``NOT_FOUND``; an edit
  of a message that is not the user's, a regenerate of one that is not an answer, a continue of an answer that
  did not stop at the length limit are ``PRECONDITION_FAILED``.
* Busy (a run in progress): an edit or a regenerate follows the session's busy policy — ``reject`` is
  ``CONFLICT``; every other policy interrupts (the run is aborted as ``run.abort`` would, its partial answer
  kept on the branch it was on, then the edit or regenerate goes ahead). The caller's ``busyPolicy`` overrides
  the session's. A continue or a branch switch while busy is ``CONFLICT``: never two runs at once, and a run
  writes only onto the path it started on.
* An edit or a regenerate starts a run, and resumes a paused queue as a send does; a continue and a switch leave
  the queue as it is. Queued messages are sent onto the active path as it is when they are sent.
* Titles: an untitled session's title (or one made from its first message) follows the first user message of
  the active path; a title the user gave, or the model made, stays.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import TypeAdapter

from ..domain import outputs
from ..files import refs as file_refs
from ..llm import PROVIDER_IDS, known_provider
from ..protocol.errors import RpcError
from ..store import repo
from ..store.models import Message, User
from . import branches, queue, transitions
from .requests import MISSING, Expand, Receipt, ReceiptT, ReplyT, RequestKey, as_is, kept_whole
from .runs import INTERRUPT_WAIT_SECONDS, STARTED, RunService, started_again, started_receipt
from .titles import follow_active_path
from .uow import SessionTx

# Applies a write: its reply, and the run it started (None: none).
Apply = Callable[[SessionTx], Awaitable[tuple[ReplyT, str | None]]]
# Checks a write's input under the lock (raising changes nothing) and returns what applies it, and what a run in
# progress means for it: ``reject`` (``CONFLICT``) or ``interrupt`` (abort it, wait for it to stop, go on).
Prepare = Callable[[SessionTx], Awaitable[tuple[Apply[ReplyT], str]]]

REGENERATED: Receipt[outputs.Regenerated, outputs.Regenerated] = kept_whole(TypeAdapter(outputs.Regenerated))
CONTINUED: Receipt[outputs.Continued, outputs.Continued] = kept_whole(TypeAdapter(outputs.Continued))
SWITCHED: Receipt[outputs.BranchSwitched, outputs.BranchSwitched] = kept_whole(TypeAdapter(outputs.BranchSwitched))


def _whole(_tx: SessionTx) -> Expand[ReplyT, ReplyT]:
    """Rebuilds a reply kept whole: as it is."""
    return as_is


def _same(reply: ReplyT) -> ReplyT:
    """The receipt of a reply kept whole: the reply."""
    return reply


class VersionService:
    """A conversation's versions: ``message.edit``, ``run.regenerate``, ``run.continue`` and
    ``session.switchBranch`` (module docstring)."""

    def __init__(self, runs: RunService) -> None:
        self.runs = runs

    async def _write(
        self,
        user: User,
        session_id: str,
        request: RequestKey | None,
        prepare: Prepare[ReplyT],
        kind: Receipt[ReceiptT, ReplyT],
        again: Callable[[SessionTx], Expand[ReceiptT, ReplyT]],
        keep: Callable[[ReplyT], ReceiptT],
    ) -> ReplyT:
        """One write of this module (see :data:`Prepare`); the reply of what it applied. A repeat of ``request``
        gets the first reply, which ``again`` rebuilds from the receipt ``keep`` made of it (of ``kind``)."""
        runs = self.runs
        deadline = time.monotonic() + INTERRUPT_WAIT_SECONDS
        while True:
            result: ReplyT | None = None
            started: str | None = None
            async with runs.uow.session(user, session_id) as tx:
                replayed = await tx.replay(request, kind, again(tx))
                if replayed is not MISSING:
                    return replayed
                apply, busy = await prepare(tx)
                taken = await runs.recover_orphaned(tx)
                row = tx.row
                if row.run_id is not None:
                    if busy == "reject":
                        raise RpcError("CONFLICT", "A run is in progress in this session")
                    if row.status == "requires-action":
                        await transitions.stop_run(tx, "aborted")  # nobody drives it: abort it here
                    else:
                        row.abort_requested = True
                        row.abort_then_send = False
                if row.run_id is None:
                    result, started = await apply(tx)
                    tx.remember(request, kind, keep(result))
            runs.start_runs(session_id, taken, started)
            if result is not None:
                return result
            await runs.wait_interrupted(session_id, deadline)

    @staticmethod
    def _policy(tx: SessionTx, given: str | None) -> str:
        return "reject" if (given or tx.row.busy_policy) == "reject" else "interrupt"

    # --- message.edit ---------------------------------------------------------------------------------------

    async def edit(
        self,
        user: User,
        session_id: str,
        message_id: str,
        content: str,
        attachments: list[dict[str, Any]] | None,
        busy_policy: str | None,
        request: RequestKey | None = None,
    ) -> outputs.SendStarted:
        """A new version of a user message (same parent), made active and answered."""
        runs = self.runs
        runs.check_content(content)
        crid = request.request_id if request is not None else None

        async def prepare(tx: SessionTx) -> tuple[Apply[outputs.SendStarted], str]:
            target = await branches.message_of(tx, message_id)
            if target.role != "user":
                raise RpcError("PRECONDITION_FAILED", "Only a user message can be edited")
            files = list(target.attachments or []) if attachments is None else attachments

            async def apply(tx: SessionTx) -> tuple[outputs.SendStarted, str | None]:
                await file_refs.link(await tx.plain(), session_id, files)
                queue.set_paused(tx, False)
                await branches.cut_before(tx, target)
                message, run = await transitions.start_with_message(
                    tx, runs.o.owner, runs.lease_seconds, content, files, "edit", crid
                )
                await follow_active_path(tx)
                return {"status": "started", "message": repo.message_wire(message).wire(), "runId": run.id}, run.id

            return apply, self._policy(tx, busy_policy)

        return await self._write(user, session_id, request, prepare, STARTED, started_again, started_receipt)

    # --- run.regenerate -------------------------------------------------------------------------------------

    async def regenerate(
        self,
        user: User,
        session_id: str,
        message_id: str | None,
        provider: str | None,
        model: str | None,
        busy_policy: str | None,
        request: RequestKey | None = None,
    ) -> outputs.Regenerated:
        """A new version of an answer (default: the last on the active path), made active and generated, by
        the session's model or the one given."""
        runs = self.runs
        crid = request.request_id if request is not None else None
        if provider is not None and not known_provider(provider):
            raise RpcError("BAD_REQUEST", f"unknown provider {provider!r}; known: {', '.join(PROVIDER_IDS)}")

        async def prepare(tx: SessionTx) -> tuple[Apply[outputs.Regenerated], str]:
            if message_id is not None:
                target: Message | None = await branches.message_of(tx, message_id)
            else:
                target = await branches.last_answer(tx)
                if target is None:
                    raise RpcError("PRECONDITION_FAILED", "There is no answer to regenerate")
            assert target is not None
            if target.role not in branches.ANSWER_ROLES:
                raise RpcError("PRECONDITION_FAILED", "Only an answer can be regenerated")
            chosen = run_model(tx, provider, model)

            async def apply(tx: SessionTx) -> tuple[outputs.Regenerated, str | None]:
                start = await branches.answer_start(tx, target)
                queue.set_paused(tx, False)
                await branches.cut_before(tx, start)
                await follow_active_path(tx)
                run = await transitions.begin_run(
                    tx,
                    runs.o.owner,
                    runs.lease_seconds,
                    "regenerate",
                    client_request_id=crid,
                    provider=chosen[0],
                    model=chosen[1],
                )
                effective = (chosen[0] or tx.row.provider, chosen[1] or tx.row.model)
                reply: outputs.Regenerated = {
                    "runId": run.id,
                    "parentId": start.parent_id,
                    "provider": effective[0],
                    "model": effective[1],
                }
                return reply, run.id

            return apply, self._policy(tx, busy_policy)

        return await self._write(user, session_id, request, prepare, REGENERATED, _whole, _same)

    # --- run.continue -----------------------------------------------------------------------------------------

    async def continue_(self, user: User, session_id: str, request: RequestKey | None = None) -> outputs.Continued:
        """The last answer on the active path, cut off by the length limit, goes on in the same message."""
        runs = self.runs
        crid = request.request_id if request is not None else None

        async def prepare(tx: SessionTx) -> tuple[Apply[outputs.Continued], str]:
            leaf = await branches.active_leaf(tx)
            if leaf is None or leaf.role != "assistant" or leaf.finish_reason != "length" or leaf.status != "complete":
                raise RpcError("PRECONDITION_FAILED", "Only an answer that stopped at the length limit can go on")
            made_by = await repo.get_run(await tx.orm(), leaf.run_id) if leaf.run_id else None

            async def apply(tx: SessionTx) -> tuple[outputs.Continued, str | None]:
                # The model that wrote the answer goes on with it.
                provider, model = (made_by.provider, made_by.model) if made_by is not None else (None, None)
                run = await transitions.begin_run(
                    tx,
                    runs.o.owner,
                    runs.lease_seconds,
                    "continue",
                    client_request_id=crid,
                    provider=provider,
                    model=model,
                    continues_id=leaf.id,
                )
                return {"runId": run.id, "messageId": leaf.id}, run.id

            return apply, "reject"

        return await self._write(user, session_id, request, prepare, CONTINUED, _whole, _same)

    # --- session.switchBranch ---------------------------------------------------------------------------------

    async def switch_branch(
        self, user: User, session_id: str, message_id: str, request: RequestKey | None = None
    ) -> outputs.BranchSwitched:
        """The path through ``message_id`` becomes the active one (down to the leaf active last below it)."""

        async def prepare(tx: SessionTx) -> tuple[Apply[outputs.BranchSwitched], str]:
            await branches.message_of(tx, message_id)

            async def apply(tx: SessionTx) -> tuple[outputs.BranchSwitched, str | None]:
                changed = await branches.switch_to(tx, message_id)
                if changed:
                    await follow_active_path(tx)
                leaf = await branches.active_leaf(tx)
                return {"changed": changed, "leafId": leaf.id if leaf is not None else None}, None

            return apply, "reject"

        return await self._write(user, session_id, request, prepare, SWITCHED, _whole, _same)


def run_model(tx: SessionTx, provider: str | None, model: str | None) -> tuple[str | None, str | None]:
    """The (provider, model) a regenerate asks, as the run stores it: None for the session's own."""
    if provider is None and model is None:
        return None, None
    if provider is None or provider == tx.row.provider:
        return tx.row.provider, model or tx.row.model
    if model is None:
        if provider != "echo":
            raise RpcError("BAD_REQUEST", f"model is required for provider {provider!r}")
        model = "echo"
    return provider, model
