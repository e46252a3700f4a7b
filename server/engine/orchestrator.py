"""The orchestrator: which runs this process drives, the providers it talks to, and the sweeper.

* ``start(session_id, run_id)`` is called after a transaction that claimed a run's lease for this process
  (a send, an auto-send, a resume after tool outputs/approvals, the sweeper); it spawns a :class:`RunLoop`.
* ``abort_local`` stops a loop running here at once; ``run.abort`` on another replica sets
  ``abort_requested`` on the session row, which the owner's heartbeat polls (``abort_poll_seconds``).
* The sweeper (every ``sweep_seconds``, and once at start) looks for sessions with pending work that no live
  process drives: a running run whose lease expired — its process died: :func:`transitions.recover` marks the
  partial answer ``interrupted``, fails the run with code ``interrupted`` and pauses the queue — and idle
  sessions whose unpaused queue is not empty (a message enqueued with ``message.enqueueMessage`` just as the
  previous run ended, or one that waited for a run slot of its owner, ``CHATSYNC_MAX_ACTIVE_RUNS_PER_USER``):
  it sends the head.
* ``run_finished`` starts what follows a finished run without delaying it (model titles, see
  ``server.services.titles``).
* ``stream_snapshots`` feeds ``server.sync.delivery`` the partial text of streams (see ``buffer.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import suppress
from typing import Any

from ..domain.events import EventEnvelope
from ..llm import ModelInputs, Provider, ProviderError, get_provider
from ..llm.capabilities import Override, model_inputs, parse_overrides
from ..pubsub.base import Bus
from ..services import requests, transitions
from ..services.lease import SessionGone, lease_live, new_owner_id
from ..services.titles import TitleService
from ..services.uow import SessionTx, UnitOfWork
from ..settings import Settings, SettingsError
from ..store import repo
from ..store.db import Database
from ..store.models import utcnow
from ..store.run_rows import MessageRow, RunFields, RunRow
from ..tools import ToolRegistry
from ..tools.mcp import McpTools
from .abort_poll import AbortPolls
from .buffer import PartialTexts
from .history import Conversations
from .run import RunLoop, StepStart, start_step
from .run_context import FileReader, RunContext

log = logging.getLogger(__name__)


VISION_MODELS_ENV = "CHATSYNC_VISION_MODELS"


def vision_overrides(settings: Settings) -> tuple[Override, ...]:
    """The ``provider:glob=on|off`` overrides of which models take images (``CHATSYNC_VISION_MODELS``,
    comma-separated). A malformed item stops start-up."""
    try:
        return parse_overrides(settings.vision_models.split(","))
    except ValueError as exc:
        raise SettingsError(f"invalid configuration: {VISION_MODELS_ENV}: {exc}") from exc


TRIM_REQUESTS_SECONDS = 600  # how often old client request records are deleted (they are kept 24 h)


class Orchestrator:
    """The engine of one process: starts a :class:`~server.engine.run.RunLoop` for each run whose lease this
    process holds (handing it a :class:`~server.engine.run_context.RunContext`), aborts them, keeps one instance
    of each provider, answers stream snapshots, and sweeps for work no live process drives (module docstring)."""

    def __init__(
        self,
        settings: Settings,
        db: Database,
        uow: UnitOfWork,
        bus: Bus,
        tools: ToolRegistry,
        partial_texts: PartialTexts,
        *,
        files: FileReader | None = None,
        mcp: McpTools | None = None,
    ) -> None:
        self.settings = settings
        # Uploaded files, read just before a request is built (None: attachments are named as unavailable).
        self.files = files
        # `provider:glob=on|off` items deciding which models take images (server.llm.capabilities).
        self.vision_overrides = vision_overrides(settings)
        self.db = db
        self.uow = uow
        self.bus = bus
        self.shared_streams = bus.shared_stream_texts()
        self.tools = tools
        self.mcp = mcp  # MCP servers' tools (docs/tools.md); the app opens and closes their sessions
        self.partial_texts = partial_texts
        self.owner = new_owner_id()
        # Other processes can only share our sessions through a networked bus.
        self.multi_replica = not settings.bus_url.startswith("memory://")
        self.abort_polls = AbortPolls(db)
        self._loops: dict[str, RunLoop] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._providers: dict[str, Provider] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._closing = False
        self._stop = asyncio.Event()
        self.titles = TitleService(uow, settings.title_mode, self.provider)
        self.run_context = RunContext(
            settings=settings,
            db=db,
            uow=uow,
            owner=self.owner,
            multi_replica=self.multi_replica,
            partial_texts=partial_texts,
            conversations=Conversations(settings.conversation_cache_bytes),
            shared_texts=self.shared_streams,
            files=files,
            tools=tools,
            mcp=mcp,
            provider=self.provider,
            model_inputs=self.model_inputs,
            publish_delta=self.publish_delta,
            publish_ephemeral=self.publish_ephemeral,
            abort_flag=self.abort_flag,
            run_finished=self.run_finished,
            loop_finished=self._loop_finished,
        )

    def running_sessions(self) -> list[str]:
        """Sessions whose run loop is in this process now (for admins and metrics)."""
        return list(self._loops)

    async def __aenter__(self) -> Orchestrator:
        self._sweeper = asyncio.create_task(self._sweep_forever())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._closing = True
        self._stop.set()
        if self._sweeper is not None:
            # Let a sweep in progress finish its transaction rather than cancel it mid-query.
            try:
                await asyncio.wait_for(asyncio.shield(self._sweeper), 5)
            except (TimeoutError, asyncio.CancelledError):
                self._sweeper.cancel()
                with suppress(asyncio.CancelledError):
                    await self._sweeper
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for provider in self._providers.values():
            with suppress(Exception):
                await provider.aclose()
        self._providers.clear()

    # --- runs ---------------------------------------------------------------------------------------------

    def start(self, session_id: str, run_id: str, first: StepStart | None = None) -> None:
        """Drive ``run_id`` here; the caller's committed transaction gave this process its lease (and, with
        ``first``, started the run's first step: :meth:`first_step`)."""
        if self._closing:
            return  # the run stays claimed; its lease expires and the sweeper of a live process recovers it
        current = self._loops.get(session_id)
        if current is not None and not current.done.is_set():
            # The previous loop has already given the run up in a committed transaction (suspended, or ended
            # its run) — the claim we were handed proves it — but it has not returned yet (it may be
            # publishing). Start after it, never beside it.
            self._spawn(self._start_after(current, session_id, run_id, first), f"run-wait:{session_id}")
            return
        loop = RunLoop(self.run_context, session_id, run_id, first)
        self._loops[session_id] = loop
        self._spawn(loop.main(), f"run:{session_id}")

    async def _start_after(self, previous: RunLoop, session_id: str, run_id: str, first: StepStart | None) -> None:
        await previous.done.wait()
        self.start(session_id, run_id, first)

    async def first_step(self, tx: SessionTx, run: RunRow, question: MessageRow) -> StepStart:
        """Start the first step of ``run``, which ``tx`` has just begun with the user message ``question``, in that
        same transaction (its assistant message and request, as the run loop's own step start makes them): a send
        that starts a run then costs one write transaction instead of two. Hand the result to :meth:`start` after
        the commit."""
        return await start_step(self.run_context, tx, run, after=question)

    def run_finished(self, session_id: str, run_id: str) -> None:
        """Called after the transaction that wrote ``run-finished`` committed: work that must not delay the
        answer or the auto-send of the queue (the model title) runs here, as a task of its own."""
        if self.titles.mode == "model" and not self._closing:
            self._spawn(self.titles.after_run_finished(session_id, run_id), f"title:{session_id}")

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _loop_finished(self, loop: RunLoop) -> None:
        if self._loops.get(loop.session_id) is loop:
            del self._loops[loop.session_id]

    def local_loop(self, session_id: str) -> RunLoop | None:
        return self._loops.get(session_id)

    def partial_text(self, session_id: str, message_id: str) -> str | None:
        return self.partial_texts.text(session_id, message_id)

    def abort_local(self, session_id: str) -> RunLoop | None:
        loop = self._loops.get(session_id)
        if loop is not None:
            loop.request_abort()
        return loop

    async def abort_flag(self, session_id: str) -> bool:
        """Whether another replica asked to stop the run of ``session_id`` (read with every other poll due now)."""
        return await self.abort_polls.asked(session_id)

    def model_inputs(self, provider_id: str, model: str) -> ModelInputs | None:
        """What ``model`` takes besides text (images, PDF documents), or ``None`` when the provider cannot be
        built (the step then fails with that provider's error anyway)."""
        try:
            target = self.provider(provider_id).input_target
        except (KeyError, ProviderError):
            return None
        return model_inputs(target, provider_id, model, self.vision_overrides)

    def provider(self, provider_id: str) -> Provider:
        """One provider instance per id for the process (they hold connection pools)."""
        provider = self._providers.get(provider_id)
        if provider is None:
            config: dict[str, Any] = {"delay": self.settings.echo_delay} if provider_id == "echo" else {}
            provider = self._providers[provider_id] = get_provider(provider_id, **config)
        return provider

    async def publish_delta(self, session_id: str, env: EventEnvelope, message_id: str, delta: str) -> None:
        try:
            await self.shared_streams.append(session_id, env, message_id, delta)
        except Exception:  # a lost delta is repaired by the snapshot a reconnecting client gets
            log.debug("publish of a delta to %s failed", session_id, exc_info=True)

    async def publish_ephemeral(self, session_id: str, env: EventEnvelope) -> None:
        try:
            await self.bus.publish(session_id, (env,))
        except Exception:  # a lost delta is repaired by the snapshot a reconnecting client gets
            log.debug("publish of a delta to %s failed", session_id, exc_info=True)

    # --- snapshots ----------------------------------------------------------------------------------------

    async def stream_snapshots(self, session_id: str) -> list[dict[str, Any]]:
        """``[{messageId, offset, text}]`` of the session's streaming messages.

        With several replicas a stream may run elsewhere: the shared stream buffer (Redis) covers it; if
        that is unavailable, the text last flushed to the message row stands in. Streams running here come
        from the local buffer.
        """
        shared: dict[str, dict[str, Any]] = {}
        if self.multi_replica:
            snaps = await self.shared_streams.snapshot(session_id)
            if snaps is not None:
                shared = {str(snap["messageId"]): dict(snap) for snap in snaps}
            else:
                async with self.db.read() as s:
                    for row in await repo.streaming_messages(s, session_id):
                        shared[row.id] = {"messageId": row.id, "offset": len(row.content), "text": row.content}
        local = self.partial_texts.snapshot(session_id)
        for snap in local:
            shared.pop(str(snap["messageId"]), None)
        return [*local, *shared.values()]

    # --- sweeper ------------------------------------------------------------------------------------------

    async def _sweep_forever(self) -> None:
        next_trim = 0.0
        while not self._stop.is_set():
            try:
                await self.sweep_once()
                if time.monotonic() >= next_trim:
                    next_trim = time.monotonic() + TRIM_REQUESTS_SECONDS
                    async with self.db.write() as s:
                        await requests.trim(s, utcnow())
            except Exception:
                log.warning("sweep failed", exc_info=True)
            with suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.settings.sweep_seconds)

    async def sweep_once(self) -> int:
        """Recover or dispatch every session with pending work and no live owner; returns how many."""
        async with self.db.read() as s:
            ids = await repo.sessions_needing_work(s, utcnow(), max_active_runs=self.uow.max_active_runs)
        handled = 0
        for session_id in ids:
            if session_id in self._loops or self._closing:
                continue
            try:
                handled += await self._sweep_session(session_id)
            except SessionGone:
                pass
            except Exception:
                log.warning("sweeping session %s failed", session_id, exc_info=True)
        return handled

    async def dispatch(self, session_id: str) -> str | None:
        """Send the head of an idle session's unpaused queue now, instead of at the next sweep (for callers
        that just enqueued; see ``message.enqueueMessage``). Returns the id of the run it started."""
        async with self.uow.session(None, session_id, missing=SessionGone) as tx:
            run = await transitions.send_next_queued(tx, self.owner, self.settings.run_lease_seconds)
        if run is not None:
            self.start(session_id, run.id)
        return run.id if run is not None else None

    async def shared_texts(self, session_id: str) -> dict[str, str]:
        """The text of the session's streams as every replica saw them (the shared stream buffer), by message."""
        if not self.multi_replica:
            return {}
        snaps = await self.shared_streams.snapshot(session_id) or []
        return {str(s["messageId"]): str(s["text"]) for s in snaps}

    async def take_over(self, tx: SessionTx, shared: dict[str, str]) -> RunRow | None:
        """``transitions.take_over`` for this process; the caller starts the run it returns after committing."""
        settings = self.settings
        return await transitions.take_over(
            tx, self.owner, settings.run_lease_seconds, resume=settings.resume_interrupted_answers, shared=shared
        )

    async def _sweep_session(self, session_id: str) -> int:
        started: RunFields | None = None
        shared = await self.shared_texts(session_id)
        async with self.uow.session(None, session_id, missing=SessionGone) as tx:
            row = tx.row
            if row.run_id is not None and row.status == "running" and not lease_live(row):
                log.warning(
                    "session %s: run %s lost its process (lease owner %s); taking it over",
                    session_id,
                    row.run_id,
                    row.lease_owner,
                )
                started = await self.take_over(tx, shared)
            elif row.run_id is None:
                started = await transitions.send_next_queued(tx, self.owner, self.settings.run_lease_seconds)
            else:
                return 0
        if started is not None:
            self.start(session_id, started.id)
        return 1
