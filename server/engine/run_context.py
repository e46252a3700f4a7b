"""What a run loop is handed: the handles and callbacks of its process, and nothing else.

The :class:`~server.engine.orchestrator.Orchestrator` builds one :class:`RunContext` at start and gives it to
every :class:`~server.engine.run.RunLoop` it spawns (and the loop to ``mcp_tools``), so a loop reaches the
database, the bus and the providers only through the fields listed here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..domain.events import EventEnvelope
    from ..llm import ModelInputs, Provider
    from ..pubsub.streams import SharedStreamTexts
    from ..services.uow import UnitOfWork
    from ..settings import Settings
    from ..store.db import Database
    from ..tools import ToolRegistry
    from ..tools.mcp import McpTools
    from .buffer import PartialTexts
    from .history import Conversations
    from .run import RunLoop


class FileReader(Protocol):
    """The part of the Files service the engine uses (``server.files.Files``)."""

    async def read(self, user_id: str, file_id: str) -> bytes: ...


@dataclass(frozen=True, slots=True)
class RunContext:
    """The process-wide parts a run loop uses, as the orchestrator set them up."""

    settings: Settings
    db: Database
    uow: UnitOfWork
    owner: str
    """This process's lease owner id: the runs it drives carry it."""
    multi_replica: bool
    """Other processes may drive this deployment's sessions (a networked bus): poll for their aborts."""
    partial_texts: PartialTexts
    """This process's partial text of each message it streams."""
    conversations: Conversations
    """The conversations this process's steps converted, kept for their next steps (``conversation_cache_bytes``)."""
    shared_texts: SharedStreamTexts
    """The same texts where every replica reads them; ``append`` also publishes the delta."""
    files: FileReader | None
    """Uploaded files, read just before a request is built (None: attachments are named as unavailable)."""
    tools: ToolRegistry
    mcp: McpTools | None
    provider: Callable[[str], Provider]
    """The process's one instance of a provider, by id."""
    model_inputs: Callable[[str, str], ModelInputs | None]
    """What a ``(provider id, model)`` takes besides text."""
    publish_delta: Callable[[str, EventEnvelope, str, str], Awaitable[None]]
    """``(session id, text-delta event, message id, delta)``: a text delta to every replica (best-effort)."""
    publish_ephemeral: Callable[[str, EventEnvelope], Awaitable[None]]
    """``(session id, event)``: another ephemeral event on the bus (best-effort)."""
    abort_flag: Callable[[str], Awaitable[bool]]
    """Whether the session's row asks for an abort (set by ``run.abort`` on another replica)."""
    run_finished: Callable[[str, str], None]
    """``(session id, run id)``, after the transaction that wrote ``run-finished`` committed."""
    loop_finished: Callable[[RunLoop], None]
    """The loop has returned: the orchestrator forgets it."""
